// Row dequantization for mul_mat's f32 paths (quant_dot.h, dequant_row_fn):
// the same values as the types' reference to_float, computed a sub-block at
// a time (scales decoded once per sub-block, inner loops the compiler
// vectorizes) instead of element by element.
#include "quant_dot.h"

namespace loom::cpu {
namespace {

// Q4_K / Q5_K: element r of sub-block s (0..7) has its low 4 bits in
// qs[32 * (s / 2) + r], low nibble for even s, high for odd; Q5_K's 5th bit
// is bit s of qh[r]. Value: d * sc * q - dmin * m.
template <typename Block, bool kFifthBit>
void k4_rows_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const Block*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const Block& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    uint8_t sc[8];
    uint64_t m8;
    k4_scales_mins(blk.scales, sc, m8);
    for (int s = 0; s < 8; ++s) {
      const float ds = d * sc[s], dm = dmin * static_cast<int>((m8 >> (8 * s)) & 0xff);
      const uint8_t* qs = blk.qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      float* out = dst + 32 * s;
      for (int r = 0; r < 32; ++r) {
        int q = (qs[r] >> shift) & 0x0f;
        if constexpr (kFifthBit) q += 16 * ((blk.qh[r] >> s) & 1);
        out[r] = ds * q - dm;
      }
    }
  }
}

// Q6_K: element r (0..31) of quarter k (0..3) of half h has its low 4 bits in
// ql[64 * h + 32 * (k % 2) + r] (low nibble for k < 2), its high 2 bits at
// 2 * k in qh[32 * h + r], and the scale of its 16 elements. Value:
// d * scale * (q - 32).
void q6_k_rows_to_float(const void* src, float* dst, int64_t n) {
  const auto* blocks = static_cast<const BlockQ6_K*>(src);
  for (int64_t b = 0; b < n / kQK_K; ++b, dst += kQK_K) {
    const BlockQ6_K& blk = blocks[b];
    const float d = fp16_to_fp32(blk.d);
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const uint8_t* ql = blk.ql + 64 * h + 32 * (k % 2);
        const uint8_t* qh = blk.qh + 32 * h;
        const int shift = k < 2 ? 0 : 4;
        float* out = dst + 128 * h + 32 * k;
        for (int half = 0; half < 2; ++half) {
          const float ds = d * blk.scales[8 * h + 2 * k + half];
          for (int r = 16 * half; r < 16 * half + 16; ++r) {
            const int q = ((ql[r] >> shift) & 0x0f) | ((qh[r] >> (2 * k)) & 3) << 4;
            out[r] = ds * (q - 32);
          }
        }
      }
  }
}

}  // namespace

ToFloatFn dequant_row_fn(DType type) {
  switch (type) {
    case DType::Q4_K: return k4_rows_to_float<BlockQ4_K, false>;
    case DType::Q5_K: return k4_rows_to_float<BlockQ5_K, true>;
    case DType::Q6_K: return q6_k_rows_to_float;
    default: return traits(type).to_float;
  }
}

}  // namespace loom::cpu
