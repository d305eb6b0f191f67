// AVX2 integer dots (see quant_dot.h): the integers of quant_dot_scalar.cpp
// with maddubs (unsigned weight bytes times signed activations, pairs summed
// to int16) and madd (int16 pairs times a scale, summed to int32). Unsigned
// codes (K-quant q, Q4_1 / Q5_1 q) go straight into maddubs, their offsets
// come from the activation sums; signed values (IQ4 / MXFP4 tables, Q5_0)
// use the sign trick |w| * sign(y, w). No int16 pair sum can saturate: the
// largest is 2 * 127 * 127 (signed tables), unsigned codes are at most 63.
#include <immintrin.h>

#include <cstring>

#include "avx2_nibbles.h"
#include "quant_dot.h"

namespace loom::cpu {
namespace {

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 16 int16 pair sums of unsigned u times signed y.
inline __m256i mul_us(__m256i u, __m256i y) { return _mm256_maddubs_epi16(u, y); }
// The same for signed w (|w| <= 127).
inline __m256i mul_ss(__m256i w, __m256i y) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
}
// Scale the low 128 bits' pair sums by s0 and the high ones' by s1; 8 int32.
inline __m256i scale16(__m256i p, int s0, int s1) {
  return _mm256_madd_epi16(p, _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s1)),
                                               _mm_set1_epi16(static_cast<int16_t>(s0))));
}
inline __m256i scale32(__m256i p, int s) { return _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(s))); }

// sum over sub-blocks of 16 of w[s] * bsums[s] (w as 16 int16).
inline int bsums_dot(const BlockQ8_K& y, __m256i w) { return hsum_i32(_mm256_madd_epi16(load256(y.bsums), w)); }


// ---- 256-element super-blocks times Q8_K ---------------------------------

void dot_q2_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockQ2_K*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  const __m256i three = _mm256_set1_epi8(3);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
    const __m256i mins = _mm256_cvtepu8_epi16(_mm_srli_epi16(_mm_and_si128(sc8, _mm_set1_epi8(static_cast<char>(0xf0))), 4));
    const int summ = bsums_dot(y[b], mins);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q = load256(x[b].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int s = 8 * h + 2 * j;
        const __m256i p = mul_us(_mm256_and_si256(q, three), load256(y[b].qs + 128 * h + 32 * j));
        acc = _mm256_add_epi32(acc, scale16(p, x[b].scales[s] & 0x0f, x[b].scales[s + 1] & 0x0f));
        q = _mm256_srli_epi16(q, 2);
      }
    }
    sum += half_to_float(x[b].d) * y[b].d * static_cast<float>(hsum_i32(acc)) -
           half_to_float(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  *out = sum;
}

void dot_q3_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockQ3_K*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    alignas(32) int16_t sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = static_cast<int16_t>(q3_k_scale(x[b].scales, s));
    // q - 4 per element: the -4 part is -4 * sum(sc * bsums).
    const int offset = 4 * bsums_dot(y[b], _mm256_load_si256(reinterpret_cast<const __m256i*>(sc)));
    __m256i hm = load256(x[b].hmask);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q = load256(x[b].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const int s = 8 * h + 2 * j;
        const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);  // bit 4h + j of hmask
        const __m256i v = _mm256_or_si256(_mm256_and_si256(q, three), hi);
        const __m256i p = mul_us(v, load256(y[b].qs + 128 * h + 32 * j));
        acc = _mm256_add_epi32(acc, scale16(p, sc[s], sc[s + 1]));
        q = _mm256_srli_epi16(q, 2);
        hm = _mm256_srli_epi16(hm, 1);
      }
    }
    sum += half_to_float(x[b].d) * y[b].d * static_cast<float>(hsum_i32(acc) - offset);
  }
  *out = sum;
}

// Q4_K / Q5_K: 4 rounds of 64 elements (sub-blocks 2c and 2c + 1), times
// NC b columns (the weights are unpacked once for all of them).
template <bool kFive, int NC, class Block>
void dot_k4(int64_t k, const Block* x, const uint8_t* b_col0, size_t b_stride, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0f);
  const BlockQ8_K* y[NC];
  __m256 sum[NC];  // 8 partial sums per column, added up at the end
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm256_setzero_ps();
  }
  __m128 msum[NC];  // the mins' terms, 4 partial sums per column
  for (int c = 0; c < NC; ++c) msum[c] = _mm_setzero_ps();
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    uint8_t sc[8];
    uint64_t m8;
    k4_scales_mins(x[b].scales, sc, m8);
    const __m128i mins = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(m8)));
    __m256i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_si256();
    __m256i hb;
    if constexpr (kFive) hb = load256(x[b].qh);
    for (int r = 0; r < 4; ++r) {
      const __m256i q = load256(x[b].qs + 32 * r);
      __m256i q0 = _mm256_and_si256(q, low), q1 = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
      if constexpr (kFive) {
        const __m256i one = _mm256_set1_epi8(1);
        q0 = _mm256_or_si256(q0, _mm256_slli_epi16(_mm256_and_si256(hb, one), 4));
        q1 = _mm256_or_si256(q1, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4));
        hb = _mm256_srli_epi16(hb, 2);
      }
      const __m256i s0 = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * r]));
      const __m256i s1 = _mm256_set1_epi16(static_cast<int16_t>(sc[2 * r + 1]));
      for (int c = 0; c < NC; ++c) {
        const __m256i p0 = _mm256_madd_epi16(mul_us(q0, load256(y[c][b].qs + 64 * r)), s0);
        const __m256i p1 = _mm256_madd_epi16(mul_us(q1, load256(y[c][b].qs + 64 * r + 32)), s1);
        acc[c] = _mm256_add_epi32(acc[c], _mm256_add_epi32(p0, p1));
      }
    }
    const float d = half_to_float(x[b].d), dmin = half_to_float(x[b].dmin);
    for (int c = 0; c < NC; ++c) {
      // bsums of the 16-element halves, paired per sub-block of 32.
      const __m128i pairs = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y[c][b].bsums)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(y[c][b].bsums + 8)));
      const __m128i summ = _mm_madd_epi16(pairs, mins);
      sum[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[c]), _mm256_set1_ps(d * y[c][b].d), sum[c]);
      msum[c] = _mm_fmadd_ps(_mm_cvtepi32_ps(summ), _mm_set1_ps(-dmin * y[c][b].d), msum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) out[c] = hsum(_mm256_add_ps(sum[c], _mm256_castps128_ps256(msum[c])));
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

// Q6_K times NC b columns.
template <int NC>
void dot_q6_k_cols(int64_t k, const BlockQ6_K* x, const uint8_t* b_col0, size_t b_stride, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3);
  const BlockQ8_K* y[NC];
  __m256 sum[NC];  // 8 partial sums per column, added up at the end
  for (int c = 0; c < NC; ++c) {
    y[c] = reinterpret_cast<const BlockQ8_K*>(b_col0 + c * b_stride);
    sum[c] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
    __m256i acc[NC];
    for (int c = 0; c < NC; ++c) acc[c] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = load256(x[b].ql + 64 * h), l1 = load256(x[b].ql + 64 * h + 32);
      __m256i qh = load256(x[b].qh + 32 * h);
      const __m256i lows[4] = {_mm256_and_si256(l0, low), _mm256_and_si256(l1, low),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), low),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), low)};
      for (int kk = 0; kk < 4; ++kk) {
        const int s = 8 * h + 2 * kk;
        const __m256i q = _mm256_or_si256(lows[kk], _mm256_slli_epi16(_mm256_and_si256(qh, three), 4));
        const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(x[b].scales[s + 1]), _mm_set1_epi16(x[b].scales[s]));
        for (int c = 0; c < NC; ++c)
          acc[c] = _mm256_add_epi32(acc[c],
                                    _mm256_madd_epi16(mul_us(q, load256(y[c][b].qs + 128 * h + 32 * kk)), scv));
        qh = _mm256_srli_epi16(qh, 2);
      }
    }
    const float d = half_to_float(x[b].d);
    for (int c = 0; c < NC; ++c) {
      // q - 32 per element: subtract 32 * sum(sc * bsums), lane by lane.
      const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(load256(y[c][b].bsums), sc16), 5);
      sum[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[c], offset)), _mm256_set1_ps(d * y[c][b].d),
                               sum[c]);
    }
  }
  for (int c = 0; c < NC; ++c) out[c] = hsum(sum[c]);
}

void dot_q6_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  dot_q6_k_cols<1>(k, static_cast<const BlockQ6_K*>(a_row), static_cast<const uint8_t*>(b_row), 0, out);
}

void dot4_q6_k(int64_t k, const void* a_row, const void* b_col0, size_t b_stride, float* out) {
  dot_q6_k_cols<4>(k, static_cast<const BlockQ6_K*>(a_row), static_cast<const uint8_t*>(b_col0), b_stride, out);
}

void dot_iq4_xs(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockIQ4_XS*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    __m256i acc = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      const __m256i w = _mm256_shuffle_epi8(table, expand_nibbles32(x[b].qs + 16 * s));
      acc = _mm256_add_epi32(acc, scale32(mul_ss(w, load256(y[b].qs + 32 * s)), iq4_xs_scale(x[b], s)));
    }
    sum += half_to_float(x[b].d) * y[b].d * static_cast<float>(hsum_i32(acc));
  }
  *out = sum;
}

// ---- 32-element blocks times Q8_32 ---------------------------------------

// sum over blocks of scale(block) * d_b * idot + extra(block) * s_b, with
// idot the block's integer dot of the weights with q; `dot` gives idot as 8
// int32 partial sums.
template <class Block, class Scale, class Extra, class Dot>
float dot_32(int64_t k, const Block* x, const void* b_row, Scale scale, Extra extra, Dot dot) {
  const int64_t nb = k / 32;
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  const float* s = d + nb;
  __m256 acc = _mm256_setzero_ps();
  float corr = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i idot = dot(x[b], load256(q + 32 * b));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(idot), _mm256_set1_ps(scale(x[b]) * d[b]), acc);
    corr += extra(x[b]) * s[b];
  }
  return hsum(acc) + corr;
}

const auto half_d = [](const auto& x) { return _cvtsh_ss(x.d); };
const auto half_m = [](const auto& x) { return _cvtsh_ss(x.m); };
const auto no_extra = [](const auto&) { return 0.0f; };

void dot_q4_1(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockQ4_1*>(a_row), b_row, half_d, half_m, [](const BlockQ4_1& x, __m256i y) {
    return scale32(mul_us(expand_nibbles32(x.qs), y), 1);
  });
}

void dot_q5_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockQ5_0*>(a_row), b_row, half_d, no_extra, [](const BlockQ5_0& x, __m256i y) {
    const __m256i w =
        _mm256_sub_epi8(_mm256_or_si256(expand_nibbles32(x.qs), expand_fifth_bits32(x.qh)), _mm256_set1_epi8(16));
    return scale32(mul_ss(w, y), 1);
  });
}

void dot_q5_1(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockQ5_1*>(a_row), b_row, half_d, half_m, [](const BlockQ5_1& x, __m256i y) {
    return scale32(mul_us(_mm256_or_si256(expand_nibbles32(x.qs), expand_fifth_bits32(x.qh)), y), 1);
  });
}

template <const int8_t* kTable>
__m256i table_dot(const uint8_t* qs, __m256i y) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kTable)));
  return scale32(mul_ss(_mm256_shuffle_epi8(table, expand_nibbles32(qs)), y), 1);
}

void dot_iq4_nl(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockIQ4_NL*>(a_row), b_row, half_d, no_extra,
                [](const BlockIQ4_NL& x, __m256i y) { return table_dot<kIq4nlValues>(x.qs, y); });
}

// 2^(e - 128) from its bits (subnormal for e < 2), as mxfp4_half_scale.
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = e >= 2 ? static_cast<uint32_t>(e - 1) << 23 : 0x00200000u << e;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

void dot_mxfp4(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(
      k, static_cast<const BlockMXFP4*>(a_row), b_row, [](const BlockMXFP4& x) { return mxfp4_scale(x.e); }, no_extra,
      [](const BlockMXFP4& x, __m256i y) { return table_dot<kMxfp4Values>(x.qs, y); });
}

}  // namespace

Dot4Fn quant_dot4_avx2(DType type) {
  switch (type) {
    case DType::Q4_K: return dot4_q4_k;
    case DType::Q5_K: return dot4_q5_k;
    case DType::Q6_K: return dot4_q6_k;
    default: return nullptr;
  }
}

DotFn quant_dot_avx2(DType type) {
  switch (type) {
    case DType::Q4_1: return dot_q4_1;
    case DType::Q5_0: return dot_q5_0;
    case DType::Q5_1: return dot_q5_1;
    case DType::Q2_K: return dot_q2_k;
    case DType::Q3_K: return dot_q3_k;
    case DType::Q4_K: return dot_q4_k;
    case DType::Q5_K: return dot_q5_k;
    case DType::Q6_K: return dot_q6_k;
    case DType::IQ4_NL: return dot_iq4_nl;
    case DType::IQ4_XS: return dot_iq4_xs;
    case DType::MXFP4: return dot_mxfp4;
    default: return nullptr;
  }
}

}  // namespace loom::cpu
