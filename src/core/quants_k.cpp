// K-quants (Q2_K .. Q6_K) and IQ4_XS: 256-element super-blocks whose
// sub-blocks have their own scales (and mins), stored in a few bits relative
// to the super-block's fp16 scale. Layouts: see the block structs in types.h.
//
// Quantization here is a plain reference, NOT llama.cpp's search
// (make_qkx2_quants, make_q3_quants, ...), so it gives valid but different
// bytes: each sub-block's scale (and min) comes from its range, refined by a
// few least-squares refits, then the scales are rounded to their stored bits
// and every q is chosen again for the stored scales. Its error is measured in
// tests/core/quants_test.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/types.h"
#include "quants.h"

namespace loom::quants {
namespace {

int round_clamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::lround(v)), lo, hi); }

// x ~ scale * q - min with q in [0, nmax], scale >= 0, min >= 0 (the group's
// minimum is at most 0, as the K-quant layouts require).
struct Affine {
  float scale = 0.0f, min = 0.0f;
};

double affine_error(const float* x, int n, int nmax, const Affine& a) {
  double e = 0.0;
  for (int j = 0; j < n; ++j) {
    const int q = a.scale > 0.0f ? round_clamp((x[j] + a.min) / a.scale, 0, nmax) : 0;
    const double r = x[j] - (a.scale * q - a.min);
    e += r * r;
  }
  return e;
}

Affine fit_affine(const float* x, int n, int nmax) {
  float lo = 0.0f, hi = -INFINITY;
  for (int j = 0; j < n; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  Affine best{hi > lo ? (hi - lo) / nmax : 0.0f, -lo};
  if (best.scale == 0.0f) return best;
  double best_err = affine_error(x, n, nmax, best);
  Affine cur = best;
  for (int iter = 0; iter < 4; ++iter) {
    // Least squares for x ~ a * q + c given the current q, with c <= 0.
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int j = 0; j < n; ++j) {
      const int q = round_clamp((x[j] + cur.min) / cur.scale, 0, nmax);
      sq += q;
      sqq += static_cast<double>(q) * q;
      sx += x[j];
      sxq += static_cast<double>(x[j]) * q;
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) break;
    double a = (n * sxq - sq * sx) / det;
    double c = (sx - a * sq) / n;
    if (c > 0) {  // the min must stay <= 0: fit the scale alone
      c = 0;
      a = sqq > 0 ? sxq / sqq : 0;
    }
    if (a <= 0) break;
    cur = {static_cast<float>(a), static_cast<float>(-c)};
    const double e = affine_error(x, n, nmax, cur);
    if (e < best_err) {
      best_err = e;
      best = cur;
    }
  }
  return best;
}

// x ~ scale * q with q in [-(qmax + 1), qmax]; the scale may be negative (the
// element of largest magnitude then maps to the negative end, which has one
// more level).
float fit_symmetric(const float* x, int n, int qmax) {
  const float max = signed_absmax(x, n);
  if (max == 0.0f) return 0.0f;
  auto error_of = [&](float s) {
    double e = 0.0;
    for (int j = 0; j < n; ++j) {
      const double r = x[j] - s * round_clamp(x[j] / s, -qmax - 1, qmax);
      e += r * r;
    }
    return e;
  };
  float best = max / -(qmax + 1);
  double best_err = error_of(best);
  for (int t = 0; t <= 6; ++t) {
    const float s0 = max / -(qmax + 1 - 0.1f * t * (qmax + 1) / 4);
    double sxq = 0, sqq = 0;
    for (int j = 0; j < n; ++j) {
      const int q = round_clamp(x[j] / s0, -qmax - 1, qmax);
      sxq += static_cast<double>(x[j]) * q;
      sqq += static_cast<double>(q) * q;
    }
    for (float s : {s0, sqq > 0 ? static_cast<float>(sxq / sqq) : s0}) {
      if (s == 0.0f) continue;
      const double e = error_of(s);
      if (e < best_err) {
        best_err = e;
        best = s;
      }
    }
  }
  return best;
}

// 6-bit scale and min of sub-block s of Q4_K / Q5_K (see BlockQ4_K).
void get_scale_min6(const uint8_t* scales, int s, int& sc, int& m) {
  if (s < 4) {
    sc = scales[s] & 63;
    m = scales[s + 4] & 63;
  } else {
    sc = (scales[s + 4] & 0x0f) | (scales[s - 4] >> 6) << 4;
    m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
  }
}

void set_scale_min6(uint8_t* scales, int s, int sc, int m) {
  if (s < 4) {
    scales[s] = static_cast<uint8_t>((scales[s] & 0xc0) | sc);
    scales[s + 4] = static_cast<uint8_t>((scales[s + 4] & 0xc0) | m);
  } else {
    scales[s + 4] = static_cast<uint8_t>((sc & 0x0f) | (m & 0x0f) << 4);
    scales[s - 4] = static_cast<uint8_t>((scales[s - 4] & 0x3f) | (sc >> 4) << 6);
    scales[s] = static_cast<uint8_t>((scales[s] & 0x3f) | (m >> 4) << 6);
  }
}

// 6-bit scale (stored + 32) of sub-block s of Q3_K (see BlockQ3_K).
int get_scale_q3(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | high << 4;
}

void set_scale_q3(uint8_t* scales, int s, int v) {
  if (s < 8) scales[s] = static_cast<uint8_t>((scales[s] & 0xf0) | (v & 0x0f));
  else scales[s - 8] = static_cast<uint8_t>((scales[s - 8] & 0x0f) | (v & 0x0f) << 4);
  scales[8 + s % 4] |= static_cast<uint8_t>(((v >> 4) & 3) << (2 * (s / 4)));
}

// Affine super-blocks (Q2_K, Q4_K, Q5_K): sub-block scales and mins, stored
// as `bits`-bit multiples of d and dmin. Returns the stored integers and q.
struct AffineSuper {
  uint16_t d = 0, dmin = 0;
  int sc[16] = {}, m[16] = {};
  int q[kQK_K] = {};
};

AffineSuper quantize_affine_super(const float* x, int n_sub, int nmax, int scale_max) {
  const int len = kQK_K / n_sub;
  AffineSuper out;
  Affine fits[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < n_sub; ++s) {
    fits[s] = fit_affine(x + s * len, len, nmax);
    max_scale = std::max(max_scale, fits[s].scale);
    max_min = std::max(max_min, fits[s].min);
  }
  out.d = fp32_to_fp16(max_scale / scale_max);
  out.dmin = fp32_to_fp16(max_min / scale_max);
  const float d = fp16_to_fp32(out.d), dmin = fp16_to_fp32(out.dmin);
  for (int s = 0; s < n_sub; ++s) {
    out.sc[s] = d > 0.0f ? round_clamp(fits[s].scale / d, 0, scale_max) : 0;
    out.m[s] = dmin > 0.0f ? round_clamp(fits[s].min / dmin, 0, scale_max) : 0;
    const float dl = d * out.sc[s], ml = dmin * out.m[s];
    for (int j = s * len; j < (s + 1) * len; ++j) out.q[j] = dl > 0.0f ? round_clamp((x[j] + ml) / dl, 0, nmax) : 0;
  }
  return out;
}

// Symmetric super-blocks (Q3_K, Q6_K, IQ4_XS): sub-block scales as signed
// integers l in [-(lmax + 1), lmax] times d; the largest scale maps to
// -(lmax + 1).
struct SymmetricScales {
  uint16_t d = 0;
  int l[16] = {};
};

SymmetricScales quantize_scales(const float* scales, int n_sub, int lmax) {
  SymmetricScales out;
  const float max = signed_absmax(scales, n_sub);
  out.d = fp32_to_fp16(max / -(lmax + 1));
  const float d = fp16_to_fp32(out.d);
  for (int s = 0; s < n_sub; ++s) out.l[s] = d != 0.0f ? round_clamp(scales[s] / d, -lmax - 1, lmax) : 0;
  return out;
}

}  // namespace

// ---- Q2_K -----------------------------------------------------------------

void q2_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ2_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ2_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, r = e % 32;
      const int q = (blk.qs[32 * h + r] >> (2 * j)) & 3;
      const int sc = blk.scales[e / 16];
      dst[e] = d * (sc & 0x0f) * q - dmin * (sc >> 4);
    }
  }
}

void q2_k_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ2_K& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    const AffineSuper s = quantize_affine_super(src, 16, 3, 15);
    blk.d = s.d;
    blk.dmin = s.dmin;
    for (int i = 0; i < 16; ++i) blk.scales[i] = static_cast<uint8_t>(s.sc[i] | s.m[i] << 4);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, r = e % 32;
      blk.qs[32 * h + r] |= static_cast<uint8_t>(s.q[e] << (2 * j));
    }
  }
}

// ---- Q3_K -----------------------------------------------------------------

void q3_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ3_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ3_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, r = e % 32;
      const int low = (blk.qs[32 * h + r] >> (2 * j)) & 3;
      const int high = (blk.hmask[r] >> (4 * h + j)) & 1;
      dst[e] = d * (get_scale_q3(blk.scales, e / 16) - 32) * (low + 4 * high - 4);
    }
  }
}

void q3_k_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ3_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ3_K& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    float scales[16];
    for (int s = 0; s < 16; ++s) scales[s] = fit_symmetric(src + 16 * s, 16, 3);
    const SymmetricScales sc = quantize_scales(scales, 16, 31);
    blk.d = sc.d;
    const float d = fp16_to_fp32(sc.d);
    for (int s = 0; s < 16; ++s) set_scale_q3(blk.scales, s, sc.l[s] + 32);
    for (int e = 0; e < kQK_K; ++e) {
      const float dl = d * sc.l[e / 16];
      const int u = (dl != 0.0f ? round_clamp(src[e] / dl, -4, 3) : 0) + 4;  // 0..7
      const int h = e / 128, j = e % 128 / 32, r = e % 32;
      blk.qs[32 * h + r] |= static_cast<uint8_t>((u & 3) << (2 * j));
      blk.hmask[r] |= static_cast<uint8_t>((u >> 2) << (4 * h + j));
    }
  }
}

// ---- Q4_K / Q5_K ----------------------------------------------------------

void q4_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ4_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ4_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, r = e % 64;
      const int q = r < 32 ? blk.qs[32 * c + r] & 0x0f : blk.qs[32 * c + r - 32] >> 4;
      int sc, m;
      get_scale_min6(blk.scales, e / 32, sc, m);
      dst[e] = d * sc * q - dmin * m;
    }
  }
}

void q4_k_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ4_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ4_K& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    const AffineSuper s = quantize_affine_super(src, 8, 15, 63);
    blk.d = s.d;
    blk.dmin = s.dmin;
    for (int i = 0; i < 8; ++i) set_scale_min6(blk.scales, i, s.sc[i], s.m[i]);
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, r = e % 64;
      blk.qs[32 * c + r % 32] |= static_cast<uint8_t>(s.q[e] << (r < 32 ? 0 : 4));
    }
  }
}

void q5_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ5_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ5_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, r = e % 64;
      const int low = r < 32 ? blk.qs[32 * c + r] & 0x0f : blk.qs[32 * c + r - 32] >> 4;
      const int high = (blk.qh[e % 32] >> (e / 32)) & 1;
      int sc, m;
      get_scale_min6(blk.scales, e / 32, sc, m);
      dst[e] = d * sc * (low + 16 * high) - dmin * m;
    }
  }
}

void q5_k_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ5_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ5_K& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    const AffineSuper s = quantize_affine_super(src, 8, 31, 63);
    blk.d = s.d;
    blk.dmin = s.dmin;
    for (int i = 0; i < 8; ++i) set_scale_min6(blk.scales, i, s.sc[i], s.m[i]);
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, r = e % 64;
      blk.qs[32 * c + r % 32] |= static_cast<uint8_t>((s.q[e] & 0x0f) << (r < 32 ? 0 : 4));
      blk.qh[e % 32] |= static_cast<uint8_t>((s.q[e] >> 4) << (e / 32));
    }
  }
}

// ---- Q6_K -----------------------------------------------------------------

void q6_k_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ6_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = e % 128 / 32, r = e % 32;
      const uint8_t l = blk.ql[64 * h + 32 * (k % 2) + r];
      const int low = k < 2 ? l & 0x0f : l >> 4;
      const int high = (blk.qh[32 * h + r] >> (2 * k)) & 3;
      dst[e] = d * blk.scales[e / 16] * ((low | high << 4) - 32);
    }
  }
}

void q6_k_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockQ6_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ6_K& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    float scales[16];
    for (int s = 0; s < 16; ++s) scales[s] = fit_symmetric(src + 16 * s, 16, 31);
    const SymmetricScales sc = quantize_scales(scales, 16, 127);
    blk.d = sc.d;
    const float d = fp16_to_fp32(sc.d);
    for (int s = 0; s < 16; ++s) blk.scales[s] = static_cast<int8_t>(sc.l[s]);
    for (int e = 0; e < kQK_K; ++e) {
      const float dl = d * sc.l[e / 16];
      const int u = (dl != 0.0f ? round_clamp(src[e] / dl, -32, 31) : 0) + 32;  // 0..63
      const int h = e / 128, k = e % 128 / 32, r = e % 32;
      blk.ql[64 * h + 32 * (k % 2) + r] |= static_cast<uint8_t>((u & 0x0f) << (k < 2 ? 0 : 4));
      blk.qh[32 * h + r] |= static_cast<uint8_t>((u >> 4) << (2 * k));
    }
  }
}

// ---- IQ4_XS ---------------------------------------------------------------

void iq4_xs_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockIQ4_XS*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockIQ4_XS& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int s = 0; s < 8; ++s) {
      const int ls = ((blk.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f) | ((blk.scales_h >> (2 * s)) & 3) << 4;
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; ++j) {
        dst[32 * s + j] = dl * kIq4nlValues[blk.qs[16 * s + j] & 0x0f];
        dst[32 * s + j + 16] = dl * kIq4nlValues[blk.qs[16 * s + j] >> 4];
      }
    }
  }
}

void iq4_xs_from_float(const float* src, void* dst, int64_t n) {
  auto* blocks = static_cast<BlockIQ4_XS*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockIQ4_XS& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    float scales[8];
    for (int s = 0; s < 8; ++s) scales[s] = fit_iq4_scale(src + 32 * s, 32);
    const SymmetricScales sc = quantize_scales(scales, 8, 31);
    blk.d = sc.d;
    const float d = fp16_to_fp32(sc.d);
    uint16_t high = 0;
    for (int s = 0; s < 8; ++s) {
      const int ls = sc.l[s] + 32;
      blk.scales_l[s / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (s % 2)));
      high |= static_cast<uint16_t>((ls >> 4) << (2 * s));
      const float dl = d * sc.l[s];
      for (int j = 0; j < 16; ++j)
        blk.qs[16 * s + j] = static_cast<uint8_t>(nearest_iq4(src[32 * s + j], dl) |
                                                  nearest_iq4(src[32 * s + j + 16], dl) << 4);
    }
    blk.scales_h = high;
  }
}

}  // namespace loom::quants
