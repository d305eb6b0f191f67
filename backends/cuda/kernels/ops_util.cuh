// Helpers shared by the non-matrix kernels (rows.cu, copy.cu, elementwise.cu,
// reduce.cu, rope.cu): element loads of any readable type, block-wide
// reductions, the grid shapes they launch with, and the launch check.
//
// Grid conventions (CUDA allows x up to 2^31 - 1, y and z up to 65535):
// - "element" kernels (element_grid): rows along y, blockIdx.y * blockDim.y
//   + threadIdx.y striding over them (a loop when there are more than
//   65535 blocks' worth), blockIdx.x * blockDim.x + threadIdx.x over dim 0;
// - "row" kernels: one block per row, blockIdx.x strides over rows.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common.cuh"
#include "loom/op_params.h"
#include "quants.cuh"

namespace loom::cuda {

// Element i0 of the row at `row` of any readable type: plain (nb0 is the
// element stride) or block-quantized (nb0 is the block stride, rows whole
// blocks). I32 reads as a float.
__device__ __forceinline__ float load_any(const char* row, int type, int64_t i0, int64_t nb0) {
  if (!is_quant_type(type)) return load_plain(row + i0 * nb0, type);
  const int n = quant_block_elems(type);
  return dequant_elem(type, row + (i0 / n) * nb0, static_cast<int>(i0 % n));
}

// The first row and the row step of an element kernel's thread.
__device__ __forceinline__ int64_t first_row() {
  return static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
}
__device__ __forceinline__ int64_t row_step() { return static_cast<int64_t>(gridDim.y) * blockDim.y; }

// Row r of t (r < ne1 * ne2 * ne3, rows in logical order) as (i1, i2, i3).
__device__ __forceinline__ void row_coords(const TensorArg& t, int64_t r, int64_t& i1, int64_t& i2, int64_t& i3) {
  i1 = r % t.ne[1];
  const int64_t q = r / t.ne[1];
  i2 = q % t.ne[2];
  i3 = q / t.ne[2];
}

// Sum and max over the whole block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. `scratch` holds 32 floats of shared
// memory; calls may follow each other (the leading barrier protects it).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  if (blockDim.x <= 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  v = warp_max(v);
  if (blockDim.x <= 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? scratch[lane] : -INFINITY);
}

// ---- host side ------------------------------------------------------------------

inline constexpr int64_t kMaxGridY = 65535;

// Element kernels: a block of 256 threads, blockDim.x (a power of two, at
// least dim 0's length up to 256) along dim 0 and blockDim.y rows; rows
// along grid y (capped; the kernel loops: row r = blockIdx.y * blockDim.y +
// threadIdx.y, stepping by gridDim.y * blockDim.y), dim 0 along grid x.
struct ElementGrid {
  dim3 grid;
  dim3 block;
};
inline ElementGrid element_grid(int64_t ne0, int64_t rows) {
  int64_t tx = 1;
  while (tx < ne0 && tx < 256) tx *= 2;
  const int64_t ty = 256 / tx;
  const int64_t bx = std::min<int64_t>((ne0 + tx - 1) / tx, 1 << 20);
  const int64_t by = std::min<int64_t>((rows + ty - 1) / ty, kMaxGridY);
  return {dim3(static_cast<unsigned>(std::max<int64_t>(bx, 1)), static_cast<unsigned>(std::max<int64_t>(by, 1)), 1),
          dim3(static_cast<unsigned>(tx), static_cast<unsigned>(ty), 1)};
}

// Row kernels: one block per row (capped at 2^20 blocks; the kernel loops)
// of `threads` threads.
inline dim3 row_grid(int64_t rows) { return dim3(static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20)), 1, 1); }
// Threads for a block that reduces a row of n elements: one warp for short
// rows, up to 1024 for long ones (each thread at least ~8 elements).
inline int row_threads(int64_t n) {
  int t = 32;
  while (t < 1024 && static_cast<int64_t>(t) * 8 < n) t *= 2;
  return t;
}

// After every launch: a launch error (bad configuration, no kernel image for
// this device) becomes loom::Error naming the kernel and the node.
inline void check_launch(const char* kernel, const Tensor& node) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    const std::string what = std::string("launching ") + kernel + " for '" + node.name + "'";
    check(status, what.c_str());
  }
}

}  // namespace loom::cuda
