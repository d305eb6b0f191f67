// The server's request handlers on malformed requests: each gets an error
// answer naming what is wrong, and nothing outside the named buffer is
// touched (the ASan build would catch it).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "loom/context.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "rpc_graph.h"
#include "rpc_service.h"

namespace loom::rpc {
namespace {

class Handlers_ : public ::testing::Test {
 protected:
  Handlers h_{{&Registry::get().cpu()}, {.max_alloc = 1 << 20}};

  uint64_t alloc(uint64_t size) {
    AllocRequest q;
    q.set_size(size);
    AllocReply r;
    EXPECT_TRUE(h_.alloc(q, r).ok());
    return r.buffer();
  }
};

BytesRange range(uint64_t buffer, uint64_t offset, uint64_t size) {
  BytesRange r;
  r.set_buffer(buffer);
  r.set_offset(offset);
  r.set_size(size);
  return r;
}

TEST_F(Handlers_, ByteRangesStayInTheirBuffer) {
  const uint64_t b = alloc(256);
  EXPECT_TRUE(h_.set_bytes(range(b, 200, 56), 0, std::string(56, 'x')).ok());
  EXPECT_EQ(h_.set_bytes(range(b, 200, 57), 0, std::string(57, 'x')).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(h_.set_bytes(range(b, ~uint64_t{0}, 2), 0, "xx").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A chunk past the end of the announced transfer.
  EXPECT_EQ(h_.set_bytes(range(b, 0, 8), 4, std::string(5, 'x')).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(h_.set_bytes(range(b + 100, 0, 1), 0, "x").error_code(), grpc::StatusCode::NOT_FOUND);
  std::string got;
  EXPECT_TRUE(h_.get_bytes(range(b, 200, 56), [&](const Chunk& c) { got += c.data(); return true; }).ok());
  EXPECT_EQ(got, std::string(56, 'x'));
  EXPECT_FALSE(h_.get_bytes(range(b, 255, 2), [](const Chunk&) { return true; }).ok());
  CopyRequest c;
  *c.mutable_src() = range(b, 0, 200);
  c.set_dst_buffer(b);
  c.set_dst_offset(100);
  EXPECT_EQ(h_.copy(c).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  MemsetRequest m;
  *m.mutable_range() = range(b, 0, 10);
  m.set_value(300);
  EXPECT_EQ(h_.memset(m).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(Handlers_, AllocationsAreBoundedAndFreedOnce) {
  AllocRequest q;
  q.set_size(2 << 20);
  AllocReply r;
  EXPECT_EQ(h_.alloc(q, r).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  q.set_device(5);
  q.set_size(16);
  EXPECT_EQ(h_.alloc(q, r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const uint64_t b = alloc(16);
  BufferRef ref;
  ref.set_buffer(b);
  EXPECT_TRUE(h_.free(ref).ok());
  EXPECT_EQ(h_.free(ref).error_code(), grpc::StatusCode::NOT_FOUND);
}

// A graph a + b over one buffer: a at 0, b at 64, the sum at 128 (4 floats each).
struct AddGraph {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4});
  Tensor* b = ctx.new_tensor(DType::F32, {4});
  Tensor* sum = add(ctx, a, b);
  GraphMsg msg;

  explicit AddGraph(uint64_t buffer) {
    const std::map<const Tensor*, uint64_t> at = {{a, 0}, {b, 64}, {sum, 128}};
    encode_graph(std::span<Tensor* const>(&sum, 1), [&](const Tensor& t) { return RemoteRef{buffer, at.at(&t)}; },
                 0, msg);
  }
};

TEST_F(Handlers_, AWellFormedGraphRunsAndIsKeptById) {
  const uint64_t buf = alloc(256);
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  ASSERT_TRUE(h_.set_bytes(range(buf, 0, 16), 0, std::string(reinterpret_cast<const char*>(a), 16)).ok());
  ASSERT_TRUE(h_.set_bytes(range(buf, 64, 16), 0, std::string(reinterpret_cast<const char*>(b), 16)).ok());
  AddGraph g(buf);
  ComputeRequest q;
  *q.mutable_graph() = g.msg;
  ComputeReply r;
  ASSERT_TRUE(h_.compute(q, r).ok());
  std::string out;
  h_.get_bytes(range(buf, 128, 16), [&](const Chunk& c) { out += c.data(); return true; });
  const float* sum = reinterpret_cast<const float*>(out.data());
  EXPECT_EQ(sum[3], 44.0f);
  ComputeRequest again;
  again.set_graph_id(r.graph_id());
  EXPECT_TRUE(h_.compute(again, r).ok());
  again.set_graph_id(r.graph_id() + 1000);
  EXPECT_EQ(h_.compute(again, r).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(Handlers_, MalformedGraphsAreRefused) {
  const uint64_t buf = alloc(256);
  const auto refused = [&](const std::function<void(GraphMsg&)>& spoil, const char* why) {
    AddGraph g(buf);
    spoil(g.msg);
    ComputeRequest q;
    *q.mutable_graph() = g.msg;
    ComputeReply r;
    const grpc::Status s = h_.compute(q, r);
    EXPECT_FALSE(s.ok()) << why;
    return s.error_message();
  };
  // Tensors are a (0), b (1), sum (2).
  refused([](GraphMsg& m) { m.mutable_tensors(2)->set_offset(250); }, "result past the buffer's end");
  refused([](GraphMsg& m) { m.mutable_tensors(0)->set_buffer(999); }, "unknown buffer");
  refused([](GraphMsg& m) { m.mutable_tensors(2)->set_src(0, 2); }, "operand refers to itself");
  refused([](GraphMsg& m) { m.mutable_tensors(2)->set_src(1, -1); }, "missing operand");
  refused([](GraphMsg& m) { m.mutable_tensors(2)->set_op(200); }, "unknown op");
  refused([](GraphMsg& m) { m.mutable_tensors(1)->set_type(77); }, "unknown type");
  refused([](GraphMsg& m) { m.mutable_tensors(1)->set_ne(0, -4); }, "negative dim");
  refused([](GraphMsg& m) { m.mutable_tensors(1)->mutable_ne()->RemoveLast(); }, "three dims");
  refused([](GraphMsg& m) { m.mutable_tensors(1)->set_nb(3, uint64_t{1} << 62); }, "huge stride");
  refused([](GraphMsg& m) { m.set_nodes(0, 7); }, "node index out of range");
  refused([](GraphMsg& m) { m.set_device(3); }, "unknown device");
  const std::string shape = refused([](GraphMsg& m) { m.mutable_tensors(2)->set_ne(0, 8); }, "result larger than operands");
  EXPECT_NE(shape.find("add"), std::string::npos) << shape;
  refused([](GraphMsg& m) { m.mutable_tensors(2)->set_nb(1, 0); }, "result strides not contiguous");
  refused([](GraphMsg& m) { m.mutable_tensors(0)->set_ne(0, 8); }, "operand shapes differ");
}

// The fuzz target's graph seeds (tests/fuzz/corpus/rpc_handlers, byte 0 the
// handler) are well formed: the fuzzer starts from graphs that run.
TEST_F(Handlers_, FuzzSeedGraphsRun) {
  int n = 0;
  alloc(4096);  // buffers 1 and 2
  alloc(4096);
  for (const auto& entry : std::filesystem::directory_iterator(LOOM_RPC_FUZZ_SEEDS)) {
    std::ifstream f(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!entry.path().filename().string().starts_with("compute-")) continue;
    ComputeRequest q;
    ASSERT_TRUE(q.ParseFromString(bytes.substr(1))) << entry.path();
    ComputeReply r;
    const grpc::Status s = h_.compute(q, r);
    EXPECT_TRUE(s.ok()) << entry.path() << ": " << s.error_message();
    ++n;
  }
  EXPECT_GE(n, 3);
}

}  // namespace
}  // namespace loom::rpc
