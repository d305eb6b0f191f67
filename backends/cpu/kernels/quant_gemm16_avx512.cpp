// AVX-512 (VNNI) mat-vecs for Q4_K and Q6_K rows interleaved in CPU_Repack
// (repack.h); Q6_K's at its kernel below. Q4_K:
// 16 rows per register, 4 bytes of each row per 32-bit lane, so that every
// vpdpbusd multiplies 4 nibbles of all 16 rows by 4 broadcast activations
// with no shuffles. Per block of 256 elements and b column:
//  - isum[s] (int32 per row) = sum of nibble * q8 over sub-block s (0..7):
//    one vpdpbusd chain per sub-block, eight chains side by side;
//  - acc = sum_s isum[s] * scale[s], the 6-bit scales of the 16 rows decoded
//    together from the interleaved scale bytes;
//  - the mins' term sum_s min[s] * (q8 sum of sub-block s) with vpdpwssd on
//    the rows' min pairs and the column's paired bsums;
//  - sum += d * d_b * acc - dmin * d_b * mins, in float per row.
// The integers are those of the scalar dot (quant_dot_scalar.cpp): at most
// 32 * 15 * 127 * 63 * 8 < 2^31 per block.
// GCC 12 reports the _mm512_undefined_* placeholders inside the conversion
// intrinsics as uninitialized (GCC bug 105593); that says nothing about this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "q4_k_interleaved.h"
#include "q6_k_interleaved.h"
#include "quant_dot.h"

namespace loom::cpu {
namespace {

inline __m512i bcast32(const void* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The 16 rows' scales (as int32) and mins (as int16 pairs (m[2p], m[2p + 1])
// per row) of one block.
struct Scales {
  __m512i sc[8];
  __m512i mpair[4];
};

inline void decode_scales(const uint8_t* s12, Scales& out) {
  __m128i sc[8], m[8];
  decode_q4_k_scales16(s12, sc, m);
  for (int i = 0; i < 8; ++i) out.sc[i] = _mm512_cvtepu8_epi32(sc[i]);
  for (int p = 0; p < 4; ++p) {
    const __m256i pairs = _mm256_set_m128i(_mm_unpackhi_epi8(m[2 * p], m[2 * p + 1]),
                                           _mm_unpacklo_epi8(m[2 * p], m[2 * p + 1]));
    out.mpair[p] = _mm512_cvtepu8_epi16(pairs);
  }
}

// NC columns (1 or 2) of 16 rows: out[c * 16 + r] for k elements.
template <int NC>
void gemm16_q4_k_cols(int64_t k, const uint8_t* group, const uint8_t* b_col0, size_t b_stride, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const BlockQ8_K* y[NC];
  __m512 sum[NC];
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ4KGroupBlock;
    prefetch_q4_k_block(g);
    __m512i isum[NC][8];
    for (int c = 0; c < NC; ++c)
      for (int s = 0; s < 8; ++s) isum[c][s] = _mm512_setzero_si512();
    // Dword t = 8j + u of a row holds qs[32j + 4u ..]: its low nibbles are
    // elements 64j + 4u.. (sub-block 2j), its high ones 64j + 32 + 4u..
    for (int u = 0; u < 8; ++u)
      for (int j = 0; j < 4; ++j) {
        const __m512i q = _mm512_loadu_si512(g + kQ4KQsOff + (8 * j + u) * 64);
        const __m512i lo = _mm512_and_si512(q, low), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
        for (int c = 0; c < NC; ++c) {
          const int8_t* yq = y[c][b].qs + 64 * j + 4 * u;
          isum[c][2 * j] = _mm512_dpbusd_epi32(isum[c][2 * j], lo, bcast32(yq));
          isum[c][2 * j + 1] = _mm512_dpbusd_epi32(isum[c][2 * j + 1], hi, bcast32(yq + 32));
        }
      }
    Scales sc;
    decode_scales(g + kQ4KScalesOff, sc);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ4KDOff)));
    const __m512 dmin = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ4KDminOff)));
    for (int c = 0; c < NC; ++c) {
      __m512i acc = _mm512_mullo_epi32(isum[c][0], sc.sc[0]);
      for (int s = 1; s < 8; ++s) acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(isum[c][s], sc.sc[s]));
      // bsums of the 16-element halves, paired per sub-block of 32: int16
      // pairs (sum[2p], sum[2p + 1]) broadcast against each row's min pair.
      alignas(16) int16_t pairs[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(pairs), q8_k_pair_sums(y[c][b]));
      __m512i mins = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) mins = _mm512_dpwssd_epi32(mins, sc.mpair[p], bcast32(pairs + 2 * p));
      const __m512 db = _mm512_set1_ps(y[c][b].d);
      sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(d, db), sum[c]);
      sum[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dmin, db), sum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + 16 * c, sum[c]);
}

void gemm16_q4_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  int c = 0;
  for (; c + 2 <= ncols; c += 2) gemm16_q4_k_cols<2>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  if (c < ncols) gemm16_q4_k_cols<1>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
}

// ---- Q6_K (layout in q6_k_interleaved.h) ------------------------------------

inline void q6_k_quarters(__m512i la, __m512i lb, __m512i qh, __m512i q[4]) {
  const __m512i low = _mm512_set1_epi8(0x0f), top = _mm512_set1_epi8(0x30);
  q[0] = _mm512_or_si512(_mm512_and_si512(la, low), _mm512_and_si512(_mm512_slli_epi16(qh, 4), top));
  q[1] = _mm512_or_si512(_mm512_and_si512(lb, low), _mm512_and_si512(_mm512_slli_epi16(qh, 2), top));
  q[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(la, 4), low), _mm512_and_si512(qh, top));
  q[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lb, 4), low),
                         _mm512_and_si512(_mm512_srli_epi16(qh, 2), top));
}

// NC columns (4, 2 or 1; 4 made 8-16 columns 1.1-1.5x faster than 2) of 16
// rows. Per sub-block of 16 and column, a
// vpdpbusd chain over its 4 dwords of unsigned 6-bit values (at most
// 16 * 63 * 128 in int32), times the rows' int8 scale; the offset of 32 is
// 32 * sum_s scale[s] * bsums[s], vpdpwssd on the rows' scale pairs. At most
// 16 * 128 * 129024 + 32 * 16 * 128 * 2048 < 2^31 per block.
template <int NC>
void gemm16_q6_k_cols(int64_t k, const uint8_t* group, const uint8_t* b_col0, size_t b_stride, float* out) {
  const BlockQ8_K* y[NC];
  __m512 sum[NC];
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const uint8_t* g = group + b * kQ6KGroupBlock;
    prefetch_q6_k_block(g);
    __m512i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_si512();
    for (int hf = 0; hf < 2; ++hf)
      for (int i = 0; i < 2; ++i) {  // dwords u = 4i..4i+3: sub-blocks 8hf + 2j + i
        __m512i isum[NC][4];
        for (int c = 0; c < NC; ++c)
          for (int j = 0; j < 4; ++j) isum[c][j] = _mm512_setzero_si512();
        for (int u = 4 * i; u < 4 * i + 4; ++u) {
          __m512i q[4];
          q6_k_quarters(_mm512_loadu_si512(g + kQ6KQlOff + (16 * hf + u) * 64),
                        _mm512_loadu_si512(g + kQ6KQlOff + (16 * hf + 8 + u) * 64),
                        _mm512_loadu_si512(g + kQ6KQhOff + (8 * hf + u) * 64), q);
          for (int c = 0; c < NC; ++c)
            for (int j = 0; j < 4; ++j)
              isum[c][j] = _mm512_dpbusd_epi32(isum[c][j], q[j], bcast32(y[c][b].qs + 128 * hf + 32 * j + 4 * u));
        }
        for (int j = 0; j < 4; ++j) {
          const __m512i sc = _mm512_cvtepi8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 16 * (8 * hf + 2 * j + i))));
          for (int c = 0; c < NC; ++c) acc[c] = _mm512_add_epi32(acc[c], _mm512_mullo_epi32(isum[c][j], sc));
        }
      }
    __m512i spair[8];
    for (int p = 0; p < 8; ++p) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 32 * p));
      const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(g + kQ6KScalesOff + 32 * p + 16));
      spair[p] = _mm512_cvtepi8_epi16(_mm256_set_m128i(_mm_unpackhi_epi8(a, a1), _mm_unpacklo_epi8(a, a1)));
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + kQ6KDOff)));
    for (int c = 0; c < NC; ++c) {
      __m512i off = _mm512_setzero_si512();
      for (int p = 0; p < 8; ++p) off = _mm512_dpwssd_epi32(off, spair[p], bcast32(y[c][b].bsums + 2 * p));
      const __m512i total = _mm512_sub_epi32(acc[c], _mm512_slli_epi32(off, 5));
      sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, _mm512_set1_ps(y[c][b].d)), sum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) _mm512_storeu_ps(out + 16 * c, sum[c]);
}

void gemm16_q6_k(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  int c = 0;
  for (; c + 4 <= ncols; c += 4) gemm16_q6_k_cols<4>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  for (; c + 2 <= ncols; c += 2) gemm16_q6_k_cols<2>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
  if (c < ncols) gemm16_q6_k_cols<1>(k, group, b_cols + c * b_stride, b_stride, out + 16 * c);
}

}  // namespace

Gemm16Fn quant_gemm16_avx512(DType type) {
  return type == DType::Q4_K ? gemm16_q4_k : type == DType::Q6_K ? gemm16_q6_k : nullptr;
}

}  // namespace loom::cpu
