// AVX-512 (F/BW/VL/DQ + VNNI + F16C) mul_mat kernels. Panels are 16 columns
// wide (one zmm). Quantized weights use vpdpbusd with the weights as the
// unsigned operand: Q4_0 nibbles as they are (C = 8), Q8_0 biased by +128
// (C = 128); the per-block m term of the packed b corrects both. Q4_1,
// Q4_K and the 5-bit types (gemm_u4) add their per-block offsets to the same
// loop; Q3_K and Q6_K (gemm_s6) are signed, with the sign moved onto b.
// GCC 12 reports the deliberately undefined lanes inside its own AVX-512
// intrinsics as uninitialized (GCC bug 105593); that says nothing about this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "loom/types.h"
#include "expand_rows_avx2.h"
#include "gemm_rows.h"
#include "quant_dot.h"
#include "vec.h"

namespace loom::cpu {
namespace {

constexpr int kP = 16;

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void quantize_row(const float* x, int64_t k, int8_t* q, float* d, float* s) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * kQBlock);
    const __m512 x1 = _mm512_loadu_ps(x + b * kQBlock + 16);
    const __m512 ax = _mm512_max_ps(_mm512_andnot_ps(sign, x0), _mm512_andnot_ps(sign, x1));
    const float amax = _mm512_reduce_max_ps(ax);
    const float scale = amax / 127.0f;
    const __m512 inv = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, inv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, inv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock + 16), _mm512_cvtsepi32_epi8(q1));
    d[b] = scale;
    s[b] = scale * static_cast<float>(_mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1)));
  }
}

// ---- float dots -------------------------------------------------------------

template <class LoadA>
inline float dot_float(int64_t k, const float* b, LoadA load_a) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(),
         acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    acc0 = _mm512_fmadd_ps(load_a(i, 0xffff), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(load_a(i + 16, 0xffff), _mm512_loadu_ps(b + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load_a(i + 32, 0xffff), _mm512_loadu_ps(b + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load_a(i + 48, 0xffff), _mm512_loadu_ps(b + i + 48), acc3);
  }
  for (; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (k - i)) - 1);
    acc0 = _mm512_fmadd_ps(load_a(i, m), _mm512_maskz_loadu_ps(m, b + i), acc0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
}

void dot_f32(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const float*>(a_row);
  *out = dot_float(k, static_cast<const float*>(b_row),
                   [a](int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, a + i); });
}

void dot_f16(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const uint16_t*>(a_row);
  *out = dot_float(k, static_cast<const float*>(b_row),
                   [a](int64_t i, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, a + i)); });
}

inline __m512 bf16x16_to_f32(__m256i v) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(v), 16));
}

void dot_bf16(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const uint16_t*>(a_row);
  *out = dot_float(k, static_cast<const float*>(b_row),
                   [a](int64_t i, __mmask16 m) { return bf16x16_to_f32(_mm256_maskz_loadu_epi16(m, a + i)); });
}

// ---- quantized dots -----------------------------------------------------------

// Two Q4_0 blocks as 64 unsigned nibbles in element order.
inline __m512i q4_pair(const uint8_t* q0, const uint8_t* q1) {
  const __m256i qq = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q0))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(q1)), 1);
  __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(qq), _mm256_srli_epi16(qq, 4), 1);
  x = _mm512_and_si512(x, _mm512_set1_epi8(0x0f));          // [lo0 | lo1 | hi0 | hi1]
  return _mm512_shuffle_i64x2(x, x, _MM_SHUFFLE(3, 1, 2, 0));  // [lo0 | hi0 | lo1 | hi1]
}

// Two Q8_0 blocks biased to unsigned.
inline __m512i q8_pair(const int8_t* q0, const int8_t* q1) {
  const __m512i x =
      _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q0))),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q1)), 1);
  return _mm512_xor_si512(x, _mm512_set1_epi8(static_cast<char>(0x80)));
}

// One Q4_0 / Q8_0 block as 32 unsigned bytes (the encodings above).
inline __m256i q4_one(const BlockQ4_0& x) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
  const __m128i low = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), low), _mm_and_si128(v, low));
}
inline __m256i q8_one(const BlockQ8_0& x) {
  return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs)),
                          _mm256_set1_epi8(static_cast<char>(0x80)));
}

// The fp16 scales of 8 consecutive blocks as floats.
template <class Block>
inline __m256 scales8(const Block* x) {
  const __m128i h = _mm_setr_epi16(static_cast<short>(x[0].d), static_cast<short>(x[1].d),
                                   static_cast<short>(x[2].d), static_cast<short>(x[3].d),
                                   static_cast<short>(x[4].d), static_cast<short>(x[5].d),
                                   static_cast<short>(x[6].d), static_cast<short>(x[7].d));
  return _mm256_cvtph_ps(h);
}

// Sum over blocks of d_a * (d_b * dot(w + C, q) + m). Eight blocks per step:
// their d_a * d_b products are formed once and spread over the two halves of
// each pair's lanes with one permute; the m terms go to their own sum.
template <class Block, class Pair, class One>
inline float dot_quant(int64_t k, const Block* x, const void* b_row, Pair pair, One one) {
  const int64_t nb = k / kQBlock;
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  const float* m = d + nb;
  const __m512i idx[4] = {
      _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
      _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
      _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5),
      _mm512_setr_epi32(6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7)};
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m256 corr = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= nb; b += 8) {
    const __m256 da = scales8(x + b);
    const __m512 dd = _mm512_castps256_ps512(_mm256_mul_ps(da, _mm256_loadu_ps(d + b)));
    corr = _mm256_fmadd_ps(da, _mm256_loadu_ps(m + b), corr);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i av = pair(x[b + 2 * j], x[b + 2 * j + 1]);
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), av, _mm512_loadu_si512(q + (b + 2 * j) * kQBlock));
      const __m512 s = _mm512_permutexvar_ps(idx[j], dd);
      if (j % 2 == 0) acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc0);
      else acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc1);
    }
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  __m128 c4 = _mm_add_ps(_mm256_castps256_ps128(corr), _mm256_extractf128_ps(corr, 1));
  c4 = _mm_add_ps(c4, _mm_movehl_ps(c4, c4));
  sum += _mm_cvtss_f32(_mm_add_ss(c4, _mm_movehdup_ps(c4)));
  for (; b < nb; ++b) {
    const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), one(x[b]),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * kQBlock)));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(dot), _mm256_extracti128_si256(dot, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
    const float da = half_to_float(x[b].d);
    sum += da * (d[b] * static_cast<float>(_mm_cvtsi128_si32(s4)) + m[b]);
  }
  return sum;
}

void dot_q4_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_quant(
      k, static_cast<const BlockQ4_0*>(a_row), b_row,
      [](const BlockQ4_0& x0, const BlockQ4_0& x1) { return q4_pair(x0.qs, x1.qs); }, q4_one);
}

void dot_q8_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_quant(
      k, static_cast<const BlockQ8_0*>(a_row), b_row,
      [](const BlockQ8_0& x0, const BlockQ8_0& x1) { return q8_pair(x0.qs, x1.qs); }, q8_one);
}

// ---- interleaved rows (CPU_Repack) ------------------------------------------------

// 16 rows at once: lane r of every vector is row r. Per block, the quant
// vectors hold 4 bytes of each row; the b column's matching 4 bytes are
// broadcast. Four integer sums keep the vpdpbusd chains short.
template <int NV, class Weights>
inline void dot16_quant(int64_t k, const uint8_t* group, const void* b_row, float* out, Weights weights) {
  const int64_t nb = k / kQBlock;
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  const float* m = d + nb;
  constexpr size_t kBlockBytes = 16 * sizeof(uint16_t) + NV * 64;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * kBlockBytes;
    const __m512 da = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    const int8_t* qb = q + b * kQBlock;
    __m512i s[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
    weights(blk + 32, qb, s);
    const __m512i sum = _mm512_add_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_add_epi32(s[2], s[3]));
    const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(d[b]), _mm512_set1_ps(m[b]));
    if (b & 1) acc1 = _mm512_fmadd_ps(t, da, acc1);
    else acc0 = _mm512_fmadd_ps(t, da, acc0);
  }
  _mm512_storeu_ps(out, _mm512_add_ps(acc0, acc1));
}

inline __m512i bcast4(const int8_t* p) { return _mm512_set1_epi32(static_cast<int>(load_u32(p))); }

void dot16_q4_0(int64_t k, const uint8_t* group, const void* b_row, float* out) {
  dot16_quant<4>(k, group, b_row, out, [](const uint8_t* v, const int8_t* qb, __m512i* s) {
    const __m512i low = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      const __m512i w = _mm512_loadu_si512(v + t * 64);
      // Low nibbles are elements 4t..4t+3, high nibbles 16+4t..16+4t+3.
      s[t] = _mm512_dpbusd_epi32(s[t], _mm512_and_si512(w, low), bcast4(qb + 4 * t));
      s[t] = _mm512_dpbusd_epi32(s[t], _mm512_and_si512(_mm512_srli_epi16(w, 4), low), bcast4(qb + 16 + 4 * t));
    }
  });
}

void dot16_q8_0(int64_t k, const uint8_t* group, const void* b_row, float* out) {
  dot16_quant<8>(k, group, b_row, out, [](const uint8_t* v, const int8_t* qb, __m512i* s) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int t = 0; t < 8; ++t) {
      const __m512i w = _mm512_xor_si512(_mm512_loadu_si512(v + t * 64), bias);
      s[t % 4] = _mm512_dpbusd_epi32(s[t % 4], w, bcast4(qb + 4 * t));
    }
  });
}

// NC b columns (row format, b_stride bytes apart) times 16 interleaved rows:
// out[c * 16 + r]. The weights are loaded (and Q4_0 nibbles split) once per
// block for all columns; each column keeps its own integer sum.
template <int NC, bool Q4>
void gemm16_tile(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, float* out) {
  const int64_t nb = k / kQBlock;
  constexpr int kNV = Q4 ? 4 : 8;
  constexpr size_t kBlockBytes = 16 * sizeof(uint16_t) + kNV * 64;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[NC];
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * kBlockBytes;
    __m512i isum[NC];
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) isum[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int t = 0; t < kNV; ++t) {
      const __m512i w = _mm512_loadu_si512(blk + 32 + t * 64);
      if constexpr (Q4) {
        const __m512i lo = _mm512_and_si512(w, low);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const auto* qb = reinterpret_cast<const int8_t*>(b_cols + c * b_stride) + b * kQBlock;
          isum[c] = _mm512_dpbusd_epi32(isum[c], lo, bcast4(qb + 4 * t));
          isum[c] = _mm512_dpbusd_epi32(isum[c], hi, bcast4(qb + 16 + 4 * t));
        }
      } else {
        const __m512i wu = _mm512_xor_si512(w, bias);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const auto* qb = reinterpret_cast<const int8_t*>(b_cols + c * b_stride) + b * kQBlock;
          isum[c] = _mm512_dpbusd_epi32(isum[c], wu, bcast4(qb + 4 * t));
        }
      }
    }
    const __m512 da = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
#pragma GCC unroll 8
    for (int c = 0; c < NC; ++c) {
      const auto* d = reinterpret_cast<const float*>(b_cols + c * b_stride + k);
      const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_set1_ps(d[b]), _mm512_set1_ps(d[nb + b]));
      acc[c] = _mm512_fmadd_ps(t, da, acc[c]);
    }
  }
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + c * 16, acc[c]);
}

template <bool Q4>
void gemm16(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  switch (ncols) {
    case 1: return Q4 ? dot16_q4_0(k, group, b_cols, out) : dot16_q8_0(k, group, b_cols, out);
    case 2: return gemm16_tile<2, Q4>(k, group, b_cols, b_stride, out);
    case 3: return gemm16_tile<3, Q4>(k, group, b_cols, b_stride, out);
    case 4: return gemm16_tile<4, Q4>(k, group, b_cols, b_stride, out);
    case 5: return gemm16_tile<5, Q4>(k, group, b_cols, b_stride, out);
    case 6: return gemm16_tile<6, Q4>(k, group, b_cols, b_stride, out);
    case 7: return gemm16_tile<7, Q4>(k, group, b_cols, b_stride, out);
    default: return gemm16_tile<8, Q4>(k, group, b_cols, b_stride, out);
  }
}

void gemm16_q4_0(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  gemm16<true>(k, group, b_cols, b_stride, ncols, out);
}
void gemm16_q8_0(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  gemm16<false>(k, group, b_cols, b_stride, ncols, out);
}

// ---- conversions and expansion -------------------------------------------------

void f16_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}

void bf16_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? 0xffff : static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(dst + i, m, bf16x16_to_f32(_mm256_maskz_loadu_epi16(m, s + i)));
  }
}

void expand_q8_0(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockQ8_0*>(a_row);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), _mm256_xor_si256(v, bias));
    d[b] = half_to_float(x[b].d);
  }
}

void expand_q4_0(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockQ4_0*>(a_row);
  const __m128i low = _mm_set1_epi8(0x0f);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock), _mm_and_si128(v, low));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kQBlock + 16), _mm_and_si128(_mm_srli_epi16(v, 4), low));
    d[b] = half_to_float(x[b].d);
  }
}

// ---- panel packing ----------------------------------------------------------------

// r[0..15] (16 values of 16 columns) -> r[k] = element k of every column.
inline void transpose16(__m512 r[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Within 128-bit lane j, b[4i + m] = element 4j + m of columns 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    b[4 * i + 0] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    b[4 * i + 1] = _mm512_shuffle_ps(a[4 * i], a[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    b[4 * i + 2] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    b[4 * i + 3] = _mm512_shuffle_ps(a[4 * i + 1], a[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  // Element 4j + m of all 16 columns: lane j of b[m], b[4 + m], b[8 + m], b[12 + m].
  for (int m = 0; m < 4; ++m) {
    const __m512 t0 = _mm512_shuffle_f32x4(b[m], b[4 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 t1 = _mm512_shuffle_f32x4(b[m], b[4 + m], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 t2 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 t3 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], _MM_SHUFFLE(3, 2, 3, 2));
    r[m] = _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(2, 0, 2, 0));
    r[4 + m] = _mm512_shuffle_f32x4(t0, t2, _MM_SHUFFLE(3, 1, 3, 1));
    r[8 + m] = _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + m] = _mm512_shuffle_f32x4(t1, t3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

void pack_f32_panel(const float* col0, size_t col_stride, int ncols, int64_t k, float* out) {
  for (int64_t i = 0; i < k; i += 16) {
    const int64_t n = std::min<int64_t>(16, k - i);
    const __mmask16 m = n == 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
    __m512 r[16];
    for (int l = 0; l < 16; ++l)
      r[l] = l < ncols ? _mm512_maskz_loadu_ps(m, col0 + l * col_stride + i) : _mm512_setzero_ps();
    transpose16(r);
    for (int64_t kk = 0; kk < n; ++kk) _mm512_storeu_ps(out + (i + kk) * kP, r[kk]);
  }
}

// 16 rows' partial sums, transposed, add up to one vector of 16 dots.
void dot16_f16(int64_t k, const uint8_t* a, size_t lda, const float* b, float* out) {
  __m512 acc[16];
  for (int r = 0; r < 16; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; i += 16) {
    const __mmask16 m = k - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (k - i)) - 1);
    const __m512 bv = _mm512_maskz_loadu_ps(m, b + i);
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) {
      const auto* row = reinterpret_cast<const uint16_t*>(a + r * lda);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + i)), bv, acc[r]);
    }
  }
  transpose16(acc);
  __m512 sum = acc[0];
  for (int r = 1; r < 16; ++r) sum = _mm512_add_ps(sum, acc[r]);
  _mm512_storeu_ps(out, sum);
}

// ---- micro-kernels ---------------------------------------------------------------

template <int MR, int NV>
void gemm_f32_tile(const float* a, int64_t lda, const float* b0, const float* b1, int64_t ldb, int64_t k, float* c) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    __m512 bv[NV];
    bv[0] = _mm512_loadu_ps(b0 + i * ldb);
    if constexpr (NV == 2) bv[1] = _mm512_loadu_ps(b1 + i * ldb);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + i]);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

template <int MR, int NV>
void gemm_q8_tile(const uint8_t* aq, const float* ad, int64_t k, const uint8_t* panels, float* c) {
  const int64_t nb = k / kQBlock;
  const size_t stride = q8_panel_bytes(k, kP);
  const uint8_t* bq[2] = {panels, panels + stride};
  const float* bd[2] = {reinterpret_cast<const float*>(bq[0] + k * kP),
                        reinterpret_cast<const float*>(bq[1] + k * kP)};
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < nb; ++blk) {
    __m512i iacc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) iacc[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int qd = 0; qd < kQBlock / 4; ++qd) {
      const int64_t kq = blk * (kQBlock / 4) + qd;
      __m512i bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(bq[v] + kq * 4 * kP);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i av = _mm512_set1_epi32(static_cast<int>(load_u32(aq + r * k + kq * 4)));
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], av, bv[v]);
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 dv = _mm512_loadu_ps(bd[v] + blk * kP);
      const __m512 mv = _mm512_loadu_ps(bd[v] + (nb + blk) * kP);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r][v]), dv, mv);
        acc[r][v] = _mm512_fmadd_ps(t, _mm512_set1_ps(ad[r * nb + blk]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

// gemm_q8's loop with Q4_K's per-block offset: + am * m (C = -1).
template <int MR, int NV>
void gemm_u4_tile(const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels, float* c) {
  const int64_t nb = k / kQBlock;
  const size_t stride = q8_panel_bytes(k, kP);
  const uint8_t* bq[2] = {panels, panels + stride};
  const float* bd[2] = {reinterpret_cast<const float*>(bq[0] + k * kP),
                        reinterpret_cast<const float*>(bq[1] + k * kP)};
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < nb; ++blk) {
    __m512i iacc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) iacc[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int qd = 0; qd < kQBlock / 4; ++qd) {
      const int64_t kq = blk * (kQBlock / 4) + qd;
      __m512i bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(bq[v] + kq * 4 * kP);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i av = _mm512_set1_epi32(static_cast<int>(load_u32(aq + r * k + kq * 4)));
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], av, bv[v]);
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 dv = _mm512_loadu_ps(bd[v] + blk * kP);
      const __m512 mv = _mm512_loadu_ps(bd[v] + (nb + blk) * kP);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 dot = _mm512_mul_ps(_mm512_cvtepi32_ps(iacc[r][v]), dv);
        acc[r][v] = _mm512_fmadd_ps(dot, _mm512_set1_ps(ad[r * nb + blk]), acc[r][v]);
        acc[r][v] = _mm512_fmadd_ps(mv, _mm512_set1_ps(am[r * nb + blk]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

// Signed Q6_K values with the sign trick for vpdpbusd: |a| times b negated
// where a < 0; a scale per 16 elements.
template <int MR, int NV>
void gemm_s6_tile(const uint8_t* aq, const float* ad16, int64_t k, const uint8_t* panels, float* c) {
  const int64_t nb = k / kQBlock;
  const size_t stride = q8_panel_bytes(k, kP);
  const uint8_t* bq[2] = {panels, panels + stride};
  const float* bd[2] = {reinterpret_cast<const float*>(bq[0] + k * kP),
                        reinterpret_cast<const float*>(bq[1] + k * kP)};
  const __m512i zero = _mm512_setzero_si512();
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t g = 0; g < 2 * nb; ++g) {  // 16 elements at a time
    __m512i iacc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) iacc[r][v] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int qd = 0; qd < 4; ++qd) {
      const int64_t kq = g * 4 + qd;
      __m512i bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_si512(bq[v] + kq * 4 * kP);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512i av = _mm512_set1_epi32(static_cast<int>(load_u32(aq + r * k + kq * 4)));
        const __mmask64 neg = _mm512_movepi8_mask(av);
        const __m512i aabs = _mm512_abs_epi8(av);
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v)
          iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], aabs, _mm512_mask_sub_epi8(bv[v], neg, zero, bv[v]));
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m512 dv = _mm512_loadu_ps(bd[v] + (g / 2) * kP);
#pragma GCC unroll 16
      for (int r = 0; r < MR; ++r) {
        const __m512 dot = _mm512_mul_ps(_mm512_cvtepi32_ps(iacc[r][v]), dv);
        acc[r][v] = _mm512_fmadd_ps(dot, _mm512_set1_ps(ad16[r * 2 * nb + g]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

constexpr int kRowsF32 = 8;
constexpr int kRowsQ8 = 6;
constexpr int kRowsU4 = 6;
constexpr int kRowsS6 = 4;

void gemm_f32(int mr, const float* a, int64_t lda, const float* panels, int64_t k, int nv, float* c) {
  gemm_rows<kRowsF32>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_f32_tile<MR, NV>(a, lda, panels, panels + k * kP, kP, k, c);
  });
}

void gemm_f32_rows(int mr, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, int nv, float* c) {
  gemm_rows<kRowsF32>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_f32_tile<MR, NV>(a, lda, b, b + kP, ldb, k, c);
  });
}

void gemm_q8(int mr, const uint8_t* aq, const float* ad, int64_t k, const uint8_t* panels, int nv, float* c) {
  gemm_rows<kRowsQ8>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_q8_tile<MR, NV>(aq, ad, k, panels, c);
  });
}

void gemm_u4(int mr, const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels, int nv,
             float* c) {
  gemm_rows<kRowsU4>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_u4_tile<MR, NV>(aq, ad, am, k, panels, c);
  });
}

void gemm_s6(int mr, const uint8_t* aq, const float* ad16, int64_t k, const uint8_t* panels, int nv, float* c) {
  gemm_rows<kRowsS6>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_s6_tile<MR, NV>(aq, ad16, k, panels, c);
  });
}

MulMatKernels make_table() {
  MulMatKernels t;
  t.isa = Isa::Avx512;
  t.quantize_row = quantize_row;
  t.dot = {dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0};
  t.gemm16 = {nullptr, nullptr, nullptr, gemm16_q8_0, gemm16_q4_0};
  t.f16_to_f32 = f16_to_f32;
  t.bf16_to_f32 = bf16_to_f32;
  t.q8_0_offset = 128;
  t.q4_0_offset = 8;
  t.panel = kP;
  t.rows_f32 = kRowsF32;
  t.rows_q8 = kRowsQ8;
  t.gemm_f32 = gemm_f32;
  t.gemm_f32_rows = gemm_f32_rows;
  t.gemm_q8 = gemm_q8;
  t.pack_f32_panel = pack_f32_panel;
  t.dot16_f16 = dot16_f16;
  t.expand_q8_0 = expand_q8_0;
  t.expand_q4_0 = expand_q4_0;
  // Q4_0 keeps gemm_q8 (vpdpbusd takes its nibbles as they are).
  t.rows_u4 = kRowsU4;
  t.gemm_u4 = gemm_u4;
  t.gemm_u5 = gemm_u4;  // vpdpbusd sums in 32 bits: 5-bit a cannot overflow
  t.rows_s6 = kRowsS6;
  t.gemm_s6 = gemm_s6;
  set_int_gemm_expanders<128>(t);  // q8_0_offset
  return t;
}

}  // namespace

const MulMatKernels& mul_mat_kernels_avx512() {
  static const MulMatKernels table = make_table();
  return table;
}

}  // namespace loom::cpu
