// Portable mul_mat kernels: the fallback every CPU can run and the reference
// for the b quantization every ISA level must reproduce bit for bit.
#include <algorithm>
#include <cmath>

#include "loom/types.h"
#include "vec.h"

namespace loom::cpu {
namespace {

void quantize_row(const float* x, int64_t k, int8_t* q, float* d, float* s) {
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.0f;
    for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    int sum = 0;
    for (int i = 0; i < kQBlock; ++i) {
      const int v = static_cast<int>(std::nearbyint(xb[i] * inv));  // ties to even, as cvtps2dq
      q[b * kQBlock + i] = static_cast<int8_t>(v);
      sum += v;
    }
    d[b] = scale;
    s[b] = scale * static_cast<float>(sum);
  }
}

void dot_f32(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const float*>(a_row);
  const auto* b = static_cast<const float*>(b_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += a[i] * b[i];
  *out = sum;
}

void dot_f16(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const uint16_t*>(a_row);
  const auto* b = static_cast<const float*>(b_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += fp16_to_fp32(a[i]) * b[i];
  *out = sum;
}

void dot_bf16(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const uint16_t*>(a_row);
  const auto* b = static_cast<const float*>(b_row);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += bf16_to_fp32(a[i]) * b[i];
  *out = sum;
}

// Quantized dots with C = 0: signed weights times signed activations.
void dot_q8_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const BlockQ8_0*>(a_row);
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    int dot = 0;
    for (int i = 0; i < kQBlock; ++i) dot += a[b].qs[i] * q[b * kQBlock + i];
    sum += fp16_to_fp32(a[b].d) * d[b] * static_cast<float>(dot);
  }
  *out = sum;
}

void dot_q4_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const BlockQ4_0*>(a_row);
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const int8_t* qb = q + b * kQBlock;
    int dot = 0;
    for (int i = 0; i < kQBlock / 2; ++i) {
      dot += ((a[b].qs[i] & 0x0f) - 8) * qb[i];
      dot += ((a[b].qs[i] >> 4) - 8) * qb[i + kQBlock / 2];
    }
    sum += fp16_to_fp32(a[b].d) * d[b] * static_cast<float>(dot);
  }
  *out = sum;
}

void f16_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}

void bf16_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

MulMatKernels make_table() {
  MulMatKernels t;
  t.isa = Isa::Scalar;
  t.quantize_row = quantize_row;
  t.dot = {dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0};
  t.f16_to_f32 = f16_to_f32;
  t.bf16_to_f32 = bf16_to_f32;
  return t;
}

}  // namespace

const MulMatKernels& mul_mat_kernels_scalar() {
  static const MulMatKernels table = make_table();
  return table;
}

}  // namespace loom::cpu
