// AVX-512 row helpers (see row_ops.h). exp is a range reduction to
// [-ln2/2, ln2/2] with a degree-6 polynomial and vscalefps for 2^n, which
// also gives 0 for very negative inputs (a masked -inf) and inf above the
// float range.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "row_ops.h"

namespace loom::cpu {
namespace {

inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << left) - 1);
}

inline __m512 exp16(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_max_ps(x, _mm512_set1_ps(-150.0f));
  x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

void soft_max(const float* x, const float* mask, float* y, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // Pass 1: y = x * scale + mask, and the maximum.
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), s);
    if (mask) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, mask + i));
    _mm512_mask_storeu_ps(y + i, m, v);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, v);
  }
  const float max = _mm512_reduce_max_ps(vmax);
  if (max == -std::numeric_limits<float>::infinity()) {  // every element masked
    for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(y + i, tail_mask(n - i), _mm512_setzero_ps());
    return;
  }
  const __m512 vm = _mm512_set1_ps(max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, y + i), vm));
    _mm512_mask_storeu_ps(y + i, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), inv));
  }
}

void silu(const float* x, float* y, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_mask_storeu_ps(y + i, m, _mm512_div_ps(v, _mm512_add_ps(one, e)));
  }
}

float sum_sq(const float* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
  }
  for (; i < n; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

void scale(const float* x, float s, float* y, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
  }
}

void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void mul(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_mask_storeu_epi16(y + i, m, h);
  }
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i)));
  }
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

float exp_sum(const float* x, float max, float* y, int64_t n) {
  const __m512 vm = _mm512_set1_ps(max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm));
    _mm512_mask_storeu_ps(y + i, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

float softmax_tile(float* x, const float* mask, float scale, float slope, int64_t n, float* max, float* sum) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const __m512 vs = _mm512_set1_ps(scale), vslope = _mm512_set1_ps(slope), ninf = _mm512_set1_ps(kNegInf);
  __m512 vmax = ninf;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs);
    if (mask) {
      const __m512 m = _mm512_maskz_loadu_ps(k, mask + i);
      v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(m, ninf, _CMP_EQ_OQ), _mm512_fmadd_ps(vslope, m, v), ninf);
    }
    _mm512_mask_storeu_ps(x + i, k, v);
    vmax = _mm512_mask_max_ps(vmax, k, vmax, v);
  }
  const float tmax = _mm512_reduce_max_ps(vmax);
  if (tmax == kNegInf) {
    for (int64_t i = 0; i < n; i += 16) _mm512_mask_storeu_ps(x + i, tail_mask(n - i), _mm512_setzero_ps());
    return 1.0f;
  }
  const float m = std::max(*max, tmax);
  const float c = *max == kNegInf ? 0.0f : std::exp(*max - m);
  *max = m;
  *sum = *sum * c + exp_sum(x, m, x, n);
  return c;
}

}  // namespace

const RowOps& row_ops_avx512() {
  static const RowOps ops{soft_max, silu, sum_sq, scale, add, mul, f32_to_f16, f16_to_f32, axpy, exp_sum, softmax_tile};
  return ops;
}

}  // namespace loom::cpu
