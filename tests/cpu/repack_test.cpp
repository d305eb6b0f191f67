// CPU_Repack: interleaved Q4_0 / Q8_0 weights read back as they were
// written (whole, partial, memset), mul_mat with them equal to mul_mat with
// the plain weights on every ISA level and both paths (mat-vec, gemm), and
// the device accepting a repacked weight only as mul_mat's src0.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/kernels/vec.h"
#include "cpu/repack.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

BufferType& repack_type() {
  BufferType* bt = Registry::get().find_buffer_type("CPU_Repack");
  if (!bt) throw std::runtime_error("no CPU_Repack buffer type");
  return *bt;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

class RepackTest : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override { cpu::set_mul_mat_isa(std::nullopt); }
};

TEST_P(RepackTest, ReadsBackWhatWasWritten) {
  Context ctx;
  Tensor* w = ctx.new_tensor(GetParam(), {96, 48});
  auto alloc = allocate_tensors(ctx, repack_type(), BufferUsage::Weights);
  ASSERT_TRUE(cpu::is_repacked(*w));
  const size_t n = w->nbytes();
  std::vector<uint8_t> plain = random_bytes(n, 1);
  tensor_set(*w, plain.data(), 0, n);
  // The stored bytes are interleaved, not a copy...
  EXPECT_NE(0, std::memcmp(w->data, plain.data(), n));
  std::vector<uint8_t> got(n);
  tensor_get(*w, got.data(), 0, n);
  EXPECT_EQ(got, plain);
  // ...and partial writes, reads and memsets act on the plain bytes.
  const std::vector<uint8_t> patch = random_bytes(1001, 2);
  tensor_set(*w, patch.data(), 107, patch.size());
  std::copy(patch.begin(), patch.end(), plain.begin() + 107);
  tensor_memset(*w, 0x5a, 2000, 77);
  std::fill(plain.begin() + 2000, plain.begin() + 2077, 0x5a);
  std::vector<uint8_t> part(555);
  tensor_get(*w, part.data(), 901, part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), plain.begin() + 901));
  tensor_get(*w, got.data(), 0, n);
  EXPECT_EQ(got, plain);
}

TEST_P(RepackTest, RowsNotAMultipleOf16StayPlain) {
  Context ctx;
  Tensor* w = ctx.new_tensor(GetParam(), {64, 40});
  auto alloc = allocate_tensors(ctx, repack_type(), BufferUsage::Weights);
  EXPECT_FALSE(cpu::is_repacked(*w));
  const std::vector<uint8_t> plain = random_bytes(w->nbytes(), 3);
  tensor_set(*w, plain.data(), 0, plain.size());
  EXPECT_EQ(0, std::memcmp(w->data, plain.data(), plain.size()));
}

// mul_mat with the weight in CPU_Repack and in CPU memory, same bytes.
void compare(DType type, int64_t K, int64_t M, int64_t N, cpu::Isa isa, int threads) {
  SCOPED_TRACE(fmt::format("{} K={} M={} N={} isa={} threads={}", type_name(type), K, M, N, cpu::isa_name(isa),
                           threads));
  cpu::set_mul_mat_isa(isa);
  Context wctx, ctx;
  Tensor* wr = wctx.new_tensor(type, {K, M});
  auto walloc = allocate_tensors(wctx, repack_type(), BufferUsage::Weights);
  Tensor* wp = ctx.new_tensor(type, {K, M});
  Tensor* b = ctx.new_tensor(DType::F32, {K, N});
  Tensor* out_r = mul_mat(ctx, wr, b);
  Tensor* out_p = mul_mat(ctx, wp, b);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(static_cast<uint32_t>(K * 7 + M * 3 + N));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> wv(K * M), bv(K * N);
  for (float& v : wv) v = dist(rng);
  for (float& v : bv) v = dist(rng);
  tensor_from_floats(*wp, wv);
  tensor_from_floats(*b, bv);
  tensor_copy(*wp, *wr);
  Device& cpu = Registry::get().cpu();
  ASSERT_TRUE(cpu.supports_op(*out_r));
  auto backend = cpu.create_backend({.n_threads = threads});
  Tensor* outs[] = {out_r, out_p};
  Graph graph = Graph::build(outs);
  backend->compute(graph);
  const std::vector<float> r = tensor_to_floats(*out_r), p = tensor_to_floats(*out_p);
  float scale = 0.0f;
  for (float v : p) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (!(std::fabs(r[i] - p[i]) <= 1e-5f * scale) && bad++ < 5)
      ADD_FAILURE() << "dst[" << i % M << ", " << i / M << "] = " << r[i] << " repacked, " << p[i] << " plain";
  EXPECT_EQ(bad, 0);
}

TEST_P(RepackTest, MulMatMatchesPlainWeights) {
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    for (int threads : {1, 2}) {
      compare(GetParam(), 96, 48, 1, isa, threads);     // mat-vec
      compare(GetParam(), 32 * 21, 160, 3, isa, threads);  // few columns, several chunks
      compare(GetParam(), 64, 32, 37, isa, threads);    // gemm path
      compare(GetParam(), 64, 40, 2, isa, threads);     // stays plain
    }
  }
}

TEST_P(RepackTest, OnlyMulMatReadsARepackedWeight) {
  Context wctx, ctx;
  Tensor* w = wctx.new_tensor(GetParam(), {64, 32});
  auto walloc = allocate_tensors(wctx, repack_type(), BufferUsage::Weights);
  Tensor* b = ctx.new_tensor(DType::F32, {64, 4});
  Tensor* idx = ctx.new_tensor(DType::I32, {2});
  Device& cpu = Registry::get().cpu();
  EXPECT_TRUE(cpu.supports_buffer_type(repack_type()));
  // The CPU has both kernels (supports_op: op, types, shapes), but reads the
  // weight from CPU_Repack memory only as mul_mat's src0 (supports_operand).
  Tensor* mm = mul_mat(ctx, w, b);
  Tensor* rows = get_rows(ctx, w, idx);
  EXPECT_TRUE(cpu.supports_op(*mm));
  EXPECT_TRUE(cpu.supports_operand(*mm, 0, repack_type()));
  EXPECT_TRUE(cpu.supports_op(*rows));
  EXPECT_FALSE(cpu.supports_operand(*rows, 0, repack_type()));
  // A view sees interleaved bytes: not readable, even by mul_mat.
  Tensor* mm_view = mul_mat(ctx, reshape(ctx, w, {128, 16, 1, 1}), ctx.new_tensor(DType::F32, {128, 2}));
  EXPECT_FALSE(cpu.supports_operand(*mm_view, 0, repack_type()));
  // Asked before placement: mul_mat src0 of a repackable shape, where it pays.
  Tensor* fresh = ctx.new_tensor(GetParam(), {64, 32});
  Tensor* odd = ctx.new_tensor(GetParam(), {64, 40});
  EXPECT_EQ(repack_type().supports_op(*mul_mat(ctx, fresh, b)), cpu::best_isa() == cpu::Isa::Avx512);
  EXPECT_FALSE(repack_type().supports_op(*mul_mat(ctx, odd, b)));
  EXPECT_FALSE(repack_type().supports_op(*get_rows(ctx, fresh, idx)));
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest, ::testing::Values(DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(Repack, OtherTypesAreNotRepacked) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::F16, {64, 32});
  auto alloc = allocate_tensors(ctx, repack_type(), BufferUsage::Weights);
  EXPECT_FALSE(cpu::is_repacked(*w));
  EXPECT_FALSE(repack_type().supports_op(*mul_mat(ctx, w, ctx.new_tensor(DType::F32, {64, 1}))));
}

}  // namespace
}  // namespace loom
