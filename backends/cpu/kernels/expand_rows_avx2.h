// Quantized rows expanded to one byte per element for the integer gemms
// (vec.h): 4- and 5-bit unsigned values with a scale and an offset per 32
// elements for gemm_u4 / gemm_u5 (Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K),
// signed values with a scale per 16 for gemm_s6 (Q3_K, Q6_K), and table
// values as Q8_0 bytes for gemm_q8 (IQ4_NL, IQ4_XS, MXFP4). AVX2 code,
// shared by the AVX2 and AVX-512 levels. Internal linkage on purpose: each
// ISA's file compiles its own copy with its own flags, so no copy built for
// a higher level can stand in for another's.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "avx2_nibbles.h"
#include "loom/types.h"
#include "quant_dot.h"
#include "vec.h"

namespace loom::cpu {
namespace {  // internal linkage: see above

inline void store32(uint8_t* q, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), v); }

// Q4_0 for gemm_u4: d * q - 8 * d (AVX-512 keeps Q4_0 on gemm_q8).
[[maybe_unused]] void expand_u4_q4_0(const void* a_row, int64_t k, uint8_t* q, float* d, float* m) {
  const auto* x = static_cast<const BlockQ4_0*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    store32(q + b * kQBlock, expand_nibbles32(x[b].qs));
    d[b] = half_to_float(x[b].d);
    m[b] = -8.0f * d[b];
  }
}

// Q4_1 for gemm_u4: d * q + m.
void expand_u4_q4_1(const void* a_row, int64_t k, uint8_t* q, float* d, float* m) {
  const auto* x = static_cast<const BlockQ4_1*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    store32(q + b * kQBlock, expand_nibbles32(x[b].qs));
    d[b] = half_to_float(x[b].d);
    m[b] = half_to_float(x[b].m);
  }
}

// Q5_0 for gemm_u5: d * q - 16 * d, q = nibble | 5th bit.
void expand_u5_q5_0(const void* a_row, int64_t k, uint8_t* q, float* d, float* m) {
  const auto* x = static_cast<const BlockQ5_0*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    store32(q + b * kQBlock, _mm256_or_si256(expand_nibbles32(x[b].qs), expand_fifth_bits32(x[b].qh)));
    d[b] = half_to_float(x[b].d);
    m[b] = -16.0f * d[b];
  }
}

// Q5_1 for gemm_u5: d * q + m.
void expand_u5_q5_1(const void* a_row, int64_t k, uint8_t* q, float* d, float* m) {
  const auto* x = static_cast<const BlockQ5_1*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    store32(q + b * kQBlock, _mm256_or_si256(expand_nibbles32(x[b].qs), expand_fifth_bits32(x[b].qh)));
    d[b] = half_to_float(x[b].d);
    m[b] = half_to_float(x[b].m);
  }
}

// The scales and offsets of a Q4_K / Q5_K block's 8 sub-blocks:
// d * sc[s] and -dmin * min[s].
template <typename Block>
inline void k4_expand_scales(const Block& x, float* d, float* m) {
  uint8_t sc[8];
  uint64_t m8;
  k4_scales_mins(x.scales, sc, m8);
  const float dd = half_to_float(x.d), dmin = half_to_float(x.dmin);
  for (int s = 0; s < 8; ++s) {
    d[s] = dd * sc[s];
    m[s] = -dmin * static_cast<float>((m8 >> (8 * s)) & 0xff);
  }
}

// Q4_K for gemm_u4: sub-block s (elements 32s..32s+31) is d * sc[s] * q -
// dmin * min[s]; its nibbles are the low (s even) or high (s odd) halves of
// qs[32 * (s / 2)..].
void expand_u4_q4_k(const void* a_row, int64_t k, uint8_t* q, float* d, float* m) {
  const auto* x = static_cast<const BlockQ4_K*>(a_row);
  const __m256i low = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < k / kQK_K; ++b, q += kQK_K, d += 8, m += 8) {
    for (int r = 0; r < 4; ++r) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * r));
      store32(q + 64 * r, _mm256_and_si256(v, low));
      store32(q + 64 * r + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), low));
    }
    k4_expand_scales(x[b], d, m);
  }
}

// Q5_K for gemm_u5: Q4_K's nibbles with bit s of qh[r] as the 5th bit of
// element r of sub-block s.
void expand_u5_q5_k(const void* a_row, int64_t k, uint8_t* q, float* d, float* m) {
  const auto* x = static_cast<const BlockQ5_K*>(a_row);
  const __m256i low = _mm256_set1_epi8(0x0f), one = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < k / kQK_K; ++b, q += kQK_K, d += 8, m += 8) {
    __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
    for (int r = 0; r < 4; ++r) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * r));
      // Bit 0 of each qh byte, moved to bit 4; 16-bit shifts cannot carry
      // across bytes here (a 0/1 byte shifted by 4, qh shifted by 1 at most 7 times).
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 1), one), 4);
      store32(q + 64 * r, _mm256_or_si256(_mm256_and_si256(v, low), h0));
      store32(q + 64 * r + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), h1));
      qh = _mm256_srli_epi16(qh, 2);
    }
    k4_expand_scales(x[b], d, m);
  }
}

// Q3_K for gemm_s6: element r of quarter j (0..3) of half h is q - 4 with
// q's low 2 bits at 2j in qs[32h + r] and its high bit at 4h + j in
// hmask[r]; each 16 elements have the scale d * (sc - 32).
void expand_s6_q3_k(const void* a_row, int64_t k, uint8_t* q, float* d16) {
  const auto* x = static_cast<const BlockQ3_K*>(a_row);
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
  for (int64_t b = 0; b < k / kQK_K; ++b, q += kQK_K, d16 += 16) {
    __m256i hm = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].hmask));
    for (int h = 0; h < 2; ++h) {
      __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * h));
      for (int j = 0; j < 4; ++j) {
        // As in expand_u5_q5_k, the 16-bit shifts carry nothing across bytes.
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
        const __m256i v = _mm256_or_si256(_mm256_and_si256(qs, three), hi);
        store32(q + 128 * h + 32 * j, _mm256_sub_epi8(v, four));
        qs = _mm256_srli_epi16(qs, 2);
        hm = _mm256_srli_epi16(hm, 1);
      }
    }
    const float d = half_to_float(x[b].d);
    for (int s = 0; s < 16; ++s) d16[s] = d * static_cast<float>(q3_k_scale(x[b].scales, s));
  }
}

// Q6_K for gemm_s6: element r of quarter j (0..3) of half h has its low 4
// bits in ql[64h + 32(j % 2) + r] (high nibble for j >= 2) and its top 2 bits
// at 2j in qh[32h + r]; each 16 elements have a scale.
void expand_s6_q6_k(const void* a_row, int64_t k, uint8_t* q, float* d16) {
  const auto* x = static_cast<const BlockQ6_K*>(a_row);
  const __m256i low = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
  for (int64_t b = 0; b < k / kQK_K; ++b, q += kQK_K, d16 += 16) {
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].ql + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].ql + 64 * h + 32));
      __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * h));
      const __m256i lows[4] = {_mm256_and_si256(l0, low), _mm256_and_si256(l1, low),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), low)};
      for (int j = 0; j < 4; ++j) {
        const __m256i v = _mm256_or_si256(lows[j], _mm256_slli_epi16(_mm256_and_si256(qh, three), 4));
        store32(q + 128 * h + 32 * j, _mm256_sub_epi8(v, bias));
        qh = _mm256_srli_epi16(qh, 2);
      }
    }
    const float d = half_to_float(x[b].d);
    for (int g = 0; g < 16; ++g) d16[g] = d * x[b].scales[g];
  }
}

// IQ4_NL, IQ4_XS and MXFP4 for gemm_q8: their nibbles index a table of
// int8 values, written as the level's gemm_q8 takes Q8_0 bytes (C: its
// q8_0_offset, 0 for signed bytes, 128 for bytes biased by +128).
template <const int8_t* kTable, int C>
inline __m256i table_bytes32(const uint8_t* qs) {
  static_assert(C == 0 || C == 128);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable)));
  const __m256i v = _mm256_shuffle_epi8(table, expand_nibbles32(qs));
  return C == 0 ? v : _mm256_xor_si256(v, _mm256_set1_epi8(static_cast<char>(0x80)));
}

template <int C>
void expand_q8_iq4_nl(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockIQ4_NL*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    store32(q + b * kQBlock, table_bytes32<kIq4nlValues, C>(x[b].qs));
    d[b] = half_to_float(x[b].d);
  }
}

template <int C>
void expand_q8_iq4_xs(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockIQ4_XS*>(a_row);
  for (int64_t b = 0; b < k / kQK_K; ++b, q += kQK_K, d += 8) {
    const float dd = half_to_float(x[b].d);
    for (int s = 0; s < 8; ++s) {
      store32(q + 32 * s, table_bytes32<kIq4nlValues, C>(x[b].qs + 16 * s));
      d[s] = dd * static_cast<float>(iq4_xs_scale(x[b], s));
    }
  }
}

// MXFP4's table holds the e2m1 values doubled, so the scale is 2^(e - 128).
template <int C>
void expand_q8_mxfp4(const void* a_row, int64_t k, uint8_t* q, float* d) {
  const auto* x = static_cast<const BlockMXFP4*>(a_row);
  for (int64_t b = 0; b < k / kQBlock; ++b) {
    store32(q + b * kQBlock, table_bytes32<kMxfp4Values, C>(x[b].qs));
    d[b] = mxfp4_half_scale(x[b].e);
  }
}

// The table entries of a level with gemm_u4 / gemm_u5 / gemm_s6 and a
// gemm_q8 that takes Q8_0 bytes with offset C (Q4_0 is the level's choice:
// gemm_u4 or gemm_q8).
template <int C>
inline void set_int_gemm_expanders(MulMatKernels& t) {
  t.expand_q8_iq4_nl = expand_q8_iq4_nl<C>;
  t.expand_q8_iq4_xs = expand_q8_iq4_xs<C>;
  t.expand_q8_mxfp4 = expand_q8_mxfp4<C>;
  t.expand_u4_q4_1 = expand_u4_q4_1;
  t.expand_u4_q4_k = expand_u4_q4_k;
  t.expand_u5_q5_0 = expand_u5_q5_0;
  t.expand_u5_q5_1 = expand_u5_q5_1;
  t.expand_u5_q5_k = expand_u5_q5_k;
  t.expand_s6_q3_k = expand_s6_q3_k;
  t.expand_s6_q6_k = expand_s6_q6_k;
}

}  // namespace
}  // namespace loom::cpu
