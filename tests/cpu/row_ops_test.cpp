// The row helpers of every ISA level this CPU runs (row_ops.h) against the
// portable table, on lengths around the vector widths (tails), with inputs
// that reach exp's extremes: softmax rows with masked (-inf) elements and an
// all-masked row, silu of large magnitudes. Element-wise results are equal
// up to float rounding (exp to a few ulp: relative 1e-6); sums of squares
// within 1e-6 of the sum (the order of additions differs); F16 conversions
// exactly equal.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/kernels/row_ops.h"
#include "cpu/kernels/vec.h"

namespace loom {
namespace {

using cpu::Isa;
using cpu::RowOps;

std::vector<std::pair<Isa, const RowOps*>> vector_levels() {
  std::vector<std::pair<Isa, const RowOps*>> out;
  if (cpu::best_isa() >= Isa::Avx2) out.emplace_back(Isa::Avx2, &cpu::row_ops_avx2());
  if (cpu::best_isa() >= Isa::Avx512) out.emplace_back(Isa::Avx512, &cpu::row_ops_avx512());
  return out;
}

constexpr int64_t kLengths[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 257};

std::vector<float> random_row(int64_t n, float range, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "] of " << got.size();
      continue;
    }
    EXPECT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-30) << what << " [" << i << "] of " << got.size();
  }
}

TEST(RowOps, EveryLevelMatchesThePortableHelpers) {
  const RowOps& ref = cpu::row_ops_portable();
  if (vector_levels().empty()) GTEST_SKIP() << "no vector level on this CPU";
  for (const auto& [isa, ops] : vector_levels()) {
    SCOPED_TRACE(std::string(cpu::isa_name(isa)));
    for (int64_t n : kLengths) {
      SCOPED_TRACE("n=" + std::to_string(n));
      const std::vector<float> a = random_row(n, 4.0f, 1), b = random_row(n, 4.0f, 2);
      std::vector<float> want(n), got(n);

      std::vector<float> mask = random_row(n, 1.0f, 3);
      for (int64_t i = 0; i < n; i += 3) mask[i] = -std::numeric_limits<float>::infinity();
      for (const float* m : {static_cast<const float*>(nullptr), static_cast<const float*>(mask.data())}) {
        ref.soft_max(a.data(), m, want.data(), n, 0.7f);
        ops->soft_max(a.data(), m, got.data(), n, 0.7f);
        expect_close(got, want, 1e-6, "soft_max");
        for (int64_t i = 0; m && i < n; i += 3) EXPECT_EQ(got[i], 0.0f) << "masked element " << i;
      }
      const std::vector<float> masked(n, -std::numeric_limits<float>::infinity());
      ops->soft_max(a.data(), masked.data(), got.data(), n, 1.0f);
      for (float v : got) EXPECT_EQ(v, 0.0f) << "all-masked row";

      const std::vector<float> wide = random_row(n, 120.0f, 4);
      ref.silu(wide.data(), want.data(), n);
      ops->silu(wide.data(), got.data(), n);
      expect_close(got, want, 1e-6, "silu");

      EXPECT_NEAR(ops->sum_sq(a.data(), n), ref.sum_sq(a.data(), n), 1e-6 * ref.sum_sq(a.data(), n));

      ref.scale(a.data(), -1.5f, want.data(), n);
      ops->scale(a.data(), -1.5f, got.data(), n);
      expect_close(got, want, 0.0, "scale");
      ref.add(a.data(), b.data(), want.data(), n);
      ops->add(a.data(), b.data(), got.data(), n);
      expect_close(got, want, 0.0, "add");
      ref.mul(a.data(), b.data(), want.data(), n);
      ops->mul(a.data(), b.data(), got.data(), n);
      expect_close(got, want, 0.0, "mul");

      std::vector<uint16_t> h_want(n), h_got(n);
      ref.f32_to_f16(wide.data(), h_want.data(), n);
      ops->f32_to_f16(wide.data(), h_got.data(), n);
      EXPECT_EQ(h_got, h_want) << "f32_to_f16";
      ref.f16_to_f32(h_want.data(), want.data(), n);
      ops->f16_to_f32(h_want.data(), got.data(), n);
      expect_close(got, want, 0.0, "f16_to_f32");
    }
  }
}

// exp's range: softmax of a row with a spread wider than float's exponent
// (the small entries underflow to 0 or subnormals, as std::exp gives them).
TEST(RowOps, SoftMaxAcrossTheExponentRange) {
  const RowOps& ref = cpu::row_ops_portable();
  for (const auto& [isa, ops] : vector_levels()) {
    SCOPED_TRACE(std::string(cpu::isa_name(isa)));
    std::vector<float> x(24);
    for (size_t i = 0; i < x.size(); ++i) x[i] = -9.0f * static_cast<float>(i);  // 0 .. -207
    std::vector<float> want(x.size()), got(x.size());
    ref.soft_max(x.data(), nullptr, want.data(), static_cast<int64_t>(x.size()), 1.0f);
    ops->soft_max(x.data(), nullptr, got.data(), static_cast<int64_t>(x.size()), 1.0f);
    for (size_t i = 0; i < x.size(); ++i) {
      if (want[i] >= std::numeric_limits<float>::min()) EXPECT_NEAR(got[i], want[i], 1e-6 * want[i]) << i;
      else EXPECT_LE(std::fabs(got[i] - want[i]), 2 * std::numeric_limits<float>::denorm_min() * 8) << i;
    }
  }
}

}  // namespace
}  // namespace loom
