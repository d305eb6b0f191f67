// CPU mul_mat against a double-precision reference, for every weight type on
// every ISA level this CPU runs (forced through set_mul_mat_isa), with odd
// shapes, broadcasting, non-contiguous b, and 1 and 2 threads.
//
// The reference uses the dequantized weights. For Q8_0/Q4_0 it also quantizes
// b exactly as the kernels do (32-element blocks, d = amax/127 in float,
// q = rint(x/d)), so what remains is f32 rounding: the tolerance is 1e-4 of
// sum |a*b| over the dot product. The other quantized types (Q4_1 .. MXFP4)
// quantize b as their integer dots do (quant_dot.h): Q8_K blocks (the
// reference quantize_row_q8_k) for 256-element super-blocks, the same 32-element
// blocks as Q8_0 for the rest, so the same tolerance holds. Q4_K and Q6_K on
// a level's integer gemm (cpu::mul_mat_int_gemm) quantize b as Q4_0. Their row lengths
// are multiples of 256 (see scaled_k). BF16 weights may round b to bf16
// (vdpbf16ps), a relative error of at most 2^-9 per element: tolerance 4e-3.
// Quantized weights are checked on both paths (cpu::QuantPath): integer
// kernels with b quantized as above, and dequantized rows on the f32 kernels
// with b as it is; and on the path mul_mat picks by itself (Auto), with the
// reference that path's choice (cpu::mul_mat_dequantizes) calls for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>

#include "cpu/kernels/quant_dot.h"
#include "cpu/kernels/vec.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

using cpu::Isa;

enum class BLayout { Contiguous, Transposed, Permuted };

struct Case {
  int64_t K, M, N;
  int64_t a2 = 1, a3 = 1, b2 = 1, b3 = 1;
  BLayout layout = BLayout::Contiguous;
  // a's quantized values all at their top code and b all 1: the sums the
  // integer kernels keep in 16 bits at their largest (see extreme_weights).
  bool extreme = false;
};

// Every byte of a's blocks 0xff (every quantized value at its top code, every
// 6-bit scale 63), with the f16 scales and mins set to 1 so that the values
// stay finite.
void extreme_weights(Tensor& a) {
  auto* data = static_cast<uint8_t*>(a.data);
  std::memset(data, 0xff, a.nbytes());
  const size_t block = traits(a.type).type_size;
  std::vector<size_t> f16_fields;
  switch (a.type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::IQ4_XS: f16_fields = {0}; break;
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K: f16_fields = {0, 2}; break;
    case DType::Q3_K: f16_fields = {offsetof(BlockQ3_K, d)}; break;
    case DType::Q6_K: f16_fields = {offsetof(BlockQ6_K, d)}; break;
    default: FAIL() << "no extreme weights for " << type_name(a.type);
  }
  const uint16_t one = 0x3c00;
  for (size_t off = 0; off < a.nbytes(); off += block)
    for (size_t f : f16_fields) std::memcpy(data + off + f, &one, sizeof one);
}

std::string describe(const Case& c, DType type, Isa isa, cpu::QuantPath path, int threads) {
  static const char* kLayouts[] = {"contiguous", "transposed", "permuted"};
  static const char* kPaths[] = {"auto", "int-dot", "dequant"};
  return fmt::format("{} isa={} path={} threads={} K={} M={} N={} a=[{},{}] b=[{},{}] b {}", type_name(type),
                     cpu::isa_name(isa), kPaths[static_cast<int>(path)], threads, c.K, c.M, c.N, c.a2, c.a3, c.b2, c.b3,
                     kLayouts[static_cast<int>(c.layout)]);
}

// b after the kernels' quantization, as they see it.
std::vector<double> quantize_like_kernels(const std::vector<float>& x) {
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size(); b += cpu::kQBlock) {
    float amax = 0.0f;
    for (int i = 0; i < cpu::kQBlock; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < cpu::kQBlock; ++i) out[b + i] = std::nearbyint(x[b + i] * inv) * static_cast<double>(d);
  }
  return out;
}

// b as the kernels see it for weights of `type` (f32 when they dequantize a).
std::vector<double> b_like_kernels(DType type, bool dequantized, bool int_gemm, const std::vector<float>& x) {
  if (!traits(type).is_quantized || dequantized) return {x.begin(), x.end()};
  if (type == DType::Q8_0 || type == DType::Q4_0 || int_gemm) return quantize_like_kernels(x);
  if (cpu::act_format(type) == cpu::ActFormat::Q8_32) return quantize_like_kernels(x);
  std::vector<BlockQ8_K> blocks(x.size() / kQK_K);
  std::vector<float> deq(x.size());
  quantize_row_q8_k(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
  dequantize_row_q8_k(blocks.data(), deq.data(), static_cast<int64_t>(x.size()));
  return {deq.begin(), deq.end()};
}

void check(const Case& c, DType type, Isa isa, cpu::QuantPath path, int threads, uint32_t seed) {
  SCOPED_TRACE(describe(c, type, isa, path, threads));
  cpu::set_mul_mat_isa(isa);
  ASSERT_EQ(cpu::mul_mat_isa(), isa);
  cpu::set_mul_mat_quant_path(path);
  const bool dequantized = cpu::mul_mat_dequantizes(isa, type, c.N);
  const bool int_gemm = cpu::mul_mat_int_gemm(isa, type, c.N);

  Context ctx;
  Tensor* a = ctx.new_tensor(type, {c.K, c.M, c.a2, c.a3});
  Tensor* storage = nullptr;
  Tensor* b = nullptr;
  switch (c.layout) {
    case BLayout::Contiguous:
      b = storage = ctx.new_tensor(DType::F32, {c.K, c.N, c.b2, c.b3});
      break;
    case BLayout::Transposed:
      storage = ctx.new_tensor(DType::F32, {c.N, c.K, c.b2, c.b3});
      b = transpose(ctx, storage);
      break;
    case BLayout::Permuted:
      storage = ctx.new_tensor(DType::F32, {c.K, c.b2, c.N, c.b3});
      b = permute(ctx, storage, {0, 2, 1, 3});
      break;
  }
  ASSERT_EQ(b->ne, (std::array<int64_t, 4>{c.K, c.N, c.b2, c.b3}));
  Tensor* out = mul_mat(ctx, a, b);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());

  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> av(a->nelements()), sv(storage->nelements());
  for (float& v : av) v = dist(rng);
  for (float& v : sv) v = dist(rng);
  if (c.extreme) std::fill(sv.begin(), sv.end(), 1.0f);
  tensor_from_floats(*a, av);
  tensor_from_floats(*storage, sv);
  if (c.extreme) extreme_weights(*a);
  const std::vector<float> a_deq = tensor_to_floats(*a);

  auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
  Graph graph = Graph::build(out);
  backend->compute(graph);
  const std::vector<float> got = tensor_to_floats(*out);

  const double rel = type == DType::BF16 ? 4e-3 : 1e-4;
  int bad = 0;
  for (int64_t i3 = 0; i3 < c.b3; ++i3)
    for (int64_t i2 = 0; i2 < c.b2; ++i2)
      for (int64_t j = 0; j < c.N; ++j) {
        std::vector<float> col(c.K);
        for (int64_t k = 0; k < c.K; ++k) {
          switch (c.layout) {
            case BLayout::Contiguous: col[k] = sv[k + c.K * (j + c.N * (i2 + c.b2 * i3))]; break;
            case BLayout::Transposed: col[k] = sv[j + c.N * (k + c.K * (i2 + c.b2 * i3))]; break;
            case BLayout::Permuted: col[k] = sv[k + c.K * (i2 + c.b2 * (j + c.N * i3))]; break;
          }
        }
        const std::vector<double> bref = b_like_kernels(type, dequantized, int_gemm, col);
        const int64_t ia2 = i2 / (c.b2 / c.a2), ia3 = i3 / (c.b3 / c.a3);
        for (int64_t i = 0; i < c.M; ++i) {
          const float* arow = &a_deq[c.K * (i + c.M * (ia2 + c.a2 * ia3))];
          double ref = 0.0, mag = 0.0;
          for (int64_t k = 0; k < c.K; ++k) {
            ref += arow[k] * bref[k];
            mag += std::fabs(arow[k] * bref[k]);
          }
          const float v = got[i + c.M * (j + c.N * (i2 + c.b2 * i3))];
          if (!(std::fabs(v - ref) <= rel * mag + 1e-5) && bad++ < 5)
            ADD_FAILURE() << "dst[" << i << ", " << j << ", " << i2 << ", " << i3 << "] = " << v << ", expected "
                          << ref << " (sum |a*b| " << mag << ")";
        }
      }
  EXPECT_EQ(bad, 0);
}

std::vector<Isa> levels() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa <= cpu::best_isa()) out.push_back(isa);
  return out;
}

class MulMatTest : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override {
    cpu::set_mul_mat_isa(std::nullopt);
    cpu::set_mul_mat_quant_path(cpu::QuantPath::Auto);
  }
  // Every level, path and thread count, less two repeats: Auto computes as
  // one of the other two paths (its reference follows mul_mat_dequantizes,
  // so a wrong pick still fails), so it runs with 2 threads only; and the
  // dequantized path is the type's level-independent to_float feeding the
  // f32 gemm that F32 and F16 weights test at every level, so quantized
  // types take it at the best level only.
  void run(Case c) {
    const DType type = GetParam();
    c.K = scaled_k(c.K, type);
    const bool quantized = traits(type).is_quantized;
    uint32_t seed = 1;
    for (Isa isa : levels()) {
      check(c, type, isa, cpu::QuantPath::Auto, 2, seed++);
      if (!quantized) {
        check(c, type, isa, cpu::QuantPath::Auto, 1, seed++);
        continue;
      }
      for (int threads : {1, 2}) {
        check(c, type, isa, cpu::QuantPath::IntDot, threads, seed++);
        if (isa == cpu::best_isa()) check(c, type, isa, cpu::QuantPath::Dequant, threads, seed++);
      }
    }
  }
  // Types of 256-element blocks: K (a multiple of 32) becomes 256, 512 or 768.
  static int64_t scaled_k(int64_t k, DType type) {
    return traits(type).block_size == kQK_K ? kQK_K * (1 + k / 32 % 3) : k;
  }
};

TEST_P(MulMatTest, MatVec) { run({.K = 96, .M = 37, .N = 1}); }
TEST_P(MulMatTest, MatVecLongRows) { run({.K = 32 * 19, .M = 33, .N = 1}); }
TEST_P(MulMatTest, FewColumns) { run({.K = 160, .M = 29, .N = 5}); }
TEST_P(MulMatTest, FewColumnsLongRows) { run({.K = 32 * 16, .M = 9, .N = 3}); }
TEST_P(MulMatTest, OddTiles) { run({.K = 160, .M = 53, .N = 45}); }
TEST_P(MulMatTest, JustOverOnePanel) { run({.K = 32, .M = 7, .N = 17}); }
TEST_P(MulMatTest, ManyChunks) { run({.K = 352, .M = 203, .N = 71}); }
TEST_P(MulMatTest, Broadcast) { run({.K = 96, .M = 19, .N = 35, .a2 = 2, .a3 = 1, .b2 = 4, .b3 = 3}); }
TEST_P(MulMatTest, BroadcastMatVec) { run({.K = 64, .M = 11, .N = 1, .a2 = 1, .a3 = 2, .b2 = 3, .b3 = 2}); }
TEST_P(MulMatTest, TransposedB) {
  run({.K = 96, .M = 21, .N = 40, .layout = BLayout::Transposed});
  run({.K = 96, .M = 21, .N = 3, .layout = BLayout::Transposed});
}
TEST_P(MulMatTest, PermutedB) {
  run({.K = 64, .M = 13, .N = 33, .a2 = 1, .a3 = 1, .b2 = 3, .b3 = 1, .layout = BLayout::Permuted});
  run({.K = 64, .M = 13, .N = 2, .a2 = 1, .a3 = 1, .b2 = 3, .b3 = 1, .layout = BLayout::Permuted});
}

INSTANTIATE_TEST_SUITE_P(Types, MulMatTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// The integer kernels add maddubs pair sums in 16 bits before widening: with
// every weight at its top code and b at +127 they must still not overflow.
TEST(MulMatExtreme, TopCodesDoNotOverflow) {
  for (DType type : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q3_K, DType::Q4_K,
                     DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    const int64_t K = traits(type).block_size == kQK_K ? 2 * kQK_K : 8 * cpu::kQBlock;
    uint32_t seed = 1;
    for (Isa isa : levels())
      for (int64_t N : {1, 4, 40})
        check({.K = K, .M = 19, .N = N, .extreme = true}, type, isa, cpu::QuantPath::IntDot, 1, seed++);
  }
  cpu::set_mul_mat_isa(std::nullopt);
  cpu::set_mul_mat_quant_path(cpu::QuantPath::Auto);
}

// Float rows of any length (an attention head of 70, say): the 16-row F16
// dots sum the elements past the last 8 apart, and every level must agree.
TEST(MulMatFloatRows, LengthsThatAreNoMultipleOfEight) {
  uint32_t seed = 1;
  for (DType type : {DType::F16, DType::F32, DType::BF16})
    for (int64_t K : {70, 13})
      for (Isa isa : levels())
        for (int64_t N : {1, 3}) check({.K = K, .M = 35, .N = N}, type, isa, cpu::QuantPath::Auto, 1, seed++);
  cpu::set_mul_mat_isa(std::nullopt);
}

TEST(MulMatDispatch, NeverAboveTheCpu) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    cpu::set_mul_mat_isa(isa);
    EXPECT_LE(cpu::mul_mat_isa(), cpu::best_isa());
    EXPECT_LE(cpu::mul_mat_isa(), isa);
  }
  cpu::set_mul_mat_isa(std::nullopt);
  EXPECT_EQ(cpu::isa_from_name("avx2"), Isa::Avx2);
  EXPECT_EQ(cpu::isa_from_name("sse9"), std::nullopt);
}

}  // namespace
}  // namespace loom
