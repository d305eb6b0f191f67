// Vector helpers over contiguous f32 rows, used by the element-wise, norm and
// soft_max kernels. Each ISA level fills a table (row_ops_avx2.cpp and
// row_ops_avx512.cpp, each with its own flags); row_ops() returns the one of
// the mul_mat level, and the portable table for scalar. Results match the scalar definitions to float
// rounding (exp to about 2 ulp), which the conformance thresholds cover.
#pragma once

#include <cstdint>

namespace loom::cpu {

struct RowOps {
  // y = softmax(x * scale + mask); mask may be null. y may alias x.
  void (*soft_max)(const float* x, const float* mask, float* y, int64_t n, float scale);
  void (*silu)(const float* x, float* y, int64_t n);
  float (*sum_sq)(const float* x, int64_t n);
  void (*scale)(const float* x, float s, float* y, int64_t n);
  void (*add)(const float* a, const float* b, float* y, int64_t n);
  void (*mul)(const float* a, const float* b, float* y, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  // y += a * x (fused attention's V accumulation).
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  // y = exp(x - max), returns the sum of y (fused attention's online
  // softmax). -inf in x gives 0. y may alias x.
  float (*exp_sum)(const float* x, float max, float* y, int64_t n);
  // One step of an online softmax over a tile of n logits x (in place):
  // x = x * scale + slope * mask (-inf where the mask is -inf; mask may be
  // null); then, unless every x is -inf (x becomes zeros, returns 1), the
  // running max grows to cover the tile, x = exp(x - max), and
  // sum = sum * c + sum(x). Returns c = exp(old max - new max), the factor
  // the caller's accumulator must be scaled by (0 when max was -inf).
  float (*softmax_tile)(float* x, const float* mask, float scale, float slope, int64_t n, float* max, float* sum);
};

const RowOps& row_ops();
const RowOps& row_ops_portable();
const RowOps& row_ops_avx2();    // only if best_isa() >= Avx2
const RowOps& row_ops_avx512();  // only if best_isa() is Avx512

}  // namespace loom::cpu
