// Quantizing 32 floats into one block of the types kernels write (set_rows
// and cpy into Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), bit for bit as the CPU's
// from_float (src/core/types.cpp, src/core/quants.cpp): the same scale
// choice, IEEE division (__fdiv_rn), no fused multiply-add (the CPU is built
// without contraction, so every product and sum is rounded on its own:
// __fmul_rn / __fadd_rn), round-to-nearest-even fp16 scales, and the same
// rounding of x / d (lround for Q8_0, truncation of x * id + bias for the rest).
// Blocks are written byte by byte: any block address works.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "loom/types.h"

namespace loom::cuda {

// The types quantize_block writes.
__host__ __device__ constexpr bool can_quantize_type(int type) {
  return type == static_cast<int>(DType::Q8_0) || type == static_cast<int>(DType::Q4_0) ||
         type == static_cast<int>(DType::Q4_1) || type == static_cast<int>(DType::Q5_0) ||
         type == static_cast<int>(DType::Q5_1);
}

namespace qwrite {

__device__ __forceinline__ void put_f16(uint8_t* p, float v) {
  const unsigned short h = __half_as_ushort(__float2half_rn(v));
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// The element of largest magnitude, with its sign (the first one on ties).
__device__ __forceinline__ float signed_absmax32(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (fabsf(x[j]) > amax) {
      amax = fabsf(x[j]);
      max = x[j];
    }
  }
  return max;
}

// std::min / std::max as the CPU calls them (a NaN in x is skipped, as there).
__device__ __forceinline__ void min_max32(const float* x, float& lo, float& hi) {
  lo = 3.402823466e+38f;
  hi = -3.402823466e+38f;
  for (int j = 0; j < 32; ++j) {
    lo = x[j] < lo ? x[j] : lo;
    hi = hi < x[j] ? x[j] : hi;
  }
}

// q[j] (5 bits) into 16 bytes of nibbles at qs (low: j < 16) and the 32
// fifth bits at qh (little-endian), as pack_q5.
__device__ __forceinline__ void pack_nibbles(const int* q, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 15) | (q[j + 16] & 15) << 4);
}
__device__ __forceinline__ void pack_high_bits(const int* q, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < 32; ++j) h |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  for (int k = 0; k < 4; ++k) qh[k] = static_cast<uint8_t>(h >> (8 * k));
}

}  // namespace qwrite

// Quantizes x[0..31] into the block at `block` of `type` (can_quantize_type).
__device__ inline void quantize_block(const float* x, char* block, int type) {
  using namespace qwrite;
  uint8_t* b = reinterpret_cast<uint8_t*>(block);
  if (type == static_cast<int>(DType::Q8_0)) {  // d = max|x| / 127, q = lround(x / d)
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(x[j]));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    put_f16(b, d);
    for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(lroundf(__fmul_rn(x[j], id))));
    return;
  }
  int q[32];
  if (type == static_cast<int>(DType::Q4_0) || type == static_cast<int>(DType::Q5_0)) {
    // The element of largest magnitude maps to -8 (-16) exactly.
    const bool four = type == static_cast<int>(DType::Q4_0);
    const float d = __fdiv_rn(signed_absmax32(x), four ? -8.0f : -16.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const float bias = four ? 8.5f : 16.5f;
    const int qmax = four ? 15 : 31;
    for (int j = 0; j < 32; ++j) q[j] = min(qmax, static_cast<int>(__fadd_rn(__fmul_rn(x[j], id), bias)));
    put_f16(b, d);
    if (four) {
      pack_nibbles(q, b + 2);
    } else {
      pack_high_bits(q, b + 2);
      pack_nibbles(q, b + 6);
    }
    return;
  }
  // Q4_1, Q5_1: from the minimum to the maximum.
  const bool four = type == static_cast<int>(DType::Q4_1);
  float lo, hi;
  min_max32(x, lo, hi);
  const int qmax = four ? 15 : 31;
  const float d = __fdiv_rn(__fsub_rn(hi, lo), static_cast<float>(qmax));
  const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  for (int j = 0; j < 32; ++j) q[j] = min(qmax, static_cast<int>(__fadd_rn(__fmul_rn(__fsub_rn(x[j], lo), id), 0.5f)));
  put_f16(b, d);
  put_f16(b + 2, lo);
  if (four) {
    pack_nibbles(q, b + 4);
  } else {
    pack_high_bits(q, b + 4);
    pack_nibbles(q, b + 8);
  }
}

}  // namespace loom::cuda
