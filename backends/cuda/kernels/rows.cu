// get_rows and set_rows (as backends/opencl/kernels/rows.cl). A row index
// outside the table is reported (report_error) and its row skipped: nothing
// is read or written out of bounds.
#include <string>

#include "launchers.h"
#include "ops_util.cuh"
#include "quantize.cuh"

namespace loom::cuda {
namespace {

// d[:, i10, i11, i12] = a[:, idx[i10, i11, i12], i11, i12] as F32; a of any
// readable type. Rows of d (idx.ne0 * idx.ne1 * idx.ne2 of them) along y.
__global__ void k_get_rows(TensorArg a, int a_type, TensorArg idx, TensorArg d, int* errors, int label) {
  const int64_t rows = idx.ne[0] * idx.ne[1] * idx.ne[2];
  const int64_t n = d.ne[0];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    const int64_t i10 = r % idx.ne[0], i11 = r / idx.ne[0] % idx.ne[1], i12 = r / (idx.ne[0] * idx.ne[1]);
    const int row = *reinterpret_cast<const int32_t*>(idx.data + i10 * idx.nb[0] + i11 * idx.nb[1] + i12 * idx.nb[2]);
    if (row < 0 || row >= a.ne[1]) {
      if (blockIdx.x == 0 && threadIdx.x == 0) report_error(errors, label, row);
      continue;
    }
    const char* in = a.row(row, i11, i12);
    char* out = d.row(i10, i11, i12);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += step)
      *reinterpret_cast<float*>(out + i0 * d.nb[0]) = load_any(in, a_type, i0, a.nb[0]);
  }
}

// d[:, idx[i1, i2, i3], i2, i3] = s[:, i1, i2, i3] (F32) for a plain d.
__global__ void k_set_rows(TensorArg s, TensorArg idx, TensorArg d, int d_type, int* errors, int label) {
  const int64_t rows = s.ne[1] * s.ne[2] * s.ne[3];
  const int64_t n = s.ne[0];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3;
    row_coords(s, r, i1, i2, i3);
    const int row = *reinterpret_cast<const int32_t*>(idx.data + i1 * idx.nb[0] + i2 * idx.nb[1] + i3 * idx.nb[2]);
    if (row < 0 || row >= d.ne[1]) {
      if (blockIdx.x == 0 && threadIdx.x == 0) report_error(errors, label, row);
      continue;
    }
    const char* in = s.row(i1, i2, i3);
    char* out = d.row(row, i2, i3);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += step)
      store_plain(out + i0 * d.nb[0], d_type, *reinterpret_cast<const float*>(in + i0 * s.nb[0]));
  }
}

// As k_set_rows into a type quantize_block writes: one thread per 32-element
// block of the row (s.ne0 / 32 of them) along x.
__global__ void k_set_rows_q(TensorArg s, TensorArg idx, TensorArg d, int d_type, int* errors, int label) {
  const int64_t rows = s.ne[1] * s.ne[2] * s.ne[3];
  const int64_t blocks = s.ne[0] / 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3;
    row_coords(s, r, i1, i2, i3);
    const int row = *reinterpret_cast<const int32_t*>(idx.data + i1 * idx.nb[0] + i2 * idx.nb[1] + i3 * idx.nb[2]);
    if (row < 0 || row >= d.ne[1]) {
      if (blockIdx.x == 0 && threadIdx.x == 0) report_error(errors, label, row);
      continue;
    }
    const char* in = s.row(i1, i2, i3);
    char* out = d.row(row, i2, i3);
    for (int64_t ib = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; ib < blocks; ib += step) {
      float x[32];
      for (int j = 0; j < 32; ++j) x[j] = *reinterpret_cast<const float*>(in + (ib * 32 + j) * s.nb[0]);
      quantize_block(x, out + ib * d.nb[0], d_type);
    }
  }
}

}  // namespace

void launch_get_rows(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  const Tensor* idx = node.src[1];
  const int64_t rows = idx->ne[0] * idx->ne[1] * idx->ne[2];
  if (node.nelements() == 0 || rows == 0) return;
  const int label = ctx.error_label("get_rows '" + node.name + "' from '" + a->name + "' (" +
                                    std::to_string(a->ne[1]) + " rows)");
  const ElementGrid g = element_grid(node.ne[0], rows);
  k_get_rows<<<g.grid, g.block, 0, ctx.stream>>>(arg(*a), type_id(a->type), arg(*idx), arg(node), ctx.errors, label);
  check_launch("k_get_rows", node);
}

void launch_set_rows(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* s = node.src[0];
  const Tensor* idx = node.src[1];
  if (s->nelements() == 0) return;
  const Tensor* target = node.view_src ? node.view_src : &node;
  const int label = ctx.error_label("set_rows '" + node.name + "' into '" + target->name + "' (" +
                                    std::to_string(node.ne[1]) + " rows)");
  if (can_quantize_type(type_id(node.type))) {
    if (s->ne[0] < 32) return;
    const ElementGrid g = element_grid(s->ne[0] / 32, s->nrows());
    k_set_rows_q<<<g.grid, g.block, 0, ctx.stream>>>(arg(*s), arg(*idx), arg(node), type_id(node.type), ctx.errors,
                                                     label);
    check_launch("k_set_rows_q", node);
    return;
  }
  const ElementGrid g = element_grid(s->ne[0], s->nrows());
  k_set_rows<<<g.grid, g.block, 0, ctx.stream>>>(arg(*s), arg(*idx), arg(node), type_id(node.type), ctx.errors,
                                                 label);
  check_launch("k_set_rows", node);
}

}  // namespace loom::cuda
