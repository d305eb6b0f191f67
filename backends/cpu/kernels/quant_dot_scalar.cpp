// Reference integer dots (see quant_dot.h), one block at a time. Each block's
// integer sum of products is exact; the AVX2 dots compute the same integers
// and differ from these only in the order of float additions.
#include <cstring>

#include "quant_dot.h"

namespace loom::cpu {
namespace {

constexpr int kQ = 32;  // elements of a 32-element block

// ---- 256-element super-blocks times Q8_K ---------------------------------

void dot_q2_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockQ2_K*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    int sumi = 0, summ = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i, h = e / 128, j = e % 128 / 32, r = e % 32;
        dot += ((x[b].qs[32 * h + r] >> (2 * j)) & 3) * y[b].qs[e];
      }
      sumi += (x[b].scales[s] & 0x0f) * dot;
      summ += (x[b].scales[s] >> 4) * y[b].bsums[s];
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * static_cast<float>(sumi) -
           fp16_to_fp32(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  *out = sum;
}

void dot_q3_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockQ3_K*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    int sumi = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i, h = e / 128, j = e % 128 / 32, r = e % 32;
        const int q = ((x[b].qs[32 * h + r] >> (2 * j)) & 3) | ((x[b].hmask[r] >> (4 * h + j)) & 1) << 2;
        dot += (q - 4) * y[b].qs[e];
      }
      sumi += q3_k_scale(x[b].scales, s) * dot;
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  *out = sum;
}

// Q4_K and Q5_K: sub-blocks of 32, q * sc - m; `high` gives the 5th bit.
template <class Block, class High>
float dot_k4(int64_t k, const Block* x, const BlockQ8_K* y, High high) {
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    int sumi = 0, summ = 0;
    for (int s = 0; s < 8; ++s) {
      int sc, m;
      k4_scale_min(x[b].scales, s, sc, m);
      int dot = 0;
      for (int r = 0; r < 32; ++r) {
        const uint8_t byte = x[b].qs[32 * (s / 2) + r];
        const int q = (s % 2 == 0 ? byte & 0x0f : byte >> 4) | high(x[b], 32 * s + r) << 4;
        dot += q * y[b].qs[32 * s + r];
      }
      sumi += sc * dot;
      summ += m * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * static_cast<float>(sumi) -
           fp16_to_fp32(x[b].dmin) * y[b].d * static_cast<float>(summ);
  }
  return sum;
}

void dot_q4_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_k4(k, static_cast<const BlockQ4_K*>(a_row), static_cast<const BlockQ8_K*>(b_row),
                [](const BlockQ4_K&, int) { return 0; });
}

void dot_q5_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_k4(k, static_cast<const BlockQ5_K*>(a_row), static_cast<const BlockQ8_K*>(b_row),
                [](const BlockQ5_K& x, int e) { return (x.qh[e % 32] >> (e / 32)) & 1; });
}

void dot_q6_k(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockQ6_K*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    int sumi = 0;
    for (int s = 0; s < 16; ++s) {
      int dot = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 16 * s + i, h = e / 128, kk = e % 128 / 32, r = e % 32;
        const uint8_t low = x[b].ql[64 * h + 32 * (kk % 2) + r];
        const int q = (kk < 2 ? low & 0x0f : low >> 4) | ((x[b].qh[32 * h + r] >> (2 * kk)) & 3) << 4;
        dot += (q - 32) * y[b].qs[e];
      }
      sumi += x[b].scales[s] * dot;
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  *out = sum;
}

void dot_iq4_xs(int64_t k, const void* a_row, const void* b_row, float* out) {
  const auto* x = static_cast<const BlockIQ4_XS*>(a_row);
  const auto* y = static_cast<const BlockQ8_K*>(b_row);
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQK_K; ++b) {
    int sumi = 0;
    for (int s = 0; s < 8; ++s) {
      int dot = 0;
      for (int j = 0; j < 16; ++j) {
        const uint8_t byte = x[b].qs[16 * s + j];
        dot += kIq4nlValues[byte & 0x0f] * y[b].qs[32 * s + j];
        dot += kIq4nlValues[byte >> 4] * y[b].qs[32 * s + 16 + j];
      }
      sumi += iq4_xs_scale(x[b], s) * dot;
    }
    sum += fp16_to_fp32(x[b].d) * y[b].d * static_cast<float>(sumi);
  }
  *out = sum;
}

// ---- 32-element blocks times Q8_32 ---------------------------------------

// Nibble element j (0..31) of a 32-element block, ordered as in Q4_0.
int nibble(const uint8_t* qs, int j) { return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4; }

int q5_high(const uint8_t* qh, int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1);
}

// sum over blocks of scale(block) * d_b * idot(block) + extra(block) * s_b,
// where idot is the block's integer dot of value(block, j) with q.
template <class Block, class Scale, class Extra, class Value>
float dot_32(int64_t k, const Block* x, const void* b_row, Scale scale, Extra extra, Value value) {
  const auto* q = static_cast<const int8_t*>(b_row);
  const auto* d = reinterpret_cast<const float*>(q + k);
  const float* s = d + k / kQ;
  float sum = 0.0f;
  for (int64_t b = 0; b < k / kQ; ++b) {
    int idot = 0;
    for (int j = 0; j < kQ; ++j) idot += value(x[b], j) * q[b * kQ + j];
    sum += scale(x[b]) * d[b] * static_cast<float>(idot) + extra(x[b]) * s[b];
  }
  return sum;
}

auto half_d = [](const auto& x) { return fp16_to_fp32(x.d); };
auto half_m = [](const auto& x) { return fp16_to_fp32(x.m); };
auto no_extra = [](const auto&) { return 0.0f; };

void dot_q4_1(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockQ4_1*>(a_row), b_row, half_d, half_m,
                [](const BlockQ4_1& x, int j) { return nibble(x.qs, j); });
}

void dot_q5_0(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockQ5_0*>(a_row), b_row, half_d, no_extra,
                [](const BlockQ5_0& x, int j) { return (nibble(x.qs, j) | q5_high(x.qh, j) << 4) - 16; });
}

void dot_q5_1(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockQ5_1*>(a_row), b_row, half_d, half_m,
                [](const BlockQ5_1& x, int j) { return nibble(x.qs, j) | q5_high(x.qh, j) << 4; });
}

void dot_iq4_nl(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(k, static_cast<const BlockIQ4_NL*>(a_row), b_row, half_d, no_extra,
                [](const BlockIQ4_NL& x, int j) { return static_cast<int>(kIq4nlValues[nibble(x.qs, j)]); });
}

void dot_mxfp4(int64_t k, const void* a_row, const void* b_row, float* out) {
  *out = dot_32(
      k, static_cast<const BlockMXFP4*>(a_row), b_row, [](const BlockMXFP4& x) { return mxfp4_half_scale(x.e); },
      no_extra, [](const BlockMXFP4& x, int j) { return static_cast<int>(kMxfp4Values[nibble(x.qs, j)]); });
}

}  // namespace

ActFormat act_format(DType type) {
  switch (type) {
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS: return ActFormat::Q8_K;
    default: return ActFormat::Q8_32;
  }
}

size_t act_row_bytes(ActFormat format, int64_t k) {
  return format == ActFormat::Q8_K ? static_cast<size_t>(k / kQK_K) * sizeof(BlockQ8_K) : q8_row_bytes(k);
}

void quantize_act(ActFormat format, QuantizeRowFn q8_32, const float* x, int64_t k, void* out) {
  if (format == ActFormat::Q8_K) {
    quantize_row_q8_k(x, static_cast<BlockQ8_K*>(out), k);
    return;
  }
  auto* q = static_cast<int8_t*>(out);
  auto* d = reinterpret_cast<float*>(q + k);
  q8_32(x, k, q, d, d + k / kQ);
}

DotFn quant_dot_scalar(DType type) {
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

Dot4Fn quant_dot4(Isa isa, DType type) {
  return isa >= Isa::Avx512 ? quant_dot4_avx512(type) : isa >= Isa::Avx2 ? quant_dot4_avx2(type) : nullptr;
}

Gemm16Fn quant_gemm16(Isa isa, DType type, int64_t n) {
  // Q6_K's 16-row kernels beat its integer gemm up to 32 columns, but not
  // the AMX one.
  const bool amx = isa >= Isa::Avx512 && amx_int8_usable();
  if (n > (type == DType::Q6_K && !amx ? 32 : 15)) return nullptr;
  return isa >= Isa::Avx512 ? quant_gemm16_avx512(type) : isa >= Isa::Avx2 ? quant_gemm16_avx2(type) : nullptr;
}

ExpandU4x16Fn interleaved_expand_u4(Isa isa, DType type) {
  return isa >= Isa::Avx2 ? interleaved_expand_u4_avx2(type) : nullptr;
}

ExpandS6x16Fn interleaved_expand_s6(Isa isa, DType type) {
  return isa >= Isa::Avx2 ? interleaved_expand_s6_avx2(type) : nullptr;
}

DotFn quant_dot(Isa isa, DType type) {
  return isa >= Isa::Avx512 ? quant_dot_avx512(type)
         : isa >= Isa::Avx2 ? quant_dot_avx2(type)
                            : quant_dot_scalar(type);
}

}  // namespace loom::cpu
