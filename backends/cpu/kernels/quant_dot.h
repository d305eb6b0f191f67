// Integer dot products for the quantized weight types other than Q8_0 / Q4_0
// (Q4_1, Q5_0, Q5_1, the K-quants, IQ4_NL, IQ4_XS, MXFP4): the a row stays in
// its blocks, the b column is quantized once to int8 activations, and each
// block's sum of products is an exact integer scaled by the blocks' floats.
//
// Activation formats (the "row format" of b on mul_mat's dot path):
//  - Q8_K: BlockQ8_K[k / 256] (types.h), for the 256-element super-block
//    types (Q2_K .. Q6_K, IQ4_XS); its bsums give the K-quants' min and
//    offset terms without touching q again.
//  - Q8_32: the q8 row of vec.h, int8 q[k], float d[k / 32], float s[k / 32]
//    with s = d * sum(q), for the 32-element types (s gives Q4_1 / Q5_1's
//    minimum term).
// quant_dot_scalar.cpp holds the reference of each dot (one block at a time,
// written for clarity); quant_dot_avx2.cpp computes the same integers with
// maddubs / madd; quant_dot_avx512.cpp has Q4_K, Q5_K and Q6_K with 512-bit
// maddubs and VNNI's vpdpwssd, and gives the AVX2 dots of the other types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "loom/types.h"
#include "vec.h"

namespace loom::cpu {

enum class ActFormat { Q8_K, Q8_32 };

// The activation format a weight type's dot takes (Q8_K for 256-element
// super-blocks, Q8_32 for 32-element blocks).
ActFormat act_format(DType type);
// Bytes of one b column of k elements in `format`.
size_t act_row_bytes(ActFormat format, int64_t k);
// x[k] -> one b column in `format`; q8_32 is the ISA's quantize_row (Q8_K
// rows are quantized by the one reference quantize_row_q8_k).
void quantize_act(ActFormat format, QuantizeRowFn q8_32, const float* x, int64_t k, void* out);

// The dot for weights of `type` at a level, or null for a type without one
// (F32, F16, BF16, Q8_0, Q4_0 use MulMatKernels::dot).
DotFn quant_dot(Isa isa, DType type);
DotFn quant_dot_scalar(DType type);
DotFn quant_dot_avx2(DType type);    // call only if best_isa() >= Avx2
DotFn quant_dot_avx512(DType type);  // call only if best_isa() >= Avx512

// out[c] = dot(a row, b column c) for 4 columns b_stride bytes apart (the
// row's weights unpacked once for the 4): the same float result as 4 calls
// of the level's DotFn. Only where it pays (Q4_K, Q5_K, Q6_K from AVX2 on);
// null elsewhere.
using Dot4Fn = void (*)(int64_t k, const void* a_row, const void* b_col0, size_t b_stride, float* out);
Dot4Fn quant_dot4(Isa isa, DType type);
Dot4Fn quant_dot4_avx2(DType type);    // call only if best_isa() >= Avx2
Dot4Fn quant_dot4_avx512(DType type);  // call only if best_isa() >= Avx512

// Rows of `type` interleaved in CPU_Repack (repack.h), 16 at a time, times
// b columns in the type's activation format: out[c * 16 + r] = dot(row r,
// column c), the same integers as the type's dot. Q4_K and Q6_K from AVX2
// on; null elsewhere (CPU_Repack then keeps such weights plain), and for b
// of more columns than where they beat the integer gemm on the same
// interleaved rows (interleaved_expand_u4 / _s6): Q4_K up to 15, Q6_K up to
// 32 (2 threads, TinyLlama's FFN shapes, against the plain weights: Q4_K at
// 8 columns 1.1-1.8x, at 16 the AVX2 kernel even with the integer gemm;
// Q6_K at 16 columns 1.1-1.5x, at 32 0.95-1.04x where the integer gemm gave
// 0.92-0.95x, at 64 0.79-0.98x against 0.93-0.97x; bench/mul_mat_bench
// mul_mat_repack).
Gemm16Fn quant_gemm16(Isa isa, DType type, int64_t n);
Gemm16Fn quant_gemm16_avx2(DType type);    // call only if best_isa() >= Avx2
Gemm16Fn quant_gemm16_avx512(DType type);  // call only if best_isa() >= Avx512
// AMX int8 tiles (mul_mat_amx.cpp): whether this CPU has them, the OS
// granted them to the process and LOOM_CPU_AMX is not 0; then the
// kGemm16WideCols kernel for interleaved Q8_0 / Q4_0 rows (null for others),
// and the gemm path's integer micro-kernels (16 rows a call) put into a
// copy of the AVX-512 table.
bool amx_int8_usable();
Gemm16Fn quant_gemm16_amx(WKind kind);
void use_amx_int_gemm(MulMatKernels& t);
// For the integer gemm at `isa` on interleaved rows of `type`: their
// ExpandU4Fn 16 rows at a time from the group, with no unpacking. Q4_K from
// AVX2 on; null elsewhere (the rows are then unpacked one by one).
ExpandU4x16Fn interleaved_expand_u4(Isa isa, DType type);
ExpandU4x16Fn interleaved_expand_u4_avx2(DType type);  // call only if best_isa() >= Avx2
// The same for ExpandS6Fn: Q6_K from AVX2 on.
ExpandS6x16Fn interleaved_expand_s6(Isa isa, DType type);
ExpandS6x16Fn interleaved_expand_s6_avx2(DType type);  // call only if best_isa() >= Avx2

// Whether mul_mat at `isa` converts weights of `type` to f32 rows and runs
// the f32 kernels for b of n columns, instead of quantizing b (see QuantPath
// in vec.h; Auto picks what measures faster, see mul_mat.cpp).
bool mul_mat_dequantizes(Isa isa, DType type, int64_t n);
// Whether mul_mat at `isa` runs weights of `type` on one of the level's
// integer gemms for K-quants and 4- / 5-bit types (gemm_u4: Q4_0, Q4_1,
// Q4_K; gemm_u5: Q5_0, Q5_1, Q5_K; gemm_s6: Q3_K, Q6_K) for b of n columns,
// with b quantized in 32-element q8 blocks as for Q4_0 (vec.h).
bool mul_mat_int_gemm(Isa isa, DType type, int64_t n);
// A row of `type` to f32 for those paths: the reference to_float's values,
// faster for Q4_K, Q5_K, Q6_K (dequant_rows.cpp).
ToFloatFn dequant_row_fn(DType type);

// ---- block decoding shared by the scalar and AVX2 dots -------------------

// Q4_K / Q5_K: 6-bit scale and min of sub-block s (0..7); layout in types.h.
inline void k4_scale_min(const uint8_t* scales, int s, int& sc, int& m) {
  if (s < 4) {
    sc = scales[s] & 63;
    m = scales[s + 4] & 63;
  } else {
    sc = (scales[s + 4] & 0x0f) | (scales[s - 4] >> 6) << 4;
    m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
  }
}

// Q4_K / Q5_K: all 8 scales (sc[s]) and mins (byte s of m8) at once, from
// the same layout with whole-word shifts and masks.
inline void k4_scales_mins(const uint8_t* scales, uint8_t* sc, uint64_t& m8) {
  uint32_t w[3];
  std::memcpy(w, scales, 12);
  // w[0]: low 6 bits sc[0..3], top 2 bits sc[4..7] >> 4; w[1]: the same for
  // m; w[2]: low nibbles sc[4..7], high nibbles m[4..7].
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kNibble = 0x0f0f0f0f, kTop2 = 0x03030303;
  const uint32_t sc_lo = w[0] & kLow6, sc_hi = (w[2] & kNibble) | ((w[0] >> 6) & kTop2) << 4;
  const uint32_t m_lo = w[1] & kLow6, m_hi = ((w[2] >> 4) & kNibble) | ((w[1] >> 6) & kTop2) << 4;
  std::memcpy(sc, &sc_lo, 4);
  std::memcpy(sc + 4, &sc_hi, 4);
  m8 = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

// Q3_K: the signed scale (6-bit value - 32) of sub-block s (0..15).
inline int q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | high << 4) - 32;
}

// IQ4_XS: the signed scale (6-bit ls - 32) of sub-block s (0..7).
inline int iq4_xs_scale(const BlockIQ4_XS& x, int s) {
  const int low = (x.scales_l[s / 2] >> (4 * (s % 2))) & 0x0f;
  const int high = (x.scales_h >> (2 * s)) & 3;
  return (low | high << 4) - 32;
}

}  // namespace loom::cpu
