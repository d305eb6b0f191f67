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
  void SetUp() override { ASSERT_TRUE(h_.open_session(s_).ok()); }

  Handlers h_{{&Registry::get().cpu()}, {.max_alloc = 1 << 20, .max_sessions = 3}};
  uint64_t s_ = 0;  // the session of the calls below

  uint64_t alloc(uint64_t size, uint64_t session = 0) {
    AllocRequest q;
    q.set_size(size);
    AllocReply r;
    EXPECT_TRUE(h_.alloc(session ? session : s_, q, r).ok());
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
  EXPECT_TRUE(h_.set_bytes(s_, range(b, 200, 56), 0, std::string(56, 'x')).ok());
  EXPECT_EQ(h_.set_bytes(s_, range(b, 200, 57), 0, std::string(57, 'x')).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(h_.set_bytes(s_, range(b, ~uint64_t{0}, 2), 0, "xx").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // A chunk past the end of the announced transfer.
  EXPECT_EQ(h_.set_bytes(s_, range(b, 0, 8), 4, std::string(5, 'x')).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(h_.set_bytes(s_, range(b + 100, 0, 1), 0, "x").error_code(), grpc::StatusCode::NOT_FOUND);
  std::string got;
  EXPECT_TRUE(h_.get_bytes(s_, range(b, 200, 56), [&](const Chunk& c) { got += c.data(); return true; }).ok());
  EXPECT_EQ(got, std::string(56, 'x'));
  EXPECT_FALSE(h_.get_bytes(s_, range(b, 255, 2), [](const Chunk&) { return true; }).ok());
  CopyRequest c;
  *c.mutable_src() = range(b, 0, 200);
  c.set_dst_buffer(b);
  c.set_dst_offset(100);
  EXPECT_EQ(h_.copy(s_, c).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  MemsetRequest m;
  *m.mutable_range() = range(b, 0, 10);
  m.set_value(300);
  EXPECT_EQ(h_.memset(s_, m).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Writes that travel with a compute request (or alone in one) are checked
// as SetBytes transfers are: in their buffer, and as many bytes as the range.
TEST_F(Handlers_, WritesInAComputeRequestAreCheckedAndMadeInOrder) {
  const uint64_t b = alloc(64);
  auto add = [](ComputeRequest& q, BytesRange r, std::string data) {
    Write& w = *q.add_writes();
    *w.mutable_range() = r;
    w.set_data(std::move(data));
  };
  ComputeRequest q;
  add(q, range(b, 0, 8), "aaaaaaaa");
  add(q, range(b, 4, 4), "bbbb");  // the later write wins
  ComputeReply r;
  ASSERT_TRUE(h_.compute(s_, q, r).ok());
  EXPECT_EQ(r.graph_id(), 0u);
  std::string got;
  EXPECT_TRUE(h_.get_bytes(s_, range(b, 0, 8), [&](const Chunk& c) { got += c.data(); return true; }).ok());
  EXPECT_EQ(got, "aaaabbbb");
  ComputeRequest short_write;
  add(short_write, range(b, 0, 8), "abc");
  EXPECT_EQ(h_.compute(s_, short_write, r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ComputeRequest outside;
  add(outside, range(b, 60, 8), "cccccccc");
  EXPECT_EQ(h_.compute(s_, outside, r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ComputeRequest unknown;
  add(unknown, range(b + 100, 0, 1), "c");
  EXPECT_EQ(h_.compute(s_, unknown, r).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(Handlers_, AllocationsAreBoundedAndFreedOnce) {
  AllocRequest q;
  q.set_size(2 << 20);
  AllocReply r;
  EXPECT_EQ(h_.alloc(s_, q, r).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  q.set_device(5);
  q.set_size(16);
  EXPECT_EQ(h_.alloc(s_, q, r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  const uint64_t b = alloc(16);
  BufferRef ref;
  ref.set_buffer(b);
  EXPECT_TRUE(h_.free(s_, ref).ok());
  EXPECT_EQ(h_.free(s_, ref).error_code(), grpc::StatusCode::NOT_FOUND);
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
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 0, 16), 0, std::string(reinterpret_cast<const char*>(a), 16)).ok());
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 64, 16), 0, std::string(reinterpret_cast<const char*>(b), 16)).ok());
  AddGraph g(buf);
  ComputeRequest q;
  *q.mutable_graph() = g.msg;
  ComputeReply r;
  ASSERT_TRUE(h_.compute(s_, q, r).ok());
  std::string out;
  h_.get_bytes(s_, range(buf, 128, 16), [&](const Chunk& c) { out += c.data(); return true; });
  const float* sum = reinterpret_cast<const float*>(out.data());
  EXPECT_EQ(sum[3], 44.0f);
  ComputeRequest again;
  again.set_graph_id(r.graph_id());
  EXPECT_TRUE(h_.compute(s_, again, r).ok());
  again.set_graph_id(r.graph_id() + 1000);
  EXPECT_EQ(h_.compute(s_, again, r).error_code(), grpc::StatusCode::NOT_FOUND);
}

// The graph sent before with tensor b moved: only the patch travels, the
// server checks the patched graph in full.
TEST_F(Handlers_, APatchedGraphRunsAsANewGraphAndIsChecked) {
  const uint64_t buf = alloc(256);
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {100, 200, 300, 400};
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 0, 16), 0, std::string(reinterpret_cast<const char*>(a), 16)).ok());
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 64, 16), 0, std::string(reinterpret_cast<const char*>(b), 16)).ok());
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 192, 16), 0, std::string(reinterpret_cast<const char*>(c), 16)).ok());
  AddGraph g(buf);
  ComputeRequest q;
  *q.mutable_graph() = g.msg;
  ComputeReply first;
  ASSERT_TRUE(h_.compute(s_, q, first).ok());
  ComputeRequest patched;
  patched.set_graph_id(first.graph_id());
  TensorPatch& p = *patched.add_patches();
  p.set_index(1);
  *p.mutable_tensor() = g.msg.tensors(1);
  p.mutable_tensor()->set_offset(192);
  ComputeReply second;
  ASSERT_TRUE(h_.compute(s_, patched, second).ok());
  EXPECT_NE(second.graph_id(), first.graph_id());
  std::string out;
  h_.get_bytes(s_, range(buf, 128, 16), [&](const Chunk& c) { out += c.data(); return true; });
  EXPECT_EQ(reinterpret_cast<const float*>(out.data())[3], 404.0f);
  // Both graphs stay runnable by id.
  ComputeRequest again;
  again.set_graph_id(first.graph_id());
  ASSERT_TRUE(h_.compute(s_, again, first).ok());
  out.clear();
  h_.get_bytes(s_, range(buf, 128, 16), [&](const Chunk& c) { out += c.data(); return true; });
  EXPECT_EQ(reinterpret_cast<const float*>(out.data())[3], 44.0f);
  // A patch outside the graph, and one that moves the result past the buffer's end.
  p.set_index(3);
  EXPECT_EQ(h_.compute(s_, patched, second).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  p.set_index(2);
  *p.mutable_tensor() = g.msg.tensors(2);
  p.mutable_tensor()->set_offset(250);
  EXPECT_EQ(h_.compute(s_, patched, second).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Patches without a graph id name nothing to patch.
  patched.clear_graph_id();
  EXPECT_EQ(h_.compute(s_, patched, second).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// Reads in a compute request come back in its reply, after the graph ran;
// a read outside its buffer or past the reply's limit refuses the whole
// request before anything is written or run.
TEST_F(Handlers_, ReadsComeBackInTheComputeReplyAfterTheGraph) {
  const uint64_t buf = alloc(256);
  const float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 0, 16), 0, std::string(reinterpret_cast<const char*>(a), 16)).ok());
  AddGraph g(buf);
  ComputeRequest q;
  *q.mutable_graph() = g.msg;
  Write& w = *q.add_writes();
  *w.mutable_range() = range(buf, 64, 16);
  w.set_data(std::string(reinterpret_cast<const char*>(b), 16));
  *q.add_reads() = range(buf, 128, 16);  // the sum
  *q.add_reads() = range(buf, 64, 8);    // b's first two, as written
  ComputeReply r;
  ASSERT_TRUE(h_.compute(s_, q, r).ok());
  ASSERT_EQ(r.data_size(), 2);
  ASSERT_EQ(r.data(0).size(), 16u);
  EXPECT_EQ(reinterpret_cast<const float*>(r.data(0).data())[3], 44.0f);
  ASSERT_EQ(r.data(1).size(), 8u);
  EXPECT_EQ(reinterpret_cast<const float*>(r.data(1).data())[1], 20.0f);

  // By id, with a read past the buffer: refused, and b is not written again.
  ComputeRequest bad;
  bad.set_graph_id(r.graph_id());
  Write& w2 = *bad.add_writes();
  *w2.mutable_range() = range(buf, 64, 16);
  w2.set_data(std::string(16, '\0'));
  *bad.add_reads() = range(buf, 250, 16);
  ComputeReply r2;
  EXPECT_EQ(h_.compute(s_, bad, r2).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(r2.data_size(), 0);
  std::string out;
  h_.get_bytes(s_, range(buf, 64, 16), [&](const Chunk& c) { out += c.data(); return true; });
  EXPECT_EQ(reinterpret_cast<const float*>(out.data())[3], 40.0f);

  // More than kMaxReplyReadBytes in all, each read within the buffer.
  bad.clear_reads();
  for (uint64_t n = 0; n <= kMaxReplyReadBytes; n += 256) *bad.add_reads() = range(buf, 0, 256);
  EXPECT_EQ(h_.compute(s_, bad, r2).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A session sees only its own buffers; ending it frees them all, and its id
// is refused afterwards.
TEST_F(Handlers_, SessionsOwnTheirBuffersAndEndingOneFreesThem) {
  uint64_t other = 0;
  ASSERT_TRUE(h_.open_session(other).ok());
  // Handles are per session: the other's buffer 1 is not this one's.
  alloc(256);
  const uint64_t mine = alloc(512);
  const uint64_t theirs = alloc(1024, other);
  EXPECT_EQ(theirs, 1u);
  EXPECT_EQ(h_.n_buffers(), 3u);
  EXPECT_EQ(h_.set_bytes(other, range(mine, 0, 1), 0, "x").error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(h_.set_bytes(other, range(theirs, 0, 1000), 0, std::string(1000, 'x')).ok());
  EXPECT_EQ(h_.set_bytes(s_, range(theirs, 0, 1000), 0, std::string(1000, 'x')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // this session's buffer 1 has 256 bytes
  const SessionEnd end = h_.close_session(s_);
  EXPECT_EQ(end.buffers, 2u);
  EXPECT_EQ(end.bytes, 768u);
  EXPECT_EQ(h_.n_buffers(), 1u);
  EXPECT_EQ(h_.set_bytes(s_, range(mine, 0, 1), 0, "x").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  AllocRequest q;
  q.set_size(16);
  AllocReply r;
  EXPECT_EQ(h_.alloc(s_, q, r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(h_.alloc(0, q, r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(h_.close_session(s_).buffers, 0u);
  StatsReply stats;
  ASSERT_TRUE(h_.stats(stats).ok());
  EXPECT_EQ(stats.sessions(), 1u);
  EXPECT_EQ(stats.sessions_ended(), 1u);
  EXPECT_EQ(stats.buffer_bytes(), 1024u);
}

TEST_F(Handlers_, SessionsAreBounded) {
  uint64_t a = 0, b = 0, c = 0;
  EXPECT_TRUE(h_.open_session(a).ok());
  EXPECT_TRUE(h_.open_session(b).ok());
  EXPECT_EQ(h_.open_session(c).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  h_.close_session(a);
  EXPECT_TRUE(h_.open_session(c).ok());
}

TEST_F(Handlers_, MalformedGraphsAreRefused) {
  const uint64_t buf = alloc(256);
  const auto refused = [&](const std::function<void(GraphMsg&)>& spoil, const char* why) {
    AddGraph g(buf);
    spoil(g.msg);
    ComputeRequest q;
    *q.mutable_graph() = g.msg;
    ComputeReply r;
    const grpc::Status s = h_.compute(s_, q, r);
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

// get_rows of a Q8_0 matrix of 2 rows (68 bytes at 0), row ids at 80, the
// f32 row out at 128: blocks must be aligned for their fp16 scales, and a
// row's blocks at least a block apart (nb[0] = 1 would make the checked
// span 2 bytes for 68 the kernel reads).
TEST_F(Handlers_, QuantizedBlocksMustBeAlignedAndApart) {
  const uint64_t buf = alloc(256);
  std::string bytes(256, '\0');
  bytes[80] = 1;  // row id 1
  ASSERT_TRUE(h_.set_bytes(s_, range(buf, 0, 256), 0, bytes).ok());
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, {32, 2});
  Tensor* ids = ctx.new_tensor(DType::I32, {1});
  Tensor* row = get_rows(ctx, w, ids);
  const std::map<const Tensor*, uint64_t> at = {{w, 0}, {ids, 80}, {row, 128}};
  GraphMsg good;
  encode_graph(std::span<Tensor* const>(&row, 1), [&](const Tensor& t) { return RemoteRef{buf, at.at(&t)}; }, 0,
               good);
  const auto compute = [&](const std::function<void(TensorMsg&)>& spoil) {
    ComputeRequest q;
    *q.mutable_graph() = good;
    spoil(*q.mutable_graph()->mutable_tensors(0));
    ComputeReply r;
    return h_.compute(s_, q, r);
  };
  const grpc::Status ok = compute([](TensorMsg&) {});
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  const grpc::Status odd = compute([](TensorMsg& m) { m.set_offset(1); });
  EXPECT_EQ(odd.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(odd.error_message().find("aligned"), std::string::npos) << odd.error_message();
  EXPECT_EQ(compute([](TensorMsg& m) { m.set_nb(1, 35); }).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(compute([](TensorMsg& m) { m.set_nb(0, 2); }).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(compute([](TensorMsg& m) { m.set_nb(0, 0); }).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // Blocks further apart than their size (a permuted view) are fine if they fit.
  EXPECT_TRUE(compute([](TensorMsg& m) { m.set_ne(0, 32); m.set_nb(0, 36); }).ok());
}

// The fuzz target's graph seeds (tests/fuzz/corpus/rpc_handlers, byte 0 the
// handler) are well formed: the fuzzer starts from graphs that run.
TEST_F(Handlers_, FuzzSeedGraphsRun) {
  int n = 0;
  alloc(4096);  // buffers 1 and 2
  alloc(4096);
  AllocRequest layout;  // buffer 3: CPU_Repack
  layout.set_size(4096);
  layout.set_layout(1);
  AllocReply r3;
  ASSERT_TRUE(h_.alloc(s_, layout, r3).ok());
  ASSERT_EQ(r3.buffer(), 3u);
  for (const auto& entry : std::filesystem::directory_iterator(LOOM_RPC_FUZZ_SEEDS)) {
    std::ifstream f(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!entry.path().filename().string().starts_with("compute-")) continue;
    ComputeRequest q;
    ASSERT_TRUE(q.ParseFromString(bytes.substr(1))) << entry.path();
    ComputeRequest first = q;
    first.clear_patches();
    ComputeReply r;
    grpc::Status s = h_.compute(s_, first, r);
    EXPECT_TRUE(s.ok()) << entry.path() << ": " << s.error_message();
    if (q.patches_size()) {  // as the fuzz target runs them: patches of the graph it sent
      ComputeRequest again;
      again.set_graph_id(r.graph_id());
      *again.mutable_patches() = q.patches();
      s = h_.compute(s_, again, r);
      EXPECT_TRUE(s.ok()) << entry.path() << " patched: " << s.error_message();
    }
    ++n;
  }
  EXPECT_GE(n, 3);
}

}  // namespace
}  // namespace loom::rpc
