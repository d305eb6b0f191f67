// The integer dots of the quantized weight types (quant_dot.h), per type:
//  - Exact: with every float scale 1 (fp16 d = dmin = m = 1, MXFP4 e = 128,
//    activation d = 1) and random bits everywhere else, a dot is an integer
//    below 2^24, so the scalar dot, the AVX2 dot and the dot of the
//    dequantized rows (to_float, in double) must all be equal (AVX-512 too).
//  - Realistic: weights quantized by the type's reference from_float, real
//    activations. AVX2 equals scalar within 1e-5 of sum |w * y| (the order of
//    float additions differs); scalar equals the dot of the dequantized
//    weights with the dequantized activations within the same bound; and it
//    is within sum |w| * step / 2 (+ the same 1e-5) of the dot with the f32
//    activations, step being the activation block's quantization step
//    (|d| of Q8_K or of the 32-element block): rounding moves each
//    activation by at most half a step.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/kernels/quant_dot.h"
#include "cpu/kernels/vec.h"
#include "loom/types.h"

namespace loom {
namespace {

using cpu::ActFormat;
using cpu::Isa;

constexpr DType kTypes[] = {DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K,   DType::Q3_K,   DType::Q4_K,
                            DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

class QuantDotTest : public ::testing::TestWithParam<DType> {
 protected:
  DType type() const { return GetParam(); }
  const TypeTraits& tt() const { return traits(type()); }
  ActFormat format() const { return cpu::act_format(type()); }
  std::vector<int64_t> lengths() const {
    return tt().block_size == kQK_K ? std::vector<int64_t>{256, 512, 1024} : std::vector<int64_t>{32, 96, 256};
  }
  std::vector<cpu::DotFn> simd_dots() const {
    std::vector<cpu::DotFn> out;
    if (cpu::best_isa() >= Isa::Avx2) out.push_back(cpu::quant_dot_avx2(type()));
    if (cpu::best_isa() >= Isa::Avx512) out.push_back(cpu::quant_dot_avx512(type()));
    return out;
  }
  // The activations as floats, and the quantization step of element i.
  std::vector<double> act_values(const std::vector<uint8_t>& act, int64_t k, std::vector<double>* step) const {
    std::vector<double> out(k);
    if (step) step->resize(k);
    if (format() == ActFormat::Q8_K) {
      const auto* blocks = reinterpret_cast<const BlockQ8_K*>(act.data());
      for (int64_t i = 0; i < k; ++i) {
        out[i] = static_cast<double>(blocks[i / kQK_K].d) * blocks[i / kQK_K].qs[i % kQK_K];
        if (step) (*step)[i] = std::fabs(blocks[i / kQK_K].d);
      }
    } else {
      const auto* q = reinterpret_cast<const int8_t*>(act.data());
      const auto* d = reinterpret_cast<const float*>(q + k);
      for (int64_t i = 0; i < k; ++i) {
        out[i] = static_cast<double>(d[i / 32]) * q[i];
        if (step) (*step)[i] = d[i / 32];
      }
    }
    return out;
  }
};

// Sets every float scale of a row of `type` to 1.
void unit_scales(DType type, uint8_t* row, int64_t k) {
  const uint16_t one = fp32_to_fp16(1.0f);
  const int64_t nb = k / traits(type).block_size;
  const size_t size = traits(type).type_size;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* block = row + b * size;
    auto set = [&](size_t offset) { std::memcpy(block + offset, &one, 2); };
    switch (type) {
      case DType::Q4_1: set(offsetof(BlockQ4_1, d)), set(offsetof(BlockQ4_1, m)); break;
      case DType::Q5_0: set(offsetof(BlockQ5_0, d)); break;
      case DType::Q5_1: set(offsetof(BlockQ5_1, d)), set(offsetof(BlockQ5_1, m)); break;
      case DType::Q2_K: set(offsetof(BlockQ2_K, d)), set(offsetof(BlockQ2_K, dmin)); break;
      case DType::Q3_K: set(offsetof(BlockQ3_K, d)); break;
      case DType::Q4_K: set(offsetof(BlockQ4_K, d)), set(offsetof(BlockQ4_K, dmin)); break;
      case DType::Q5_K: set(offsetof(BlockQ5_K, d)), set(offsetof(BlockQ5_K, dmin)); break;
      case DType::Q6_K: set(offsetof(BlockQ6_K, d)); break;
      case DType::IQ4_NL: set(offsetof(BlockIQ4_NL, d)); break;
      case DType::IQ4_XS: set(offsetof(BlockIQ4_XS, d)); break;
      case DType::MXFP4: block[offsetof(BlockMXFP4, e)] = 128; break;  // 2^(e - 128) = 1
      default: FAIL() << "no scales for " << type_name(type);
    }
  }
}

// Random int8 activations in [-127, 127] with d = 1, in `format`.
std::vector<uint8_t> unit_activations(ActFormat format, int64_t k, std::mt19937& rng) {
  std::uniform_int_distribution<int> qd(-127, 127);
  std::vector<uint8_t> out(cpu::act_row_bytes(format, k));
  if (format == ActFormat::Q8_K) {
    auto* blocks = reinterpret_cast<BlockQ8_K*>(out.data());
    for (int64_t b = 0; b < k / kQK_K; ++b) {
      blocks[b].d = 1.0f;
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += blocks[b].qs[16 * g + j] = static_cast<int8_t>(qd(rng));
        blocks[b].bsums[g] = static_cast<int16_t>(sum);
      }
    }
  } else {
    auto* q = reinterpret_cast<int8_t*>(out.data());
    auto* d = reinterpret_cast<float*>(q + k);
    for (int64_t b = 0; b < k / 32; ++b) {
      int sum = 0;
      for (int j = 0; j < 32; ++j) sum += q[32 * b + j] = static_cast<int8_t>(qd(rng));
      d[b] = 1.0f;
      d[k / 32 + b] = static_cast<float>(sum);
    }
  }
  return out;
}

TEST_P(QuantDotTest, ExactWithUnitScales) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t k : lengths()) {
    SCOPED_TRACE(fmt::format("{} k={}", type_name(type()), k));
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint8_t> row(row_size(type(), k));
      for (uint8_t& v : row) v = static_cast<uint8_t>(byte(rng));
      unit_scales(type(), row.data(), k);
      const std::vector<uint8_t> act = unit_activations(format(), k, rng);

      std::vector<float> w(k);
      tt().to_float(row.data(), w.data(), k);
      const std::vector<double> y = act_values(act, k, nullptr);
      double want = 0.0;
      for (int64_t i = 0; i < k; ++i) want += w[i] * y[i];
      ASSERT_LT(std::fabs(want), 1 << 24);

      float got = 0.0f;
      cpu::quant_dot_scalar(type())(k, row.data(), act.data(), &got);
      EXPECT_EQ(got, want) << "scalar";
      for (cpu::DotFn dot : simd_dots()) {
        float simd = 0.0f;
        dot(k, row.data(), act.data(), &simd);
        EXPECT_EQ(simd, want) << "simd";
      }
    }
  }
}

TEST_P(QuantDotTest, RealisticWithinBounds) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.05f, 3.0f);
  for (int64_t k : lengths()) {
    SCOPED_TRACE(fmt::format("{} k={}", type_name(type()), k));
    for (int trial = 0; trial < 10; ++trial) {
      // Blocks of different magnitudes, so that the scales differ.
      std::vector<float> wf(k), x(k);
      for (int64_t i = 0; i < k; i += 32) {
        const float sw = spread(rng), sx = spread(rng);
        for (int64_t j = i; j < i + 32; ++j) {
          wf[j] = sw * normal(rng);
          x[j] = sx * normal(rng);
        }
      }
      std::vector<uint8_t> row(row_size(type(), k)), act(cpu::act_row_bytes(format(), k));
      tt().from_float(wf.data(), row.data(), k);
      cpu::quantize_act(format(), cpu::mul_mat_kernels_scalar().quantize_row, x.data(), k, act.data());
      std::vector<float> w(k);
      tt().to_float(row.data(), w.data(), k);
      std::vector<double> step;
      const std::vector<double> y = act_values(act, k, &step);

      double want = 0.0, mag = 0.0, want_f32 = 0.0, bound_f32 = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        want += w[i] * y[i];
        mag += std::fabs(w[i] * y[i]);
        want_f32 += static_cast<double>(w[i]) * x[i];
        bound_f32 += std::fabs(w[i]) * step[i] / 2;
      }
      const double tol = 1e-5 * mag + 1e-6;
      float got = 0.0f;
      cpu::quant_dot_scalar(type())(k, row.data(), act.data(), &got);
      EXPECT_NEAR(got, want, tol) << "scalar vs dequantized dot";
      EXPECT_NEAR(got, want_f32, bound_f32 + tol) << "scalar vs f32 activations";
      for (cpu::DotFn dot : simd_dots()) {
        float simd = 0.0f;
        dot(k, row.data(), act.data(), &simd);
        EXPECT_NEAR(simd, got, tol) << "simd vs scalar";
      }
    }
  }
}

// The types that have a 4-column dot on this CPU (the others take the
// dequantizing path for many columns, tested in mul_mat_test).
std::vector<DType> types_with_dot4() {
  std::vector<DType> out;
  for (DType t : kTypes)
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
      if (isa <= cpu::best_isa() && cpu::quant_dot4(isa, t)) {
        out.push_back(t);
        break;
      }
  return out;
}

class QuantDot4Test : public QuantDotTest {};

// The 4-column dots give exactly what 4 one-column dots give.
TEST_P(QuantDot4Test, FourColumnsAsFourDots) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    const cpu::Dot4Fn dot4 = cpu::quant_dot4(isa, type());
    if (!dot4) continue;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t k : lengths()) {
      SCOPED_TRACE(fmt::format("{} {} k={}", type_name(type()), cpu::isa_name(isa), k));
      std::vector<float> wf(k), x(4 * k);
      for (float& v : wf) v = normal(rng);
      for (float& v : x) v = normal(rng);
      std::vector<uint8_t> row(row_size(type(), k));
      tt().from_float(wf.data(), row.data(), k);
      const size_t stride = cpu::act_row_bytes(format(), k) + 64;  // columns need not be adjacent
      std::vector<uint8_t> act(4 * stride);
      for (int c = 0; c < 4; ++c)
        cpu::quantize_act(format(), cpu::mul_mat_kernels_scalar().quantize_row, x.data() + c * k, k,
                          act.data() + c * stride);
      float four[4];
      dot4(k, row.data(), act.data(), stride, four);
      for (int c = 0; c < 4; ++c) {
        float one = 0.0f;
        cpu::quant_dot(isa, type())(k, row.data(), act.data() + c * stride, &one);
        EXPECT_EQ(four[c], one) << "column " << c;
      }
    }
  }
}

// mul_mat's f32 paths dequantize rows with dequant_row_fn: the reference
// to_float's values, on random bits with unit scales (every code of q, qh and
// the sub-block scales) and on rows quantized from normal values.
TEST_P(QuantDotTest, DequantRowEqualsToFloat) {
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t k : lengths()) {
    for (bool unit : {true, false}) {
      SCOPED_TRACE(fmt::format("{} k={} {}", type_name(type()), k, unit ? "random bits, unit scales" : "quantized"));
      std::vector<uint8_t> row(row_size(type(), k));
      if (unit) {
        for (uint8_t& v : row) v = static_cast<uint8_t>(byte(rng));
        unit_scales(type(), row.data(), k);
      } else {
        std::vector<float> wf(k);
        for (float& v : wf) v = normal(rng);
        tt().from_float(wf.data(), row.data(), k);
      }
      std::vector<float> want(k), got(k);
      tt().to_float(row.data(), want.data(), k);
      cpu::dequant_row_fn(type())(row.data(), got.data(), k);
      for (int64_t i = 0; i < k; ++i) ASSERT_EQ(got[i], want[i]) << "element " << i;
    }
  }
}

TEST(QuantDot, EveryQuantizedTypeHasADotOnEveryLevel) {
  for (DType type : kQuantizedTypes) {
    const bool own = type != DType::Q8_0 && type != DType::Q4_0;  // those are MulMatKernels::dot
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
      if (isa <= cpu::best_isa()) EXPECT_EQ(cpu::quant_dot(isa, type) != nullptr, own) << type_name(type);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantDotTest, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });
INSTANTIATE_TEST_SUITE_P(Types, QuantDot4Test, ::testing::ValuesIn(types_with_dot4()),
                         [](const auto& info) { return std::string(type_name(info.param)); });
// A CPU below AVX2 may have no 4-column dot at all.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QuantDot4Test);

}  // namespace
}  // namespace loom
