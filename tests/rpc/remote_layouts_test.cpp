// Buffer types that keep weights in a layout of their own, on a server: the
// CPU's CPU_Repack as RPC0:CPU_Repack. The server stores a weight there
// permuted and moves its bytes plain (a range names its tensor); it answers
// which operands its kernels read from there; a graph that would read such
// memory any other way is refused. Through a client, a weight placed there
// round-trips and multiplies as the local CPU does, and a model whose layers
// all run remotely keeps there what the local CPU keeps in CPU_Repack.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "loom/context.h"
#include "loom/graph.h"
#include "loom/model.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"
#include "loopback.h"
#include "model_gen/model_gen.h"
#include "rpc_graph.h"
#include "rpc_service.h"

namespace loom {
namespace {

// Q8_0 bytes of a rows x cols matrix of smooth values.
std::vector<uint8_t> q8_matrix(int64_t cols, int64_t rows) {
  std::vector<float> row(cols);
  const size_t row_bytes = cols / 32 * sizeof(BlockQ8_0);
  std::vector<uint8_t> out(rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) row[c] = std::sin(0.37f * static_cast<float>(r * cols + c)) * (1 + r % 3);
    traits(DType::Q8_0).from_float(row.data(), out.data() + r * row_bytes, cols);
  }
  return out;
}

rpc::BytesRange range(uint64_t buffer, uint64_t offset, uint64_t size) {
  rpc::BytesRange r;
  r.set_buffer(buffer);
  r.set_offset(offset);
  r.set_size(size);
  return r;
}

// A 32 x 16 Q8_0 weight (34-byte rows, 544 bytes) at offset 64 of a layout
// buffer, named by its ranges.
class LayoutHandlers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(h_.open_session(s_).ok());
    rpc::HelloReply hello;
    ASSERT_TRUE(h_.hello(hello).ok());
    ASSERT_EQ(hello.devices(0).layouts_size(), 1);
    EXPECT_EQ(hello.devices(0).layouts(0).name(), "CPU_Repack");
    rpc::AllocRequest q;
    q.set_size(1024);
    q.set_layout(1);
    rpc::AllocReply r;
    ASSERT_TRUE(h_.alloc(s_, q, r).ok());
    buffer_ = r.buffer();
    w_.set_type(static_cast<uint32_t>(DType::Q8_0));
    for (int64_t ne : {32, 16, 1, 1}) w_.add_ne(ne);
    for (uint64_t nb : {34, 34, 544, 544}) w_.add_nb(nb);
    w_.set_view_src(-1);
    w_.set_buffer(buffer_);
    w_.set_offset(64);
  }
  rpc::BytesRange in_w(uint64_t offset, uint64_t size) const {
    rpc::BytesRange r = range(buffer_, 64 + offset, size);
    *r.mutable_tensor() = w_;
    return r;
  }
  std::string get(const rpc::BytesRange& r) {
    std::string got;
    const grpc::Status s = h_.get_bytes(s_, r, [&](const rpc::Chunk& c) { got += c.data(); return true; });
    EXPECT_TRUE(s.ok()) << s.error_message();
    return got;
  }

  rpc::Handlers h_{{&Registry::get().cpu()}};
  uint64_t s_ = 0, buffer_ = 0;
  rpc::TensorMsg w_;
};

TEST_F(LayoutHandlers, ATensorsBytesAreStoredPermutedAndMovePlainWholeAndInPart) {
  const std::vector<uint8_t> plain = q8_matrix(32, 16);
  const std::string bytes(plain.begin(), plain.end());
  ASSERT_TRUE(h_.set_bytes(s_, in_w(0, 544), 0, bytes).ok());
  EXPECT_EQ(get(in_w(0, 544)), bytes);
  EXPECT_NE(get(range(buffer_, 64, 544)), bytes);  // raw: the server's own order
  EXPECT_EQ(get(in_w(100, 77)), bytes.substr(100, 77));
  // A write of part of it, in two chunks, lands where the plain bytes would.
  std::string changed = bytes;
  for (size_t i = 50; i < 150; ++i) changed[i] = static_cast<char>(i);
  ASSERT_TRUE(h_.set_bytes(s_, in_w(50, 100), 0, changed.substr(50, 60)).ok());
  ASSERT_TRUE(h_.set_bytes(s_, in_w(50, 100), 60, changed.substr(110, 40)).ok());
  EXPECT_EQ(get(in_w(0, 544)), changed);
  rpc::MemsetRequest m;
  *m.mutable_range() = in_w(34, 34);  // row 1
  m.set_value(7);
  ASSERT_TRUE(h_.memset(s_, m).ok());
  EXPECT_EQ(get(in_w(34, 34)), std::string(34, '\7'));
  EXPECT_EQ(get(in_w(0, 34)), changed.substr(0, 34));
}

TEST_F(LayoutHandlers, ARangeMustLieInTheTensorItNamesAndThatInItsBuffer) {
  const auto refused = [&](const rpc::BytesRange& r) {
    return h_.set_bytes(s_, r, 0, std::string(r.size(), 'x')).error_code();
  };
  EXPECT_EQ(refused(in_w(540, 8)), grpc::StatusCode::INVALID_ARGUMENT);  // past the tensor's end
  rpc::BytesRange before = in_w(0, 8);
  before.set_offset(60);
  EXPECT_EQ(refused(before), grpc::StatusCode::INVALID_ARGUMENT);  // before its start
  rpc::BytesRange other = in_w(0, 8);
  other.mutable_tensor()->set_buffer(buffer_ + 1);
  EXPECT_EQ(refused(other), grpc::StatusCode::INVALID_ARGUMENT);  // a tensor of another buffer
  rpc::BytesRange big = in_w(0, 8);
  big.mutable_tensor()->set_ne(1, 64);
  big.mutable_tensor()->set_nb(2, 64 * 34);
  big.mutable_tensor()->set_nb(3, 64 * 34);
  EXPECT_EQ(refused(big), grpc::StatusCode::INVALID_ARGUMENT);  // does not fit its buffer
  rpc::BytesRange node = in_w(0, 8);
  node.mutable_tensor()->set_type(99);
  EXPECT_EQ(refused(node), grpc::StatusCode::INVALID_ARGUMENT);  // checked as a graph's tensor
  rpc::AllocRequest q;
  q.set_size(64);
  q.set_layout(2);
  rpc::AllocReply r;
  EXPECT_EQ(h_.alloc(s_, q, r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// The server's answers about the layout are its CPU's; a graph that reads
// the weight as anything but a mul_mat's src0 is refused, a mul_mat runs.
TEST_F(LayoutHandlers, OnlyAMulMatReadsAWeightThereAndTheServerSaysSo) {
  ASSERT_TRUE(h_.set_bytes(s_, in_w(0, 544), 0, std::string(544, '\0')).ok());
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, {32, 16});
  Tensor* x = ctx.new_tensor(DType::F32, {32, 2});
  Tensor* ids = ctx.new_tensor(DType::I32, {1});
  Tensor* product = mul_mat(ctx, w, x);
  Tensor* rows = get_rows(ctx, w, ids);
  Device& cpu = Registry::get().cpu();
  BufferType& repack = *cpu.buffer_types().back();
  ASSERT_EQ(repack.name(), "CPU_Repack");
  const auto ask = [&](Tensor* node, int slot) {
    rpc::SupportsOpRequest q;
    rpc::encode_graph(std::span<Tensor* const>(&node, 1), [](const Tensor&) { return rpc::RemoteRef{}; }, 0,
                      *q.mutable_graph());
    q.set_layout(1);
    q.set_slot(slot);
    rpc::SupportsOpReply r;
    EXPECT_TRUE(h_.supports_op(q, r).ok());
    return r;
  };
  EXPECT_TRUE(ask(product, 0).readable());
  EXPECT_EQ(ask(product, 0).preferred(), repack.supports_op(*product));
  EXPECT_TRUE(ask(product, 1).readable());  // f32 is stored plain there
  EXPECT_FALSE(ask(rows, 0).readable());
  EXPECT_EQ(ask(rows, 0).readable(), cpu.supports_operand(*rows, 0, repack));

  // x at 0, ids at 256, the results at 512 of a plain buffer.
  rpc::AllocRequest a;
  a.set_size(1024);
  rpc::AllocReply plain;
  ASSERT_TRUE(h_.alloc(s_, a, plain).ok());
  const auto compute = [&](Tensor* node) {
    const std::map<const Tensor*, rpc::RemoteRef> at = {{w, {buffer_, 64}},
                                                        {x, {plain.buffer(), 0}},
                                                        {ids, {plain.buffer(), 256}},
                                                        {node, {plain.buffer(), 512}}};
    rpc::ComputeRequest q;
    rpc::encode_graph(std::span<Tensor* const>(&node, 1), [&](const Tensor& t) { return at.at(&t); }, 0,
                      *q.mutable_graph());
    rpc::ComputeReply r;
    return h_.compute(s_, q, r);
  };
  EXPECT_TRUE(compute(product).ok());
  const grpc::Status refused = compute(rows);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("CPU_Repack"), std::string::npos) << refused.error_message();
}

// Through a client: RPC0:CPU_Repack holds the weight, RPC0:CPU the rest.
TEST(RemoteLayouts, AWeightThereRoundTripsPlainAndMultipliesAsTheLocalCpuDoes) {
  auto server = test::start_server();
  auto family = test::connect({test::endpoint(*server)});
  Device& remote = *family->devices().at(0);
  const std::vector<BufferType*> types = remote.buffer_types();
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(types[1]->name(), "RPC0:CPU_Repack");
  EXPECT_TRUE(remote.supports_buffer_type(*types[1]));

  const std::vector<uint8_t> wq = q8_matrix(64, 32);
  std::vector<float> xf(64 * 3);
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = std::cos(0.11f * static_cast<float>(i));
  const auto multiply = [&](Device& d, BufferType& weight_type, std::vector<uint8_t>* weight_back) {
    Context wctx, ctx;
    Tensor* w = wctx.new_tensor(DType::Q8_0, {64, 32});
    Tensor* x = ctx.new_tensor(DType::F32, {64, 3});
    Tensor* y = mul_mat(ctx, w, x);
    auto weights = allocate_tensors(wctx, weight_type, BufferUsage::Weights);
    auto rest = allocate_tensors(ctx, d.default_buffer_type());
    // In two parts, the first ending inside a 16-row group.
    tensor_set(*w, wq.data(), 0, 700);
    tensor_set(*w, wq.data() + 700, 700, wq.size() - 700);
    tensor_set(*x, xf.data(), 0, x->nbytes());
    if (weight_back) {
      weight_back->resize(wq.size());
      tensor_get(*w, weight_back->data(), 0, wq.size());
    }
    EXPECT_TRUE(d.supports_operand(*y, 0, weight_type));
    Graph g = Graph::build(y);
    auto backend = d.create_backend();
    backend->compute(g);
    backend->synchronize();
    std::vector<float> out(y->nelements());
    tensor_get(*y, out.data(), 0, y->nbytes());
    return out;
  };
  Device& cpu = Registry::get().cpu();
  const std::vector<float> want = multiply(cpu, cpu.default_buffer_type(), nullptr);
  std::vector<uint8_t> back;
  const std::vector<float> got = multiply(remote, *types[1], &back);
  EXPECT_EQ(back, wq);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4f * (1 + std::fabs(want[i]))) << i;

  // Read any other way, the weight is a plain copy (staged through the host).
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, {64, 32});
  Tensor* ids = ctx.new_tensor(DType::I32, {1});
  Tensor* rows = get_rows(ctx, w, ids);
  EXPECT_FALSE(remote.supports_operand(*rows, 0, *types[1]));
}

// Every layer and the output on RPC0: the weights the local CPU keeps in
// CPU_Repack go to RPC0:CPU_Repack, byte for byte, and the logits agree.
TEST(RemoteLayouts, AModelOnTheServerKeepsItsWeightsInTheServersLayout) {
  ModelSpec s;
  s.n_vocab = 260;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 128;
  s.n_ctx = 64;
  const auto path = std::filesystem::temp_directory_path() / ("loom_rpc_layout_" + std::to_string(::getpid()) + ".gguf");
  write_random_model(s, DType::Q4_0, 5, path.string());
  auto server = test::start_server();
  auto family = test::connect({test::endpoint(*server)});
  Device& cpu = Registry::get().cpu();
  Device& remote = *family->devices().at(0);
  const auto bytes_in = [](const Model& m, std::string_view type) {
    for (const auto& [name, bytes] : m.weight_bytes_by_buffer_type())
      if (name == type) return bytes;
    return size_t{0};
  };
  const auto logits = [](Model& m) {
    Session session(m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
    const std::vector<int32_t> prompt = {1, 17, 120, 3};
    return session.decode(prompt, true);
  };
  auto local = Model::load(path.string(), {&cpu});
  auto far = Model::load(path.string(), {&cpu, &remote}, {.placement = {.n_gpu_layers = 99}});
  EXPECT_EQ(bytes_in(*far, "RPC0:CPU_Repack"), bytes_in(*local, "CPU_Repack"));
  EXPECT_EQ(bytes_in(*far, "CPU_Repack"), 0u);
  const std::vector<float> want = logits(*local), got = logits(*far);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3f * (1 + std::fabs(want[i]))) << i;
  far.reset();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom
