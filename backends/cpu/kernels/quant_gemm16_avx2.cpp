// AVX2 mat-vecs for Q4_K and Q6_K rows interleaved in CPU_Repack (repack.h,
// layouts in q4_k_interleaved.h and q6_k_interleaved.h), and their
// expansion 16 rows at a time for the integer gemm. Q4_K: as
// quant_gemm16_avx512.cpp, in two halves of 8 rows (a 32-byte half of each
// 64-byte row vector), 4 or 2 columns per pass over the weights (4 made 8
// columns 1.2x faster than 2); an odd column takes both halves in one pass
// (q4_k_one_col, the mat-vec of a token). Without vpdpbusd, maddubs makes int16 pair
// sums (at most 2 * 15 * 127); the 8 of one sub-block add up in int16 (at
// most 8 * 3840 < 2^15), and one madd with the rows' scale in both halves of
// each lane gives scale * (sum over the sub-block) in int32.
// The mins' term is a madd of the rows' min pairs with the column's paired
// bsums. The integers are those of the scalar dot.
#include <immintrin.h>

#include <algorithm>

#include "../repack.h"
#include "q4_k_interleaved.h"
#include "q6_k_interleaved.h"
#include "quant_dot.h"

namespace loom::cpu {
namespace {

inline __m256i bcast32(const void* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Step `step` of Steps that prefetch the Bytes at `ahead`, a few lines each,
// so that the requests do not come in one burst. The kernels spread a group
// block's lines over its steps this way (the half passes in the first).
// All at the block's start, or none (the hardware prefetchers alone), left
// a Q6_K mat-vec from DRAM on 2 Zen 3 cores at 0.9x and 0.55x the plain
// rows' (1.2x so), and 4 columns at 0.95x (1.2x so).
template <size_t Bytes, int Steps>
inline void prefetch_part(const uint8_t* ahead, int step) {
  constexpr int kLines = static_cast<int>((Bytes + 63) / 64), kPerStep = (kLines + Steps - 1) / Steps;
  for (int l = step * kPerStep; l < std::min(kLines, (step + 1) * kPerStep); ++l)
    _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * l), _MM_HINT_T0);
}

// Rows 8h..8h+7's bytes of a 16-row vector (h is 0 or 1).
inline __m128i half_bytes(__m128i v, int h) { return h ? _mm_unpackhi_epi64(v, v) : v; }

// Rows 8h..8h+7's sub-block scales, each in both int16 halves of its lane
// (for _mm256_madd_epi16 with the rows' int16 sums).
inline __m256i q4_k_scale_pairs(__m128i sc8, int h) {
  const __m256i s = _mm256_cvtepu8_epi32(half_bytes(sc8, h));
  return _mm256_or_si256(s, _mm256_slli_epi32(s, 16));
}

// Rows 8h..8h+7's mins of sub-blocks 2p and 2p + 1, as int16 pairs.
inline __m256i q4_k_min_pairs(const __m128i* m8, int p, int h) {
  return _mm256_cvtepu8_epi16(h ? _mm_unpackhi_epi8(m8[2 * p], m8[2 * p + 1]) : _mm_unpacklo_epi8(m8[2 * p], m8[2 * p + 1]));
}

// NC columns (4 or 2) of the 8 rows of half H: out[c * 16 + 8H + r].
template <int NC, int H>
void half_q4_k_cols(int64_t k, const uint8_t* group, const uint8_t* b_col0, size_t b_stride, float* out) {
  constexpr int h = H;
  const __m256i low = _mm256_set1_epi8(0x0f);
  const BlockQ8_K* y[NC];
  __m256 sum[NC];
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ4KGroupBlock;
    __m128i sc8[8], m8[8];
    decode_q4_k_scales16(g + kQ4KScalesOff, sc8, m8);
    __m256i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_si256();
    // Chunk j: dwords t = 8j + u hold qs[32j + 4u ..], low nibbles in
    // sub-block 2j, high nibbles in 2j + 1.
    for (int j = 0; j < 4; ++j) {
      __m256i lo16[NC], hi16[NC];
      for (int c = 0; c < NC; ++c) lo16[c] = hi16[c] = _mm256_setzero_si256();
      for (int u = 0; u < 8; ++u) {
        if constexpr (h == 0) prefetch_part<kQ4KGroupBlock, 32>(g + kQ4KPrefetchBlocks * kQ4KGroupBlock, 8 * j + u);
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ4KQsOff + (8 * j + u) * 64 + 32 * h));
        const __m256i lo = _mm256_and_si256(q, low), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        for (int c = 0; c < NC; ++c) {
          const int8_t* yq = y[c][b].qs + 64 * j + 4 * u;
          lo16[c] = _mm256_add_epi16(lo16[c], _mm256_maddubs_epi16(lo, bcast32(yq)));
          hi16[c] = _mm256_add_epi16(hi16[c], _mm256_maddubs_epi16(hi, bcast32(yq + 32)));
        }
      }
      const __m256i s2_lo = q4_k_scale_pairs(sc8[2 * j], h), s2_hi = q4_k_scale_pairs(sc8[2 * j + 1], h);
      for (int c = 0; c < NC; ++c)
        acc[c] = _mm256_add_epi32(acc[c], _mm256_add_epi32(_mm256_madd_epi16(lo16[c], s2_lo),
                                                           _mm256_madd_epi16(hi16[c], s2_hi)));
    }
    __m256i mpair[4];
    for (int p = 0; p < 4; ++p) mpair[p] = q4_k_min_pairs(m8, p, h);
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDOff + 16 * h)));
    const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDminOff + 16 * h)));
    for (int c = 0; c < NC; ++c) {
      alignas(16) int16_t pairs[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(pairs), q8_k_pair_sums(y[c][b]));
      __m256i mins = _mm256_madd_epi16(mpair[0], bcast32(pairs));
      for (int p = 1; p < 4; ++p) mins = _mm256_add_epi32(mins, _mm256_madd_epi16(mpair[p], bcast32(pairs + 2 * p)));
      const __m256 db = _mm256_set1_ps(y[c][b].d);
      sum[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[c]), _mm256_mul_ps(d, db), sum[c]);
      sum[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, db), sum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + 16 * c + 8 * h, sum[c]);
}

// One column, both halves per block: each 64-byte piece of the group is
// read once, so the weights stream from memory at an even pace. (The half
// passes leave memory idle in the second, which re-reads the group from L2:
// a mat-vec from DRAM on 2 Zen 3 cores ran at 0.8-0.95x the plain rows'.)
void q4_k_one_col(int64_t k, const uint8_t* group, const uint8_t* b_col, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(b_col);
  __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ4KGroupBlock;
    __m128i sc8[8], m8[8];
    decode_q4_k_scales16(g + kQ4KScalesOff, sc8, m8);
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int j = 0; j < 4; ++j) {
      __m256i lo16[2], hi16[2];
      for (int h = 0; h < 2; ++h) lo16[h] = hi16[h] = _mm256_setzero_si256();
      for (int u = 0; u < 8; ++u) {
        prefetch_part<kQ4KGroupBlock, 32>(g + kQ4KPrefetchBlocks * kQ4KGroupBlock, 8 * j + u);
        const int8_t* yq = y[b].qs + 64 * j + 4 * u;
        const __m256i ylo = bcast32(yq), yhi = bcast32(yq + 32);
        for (int h = 0; h < 2; ++h) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ4KQsOff + (8 * j + u) * 64 + 32 * h));
          lo16[h] = _mm256_add_epi16(lo16[h], _mm256_maddubs_epi16(_mm256_and_si256(q, low), ylo));
          hi16[h] = _mm256_add_epi16(hi16[h], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), low), yhi));
        }
      }
      for (int h = 0; h < 2; ++h) {
        acc[h] = _mm256_add_epi32(acc[h], _mm256_add_epi32(_mm256_madd_epi16(lo16[h], q4_k_scale_pairs(sc8[2 * j], h)),
                                                           _mm256_madd_epi16(hi16[h], q4_k_scale_pairs(sc8[2 * j + 1], h))));
      }
    }
    alignas(16) int16_t pairs[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(pairs), q8_k_pair_sums(y[b]));
    const __m256 db = _mm256_set1_ps(y[b].d);
    for (int h = 0; h < 2; ++h) {
      __m256i mins = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p)
        mins = _mm256_add_epi32(mins, _mm256_madd_epi16(q4_k_min_pairs(m8, p, h), bcast32(pairs + 2 * p)));
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDOff + 16 * h)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDminOff + 16 * h)));
      sum[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[h]), _mm256_mul_ps(d, db), sum[h]);
      sum[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dmin, db), sum[h]);
    }
  }
  _mm256_storeu_ps(out, sum[0]);
  _mm256_storeu_ps(out + 8, sum[1]);
}

// Pairs of columns in half passes (4 at a time, then 2), an odd last one
// with q4_k_one_col.
template <int H>
void half_q4_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  int c = 0;
  for (; c + 4 <= ncols; c += 4) half_q4_k_cols<4, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  for (; c + 2 <= ncols; c += 2) half_q4_k_cols<2, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
}

void gemm16_q4_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  const int paired = ncols & ~1;
  half_q4_k<0>(k, group, b_cols, b_stride, paired, out);
  half_q4_k<1>(k, group, b_cols, b_stride, paired, out);
  if (ncols & 1) q4_k_one_col(k, group, b_cols + paired * b_stride, out + 16 * paired);
}

// 8 x 8 dword transpose: piece0 points at 8 consecutive 64-byte pieces of an
// interleaved field (piece u holds dword u of the 16 rows); their 32-byte
// half h holds dword u of rows 8h..8h+7. row[r] gets row 8h + r's 8 dwords
// (unpack 32, unpack 64, 128-bit lane swaps).
inline void transpose_half(const uint8_t* piece0, int h, __m256i row[8]) {
  __m256i v[8], t[8], s[8];
  for (int u = 0; u < 8; ++u) v[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(piece0 + u * 64 + 32 * h));
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  // s[c] (c < 4): lane l holds u = 0..3 of row 4l + c; s[4 + c] u = 4..7.
  for (int i = 0; i < 2; ++i) {
    s[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    s[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    s[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    s[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    row[c] = _mm256_permute2x128_si256(s[c], s[4 + c], 0x20);
    row[c + 4] = _mm256_permute2x128_si256(s[c], s[4 + c], 0x31);
  }
}

// ExpandU4x16Fn for Q4_K: per chunk j of a block (qs[32j..32j+31] of every
// row, dwords t = 8j..8j+7), the transposed halves give each row its 32
// bytes, split into low and high nibbles as expand_u4_q4_k does for a plain
// row.
void expand_u4_q4_k_x16(const uint8_t* group, int64_t k, uint8_t* q, float* d, float* m) {
  const int64_t nb32 = k / kQBlock;
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ4KGroupBlock;
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j) {
        __m256i rows[8];
        transpose_half(g + kQ4KQsOff + 8 * j * 64, h, rows);
        for (int r = 0; r < 8; ++r) {
          uint8_t* out = q + (8 * h + r) * k + b * kQK_K + 64 * j;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_and_si256(rows[r], low));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32),
                              _mm256_and_si256(_mm256_srli_epi16(rows[r], 4), low));
        }
      }
    __m128i sc8[8], m8[8];
    decode_q4_k_scales16(g + kQ4KScalesOff, sc8, m8);
    alignas(32) float ds[8][16], ms[8][16];
    for (int h = 0; h < 2; ++h) {
      const __m256 dd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDOff + 16 * h)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDminOff + 16 * h)));
      for (int sb = 0; sb < 8; ++sb) {
        const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(half_bytes(sc8[sb], h)));
        const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(half_bytes(m8[sb], h)));
        _mm256_store_ps(ds[sb] + 8 * h, _mm256_mul_ps(dd, sc));
        _mm256_store_ps(ms[sb] + 8 * h, _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(dmin, mn)));
      }
    }
    for (int r = 0; r < kRepackRows; ++r)
      for (int sb = 0; sb < 8; ++sb) {
        d[r * nb32 + 8 * b + sb] = ds[sb][r];
        m[r * nb32 + 8 * b + sb] = ms[sb][r];
      }
  }
}

// ---- Q6_K (layout in q6_k_interleaved.h) ------------------------------------

// The four quarters' 6-bit values (0..63) from ql dwords la (low nibbles:
// quarter 0, high: 2), lb (1, 3) and the qh dword (2 bits per quarter).
inline void q6_k_quarters(__m256i la, __m256i lb, __m256i qh, __m256i q[4]) {
  const __m256i low = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30);
  q[0] = _mm256_or_si256(_mm256_and_si256(la, low), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top));
  q[1] = _mm256_or_si256(_mm256_and_si256(lb, low), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), low), _mm256_and_si256(qh, top));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), low),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), top));
}

inline __m256i load_half(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The quarters of dwords u (q0) and u + 1 (q1) of block half hf, for rows
// 8h..8h+7 (h: the 32-byte half of each 64-byte piece).
inline void q6_k_dword_pair(const uint8_t* g, int hf, int u, int h, __m256i q0[4], __m256i q1[4]) {
  q6_k_quarters(load_half(g + kQ6KQlOff + (16 * hf + u) * 64 + 32 * h),
                load_half(g + kQ6KQlOff + (16 * hf + 8 + u) * 64 + 32 * h),
                load_half(g + kQ6KQhOff + (8 * hf + u) * 64 + 32 * h), q0);
  q6_k_quarters(load_half(g + kQ6KQlOff + (16 * hf + u + 1) * 64 + 32 * h),
                load_half(g + kQ6KQlOff + (16 * hf + 9 + u) * 64 + 32 * h),
                load_half(g + kQ6KQhOff + (8 * hf + u + 1) * 64 + 32 * h), q1);
}

// Rows 8h..8h+7's int8 scales of sub-block s, each as int16 in both halves
// of its lane (for madd).
inline __m256i q6_k_scale2(const uint8_t* g, int s, int h) {
  const __m128i s16 =
      _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 16 * s + 8 * h)));
  return _mm256_set_m128i(_mm_unpackhi_epi16(s16, s16), _mm_unpacklo_epi16(s16, s16));
}

// q6_k_scale2 of both halves: the 16 rows' scales as int16, 64-bit pieces
// ordered rows 0-3, 8-11, 4-7, 12-15, unpacked with themselves.
inline void q6_k_scale2_both(const uint8_t* g, int s, __m256i& h0, __m256i& h1) {
  const __m256i s16 = _mm256_permute4x64_epi64(
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 16 * s))), 0xd8);
  h0 = _mm256_unpacklo_epi16(s16, s16);
  h1 = _mm256_unpackhi_epi16(s16, s16);
}

// NC columns (4 or 2; 4 made 8-16 columns 1.2-1.4x faster than 2) of the
// 8 rows of half H: out[c * 16 + 8H + r]. Per quarter and
// dword pair, two maddubs (each int16 at most 2 * 63 * 128) add up in int16
// (< 2^15) and one madd with the rows' scale takes them to int32; the
// offset's term is a madd of the rows' scale pairs with the paired bsums.
template <int NC, int H>
void half_q6_k_cols(int64_t k, const uint8_t* group, const uint8_t* b_col0, size_t b_stride, float* out) {
  const BlockQ8_K* y[NC];
  __m256 sum[NC];
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ6KGroupBlock;
    __m256i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_si256();
    for (int hf = 0; hf < 2; ++hf)
      for (int i = 0; i < 2; ++i) {  // dwords u = 4i..4i+3: sub-blocks 8hf + 2j + i
        __m256i sc[4];
        for (int j = 0; j < 4; ++j) sc[j] = q6_k_scale2(g, 8 * hf + 2 * j + i, H);
        for (int u = 4 * i; u < 4 * i + 4; u += 2) {
          if constexpr (H == 0)
            prefetch_part<kQ6KGroupBlock, 8>(g + kQ6KPrefetchBlocks * kQ6KGroupBlock, (2 * hf + i) * 2 + (u - 4 * i) / 2);
          __m256i q0[4], q1[4];
          q6_k_dword_pair(g, hf, u, H, q0, q1);
          for (int c = 0; c < NC; ++c)
            for (int j = 0; j < 4; ++j) {
              const int8_t* yq = y[c][b].qs + 128 * hf + 32 * j + 4 * u;
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(q0[j], bcast32(yq)),
                                                 _mm256_maddubs_epi16(q1[j], bcast32(yq + 4)));
              acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(p, sc[j]));
            }
        }
      }
    // Rows' scale pairs (s[2p], s[2p + 1]) as int16, against bsums pairs.
    __m256i spair[8];
    for (int p = 0; p < 8; ++p) {
      const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 32 * p + 8 * H));
      const __m128i a1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 32 * p + 16 + 8 * H));
      spair[p] = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, a1));
    }
    const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KDOff + 16 * H)));
    for (int c = 0; c < NC; ++c) {
      __m256i off = _mm256_madd_epi16(spair[0], bcast32(y[c][b].bsums));
      for (int p = 1; p < 8; ++p) off = _mm256_add_epi32(off, _mm256_madd_epi16(spair[p], bcast32(y[c][b].bsums + 2 * p)));
      const __m256i total = _mm256_sub_epi32(acc[c], _mm256_slli_epi32(off, 5));
      sum[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, _mm256_set1_ps(y[c][b].d)), sum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + 16 * c + 8 * H, sum[c]);
}

// One column, both halves per block (as q4_k_one_col).
void q6_k_one_col(int64_t k, const uint8_t* group, const uint8_t* b_col, float* out) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(b_col);
  __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ6KGroupBlock;
    __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int hf = 0; hf < 2; ++hf)
      for (int i = 0; i < 2; ++i) {  // dwords u = 4i..4i+3: sub-blocks 8hf + 2j + i
        __m256i sc[2][4];
        for (int j = 0; j < 4; ++j) q6_k_scale2_both(g, 8 * hf + 2 * j + i, sc[0][j], sc[1][j]);
        for (int u = 4 * i; u < 4 * i + 4; u += 2)
          for (int h = 0; h < 2; ++h) {
            prefetch_part<kQ6KGroupBlock, 16>(g + kQ6KPrefetchBlocks * kQ6KGroupBlock, ((2 * hf + i) * 2 + (u - 4 * i) / 2) * 2 + h);
            __m256i q0[4], q1[4];
            q6_k_dword_pair(g, hf, u, h, q0, q1);
            for (int j = 0; j < 4; ++j) {
              const int8_t* yq = y[b].qs + 128 * hf + 32 * j + 4 * u;
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(q0[j], bcast32(yq)),
                                                 _mm256_maddubs_epi16(q1[j], bcast32(yq + 4)));
              acc[h] = _mm256_add_epi32(acc[h], _mm256_madd_epi16(p, sc[h][j]));
            }
          }
      }
    const __m256 db = _mm256_set1_ps(y[b].d);
    for (int h = 0; h < 2; ++h) {
      __m256i off = _mm256_setzero_si256();
      for (int p = 0; p < 8; ++p) {
        const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 32 * p + 8 * h));
        const __m128i a1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 32 * p + 16 + 8 * h));
        off = _mm256_add_epi32(off, _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, a1)),
                                                      bcast32(y[b].bsums + 2 * p)));
      }
      const __m256i total = _mm256_sub_epi32(acc[h], _mm256_slli_epi32(off, 5));
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KDOff + 16 * h)));
      sum[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, db), sum[h]);
    }
  }
  _mm256_storeu_ps(out, sum[0]);
  _mm256_storeu_ps(out + 8, sum[1]);
}

// As half_q4_k.
template <int H>
void half_q6_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  int c = 0;
  for (; c + 4 <= ncols; c += 4) half_q6_k_cols<4, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  for (; c + 2 <= ncols; c += 2) half_q6_k_cols<2, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
}

void gemm16_q6_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  const int paired = ncols & ~1;
  half_q6_k<0>(k, group, b_cols, b_stride, paired, out);
  half_q6_k<1>(k, group, b_cols, b_stride, paired, out);
  if (ncols & 1) q6_k_one_col(k, group, b_cols + paired * b_stride, out + 16 * paired);
}

// ExpandS6x16Fn for Q6_K: the transposed halves of ql and qh give each row
// its plain ql / qh bytes of a half block, expanded as expand_s6_q6_k does.
void expand_s6_q6_k_x16(const uint8_t* group, int64_t k, uint8_t* q, float* d16) {
  const int64_t n16 = k / 16;
  const __m256i bias = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ6KGroupBlock;
    for (int hf = 0; hf < 2; ++hf)
      for (int h = 0; h < 2; ++h) {
        __m256i la[8], lb[8], qh[8];
        transpose_half(g + kQ6KQlOff + 16 * hf * 64, h, la);
        transpose_half(g + kQ6KQlOff + (16 * hf + 8) * 64, h, lb);
        transpose_half(g + kQ6KQhOff + 8 * hf * 64, h, qh);
        for (int r = 0; r < 8; ++r) {
          __m256i v[4];
          q6_k_quarters(la[r], lb[r], qh[r], v);
          uint8_t* out = q + (8 * h + r) * k + b * kQK_K + 128 * hf;
          for (int j = 0; j < 4; ++j)
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * j), _mm256_sub_epi8(v[j], bias));
        }
      }
    alignas(32) float ds[16][16];
    for (int h = 0; h < 2; ++h) {
      const __m256 dd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KDOff + 16 * h)));
      for (int s = 0; s < 16; ++s) {
        const __m256i s32 =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 16 * s + 8 * h)));
        _mm256_store_ps(ds[s] + 8 * h, _mm256_mul_ps(dd, _mm256_cvtepi32_ps(s32)));
      }
    }
    for (int r = 0; r < kRepackRows; ++r)
      for (int s = 0; s < 16; ++s) d16[r * n16 + 16 * b + s] = ds[s][r];
  }
}

}  // namespace

Gemm16Fn quant_gemm16_avx2(DType type) {
  return type == DType::Q4_K ? gemm16_q4_k : type == DType::Q6_K ? gemm16_q6_k : nullptr;
}

ExpandU4x16Fn interleaved_expand_u4_avx2(DType type) { return type == DType::Q4_K ? expand_u4_q4_k_x16 : nullptr; }

ExpandS6x16Fn interleaved_expand_s6_avx2(DType type) { return type == DType::Q6_K ? expand_s6_q6_k_x16 : nullptr; }

}  // namespace loom::cpu
