#include "loom/types.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "loom/error.h"
#include "loom/iequals.h"
#include "quants.h"

namespace loom {

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | ((112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000u) {  // inf or nan
    return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0);
  }
  if (abs >= 0x477ff000u) return sign | 0x7c00;  // rounds to inf
  if (abs < 0x38800000u) {                       // subnormal or zero in fp16
    // value = abs_float; fp16 subnormal unit is 2^-24.
    const float v = std::bit_cast<float>(abs) * 16777216.0f;  // * 2^24
    const float r = std::nearbyint(v);                         // ties to even by default
    return sign | static_cast<uint16_t>(r);
  }
  const uint32_t exp = (abs >> 23) - 112;
  uint32_t mant = abs & 0x7fffff;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carries into exp correctly
  return sign | static_cast<uint16_t>(h);
}

float bf16_to_fp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

namespace {

void f32_to_float(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void f32_from_float(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void f16_to_float(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
}
void f16_from_float(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
}
void bf16_to_float(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
}
void bf16_from_float(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
}

void q8_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ8_0*>(src);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = blocks[b].qs[j] * d;
  }
}

void q8_0_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* x = src + b * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK8_0; ++j) blocks[b].qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
  }
}

void q4_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_0*>(src);
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    float* y = dst + b * kQK4_0;
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = ((blocks[b].qs[j] & 0x0f) - 8) * d;
      y[j + kQK4_0 / 2] = ((blocks[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void q4_0_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_0*>(dst);
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* x = src + b * kQK4_0;
    // The element of largest magnitude maps to -8 exactly, keeping its sign.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK4_0 / 2] * id + 8.5f));
      blocks[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

const TypeTraits kF32{"f32", 1, 4, false, f32_to_float, f32_from_float};
const TypeTraits kF16{"f16", 1, 2, false, f16_to_float, f16_from_float};
const TypeTraits kBF16{"bf16", 1, 2, false, bf16_to_float, bf16_from_float};
const TypeTraits kI32{"i32", 1, 4, false, nullptr, nullptr};
const TypeTraits kQ8_0{"q8_0", kQK8_0, sizeof(BlockQ8_0), true, q8_0_to_float, q8_0_from_float};
const TypeTraits kQ4_0{"q4_0", kQK4_0, sizeof(BlockQ4_0), true, q4_0_to_float, q4_0_from_float};
// Names as llama.cpp spells them (ggml.c type_traits).
const TypeTraits kQ4_1{"q4_1", 32, sizeof(BlockQ4_1), true, quants::q4_1_to_float, quants::q4_1_from_float};
const TypeTraits kQ5_0{"q5_0", 32, sizeof(BlockQ5_0), true, quants::q5_0_to_float, quants::q5_0_from_float};
const TypeTraits kQ5_1{"q5_1", 32, sizeof(BlockQ5_1), true, quants::q5_1_to_float, quants::q5_1_from_float};
const TypeTraits kQ2_K{"q2_K", kQK_K, sizeof(BlockQ2_K), true, quants::q2_k_to_float, quants::q2_k_from_float};
const TypeTraits kQ3_K{"q3_K", kQK_K, sizeof(BlockQ3_K), true, quants::q3_k_to_float, quants::q3_k_from_float};
const TypeTraits kQ4_K{"q4_K", kQK_K, sizeof(BlockQ4_K), true, quants::q4_k_to_float, quants::q4_k_from_float};
const TypeTraits kQ5_K{"q5_K", kQK_K, sizeof(BlockQ5_K), true, quants::q5_k_to_float, quants::q5_k_from_float};
const TypeTraits kQ6_K{"q6_K", kQK_K, sizeof(BlockQ6_K), true, quants::q6_k_to_float, quants::q6_k_from_float};
const TypeTraits kIQ4_NL{"iq4_nl", 32, sizeof(BlockIQ4_NL), true, quants::iq4_nl_to_float, quants::iq4_nl_from_float};
const TypeTraits kIQ4_XS{"iq4_xs", kQK_K, sizeof(BlockIQ4_XS), true, quants::iq4_xs_to_float,
                         quants::iq4_xs_from_float};
const TypeTraits kMXFP4{"mxfp4", 32, sizeof(BlockMXFP4), true, quants::mxfp4_to_float, quants::mxfp4_from_float};

}  // namespace

bool is_known_type(uint32_t id) {
  return std::any_of(std::begin(kAllTypes), std::end(kAllTypes),
                     [id](DType t) { return static_cast<uint32_t>(t) == id; });
}

const TypeTraits& traits(DType type) {
  switch (type) {
    case DType::F32: return kF32;
    case DType::F16: return kF16;
    case DType::BF16: return kBF16;
    case DType::I32: return kI32;
    case DType::Q8_0: return kQ8_0;
    case DType::Q4_0: return kQ4_0;
    case DType::Q4_1: return kQ4_1;
    case DType::Q5_0: return kQ5_0;
    case DType::Q5_1: return kQ5_1;
    case DType::Q2_K: return kQ2_K;
    case DType::Q3_K: return kQ3_K;
    case DType::Q4_K: return kQ4_K;
    case DType::Q5_K: return kQ5_K;
    case DType::Q6_K: return kQ6_K;
    case DType::IQ4_NL: return kIQ4_NL;
    case DType::IQ4_XS: return kIQ4_XS;
    case DType::MXFP4: return kMXFP4;
  }
  fail("unknown tensor type id {}", static_cast<uint32_t>(type));
}

std::string_view type_name(DType type) { return traits(type).name; }

std::optional<DType> type_from_name(std::string_view name) {
  for (DType t : kAllTypes) {
    if (iequals(traits(t).name, name)) return t;
  }
  return std::nullopt;
}

size_t row_size(DType type, int64_t n) {
  const TypeTraits& tt = traits(type);
  if (n % tt.block_size != 0)
    fail("a row of {} {} elements is not a whole number of {}-element blocks", n, tt.name, tt.block_size);
  return static_cast<size_t>(n / tt.block_size) * tt.type_size;
}

}  // namespace loom
