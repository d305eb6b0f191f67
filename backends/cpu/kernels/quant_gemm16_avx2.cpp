// AVX2 mat-vec for Q4_K rows interleaved in CPU_Repack (repack.h, layout in
// q4_k_interleaved.h): as quant_gemm16_avx512.cpp, in two halves of 8 rows
// (a 32-byte half of each 64-byte row vector), 4, 2 or 1 columns per pass
// over the weights (4 made 8 columns 1.2x faster than 2). Without vpdpbusd, maddubs
// makes int16 pair sums (at most 2 * 15 * 127); the 8 of one sub-block add up
// in int16 (at most 8 * 3840 < 2^15), and one madd with the rows' scale in
// both halves of each lane gives scale * (sum over the sub-block) in int32.
// The mins' term is a madd of the rows' min pairs with the column's paired
// bsums. The integers are those of the scalar dot.
#include <immintrin.h>

#include "../repack.h"
#include "q4_k_interleaved.h"
#include "quant_dot.h"

namespace loom::cpu {
namespace {

inline __m256i bcast32(const void* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// NC columns (1 or 2) of the 8 rows of half H: out[c * 16 + 8H + r].
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
    if constexpr (h == 0) prefetch_q4_k_block(g);
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
        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ4KQsOff + (8 * j + u) * 64 + 32 * h));
        const __m256i lo = _mm256_and_si256(q, low), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
        for (int c = 0; c < NC; ++c) {
          const int8_t* yq = y[c][b].qs + 64 * j + 4 * u;
          lo16[c] = _mm256_add_epi16(lo16[c], _mm256_maddubs_epi16(lo, bcast32(yq)));
          hi16[c] = _mm256_add_epi16(hi16[c], _mm256_maddubs_epi16(hi, bcast32(yq + 32)));
        }
      }
      // Rows 8h..8h+7's scales, each in both int16 halves of its lane.
      const __m256i s_lo = _mm256_cvtepu8_epi32(_mm_srli_si128(sc8[2 * j], 8 * h));
      const __m256i s_hi = _mm256_cvtepu8_epi32(_mm_srli_si128(sc8[2 * j + 1], 8 * h));
      const __m256i s2_lo = _mm256_or_si256(s_lo, _mm256_slli_epi32(s_lo, 16));
      const __m256i s2_hi = _mm256_or_si256(s_hi, _mm256_slli_epi32(s_hi, 16));
      for (int c = 0; c < NC; ++c)
        acc[c] = _mm256_add_epi32(acc[c], _mm256_add_epi32(_mm256_madd_epi16(lo16[c], s2_lo),
                                                           _mm256_madd_epi16(hi16[c], s2_hi)));
    }
    // Rows 8h..8h+7's min pairs (m[2p], m[2p + 1]) as int16.
    __m256i mpair[4];
    for (int p = 0; p < 4; ++p) {
      const __m128i pairs = h == 0 ? _mm_unpacklo_epi8(m8[2 * p], m8[2 * p + 1]) : _mm_unpackhi_epi8(m8[2 * p], m8[2 * p + 1]);
      mpair[p] = _mm256_cvtepu8_epi16(pairs);
    }
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

template <int H>
void half_q4_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  int c = 0;
  for (; c + 4 <= ncols; c += 4) half_q4_k_cols<4, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  for (; c + 2 <= ncols; c += 2) half_q4_k_cols<2, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  if (c < ncols) half_q4_k_cols<1, H>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
}

void gemm16_q4_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  half_q4_k<0>(k, group, b_cols, b_stride, ncols, out);
  half_q4_k<1>(k, group, b_cols, b_stride, ncols, out);
}

// ExpandU4x16Fn for Q4_K: per chunk j of a block (qs[32j..32j+31] of every
// row, dwords t = 8j..8j+7), eight loads of one 32-byte half hold dword t of
// 8 rows each; a 8 x 8 dword transpose (unpack 32, unpack 64, 128-bit lane
// swaps) gives each row its 32 bytes, split into low and high nibbles as
// expand_u4_q4_k does for a plain row.
void expand_u4_q4_k_x16(const uint8_t* group, int64_t k, uint8_t* q, float* d, float* m) {
  const int64_t nb32 = k / kQBlock;
  const __m256i low = _mm256_set1_epi8(0x0f);
  auto put = [&](uint8_t* row, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), _mm256_and_si256(v, low));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
  };
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ4KGroupBlock;
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 4; ++j) {
        __m256i v[8], t[8], s[8];
        for (int u = 0; u < 8; ++u)
          v[u] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ4KQsOff + (8 * j + u) * 64 + 32 * h));
        for (int i = 0; i < 4; ++i) {
          t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
          t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
        }
        // s[c] (c < 4): lane l holds u = 0..3 of row 8h + 4l + c; s[4 + c] u = 4..7.
        for (int i = 0; i < 2; ++i) {
          s[4 * i + 0] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
          s[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
          s[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
          s[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
        }
        for (int c = 0; c < 4; ++c) {
          const int r = 8 * h + c;
          put(q + r * k + b * kQK_K + 64 * j, _mm256_permute2x128_si256(s[c], s[4 + c], 0x20));
          put(q + (r + 4) * k + b * kQK_K + 64 * j, _mm256_permute2x128_si256(s[c], s[4 + c], 0x31));
        }
      }
    }
    __m128i sc8[8], m8[8];
    decode_q4_k_scales16(g + kQ4KScalesOff, sc8, m8);
    alignas(32) float ds[8][16], ms[8][16];
    for (int h = 0; h < 2; ++h) {
      const __m256 dd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDOff + 16 * h)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ4KDminOff + 16 * h)));
      for (int sb = 0; sb < 8; ++sb) {
        const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sc8[sb], 8 * h)));
        const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(m8[sb], 8 * h)));
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

}  // namespace

Gemm16Fn quant_gemm16_avx2(DType type) { return type == DType::Q4_K ? gemm16_q4_k : nullptr; }

ExpandU4x16Fn interleaved_expand_u4_avx2(DType type) { return type == DType::Q4_K ? expand_u4_q4_k_x16 : nullptr; }

}  // namespace loom::cpu
