// K-quants (Q2_K .. Q6_K) and IQ4_XS: 256-element super-blocks whose
// sub-blocks have their own scales (and mins), stored in a few bits relative
// to the super-block's fp16 scale. Layouts: see the block structs in types.h.
//
// Quantization follows llama.cpp's reference quantizers (quantize_row_*_ref,
// used by llama-quantize when there is no importance matrix): the same
// searches for the sub-block scales (fit_affine: make_qkx2_quants,
// fit_symmetric: make_qx_quants, fit_symmetric_q3: make_q3_quants), the same
// float operations in the same order, and the same rounding, so the bytes
// match. Then the scales are rounded to their stored bits and every q is
// chosen again for the stored scales (a sub-block whose stored scale is 0
// keeps the q of the search, as in llama.cpp).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "loom/types.h"
#include "quants.h"

namespace loom::quants {
namespace {

// x ~ scale * L - min with L in [0, nmax] and min >= 0 (the group's minimum
// is at most 0), weighted by w: start from the range, then try nstep + 1
// inverse scales (rmin + rdelta * i + nmax) / range, each refitted by
// weighted least squares, and keep the smallest weighted error (absolute
// differences with use_mad, else squared). Returns the scale.
float fit_affine(const float* x, const float* w, int n, int nmax, float rmin, float rdelta, int nstep, bool use_mad,
                 uint8_t* L, float* min_out) {
  float lo = x[0], hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (lo > 0) lo = 0;
  if (hi == lo) {
    std::fill(L, L + n, 0);
    *min_out = -lo;
    return 0.0f;
  }
  auto error_of = [&](const uint8_t* levels, float scale, float min) {
    float err = 0;
    for (int i = 0; i < n; ++i) {
      float diff = scale * levels[i] + min - x[i];
      diff = use_mad ? std::fabs(diff) : diff * diff;
      err += w[i] * diff;
    }
    return err;
  };
  float iscale = nmax / (hi - lo);
  float scale = 1 / iscale;
  float min = lo;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(std::clamp(round_nearest(iscale * (x[i] - lo)), 0, nmax));
  float best_error = error_of(L, scale, min);
  uint8_t trial[32];
  for (int step = 0; step <= nstep; ++step) {
    // As in llama.cpp, later steps start from the best min found so far.
    iscale = (rmin + rdelta * step + nmax) / (hi - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_nearest(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    const float err = error_of(trial, this_scale, this_min);
    if (err < best_error) {
      std::copy(trial, trial + n, L);
      best_error = err;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

// x ~ scale * l with l in [-nmax, nmax - 1], stored as L = l + nmax, with
// weights x^2: the largest magnitude starts at -nmax, refitted by weighted
// least squares, then 18 neighbouring start scales, keeping the fit with the
// largest sumlx^2 / suml2. Returns the scale (0 for an all-zero group).
float fit_symmetric(const float* x, int n, int nmax, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  auto sums = [&](float iscale, float& sumlx, float& suml2) {
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_nearest(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
  };
  auto set_levels = [&](float iscale) {
    for (int i = 0; i < n; ++i)
      L[i] = static_cast<int8_t>(nmax + std::clamp(round_nearest(iscale * x[i]), -nmax, nmax - 1));
  };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  sums(iscale, sumlx, suml2);
  set_levels(iscale);
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int t = -9; t <= 9; ++t) {
    if (t == 0) continue;
    iscale = -(nmax + 0.1f * t) / max;
    sums(iscale, sumlx, suml2);
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      set_levels(iscale);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's search: x ~ scale * l with l in [-nmax, nmax - 1] (stored as
// l + nmax), weights x^2; from the largest magnitude at -nmax, up to 5
// passes that move single elements to the level the others' fit suggests
// when that raises sumlx^2 / suml2. Returns the least-squares scale.
float fit_symmetric_q3(const float* x, int n, int nmax, int8_t* L) {
  const float max = signed_absmax(x, n);
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, 0);
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(round_nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * L[i] * L[i];
      const int l = std::clamp(round_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (l == L[i]) continue;
      slx += w * x[i] * l;
      sl2 += w * l * l;
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(l);
        sumlx = slx;
        suml2 = sl2;
        ++changed;
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
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


// Q4_K and Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; the search
// weights each element by the sub-block's RMS plus its magnitude.
void quantize_k_affine(const float* src, int nmax, float rmin, int nstep, uint16_t& d_out, uint16_t& dmin_out,
                       uint8_t* packed_scales, uint8_t* L) {
  float scales[8], mins[8], w[32];
  float max_scale = 0, max_min = 0;
  for (int s = 0; s < 8; ++s) {
    const float* x = src + 32 * s;
    float sum_x2 = 0;
    for (int i = 0; i < 32; ++i) sum_x2 += x[i] * x[i];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int i = 0; i < 32; ++i) w[i] = av_x + std::fabs(x[i]);
    scales[s] = fit_affine(x, w, 32, nmax, rmin, 0.1f, nstep, false, L + 32 * s, &mins[s]);
    max_scale = std::max(max_scale, scales[s]);
    max_min = std::max(max_min, mins[s]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  for (int s = 0; s < 8; ++s) {
    const int ls = std::min(63, static_cast<int>(static_cast<uint8_t>(round_nearest(inv_scale * scales[s]))));
    const int lm = std::min(63, static_cast<int>(static_cast<uint8_t>(round_nearest(inv_min * mins[s]))));
    set_scale_min6(packed_scales, s, ls, lm);
  }
  d_out = fp32_to_fp16(max_scale / 63.0f);
  dmin_out = fp32_to_fp16(max_min / 63.0f);
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    get_scale_min6(packed_scales, s, sc, m);
    const float d = fp16_to_fp32(d_out) * sc;
    if (d == 0) continue;
    const float dm = fp16_to_fp32(dmin_out) * m;
    for (int i = 32 * s; i < 32 * s + 32; ++i)
      L[i] = static_cast<uint8_t>(std::clamp(round_nearest((src[i] + dm) / d), 0, nmax));
  }
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
  constexpr float kLevels = 15.0f;  // 4-bit sub-block scales and mins
  auto* blocks = static_cast<BlockQ2_K*>(dst);
  for (int64_t b = 0; b < n / kQK_K; ++b, src += kQK_K) {
    BlockQ2_K& blk = blocks[b];
    std::memset(&blk, 0, sizeof(blk));
    uint8_t L[kQK_K];
    float scales[16], mins[16], w[16];
    float max_scale = 0, max_min = 0;
    for (int s = 0; s < 16; ++s) {
      const float* x = src + 16 * s;
      for (int i = 0; i < 16; ++i) w[i] = std::fabs(x[i]);
      scales[s] = fit_affine(x, w, 16, 3, -0.5f, 0.1f, 15, true, L + 16 * s, &mins[s]);
      max_scale = std::max(max_scale, scales[s]);
      max_min = std::max(max_min, mins[s]);
    }
    if (max_scale > 0) {
      const float iscale = kLevels / max_scale;
      for (int s = 0; s < 16; ++s) blk.scales[s] = static_cast<uint8_t>(round_nearest(iscale * scales[s]));
      blk.d = fp32_to_fp16(max_scale / kLevels);
    }
    if (max_min > 0) {
      const float iscale = kLevels / max_min;
      for (int s = 0; s < 16; ++s) blk.scales[s] |= static_cast<uint8_t>(round_nearest(iscale * mins[s]) << 4);
      blk.dmin = fp32_to_fp16(max_min / kLevels);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = fp16_to_fp32(blk.d) * (blk.scales[s] & 0x0f);
      if (d == 0) continue;
      const float dm = fp16_to_fp32(blk.dmin) * (blk.scales[s] >> 4);
      for (int i = 16 * s; i < 16 * s + 16; ++i)
        L[i] = static_cast<uint8_t>(std::clamp(round_nearest((src[i] + dm) / d), 0, 3));
    }
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, r = e % 32;
      blk.qs[32 * h + r] |= static_cast<uint8_t>(L[e] << (2 * j));
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
    int8_t L[kQK_K];  // 0..7
    float scales[16];
    for (int s = 0; s < 16; ++s) scales[s] = fit_symmetric_q3(src + 16 * s, 16, 4, L + 16 * s);
    const float max_scale = signed_absmax(scales, 16);
    if (max_scale != 0) {
      // 6-bit sub-block scales l in [-32, 31]; the largest maps to -32.
      const float iscale = -32.0f / max_scale;
      for (int s = 0; s < 16; ++s) {
        const int l = static_cast<int8_t>(round_nearest(iscale * scales[s]));
        set_scale_q3(blk.scales, s, std::clamp(l, -32, 31) + 32);
      }
      blk.d = fp32_to_fp16(1 / iscale);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = fp16_to_fp32(blk.d) * (get_scale_q3(blk.scales, s) - 32);
      if (d == 0) continue;
      for (int i = 16 * s; i < 16 * s + 16; ++i)
        L[i] = static_cast<int8_t>(std::clamp(round_nearest(src[i] / d), -4, 3) + 4);
    }
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, j = e % 128 / 32, r = e % 32;
      blk.qs[32 * h + r] |= static_cast<uint8_t>((L[e] & 3) << (2 * j));
      blk.hmask[r] |= static_cast<uint8_t>((L[e] >> 2) << (4 * h + j));
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
    uint8_t L[kQK_K];
    quantize_k_affine(src, 15, -1.0f, 20, blk.d, blk.dmin, blk.scales, L);
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, r = e % 64;
      blk.qs[32 * c + r % 32] |= static_cast<uint8_t>(L[e] << (r < 32 ? 0 : 4));
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
    uint8_t L[kQK_K];
    quantize_k_affine(src, 31, -0.5f, 15, blk.d, blk.dmin, blk.scales, L);
    for (int e = 0; e < kQK_K; ++e) {
      const int c = e / 64, r = e % 64;
      blk.qs[32 * c + r % 32] |= static_cast<uint8_t>((L[e] & 0x0f) << (r < 32 ? 0 : 4));
      blk.qh[e % 32] |= static_cast<uint8_t>((L[e] >> 4) << (e / 32));
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
    int8_t L[kQK_K];  // 0..63
    float scales[16];
    float max_scale = 0, max_abs = 0;
    for (int s = 0; s < 16; ++s) {
      scales[s] = fit_symmetric(src + 16 * s, 16, 32, L + 16 * s);
      if (std::fabs(scales[s]) > max_abs) {
        max_abs = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    if (max_abs < kGroupMaxEps) continue;  // all zero
    // 8-bit sub-block scales; the largest maps to -128.
    const float iscale = -128.0f / max_scale;
    blk.d = fp32_to_fp16(1 / iscale);
    for (int s = 0; s < 16; ++s) blk.scales[s] = static_cast<int8_t>(std::min(127, round_nearest(iscale * scales[s])));
    for (int s = 0; s < 16; ++s) {
      const float d = fp16_to_fp32(blk.d) * blk.scales[s];
      if (d == 0) continue;
      for (int i = 16 * s; i < 16 * s + 16; ++i)
        L[i] = static_cast<int8_t>(std::clamp(round_nearest(src[i] / d), -32, 31) + 32);
    }
    for (int e = 0; e < kQK_K; ++e) {
      const int h = e / 128, k = e % 128 / 32, r = e % 32;
      blk.ql[64 * h + 32 * (k % 2) + r] |= static_cast<uint8_t>((L[e] & 0x0f) << (k < 2 ? 0 : 4));
      blk.qh[32 * h + r] |= static_cast<uint8_t>((L[e] >> 4) << (2 * k));
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
    quantize_iq4_group(src, 8, &blk.d, blk.qs, &blk.scales_h, blk.scales_l);
  }
}

}  // namespace loom::quants
