// AVX2 + FMA + F16C row helpers (see row_ops.h). exp is the AVX-512 file's
// range reduction and polynomial; 2^n is built in the exponent bits as
// 2^(n/2) * 2^(n - n/2), so that n from -150 to 128 stays exact through
// the subnormal and overflow ranges, and inputs below -103.9 (a masked -inf)
// give exactly 0. Tails shorter than 8 take the scalar definitions.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "loom/types.h"
#include "row_ops.h"

namespace loom::cpu {
namespace {

inline __m256 pow2i(__m256i n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

inline __m256 exp8(__m256 x) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
  const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-103.9f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-103.9f));
  x = _mm256_min_ps(x, _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
  r = _mm256_fnmadd_ps(n, ln2_lo, r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, pow2i(n1)), pow2i(_mm256_sub_epi32(ni, n1)));
  return _mm256_andnot_ps(underflow, e);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void soft_max(const float* x, const float* mask, float* y, int64_t n, float scale) {
  const __m256 s = _mm256_set1_ps(scale);
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  float max = -std::numeric_limits<float>::infinity();
  // Pass 1: y = x * scale + mask, and the maximum.
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
    if (mask) v = _mm256_add_ps(v, _mm256_loadu_ps(mask + i));
    _mm256_storeu_ps(y + i, v);
    vmax = _mm256_max_ps(vmax, v);
  }
  for (; i < n; ++i) {
    y[i] = x[i] * scale + (mask ? mask[i] : 0.0f);
    max = std::max(max, y[i]);
  }
  max = std::max(max, hmax(vmax));
  if (max == -std::numeric_limits<float>::infinity()) {  // every element masked
    for (i = 0; i < n; ++i) y[i] = 0.0f;
    return;
  }
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  float sum = 0.0f;
  for (i = 0; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(y + i), vm));
    _mm256_storeu_ps(y + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  for (; i < n; ++i) sum += (y[i] = std::exp(y[i] - max));
  const float inv_f = 1.0f / (sum + hsum(vsum));
  const __m256 inv = _mm256_set1_ps(inv_f);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), inv));
  for (; i < n; ++i) y[i] *= inv_f;
}

void silu(const float* x, float* y, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_storeu_ps(y + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

float sum_sq(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

void scale(const float* x, float s, float* y, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  for (; i < n; ++i) y[i] = x[i] * s;
}

void add(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  for (; i < n; ++i) y[i] = a[i] * b[i];
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

float exp_sum(const float* x, float max, float* y, int64_t n) {
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(y + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += (y[i] = std::exp(x[i] - max));
  return sum + hsum(vsum);
}

float softmax_tile(float* x, const float* mask, float scale, float slope, int64_t n, float* max, float* sum) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const __m256 vs = _mm256_set1_ps(scale), vslope = _mm256_set1_ps(slope), ninf = _mm256_set1_ps(kNegInf);
  __m256 vmax = ninf;
  float tmax = kNegInf;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    if (mask) {
      const __m256 m = _mm256_loadu_ps(mask + i);
      v = _mm256_blendv_ps(_mm256_fmadd_ps(vslope, m, v), ninf, _mm256_cmp_ps(m, ninf, _CMP_EQ_OQ));
    }
    _mm256_storeu_ps(x + i, v);
    vmax = _mm256_max_ps(vmax, v);
  }
  for (; i < n; ++i) {
    x[i] = !mask ? x[i] * scale : mask[i] == kNegInf ? kNegInf : x[i] * scale + slope * mask[i];
    tmax = std::max(tmax, x[i]);
  }
  tmax = std::max(tmax, hmax(vmax));
  if (tmax == kNegInf) {
    for (i = 0; i < n; ++i) x[i] = 0.0f;
    return 1.0f;
  }
  const float m = std::max(*max, tmax);
  const float c = *max == kNegInf ? 0.0f : std::exp(*max - m);
  *max = m;
  *sum = *sum * c + exp_sum(x, m, x, n);
  return c;
}

}  // namespace

const RowOps& row_ops_avx2() {
  static const RowOps ops{soft_max, silu, sum_sq, scale, add, mul, f32_to_f16, f16_to_f32, axpy, exp_sum, softmax_tile};
  return ops;
}

}  // namespace loom::cpu
