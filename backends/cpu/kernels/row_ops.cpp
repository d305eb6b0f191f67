// Portable row helpers and the choice of table (see row_ops.h).
#include "row_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loom/types.h"
#include "vec.h"

namespace loom::cpu {
namespace {

void soft_max(const float* x, const float* mask, float* y, int64_t n, float scale) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    y[i] = x[i] * scale + (mask ? mask[i] : 0.0f);
    max = std::max(max, y[i]);
  }
  if (max == -std::numeric_limits<float>::infinity()) {
    std::fill(y, y + n, 0.0f);
    return;
  }
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += (y[i] = std::exp(y[i] - max));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

void silu(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

float sum_sq(const float* x, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(s);
}

void scale(const float* x, float s, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}
void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}
void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}
void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
float exp_sum(const float* x, float max, float* y, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += (y[i] = std::exp(x[i] - max));
  return sum;
}

float softmax_tile(float* x, const float* mask, float scale, float slope, int64_t n, float* max, float* sum) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float tmax = kNegInf;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = !mask ? x[i] * scale : mask[i] == kNegInf ? kNegInf : x[i] * scale + slope * mask[i];
    tmax = std::max(tmax, x[i]);
  }
  if (tmax == kNegInf) {
    std::fill(x, x + n, 0.0f);
    return 1.0f;
  }
  const float m = std::max(*max, tmax);
  const float c = *max == kNegInf ? 0.0f : std::exp(*max - m);
  *max = m;
  *sum = *sum * c + exp_sum(x, m, x, n);
  return c;
}

}  // namespace

const RowOps& row_ops_portable() {
  static const RowOps ops{soft_max, silu, sum_sq, scale, add, mul, f32_to_f16, f16_to_f32, axpy, exp_sum, softmax_tile};
  return ops;
}

// Follows the mul_mat level, so LOOM_CPU_ISA=scalar (and tests forcing a
// level) run the portable helpers too.
const RowOps& row_ops() {
  switch (mul_mat_isa()) {
    case Isa::Avx512: return row_ops_avx512();
    case Isa::Avx2: return row_ops_avx2();
    case Isa::Scalar: break;
  }
  return row_ops_portable();
}

}  // namespace loom::cpu
