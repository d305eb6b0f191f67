// 32-element block types: Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, and the Q8_K
// activation block. Quantization of Q4_1 / Q5_0 / Q5_1 / MXFP4 follows the
// same rules as llama.cpp's reference quantizers (min/max or absmax scales,
// round half up), so it gives the same blocks; IQ4_NL uses a simpler scale
// search than llama.cpp's (see fit_iq4_scale).
#include "quants.h"

#include <algorithm>
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

int nearest_iq4(float x, float d) {
  if (d == 0.0f) return 0;
  const float v = x / d;
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(kIq4nlValues[i] - v) < std::fabs(kIq4nlValues[best] - v)) best = i;
  return best;
}

float fit_iq4_scale(const float* x, int n) {
  const float max = signed_absmax(x, n);
  if (max == 0.0f) return 0.0f;
  auto error_of = [&](float d) {
    double e = 0.0;
    for (int j = 0; j < n; ++j) {
      const double r = x[j] - d * kIq4nlValues[nearest_iq4(x[j], d)];
      e += r * r;
    }
    return e;
  };
  // The largest magnitude maps near the table's end (-127); a few neighbouring
  // scales, each refitted by least squares for the indices it chose.
  float best_d = max / kIq4nlValues[0];
  double best_err = error_of(best_d);
  for (int t = -7; t <= 7; ++t) {
    const float d0 = max / (kIq4nlValues[0] + t);
    double sxv = 0.0, svv = 0.0;
    for (int j = 0; j < n; ++j) {
      const int v = kIq4nlValues[nearest_iq4(x[j], d0)];
      sxv += static_cast<double>(x[j]) * v;
      svv += static_cast<double>(v) * v;
    }
    for (float d : {d0, svv > 0.0 ? static_cast<float>(sxv / svv) : d0}) {
      const double e = error_of(d);
      if (e < best_err) {
        best_err = e;
        best_d = d;
      }
    }
  }
  return best_d;
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
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    blocks[b].d = fp32_to_fp16(fit_iq4_scale(x, kQK));
    const float d = fp16_to_fp32(blocks[b].d);  // pick indices for the stored scale
    for (int j = 0; j < 16; ++j)
      blocks[b].qs[j] = static_cast<uint8_t>(nearest_iq4(x[j], d) | nearest_iq4(x[j + 16], d) << 4);
  }
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
