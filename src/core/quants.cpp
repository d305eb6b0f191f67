// 32-element block types: Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, and the Q8_K
// activation block. Quantization of Q4_1 / Q5_0 / Q5_1 / MXFP4 follows the
// same rules as llama.cpp's reference quantizers (min/max or absmax scales,
// round half up), and IQ4_NL / IQ4_XS its scale search without an importance
// matrix (quantize_iq4_group), so they give the same blocks.
#include "quants.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "loom/types.h"

namespace loom {

float mxfp4_half_scale(uint8_t e) { return std::ldexp(1.0f, static_cast<int>(e) - 128); }

void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    BlockQ8_K& out = y[b];
    const float max = quants::signed_absmax(x, kQK_K);
    if (max == 0.0f) {
      std::memset(&out, 0, sizeof(out));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j)
      out.qs[j] = static_cast<int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * x[j]))));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += out.qs[16 * g + j];
      out.bsums[g] = static_cast<int16_t>(sum);
    }
    out.d = 1.0f / iscale;
  }
}

void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b)
    for (int j = 0; j < kQK_K; ++j) y[b * kQK_K + j] = x[b].d * x[b].qs[j];
}

namespace quants {
namespace {

constexpr int kQK = 32;

// The 5-bit value of element j (0..31) of a Q5 block.
int q5_value(const uint8_t* qs, const uint8_t* qh, int j) {
  uint32_t high;
  std::memcpy(&high, qh, 4);
  const int low = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
  return low | static_cast<int>((high >> j) & 1) << 4;
}

// Stores 5-bit values q[32] as nibbles + high bits.
void pack_q5(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | (q[j + 16] & 0x0f) << 4);
  for (int j = 0; j < 32; ++j) high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh, &high, 4);
}

// Min and max of a block.
void min_max(const float* x, int n, float& lo, float& hi) {
  lo = FLT_MAX;
  hi = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
}

}  // namespace

float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

int round_nearest(float x) {
  const float shifted = x + 12582912.0f;  // 1.5 * 2^23
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffff) - 0x00400000;
}

namespace {

// Index of the table value nearest to v (the upper one on a tie), by bisection.
int nearest_iq4_index(float v) {
  const int8_t* t = kIq4nlValues;
  if (v <= t[0]) return 0;
  if (v >= t[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (v < t[mid]) hi = mid;
    else lo = mid;
  }
  return v - t[hi - 1] < t[hi] - v ? hi - 1 : hi;
}

// Best scale for one group of 32 with weights x^2: start with the largest
// magnitude at the table's end, refit by weighted least squares, then try 15
// start scales around it and keep the fit with the largest sumqx^2 / sumq2.
float fit_iq4_scale(const float* x) {
  constexpr int n = 32;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  auto sums = [&](float inv_scale, float& sumqx, float& sumq2) {
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float q = kIq4nlValues[nearest_iq4_index(inv_scale * x[j])];
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  sums(1.0f / (-max / kIq4nlValues[0]), sumqx, sumq2);
  float d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -7; t <= 7; ++t) {
    sums(static_cast<float>(t + kIq4nlValues[0]) / max, sumqx, sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

}  // namespace

void quantize_iq4_group(const float* x, int n_sub, uint16_t* d_out, uint8_t* qs, uint16_t* scales_h,
                        uint8_t* scales_l) {
  float scales[8];
  float max_scale = 0.0f, amax_scale = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    scales[s] = fit_iq4_scale(x + 32 * s);
    if (std::fabs(scales[s]) > amax_scale) {
      amax_scale = std::fabs(scales[s]);
      max_scale = scales[s];
    }
  }
  uint8_t idx[kQK_K];
  if (n_sub == 1) {
    *d_out = fp32_to_fp16(scales[0]);
    const float id = scales[0] != 0.0f ? 1.0f / scales[0] : 0.0f;
    for (int j = 0; j < 32; ++j) idx[j] = static_cast<uint8_t>(nearest_iq4_index(id * x[j]));
  } else {
    // Sub-block scales as 6-bit l in [-32, 31] times d; the largest maps to -32.
    const float d = -max_scale / 32;
    *d_out = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    *scales_h = 0;
    for (int s = 0; s < n_sub; ++s) {
      const int l = std::clamp(round_nearest(id * scales[s]), -32, 31);
      const float dl = d * l;
      const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int j = 0; j < 32; ++j) idx[32 * s + j] = static_cast<uint8_t>(nearest_iq4_index(idl * x[32 * s + j]));
      const int stored = l + 32;
      if (s % 2 == 0) scales_l[s / 2] = static_cast<uint8_t>(stored & 0x0f);
      else scales_l[s / 2] |= static_cast<uint8_t>((stored & 0x0f) << 4);
      *scales_h |= static_cast<uint16_t>((stored >> 4) << (2 * s));
    }
  }
  for (int s = 0; s < n_sub; ++s)
    for (int j = 0; j < 16; ++j)
      qs[16 * s + j] = static_cast<uint8_t>(idx[32 * s + j] | idx[32 * s + 16 + j] << 4);
}

void q4_1_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_1*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(blocks[b].d), m = fp16_to_fp32(blocks[b].m);
    for (int j = 0; j < 16; ++j) {
      dst[b * kQK + j] = (blocks[b].qs[j] & 0x0f) * d + m;
      dst[b * kQK + j + 16] = (blocks[b].qs[j] >> 4) * d + m;
    }
  }
}

void q4_1_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_1*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float lo, hi;
    min_max(x, kQK, lo, hi);
    const float d = (hi - lo) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    blocks[b].m = fp32_to_fp16(lo);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - lo) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
      blocks[b].qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

void q5_0_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_0*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = (q5_value(blocks[b].qs, blocks[b].qh, j) - 16) * d;
  }
}

void q5_0_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_0*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    // As Q4_0: the largest magnitude maps to -16 exactly, keeping its sign.
    const float d = signed_absmax(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
    pack_q5(q, blocks[b].qs, blocks[b].qh);
  }
}

void q5_1_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_1*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(blocks[b].d), m = fp16_to_fp32(blocks[b].m);
    for (int j = 0; j < kQK; ++j) dst[b * kQK + j] = q5_value(blocks[b].qs, blocks[b].qh, j) * d + m;
  }
}

void q5_1_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_1*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float lo, hi;
    min_max(x, kQK, lo, hi);
    const float d = (hi - lo) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = fp32_to_fp16(d);
    blocks[b].m = fp32_to_fp16(lo);
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>((x[j] - lo) * id + 0.5f));
    pack_q5(q, blocks[b].qs, blocks[b].qh);
  }
}

void iq4_nl_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_NL*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    for (int j = 0; j < 16; ++j) {
      dst[b * kQK + j] = d * kIq4nlValues[blocks[b].qs[j] & 0x0f];
      dst[b * kQK + j + 16] = d * kIq4nlValues[blocks[b].qs[j] >> 4];
    }
  }
}

void iq4_nl_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockIQ4_NL*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) quantize_iq4_group(src + b * kQK, 1, &blocks[b].d, blocks[b].qs, nullptr, nullptr);
}

void mxfp4_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockMXFP4*>(src);
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = mxfp4_half_scale(blocks[b].e);
    for (int j = 0; j < 16; ++j) {
      dst[b * kQK + j] = kMxfp4Values[blocks[b].qs[j] & 0x0f] * d;
      dst[b * kQK + j + 16] = kMxfp4Values[blocks[b].qs[j] >> 4] * d;
    }
  }
}

void mxfp4_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockMXFP4*>(dst);
  // Nearest table value; on a tie the lower index wins (as llama.cpp).
  auto nearest = [](float x, float d) {
    int best = 0;
    for (int i = 1; i < 16; ++i)
      if (std::fabs(kMxfp4Values[i] * d - x) < std::fabs(kMxfp4Values[best] * d - x)) best = i;
    return best;
  };
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The shared exponent puts amax in the top binade of e2m1 (4 <= amax/2^(e-127) < 8,
    // the largest e2m1 value being 6).
    const int e = amax > 0.0f ? std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254) : 0;
    blocks[b].e = static_cast<uint8_t>(e);
    const float d = mxfp4_half_scale(blocks[b].e);
    for (int j = 0; j < 16; ++j)
      blocks[b].qs[j] = static_cast<uint8_t>(nearest(x[j], d) | nearest(x[j + 16], d) << 4);
  }
}

}  // namespace quants
}  // namespace loom
