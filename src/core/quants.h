// Reference conversions between f32 rows and the quantized block types other
// than Q8_0 / Q4_0 (which live in types.cpp). Written for clarity, not speed:
// the CPU kernels and `loom quantize` build on these, and tests check the
// layouts against hand-packed blocks. n is a multiple of the block size.
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
// The element of largest magnitude, with its sign (0 for an all-zero group).
float signed_absmax(const float* x, int n);
// The best d for x ~ d * kIq4nlValues[q] over a group of n: a few candidate
// scales around max / -127, each refitted by least squares.
float fit_iq4_scale(const float* x, int n);
// Index of the table value nearest to x / d (0 when d is 0).
int nearest_iq4(float x, float d);

}  // namespace loom::quants
