// Shared by every CUDA kernel: how a tensor travels to a kernel (TensorArg,
// by value: a device pointer, element counts and byte strides as in
// loom::Tensor), element loads and stores for the plain types, error
// reports, and launch helpers. Quantized block formats are in quants.cuh.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../cuda_launch.h"
#include "loom/tensor.h"
#include "loom/types.h"

namespace loom::cuda {

struct TensorArg {
  char* data;
  int64_t ne[4];
  int64_t nb[4];

  __device__ __forceinline__ char* row(int64_t i1, int64_t i2, int64_t i3) const {
    return data + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
  }
  __device__ __forceinline__ char* elem(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
    return row(i1, i2, i3) + i0 * nb[0];
  }
};

// Host side: the kernel argument for t (t.data is a device pointer; null for
// a zero-byte tensor, which kernels never touch).
inline TensorArg arg(const Tensor& t) {
  TensorArg a{static_cast<char*>(t.data), {}, {}};
  for (int i = 0; i < 4; ++i) {
    a.ne[i] = t.ne[i];
    a.nb[i] = static_cast<int64_t>(t.nb[i]);
  }
  return a;
}
// An absent optional operand: a kernel tests `data != nullptr`.
inline TensorArg no_arg() { return TensorArg{nullptr, {1, 1, 1, 1}, {0, 0, 0, 0}}; }

// DType as kernels compare it (host and device: load_plain/store_plain use it).
__host__ __device__ constexpr int type_id(DType t) { return static_cast<int>(t); }

__device__ __forceinline__ float load_bf16(const char* p) {
  return __uint_as_float(static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p)) << 16);
}
// Round to nearest even, NaN stays NaN (as loom::fp32_to_bf16).
__device__ __forceinline__ void store_bf16(char* p, float v) {
  uint32_t x = __float_as_uint(v);
  uint16_t h;
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    h = static_cast<uint16_t>((x >> 16) | 0x40u);
  } else {
    x += 0x7fffu + ((x >> 16) & 1u);
    h = static_cast<uint16_t>(x >> 16);
  }
  *reinterpret_cast<uint16_t*>(p) = h;
}
__device__ __forceinline__ float load_f16(const char* p) { return __half2float(*reinterpret_cast<const __half*>(p)); }
// Plain types only: F32, F16, BF16, I32 (as a float).
__device__ __forceinline__ float load_plain(const char* p, int type) {
  if (type == type_id(DType::F32)) return *reinterpret_cast<const float*>(p);
  if (type == type_id(DType::F16)) return load_f16(p);
  if (type == type_id(DType::BF16)) return load_bf16(p);
  return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
}
// F32, F16 (round to nearest even) or BF16.
__device__ __forceinline__ void store_plain(char* p, int type, float v) {
  if (type == type_id(DType::F32)) {
    *reinterpret_cast<float*>(p) = v;
  } else if (type == type_id(DType::F16)) {
    *reinterpret_cast<__half*>(p) = __float2half_rn(v);
  } else {
    store_bf16(p, v);
  }
}

// Records the first bad value any kernel saw (errors[0] flag, [1] label,
// [2] value); the backend reports it after the stream synchronizes.
__device__ __forceinline__ void report_error(int* errors, int label, int value) {
  if (atomicCAS(errors, 0, 1) == 0) {
    errors[1] = label;
    errors[2] = value;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

inline unsigned blocks_for(int64_t n, int per_block) { return static_cast<unsigned>((n + per_block - 1) / per_block); }

}  // namespace loom::cuda
