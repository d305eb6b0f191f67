// AVX2 + FMA + F16C mul_mat kernels. Panels are 8 columns wide (one ymm).
// Quantized weights use maddubs with the sign trick, |w| * sign(q, w), which
// cannot saturate for Q8_0 (C = 0); Q4_0 nibbles are already non-negative
// (C = 8, corrected by the m term of the packed b). Q4_0 / Q8_0 weights
// interleaved in CPU_Repack have gemm16 kernels: 8 rows per ymm, no
// horizontal sums.
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

constexpr int kP = 8;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void quantize_row(const float* x, int64_t k, int8_t* q, float* d, float* s) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(xb + 8 * i);
    const __m256 ax = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                    _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    const float scale = hmax(ax) / 127.0f;
    const __m256 inv = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    __m256i qi[4];
    for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    const int sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
    // packs works within 128-bit lanes; the permute restores element order.
    const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]);
    const __m256i p16b = _mm256_packs_epi32(qi[2], qi[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), ordered);
    d[b] = scale;
    s[b] = scale * static_cast<float>(sum);
  }
}

// ---- float dots ---------------------------------------------------------------

template <class LoadA, class LoadOne>
inline float dot_float(int64_t k, const float* b, LoadA load_a, LoadOne load_one) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
         acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= k; i += 32) {
    acc0 = _mm256_fmadd_ps(load_a(i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(load_a(i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(load_a(i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(load_a(i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= k; i += 8) acc0 = _mm256_fmadd_ps(load_a(i), _mm256_loadu_ps(b + i), acc0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < k; ++i) sum += load_one(i) * b[i];
  return sum;
}

void dot_f32(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const float*>(a_row);
  *out = dot_float(
      k, static_cast<const float*>(b_row), [a](int64_t i) { return _mm256_loadu_ps(a + i); },
      [a](int64_t i) { return a[i]; });
}

void dot_f16(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const uint16_t*>(a_row);
  *out = dot_float(
      k, static_cast<const float*>(b_row),
      [a](int64_t i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i))); },
      [a](int64_t i) { return half_to_float(a[i]); });
}

inline __m256 bf16x8_to_f32(const uint16_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

void dot_bf16(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* a = static_cast<const uint16_t*>(a_row);
  *out = dot_float(
      k, static_cast<const float*>(b_row), [a](int64_t i) { return bf16x8_to_f32(a + i); },
      [a](int64_t i) { return bf16_to_fp32(a[i]); });
}

// ---- quantized dots ------------------------------------------------------------

// Sum of 4-byte groups of |w| * sign(q, w) as 8 int32.
inline __m256i dot_i8(__m256i w, __m256i q) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(q, w));
  return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

template <class Block, class Load>
inline float dot_quant(int64_t k, const Block* x, const void* b_row, Load load) {
  const int64_t nb = k / kQBlock;
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  const float* m = d + nb;
  __m256 acc = _mm256_setzero_ps();
  float corr = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const float da = half_to_float(x[b].d);
    const __m256i dot = dot_i8(load(x[b]), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + b * kQBlock)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(da * d[b]), acc);
    corr += da * m[b];
  }
  return hsum(acc) + corr;
}

void dot_q8_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_quant(k, static_cast<const BlockQ8_0*>(a_row), b_row, [](const BlockQ8_0& x) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  });
}

void dot_q4_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_quant(k, static_cast<const BlockQ4_0*>(a_row), b_row,
                   [](const BlockQ4_0& x) { return expand_nibbles32(x.qs); });
}

// ---- interleaved rows (CPU_Repack) -------------------------------------------------

// One group block (repack.h) holds, per 4 quant bytes t of the rows, 64 bytes:
// rows 0..7 in the first 32, rows 8..15 in the second, so lane r of a ymm is
// row r of one half. The b column's matching 4 bytes are broadcast to every
// lane. Q4_0 nibbles (0..15, C = 8) are maddubs' unsigned operand as they
// are, and a whole block's int16 pair sums are added before widening: at most
// 8 * 2 * 15 * 127 = 30480. Q8_0 (C = 0) takes the sign trick, |w| and
// sign(q, w), and widens after every maddubs (one pair can reach 2 * 128 * 127).

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}

// NC b columns times NH halves of the group (8 rows each) from half h0:
// out[c * 16 + 8 * h + r] for the halves h0..h0 + NH - 1. NC * NH <= 4 keeps
// the float and integer sums in registers (16 ymm).
template <int NC, int NH, bool Q4>
void gemm16_part(int64_t k, const uint8_t* group, int h0, const uint8_t* b_cols, size_t b_stride, float* out) {
  const int64_t nb = k / kQBlock;
  constexpr int kNV = Q4 ? 4 : 8;
  constexpr size_t kBlockBytes = 16 * sizeof(uint16_t) + kNV * 64;
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* q[NC];
  const float* d[NC];
#pragma GCC unroll 4
  for (int c = 0; c < NC; ++c) {
    q[c] = reinterpret_cast<const int8_t*>(b_cols + c * b_stride);
    d[c] = reinterpret_cast<const float*>(b_cols + c * b_stride + k);
  }
  __m256 acc[NH][NC];
#pragma GCC unroll 2
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) acc[h][c] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * kBlockBytes;
    const uint8_t* v = blk + 16 * sizeof(uint16_t) + 32 * h0;
    __m256i isum[NH][NC];
    if constexpr (Q4) {
      __m256i s16[NH][NC];
#pragma GCC unroll 2
      for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) s16[h][c] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
#pragma GCC unroll 2
        for (int h = 0; h < NH; ++h) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + t * 64 + h * 32));
          // Low nibbles are elements 4t..4t+3, high nibbles 16+4t..16+4t+3.
          const __m256i lo = _mm256_and_si256(w, low);
          const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), low);
#pragma GCC unroll 4
          for (int c = 0; c < NC; ++c) {
            const int8_t* qb = q[c] + b * kQBlock;
            s16[h][c] = _mm256_add_epi16(s16[h][c], _mm256_maddubs_epi16(lo, bcast4(qb + 4 * t)));
            s16[h][c] = _mm256_add_epi16(s16[h][c], _mm256_maddubs_epi16(hi, bcast4(qb + 16 + 4 * t)));
          }
        }
      }
#pragma GCC unroll 2
      for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) isum[h][c] = _mm256_madd_epi16(s16[h][c], ones);
    } else {
#pragma GCC unroll 2
      for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
        for (int c = 0; c < NC; ++c) isum[h][c] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int t = 0; t < 8; ++t) {
#pragma GCC unroll 2
        for (int h = 0; h < NH; ++h) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + t * 64 + h * 32));
          const __m256i aw = _mm256_sign_epi8(w, w);
#pragma GCC unroll 4
          for (int c = 0; c < NC; ++c) {
            const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(bcast4(q[c] + b * kQBlock + 4 * t), w));
            isum[h][c] = _mm256_add_epi32(isum[h][c], _mm256_madd_epi16(p16, ones));
          }
        }
      }
    }
#pragma GCC unroll 2
    for (int h = 0; h < NH; ++h) {
      const __m256 da =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + (h0 + h) * 8 * sizeof(uint16_t))));
#pragma GCC unroll 4
      for (int c = 0; c < NC; ++c) {
        const __m256 t =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h][c]), _mm256_set1_ps(d[c][b]), _mm256_set1_ps(d[c][nb + b]));
        acc[h][c] = _mm256_fmadd_ps(t, da, acc[h][c]);
      }
    }
  }
#pragma GCC unroll 2
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + c * 16 + (h0 + h) * 8, acc[h][c]);
}

// Up to 4 columns per pass over the group: 1 or 2 with both halves at once
// (the broadcasts serve 16 rows), 3 or 4 one half at a time.
template <bool Q4>
void gemm16(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  for (int c0 = 0; c0 < ncols; c0 += 4) {
    const uint8_t* cols = b_cols + c0 * b_stride;
    float* o = out + c0 * 16;
    switch (std::min(4, ncols - c0)) {
      case 1: gemm16_part<1, 2, Q4>(k, group, 0, cols, b_stride, o); break;
      case 2: gemm16_part<2, 2, Q4>(k, group, 0, cols, b_stride, o); break;
      case 3:
        gemm16_part<3, 1, Q4>(k, group, 0, cols, b_stride, o);
        gemm16_part<3, 1, Q4>(k, group, 1, cols, b_stride, o);
        break;
      default:
        gemm16_part<4, 1, Q4>(k, group, 0, cols, b_stride, o);
        gemm16_part<4, 1, Q4>(k, group, 1, cols, b_stride, o);
        break;
    }
  }
}

void gemm16_q4_0(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  gemm16<true>(k, group, b_cols, b_stride, ncols, out);
}
void gemm16_q8_0(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  gemm16<false>(k, group, b_cols, b_stride, ncols, out);
}

// ---- conversions and expansion --------------------------------------------------

void f16_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  for (; i < n; ++i) dst[i] = half_to_float(s[i]);
}

void bf16_to_f32(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, bf16x8_to_f32(s + i));
  for (; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}

void expand_q8_0(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockQ8_0*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    std::memcpy(q + b * kQBlock, x[b].qs, kQBlock);
    d[b] = half_to_float(x[b].d);
  }
}

void expand_q4_0(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockQ4_0*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * kQBlock), expand_nibbles32(x[b].qs));
    d[b] = half_to_float(x[b].d);
  }
}

// Rows r[0..7] become columns: r[i][j] <- r[j][i].
[[gnu::always_inline]] inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

void pack_f32_panel(const float* col0, size_t col_stride, int ncols, int64_t k, float* out) {
  for (int64_t i = 0; i < k; i += 8) {
    const int64_t n = std::min<int64_t>(8, k - i);
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m256 r[8];
    for (int l = 0; l < 8; ++l)
      r[l] = l >= ncols ? _mm256_setzero_ps()
             : n == 8   ? _mm256_loadu_ps(col0 + l * col_stride + i)
                        : _mm256_maskload_ps(col0 + l * col_stride + i, m);
    transpose8(r);
    for (int64_t kk = 0; kk < n; ++kk) _mm256_storeu_ps(out + (i + kk) * kP, r[kk]);
  }
}

// 16 rows' partial sums, transposed 8 at a time, add up to 16 dots.
void dot16_f16(int64_t k, const uint8_t* a, size_t lda, const float* b, float* out) {
  const int64_t k8 = k / 8 * 8;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* rows = a + 8 * h * lda;
    __m256 acc[8];
    for (int r = 0; r < 8; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < k8; i += 8) {
      const __m256 bv = _mm256_loadu_ps(b + i);
#pragma GCC unroll 8
      for (int r = 0; r < 8; ++r) {
        const auto* row = reinterpret_cast<const uint16_t*>(rows + r * lda);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + i))), bv, acc[r]);
      }
    }
    transpose8(acc);
    __m256 sum = acc[0];
    for (int r = 1; r < 8; ++r) sum = _mm256_add_ps(sum, acc[r]);
    _mm256_storeu_ps(out + 8 * h, sum);
    for (int64_t i = k8; i < k; ++i)
      for (int r = 0; r < 8; ++r)
        out[8 * h + r] += half_to_float(reinterpret_cast<const uint16_t*>(rows + r * lda)[i]) * b[i];
  }
}

// ---- micro-kernels ----------------------------------------------------------------

template <int MR, int NV>
void gemm_f32_tile(const float* a, int64_t lda, const float* b0, const float* b1, int64_t ldb, int64_t k, float* c) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < k; ++i) {
    __m256 bv[NV];
    bv[0] = _mm256_loadu_ps(b0 + i * ldb);
    if constexpr (NV == 2) bv[1] = _mm256_loadu_ps(b1 + i * ldb);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + i);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

template <int MR, int NV>
void gemm_q8_tile(const uint8_t* aq, const float* ad, int64_t k, const uint8_t* panels, float* c) {
  const int64_t nb = k / kQBlock;
  const size_t stride = q8_panel_bytes(k, kP);
  const uint8_t* bq[2] = {panels, panels + stride};
  const float* bd[2] = {reinterpret_cast<const float*>(bq[0] + k * kP),
                        reinterpret_cast<const float*>(bq[1] + k * kP)};
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t blk = 0; blk < nb; ++blk) {
    __m256i iacc[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) iacc[r][v] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int qd = 0; qd < kQBlock / 4; ++qd) {
      const int64_t kq = blk * (kQBlock / 4) + qd;
      __m256i bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq[v] + kq * 4 * kP));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t w;
        std::memcpy(&w, aq + r * k + kq * 4, sizeof w);
        const __m256i av = _mm256_set1_epi32(w);
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) iacc[r][v] = _mm256_add_epi32(iacc[r][v], dot_i8(av, bv[v]));
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m256 dv = _mm256_loadu_ps(bd[v] + blk * kP);
      const __m256 mv = _mm256_loadu_ps(bd[v] + (nb + blk) * kP);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m256 t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][v]), dv, mv);
        acc[r][v] = _mm256_fmadd_ps(t, _mm256_set1_ps(ad[r * nb + blk]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

// Unsigned a goes straight into maddubs, no sign trick; the int16 pair sums
// of Quads groups of 4 elements are added before widening: for 4-bit a, a
// whole block (8 * 2 * 15 * 127 = 30480), for 5-bit a, half a block
// (4 * 2 * 31 * 127 = 31496), no overflow.
template <int MR, int NV, int Quads>
void gemm_u4_tile(const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels, float* c) {
  static_assert(kQBlock / 4 % Quads == 0);
  const int64_t nb = k / kQBlock;
  const size_t stride = q8_panel_bytes(k, kP);
  const uint8_t* bq[2] = {panels, panels + stride};
  const float* bd[2] = {reinterpret_cast<const float*>(bq[0] + k * kP),
                        reinterpret_cast<const float*>(bq[1] + k * kP)};
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t blk = 0; blk < nb; ++blk) {
    __m256i s32[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) s32[r][v] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int part = 0; part < kQBlock / 4 / Quads; ++part) {
      __m256i s16[MR][NV];
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) s16[r][v] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int qd = 0; qd < Quads; ++qd) {
        const int64_t kq = blk * (kQBlock / 4) + part * Quads + qd;
        __m256i bv[NV];
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v)
          bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq[v] + kq * 4 * kP));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          int32_t w;
          std::memcpy(&w, aq + r * k + kq * 4, sizeof w);
          const __m256i av = _mm256_set1_epi32(w);
#pragma GCC unroll 2
          for (int v = 0; v < NV; ++v) s16[r][v] = _mm256_add_epi16(s16[r][v], _mm256_maddubs_epi16(av, bv[v]));
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) s32[r][v] = _mm256_add_epi32(s32[r][v], _mm256_madd_epi16(s16[r][v], ones));
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m256 dv = _mm256_loadu_ps(bd[v] + blk * kP);
      const __m256 mv = _mm256_loadu_ps(bd[v] + (nb + blk) * kP);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m256 dot = _mm256_mul_ps(_mm256_cvtepi32_ps(s32[r][v]), dv);
        acc[r][v] = _mm256_fmadd_ps(dot, _mm256_set1_ps(ad[r * nb + blk]), acc[r][v]);
        acc[r][v] = _mm256_fmadd_ps(mv, _mm256_set1_ps(am[r * nb + blk]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

// Signed 6-bit a (-32..31) with the sign trick; the int16 pair sums of 16
// elements are added before widening: at most 4 * 2 * 32 * 127 = 32512.
template <int MR, int NV>
void gemm_s6_tile(const uint8_t* aq, const float* ad16, int64_t k, const uint8_t* panels, float* c) {
  const int64_t nb = k / kQBlock;
  const size_t stride = q8_panel_bytes(k, kP);
  const uint8_t* bq[2] = {panels, panels + stride};
  const float* bd[2] = {reinterpret_cast<const float*>(bq[0] + k * kP),
                        reinterpret_cast<const float*>(bq[1] + k * kP)};
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t g = 0; g < 2 * nb; ++g) {  // 16 elements at a time
    __m256i s16[MR][NV];
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) s16[r][v] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int qd = 0; qd < 4; ++qd) {
      const int64_t kq = g * 4 + qd;
      __m256i bv[NV];
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) bv[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq[v] + kq * 4 * kP));
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        int32_t w;
        std::memcpy(&w, aq + r * k + kq * 4, sizeof w);
        const __m256i av = _mm256_set1_epi32(w);
        const __m256i aabs = _mm256_sign_epi8(av, av);
#pragma GCC unroll 2
        for (int v = 0; v < NV; ++v)
          s16[r][v] = _mm256_add_epi16(s16[r][v], _mm256_maddubs_epi16(aabs, _mm256_sign_epi8(bv[v], av)));
      }
    }
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      const __m256 dv = _mm256_loadu_ps(bd[v] + (g / 2) * kP);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m256 dot = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(s16[r][v], ones)), dv);
        acc[r][v] = _mm256_fmadd_ps(dot, _mm256_set1_ps(ad16[r * 2 * nb + g]), acc[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm256_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

constexpr int kRowsF32 = 6;
constexpr int kRowsQ8 = 2;
constexpr int kRowsU4 = 3;
constexpr int kRowsS6 = 2;

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
    gemm_u4_tile<MR, NV, kQBlock / 4>(aq, ad, am, k, panels, c);
  });
}

void gemm_u5(int mr, const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels, int nv,
             float* c) {
  gemm_rows<kRowsU4>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_u4_tile<MR, NV, kQBlock / 8>(aq, ad, am, k, panels, c);
  });
}

void gemm_s6(int mr, const uint8_t* aq, const float* ad16, int64_t k, const uint8_t* panels, int nv, float* c) {
  gemm_rows<kRowsS6>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_s6_tile<MR, NV>(aq, ad16, k, panels, c);
  });
}

MulMatKernels make_table() {
  MulMatKernels t;
  t.isa = Isa::Avx2;
  t.quantize_row = quantize_row;
  t.dot = {dot_f32, dot_f16, dot_bf16, dot_q8_0, dot_q4_0};
  t.gemm16 = {nullptr, nullptr, nullptr, gemm16_q8_0, gemm16_q4_0};
  t.f16_to_f32 = f16_to_f32;
  t.bf16_to_f32 = bf16_to_f32;
  t.q8_0_offset = 0;
  t.q4_0_offset = 8;
  t.panel = kP;
  t.rows_f32 = kRowsF32;
  t.rows_q8 = kRowsQ8;
  t.gemm_f32 = gemm_f32;
  t.gemm_f32_rows = gemm_f32_rows;
  t.dot16_f16 = dot16_f16;
  t.pack_f32_panel = pack_f32_panel;
  t.gemm_q8 = gemm_q8;
  t.expand_q8_0 = expand_q8_0;
  t.expand_q4_0 = expand_q4_0;
  t.rows_u4 = kRowsU4;
  t.gemm_u4 = gemm_u4;
  t.gemm_u5 = gemm_u5;
  t.expand_u4_q4_0 = expand_u4_q4_0;
  t.rows_s6 = kRowsS6;
  t.gemm_s6 = gemm_s6;
  set_int_gemm_expanders<0>(t);  // q8_0_offset
  return t;
}

}  // namespace

const MulMatKernels& mul_mat_kernels_avx2() {
  static const MulMatKernels table = make_table();
  return table;
}

}  // namespace loom::cpu
