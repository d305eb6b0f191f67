// AVX-512 (VNNI) integer dots for Q4_K, Q5_K and Q6_K (see quant_dot.h): the
// integers of quant_dot_scalar.cpp, 128 weights per step. A step takes two
// 32-byte rounds of qs: its low nibbles are sub-blocks 4h and 4h + 2, its
// high nibbles 4h + 1 and 4h + 3; two lane shuffles put each pair of
// neighbouring sub-blocks in one register, in the order of the Q8_K
// activations, so that every b column is read as it lies. maddubs makes the
// int16 pair sums (at most 2 * 31 * 127, no saturation), vpdpwssd scales
// them by the sub-block scales and adds them up in int32. Q6_K is below.
// The other types run the AVX2 dots.
#include <immintrin.h>

#include "quant_dot.h"

namespace loom::cpu {
namespace {

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// int16 lanes 0-15 are sc[2j], lanes 16-31 sc[2j + 1], for j = 0..3.
inline void scale_pairs(const uint8_t* sc, __m512i out[4]) {
  const __m512i sc16 = _mm512_cvtepu8_epi16(_mm256_zextsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
  for (int j = 0; j < 4; ++j) {
    const __m512i idx = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * j)),
                                           _mm256_set1_epi16(static_cast<int16_t>(2 * j + 1)), 1);
    out[j] = _mm512_permutexvar_epi16(idx, sc16);
  }
}

// Q4_K / Q5_K times NC b columns (the weights are unpacked once for all of them).
template <bool kFive, int NC, class Block>
void dot_k4(int64_t k, const Block* x, const uint8_t* b_col0, size_t b_stride, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const BlockQ8_K* y[NC];
  __m512 sum[NC];  // 16 partial sums per column, added up at the end
  __m128 msum[NC];  // the mins' terms, 4 partial sums per column
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm512_setzero_ps();
    msum[c] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    uint8_t sc[8];
    uint64_t m8;
    k4_scales_mins(x[b].scales, sc, m8);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
    __m512i scales[4];
    scale_pairs(sc, scales);
    __m512i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_si512();
    __m512i hb;
    if constexpr (kFive) {
      // Bits 2r and 2r + 1 of qh are the fifth bits of sub-blocks 2r and 2r + 1:
      // the upper half starts two bits on, for the second round of each step.
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
      hb = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 2), 1);
    }
    for (int h = 0; h < 2; ++h) {
      const __m512i q = load512(x[b].qs + 64 * h);
      __m512i lo = _mm512_and_si512(q, low), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
      if constexpr (kFive) {
        const __m512i one = _mm512_set1_epi8(1);
        lo = _mm512_or_si512(lo, _mm512_slli_epi16(_mm512_and_si512(hb, one), 4));
        hi = _mm512_or_si512(hi, _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 1), one), 4));
        hb = _mm512_srli_epi16(hb, 4);
      }
      // Sub-blocks 4h, 4h + 1 and 4h + 2, 4h + 3, as the activations lie.
      const __m512i w0 = _mm512_shuffle_i64x2(lo, hi, 0x44), w1 = _mm512_shuffle_i64x2(lo, hi, 0xee);
      for (int c = 0; c < NC; ++c) {
        const int8_t* yq = y[c][b].qs + 128 * h;
        acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(w0, load512(yq)), scales[2 * h]);
        acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(w1, load512(yq + 64)), scales[2 * h + 1]);
      }
    }
    const float d = half_to_float(x[b].d), dmin = half_to_float(x[b].dmin);
    for (int c = 0; c < NC; ++c) {
      // bsums of the 16-element halves, paired per sub-block of 32.
      const __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[c][b].bsums)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(y[c][b].bsums + 8)));
      const __m128i summ = _mm_madd_epi16(pairs, mins);
      sum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[c]), _mm512_set1_ps(d * y[c][b].d), sum[c]);
      msum[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(summ), _mm_set1_ps(-dmin * y[c][b].d), msum[c]);
    }
  }
  for (int c = 0; c < NC; ++c)
    out[c] = _mm512_reduce_add_ps(_mm512_add_ps(sum[c], _mm512_castps128_ps512(msum[c])));
}

void dot_q4_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  dot_k4<false, 1>(k, static_cast<const BlockQ4_K*>(a_row), static_cast<const uint8_t*>(b_row), 0, out);
}

void dot4_q4_k(int64_t k, const void* a_row, const void* b_col0, size_t b_stride, float* out) {
  dot_k4<false, 4>(k, static_cast<const BlockQ4_K*>(a_row), static_cast<const uint8_t*>(b_col0), b_stride, out);
}

void dot_q5_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  dot_k4<true, 1>(k, static_cast<const BlockQ5_K*>(a_row), static_cast<const uint8_t*>(b_row), 0, out);
}

void dot4_q5_k(int64_t k, const void* a_row, const void* b_col0, size_t b_stride, float* out) {
  dot_k4<true, 4>(k, static_cast<const BlockQ5_K*>(a_row), static_cast<const uint8_t*>(b_col0), b_stride, out);
}

// Q6_K times NC b columns: per half h, elements 128h..128h+63 take the low
// nibbles of ql[64h..64h+63] and qh bits 0-1 (lower 32) and 2-3 (upper 32);
// elements 128h+64..128h+127 the high nibbles and qh bits 4-5 and 6-7. The
// int8 scale of each 16 elements is spread over its 8 int16 pair lanes;
// the -32 of every q comes off through the activation sums (bsums).
template <int NC>
void dot_q6_k_cols(int64_t k, const BlockQ6_K* x, const uint8_t* b_col0, size_t b_stride, float* out) {
  const __m512i low = _mm512_set1_epi8(0x0f), three = _mm512_set1_epi8(3);
  __m512i idx[4];  // int16 lane j of part p: scale 4p + j / 8
  for (int p = 0; p < 4; ++p) {
    alignas(64) int16_t lanes[32];
    for (int j = 0; j < 32; ++j) lanes[j] = static_cast<int16_t>(4 * p + j / 8);
    idx[p] = _mm512_load_si512(lanes);
  }
  const BlockQ8_K* y[NC];
  __m256 sum[NC];  // 8 partial sums per column, added up at the end
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
    const __m512i sc512 = _mm512_zextsi256_si512(sc16);
    __m512i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i l = load512(x[b].ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * h));
      const __m512i hb = _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      const __m512i q0 = _mm512_or_si512(_mm512_and_si512(l, low), _mm512_slli_epi16(_mm512_and_si512(hb, three), 4));
      const __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(hb, 4), three), 4));
      const __m512i s0 = _mm512_permutexvar_epi16(idx[2 * h], sc512);
      const __m512i s1 = _mm512_permutexvar_epi16(idx[2 * h + 1], sc512);
      for (int c = 0; c < NC; ++c) {
        const int8_t* yq = y[c][b].qs + 128 * h;
        acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(q0, load512(yq)), s0);
        acc[c] = _mm512_dpwssd_epi32(acc[c], _mm512_maddubs_epi16(q1, load512(yq + 64)), s1);
      }
    }
    const float d = half_to_float(x[b].d);
    for (int c = 0; c < NC; ++c) {
      const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(acc[c]), _mm512_extracti64x4_epi64(acc[c], 1));
      // q - 32 per element: subtract 32 * sum(sc * bsums).
      const __m256i offset = _mm256_slli_epi32(
          _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[c][b].bsums)), sc16), 5);
      sum[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(a, offset)), _mm256_set1_ps(d * y[c][b].d), sum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(sum[c]), _mm256_extractf128_ps(sum[c], 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    out[c] = _mm_cvtss_f32(s);
  }
}

void dot_q6_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  dot_q6_k_cols<1>(k, static_cast<const BlockQ6_K*>(a_row), static_cast<const uint8_t*>(b_row), 0, out);
}

void dot4_q6_k(int64_t k, const void* a_row, const void* b_col0, size_t b_stride, float* out) {
  dot_q6_k_cols<4>(k, static_cast<const BlockQ6_K*>(a_row), static_cast<const uint8_t*>(b_col0), b_stride, out);
}

}  // namespace

DotFn quant_dot_avx512(DType type) {
  switch (type) {
    case DType::Q4_K: return dot_q4_k;
    case DType::Q5_K: return dot_q5_k;
    case DType::Q6_K: return dot_q6_k;
    default: return quant_dot_avx2(type);
  }
}

Dot4Fn quant_dot4_avx512(DType type) {
  switch (type) {
    case DType::Q4_K: return dot4_q4_k;
    case DType::Q5_K: return dot4_q5_k;
    case DType::Q6_K: return dot4_q6_k;
    default: return quant_dot4_avx2(type);
  }
}

}  // namespace loom::cpu
