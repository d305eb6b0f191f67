// cpy / cont with type conversion, and concat (as backends/opencl/kernels/
// copy.cl and elementwise.cl's k_concat). The k-th element of the source in
// logical (row-major) order becomes the k-th of the destination.
#include "launchers.h"
#include "ops_util.cuh"
#include "quantize.cuh"

namespace loom::cuda {
namespace {

// Copies one element of `bytes` (2 or 4) bytes.
__device__ __forceinline__ void copy_elem(char* out, const char* in, int bytes) {
  if (bytes == 4) *reinterpret_cast<int32_t*>(out) = *reinterpret_cast<const int32_t*>(in);
  else *reinterpret_cast<uint16_t*>(out) = *reinterpret_cast<const uint16_t*>(in);
}

// Into a plain destination (F32, F16, BF16, or I32 from I32). Rows of d
// along y, elements along x. same_shape: s's index is d's; otherwise the
// logical index is unflattened over s's shape. raw_bytes > 0: the same
// type on both sides, moved as raw bytes (exact, NaN payloads too).
__global__ void k_cpy(TensorArg s, int s_type, TensorArg d, int d_type, int same_shape, int raw_bytes) {
  const int64_t rows = d.ne[1] * d.ne[2] * d.ne[3];
  const int64_t n = d.ne[0];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3;
    row_coords(d, r, i1, i2, i3);
    char* out = d.row(i1, i2, i3);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += step) {
      int64_t j0 = i0, j1 = i1, j2 = i2, j3 = i3;
      if (!same_shape) {
        int64_t k = r * n + i0;
        j0 = k % s.ne[0];
        k /= s.ne[0];
        j1 = k % s.ne[1];
        k /= s.ne[1];
        j2 = k % s.ne[2];
        j3 = k / s.ne[2];
      }
      const char* in_row = s.row(j1, j2, j3);
      if (raw_bytes > 0) {
        copy_elem(out + i0 * d.nb[0], in_row + j0 * s.nb[0], raw_bytes);
      } else {
        store_plain(out + i0 * d.nb[0], d_type, load_any(in_row, s_type, j0, s.nb[0]));
      }
    }
  }
}

// Into a quantized destination (rows of the same length on both sides): one
// thread per destination block. The same type: the block's bytes; otherwise
// 32 elements read (dequantized if need be) and quantized (quantize_block).
__global__ void k_cpy_q(TensorArg s, int s_type, TensorArg d, int d_type) {
  const int64_t rows = d.ne[1] * d.ne[2] * d.ne[3];
  const int64_t blocks = d.ne[0] / quant_block_elems(d_type);
  const int block_bytes = quant_block_bytes(d_type);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3, j1, j2, j3;
    row_coords(d, r, i1, i2, i3);
    row_coords(s, r, j1, j2, j3);  // the same row of the source
    const char* in = s.row(j1, j2, j3);
    char* out = d.row(i1, i2, i3);
    for (int64_t ib = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; ib < blocks; ib += step) {
      char* blk = out + ib * d.nb[0];
      if (s_type == d_type) {
        const char* src = in + ib * s.nb[0];
        for (int k = 0; k < block_bytes; ++k) blk[k] = src[k];
        continue;
      }
      float x[32];
      for (int k = 0; k < 32; ++k) x[k] = load_any(in, s_type, ib * 32 + k, s.nb[0]);
      quantize_block(x, blk, d_type);
    }
  }
}

// a and b joined along `dim`; elements of `bytes` (2 or 4) bytes copied raw.
__global__ void k_concat(TensorArg a, TensorArg b, TensorArg d, int dim, int bytes) {
  const int64_t rows = d.ne[1] * d.ne[2] * d.ne[3];
  const int64_t n = d.ne[0];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i[4];
    row_coords(d, r, i[1], i[2], i[3]);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += step) {
      int64_t j[4] = {i0, i[1], i[2], i[3]};
      const char* in;
      if (j[dim] < a.ne[dim]) {
        in = a.elem(j[0], j[1], j[2], j[3]);
      } else {
        j[dim] -= a.ne[dim];
        in = b.elem(j[0], j[1], j[2], j[3]);
      }
      copy_elem(d.elem(i0, i[1], i[2], i[3]), in, bytes);
    }
  }
}

}  // namespace

void launch_cpy(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* s = node.src[0];
  if (node.nelements() == 0) return;
  const int s_type = type_id(s->type), d_type = type_id(node.type);
  if (is_quant_type(d_type)) {
    const int64_t blocks = node.ne[0] / quant_block_elems(d_type);
    if (blocks == 0) return;
    const ElementGrid g = element_grid(blocks, node.nrows());
    k_cpy_q<<<g.grid, g.block, 0, ctx.stream>>>(arg(*s), s_type, arg(node), d_type);
    check_launch("k_cpy_q", node);
    return;
  }
  const bool same_shape = s->ne == node.ne;
  const int raw_bytes = s_type == d_type ? static_cast<int>(traits(node.type).type_size) : 0;
  const ElementGrid g = element_grid(node.ne[0], node.nrows());
  k_cpy<<<g.grid, g.block, 0, ctx.stream>>>(arg(*s), s_type, arg(node), d_type, same_shape ? 1 : 0, raw_bytes);
  check_launch("k_cpy", node);
}

void launch_concat(const Tensor& node, const LaunchContext& ctx) {
  if (node.nelements() == 0) return;
  const int dim = concat_params(node).dim;
  const int bytes = static_cast<int>(traits(node.type).type_size);
  const ElementGrid g = element_grid(node.ne[0], node.nrows());
  k_concat<<<g.grid, g.block, 0, ctx.stream>>>(arg(*node.src[0]), arg(*node.src[1]), arg(node), dim, bytes);
  check_launch("k_concat", node);
}

}  // namespace loom::cuda
