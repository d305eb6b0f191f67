// Reference conversions between f32 rows and the quantized block types other
// than Q8_0 / Q4_0 (which live in types.cpp). Written for clarity, not speed:
// the CPU kernels and `loom quantize` build on these, and tests check the
// layouts against hand-packed blocks. n is a multiple of the block size.
// Quantization follows llama.cpp's algorithms without an importance matrix
// (quantize_row_*_ref, and quantize_iq4_nl / quantize_iq4_xs), with the same
// float operations in the same order, so that it writes the same bytes.
#pragma once

#include <cstdint>

namespace loom::quants {

void q4_1_to_float(const void* src, float* dst, int64_t n);
void q4_1_from_float(const float* src, void* dst, int64_t n);
void q5_0_to_float(const void* src, float* dst, int64_t n);
void q5_0_from_float(const float* src, void* dst, int64_t n);
void q5_1_to_float(const void* src, float* dst, int64_t n);
void q5_1_from_float(const float* src, void* dst, int64_t n);
void iq4_nl_to_float(const void* src, float* dst, int64_t n);
void iq4_nl_from_float(const float* src, void* dst, int64_t n);
void mxfp4_to_float(const void* src, float* dst, int64_t n);
void mxfp4_from_float(const float* src, void* dst, int64_t n);

// quants_k.cpp: 256-element super-blocks.
void q2_k_to_float(const void* src, float* dst, int64_t n);
void q2_k_from_float(const float* src, void* dst, int64_t n);
void q3_k_to_float(const void* src, float* dst, int64_t n);
void q3_k_from_float(const float* src, void* dst, int64_t n);
void q4_k_to_float(const void* src, float* dst, int64_t n);
void q4_k_from_float(const float* src, void* dst, int64_t n);
void q5_k_to_float(const void* src, float* dst, int64_t n);
void q5_k_from_float(const float* src, void* dst, int64_t n);
void q6_k_to_float(const void* src, float* dst, int64_t n);
void q6_k_from_float(const float* src, void* dst, int64_t n);
void iq4_xs_to_float(const void* src, float* dst, int64_t n);
void iq4_xs_from_float(const float* src, void* dst, int64_t n);

// Shared by both files.
// Groups whose largest magnitude is below this count as all zero.
inline constexpr float kGroupMaxEps = 1e-15f;
// The element of largest magnitude, with its sign (0 for an all-zero group).
float signed_absmax(const float* x, int n);
// Round to nearest, ties to even, as llama.cpp's nearest_int does it: the
// float sum x + 1.5 * 2^23 keeps the integer in its low mantissa bits (exact
// for |x| < 2^22; beyond that it gives the same wrapped value llama.cpp gets).
int round_nearest(float x);
// llama.cpp's non-linear 4-bit search (IQ4_NL with n_sub = 1, IQ4_XS with
// n_sub = 8 sub-blocks of 32): x[32 * n_sub] ~ scale * kIq4nlValues[q].
// Writes the fp16 super-block scale, the 4-bit indices (16 bytes per 32
// elements), and for n_sub > 1 the 6-bit sub-block scales.
void quantize_iq4_group(const float* x, int n_sub, uint16_t* d, uint8_t* qs, uint16_t* scales_h, uint8_t* scales_l);

}  // namespace loom::quants
