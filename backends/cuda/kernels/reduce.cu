// Row reductions on F32 rows (as backends/opencl/kernels/rows.cl and
// argsort.cl, the CPU's backends/cpu/kernels): sum_rows, argmax, rms_norm,
// norm and soft_max take one block per row (blockIdx.x strides over rows),
// its threads striding along the row and combining through warp shuffles
// and shared memory. argsort sorts a row in shared memory (bitonic, padded
// to a power of two) up to kArgsortSharedCols elements, and ranks elements
// by counting (O(n^2), tiled through shared memory) beyond that.
//
// In place (rms_norm, norm, soft_max may overwrite their operand): every
// read of the row that a reduction needs happens before the block's barrier,
// and afterwards each thread writes only the elements it read itself.
#include <cmath>

#include "launchers.h"
#include "ops_util.cuh"

namespace loom::cuda {
namespace {

__device__ __forceinline__ float load_f32(const char* row, int64_t i, int64_t nb0) {
  return *reinterpret_cast<const float*>(row + i * nb0);
}
__device__ __forceinline__ void store_f32(char* row, int64_t i, int64_t nb0, float v) {
  *reinterpret_cast<float*>(row + i * nb0) = v;
}

__global__ void k_sum_rows(TensorArg a, TensorArg d) {
  __shared__ float scratch[32];
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) sum += load_f32(in, i, a.nb[0]);
    sum = block_sum(sum, scratch);
    if (threadIdx.x == 0) store_f32(d.row(i1, i2, i3), 0, d.nb[0], sum);
  }
}

// The index of the first largest element (NaNs never win; a row of -inf
// and NaN gives 0), as the CPU's strict `v > best` scan from -inf. Row r of
// a goes to element r of d.
__global__ void k_argmax(TensorArg a, TensorArg d) {
  __shared__ float best_v[32];
  __shared__ int best_i[32];
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  const int none = 0x7fffffff;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    float v = -INFINITY;
    int idx = none;
    for (int64_t i = threadIdx.x; i < a.ne[0]; i += blockDim.x) {
      const float x = load_f32(in, i, a.nb[0]);
      if (x > v) {  // each thread sees its indices in increasing order
        v = x;
        idx = static_cast<int>(i);
      }
    }
    // Combine: the larger value, on a tie the smaller index.
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, v, o);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (ov > v || (ov == v && oi < idx)) {
        v = ov;
        idx = oi;
      }
    }
    if (blockDim.x > 32) {
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
      __syncthreads();
      if (lane == 0) {
        best_v[warp] = v;
        best_i[warp] = idx;
      }
      __syncthreads();
      v = lane < warps ? best_v[lane] : -INFINITY;
      idx = lane < warps ? best_i[lane] : none;
      for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(0xffffffffu, v, o);
        const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
        if (ov > v || (ov == v && oi < idx)) {
          v = ov;
          idx = oi;
        }
      }
    }
    if (threadIdx.x == 0) *reinterpret_cast<int32_t*>(d.data + r * d.nb[0]) = idx == none ? 0 : idx;
  }
}

// rms: x / sqrt(mean(x^2) + eps); otherwise (x - mean) / sqrt(var + eps).
__global__ void k_norm(TensorArg a, TensorArg d, int rms, float eps) {
  __shared__ float scratch[32];
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  const int64_t n = a.ne[0];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    char* out = d.row(i1, i2, i3);
    float mean = 0.0f;
    if (!rms) {
      float sum = 0.0f;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += load_f32(in, i, a.nb[0]);
      mean = block_sum(sum, scratch) / static_cast<float>(n);
    }
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const float x = load_f32(in, i, a.nb[0]) - mean;
      sum_sq = fmaf(x, x, sum_sq);
    }
    sum_sq = block_sum(sum_sq, scratch);
    const float s = 1.0f / sqrtf(sum_sq / static_cast<float>(n) + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) store_f32(out, i, d.nb[0], (load_f32(in, i, a.nb[0]) - mean) * s);
  }
}

// softmax(a * scale + mask) along the row; the mask row (F32 or F16,
// mask_type < 0: none) is (i1, i2 % m2, i3 % m3). With sinks, sinks[i2] is
// one more logit, in the max and the sum only. A row whose max is -inf
// (masked entirely) becomes zeros.
__global__ void k_soft_max(TensorArg a, TensorArg m, TensorArg sinks, TensorArg d, int mask_type, int has_sinks,
                           float scale) {
  __shared__ float scratch[32];
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  const int64_t n = a.ne[0];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    char* out = d.row(i1, i2, i3);
    const char* mrow = mask_type >= 0 ? m.row(i1, i2 % m.ne[2], i3 % m.ne[3]) : nullptr;
    float max = -INFINITY;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float x = __fmul_rn(load_f32(in, i, a.nb[0]), scale);
      if (mrow) x = __fadd_rn(x, load_plain(mrow + i * m.nb[0], mask_type));
      max = fmaxf(max, x);
    }
    max = block_max(max, scratch);
    const float sink = has_sinks ? *reinterpret_cast<const float*>(sinks.data + i2 * sinks.nb[0]) : -INFINITY;
    max = fmaxf(max, sink);
    if (max == -INFINITY) {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) store_f32(out, i, d.nb[0], 0.0f);
      continue;
    }
    // Each thread keeps exp(x - max) of its own elements in the output.
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float x = __fmul_rn(load_f32(in, i, a.nb[0]), scale);
      if (mrow) x = __fadd_rn(x, load_plain(mrow + i * m.nb[0], mask_type));
      const float e = expf(x - max);
      store_f32(out, i, d.nb[0], e);
      sum += e;
    }
    sum = block_sum(sum, scratch);
    if (has_sinks) sum += expf(sink - max);
    const float inv = 1.0f / sum;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float* p = reinterpret_cast<float*>(out + i * d.nb[0]);
      *p = *p * inv;
    }
  }
}

// ---- argsort ------------------------------------------------------------------------

// Whether (xa, ia) comes before (xb, ib): by value in the row's order, equal
// values by index (a stable sort), NaNs after every number, and padding
// (index >= n) after everything: a strict total order, so the sorted order
// is unique.
__device__ __forceinline__ bool sorts_before(float xa, int ia, float xb, int ib, int n, int descending) {
  const bool pa = ia >= n, pb = ib >= n;
  if (pa || pb) return pa && pb ? ia < ib : pb;
  const bool na = isnan(xa), nb = isnan(xb);
  if (na || nb) return na && nb ? ia < ib : nb;
  if (xa == xb) return ia < ib;
  return descending ? xa > xb : xa < xb;
}

// One block per row: the row (padded to npad, a power of two) in shared
// memory, sorted by a bitonic network; each thread handles pairs p, p +
// blockDim.x, ... of the npad / 2 compare-exchanges of a step.
__global__ void k_argsort_bitonic(TensorArg a, TensorArg d, int npad, int descending) {
  extern __shared__ float sort_smem[];
  float* val = sort_smem;
  int* idx = reinterpret_cast<int*>(sort_smem + npad);
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  const int n = static_cast<int>(a.ne[0]);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    for (int i = threadIdx.x; i < npad; i += blockDim.x) {
      val[i] = i < n ? load_f32(in, i, a.nb[0]) : 0.0f;
      idx[i] = i;
    }
    __syncthreads();
    for (int k = 2; k <= npad; k <<= 1) {
      for (int j = k >> 1; j > 0; j >>= 1) {
        for (int p = threadIdx.x; p < npad / 2; p += blockDim.x) {
          const int t = 2 * j * (p / j) + (p % j);  // the lower element of pair p
          const int l = t + j;
          const bool ascending_run = (t & k) == 0;
          const bool out_of_order = ascending_run ? sorts_before(val[l], idx[l], val[t], idx[t], n, descending)
                                                  : sorts_before(val[t], idx[t], val[l], idx[l], n, descending);
          if (out_of_order) {
            const float tv = val[t];
            val[t] = val[l];
            val[l] = tv;
            const int ti = idx[t];
            idx[t] = idx[l];
            idx[l] = ti;
          }
        }
        __syncthreads();
      }
    }
    char* out = d.row(i1, i2, i3);
    for (int i = threadIdx.x; i < n; i += blockDim.x) *reinterpret_cast<int32_t*>(out + i * d.nb[0]) = idx[i];
    __syncthreads();  // the next row reuses the shared arrays
  }
}

// Long rows: thread i of the row counts the elements that sort before
// element i (its rank) and writes i there. Blocks of kRankTile elements
// along x, rows along y; the row passes through shared memory in tiles.
constexpr int kRankTile = 256;

__global__ void k_argsort_rank(TensorArg a, TensorArg d, int descending) {
  __shared__ float tile[kRankTile];
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  const int n = static_cast<int>(a.ne[0]);
  const int i = static_cast<int>(blockIdx.x) * kRankTile + static_cast<int>(threadIdx.x);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    const float xi = i < n ? load_f32(in, i, a.nb[0]) : 0.0f;
    int rank = 0;
    for (int base = 0; base < n; base += kRankTile) {
      __syncthreads();
      const int jt = base + static_cast<int>(threadIdx.x);
      if (jt < n) tile[threadIdx.x] = load_f32(in, jt, a.nb[0]);
      __syncthreads();
      const int count = min(kRankTile, n - base);
      if (i < n)
        for (int t = 0; t < count; ++t) rank += sorts_before(tile[t], base + t, xi, i, n, descending) ? 1 : 0;
    }
    if (i < n) *reinterpret_cast<int32_t*>(d.elem(rank, i1, i2, i3)) = i;
  }
}

// Rows up to this many elements sort in shared memory (npad * 8 bytes).
constexpr int64_t kArgsortSharedCols = 4096;

}  // namespace

void launch_sum_rows(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  if (a->nrows() == 0) return;  // (empty rows: the kernel writes zeros)
  k_sum_rows<<<row_grid(a->nrows()), row_threads(a->ne[0]), 0, ctx.stream>>>(arg(*a), arg(node));
  check_launch("k_sum_rows", node);
}

void launch_argmax(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  if (a->nrows() == 0) return;  // (empty rows: the kernel writes 0)
  k_argmax<<<row_grid(a->nrows()), row_threads(a->ne[0]), 0, ctx.stream>>>(arg(*a), arg(node));
  check_launch("k_argmax", node);
}

void launch_norm(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  if (a->nelements() == 0) return;
  k_norm<<<row_grid(a->nrows()), row_threads(a->ne[0]), 0, ctx.stream>>>(arg(*a), arg(node), node.op == Op::RmsNorm,
                                                                          norm_params(node).eps);
  check_launch("k_norm", node);
}

void launch_soft_max(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  const Tensor* mask = node.src[1];
  const Tensor* sinks = node.src[2];
  if (a->nelements() == 0) return;
  k_soft_max<<<row_grid(a->nrows()), row_threads(a->ne[0]), 0, ctx.stream>>>(
      arg(*a), mask ? arg(*mask) : no_arg(), sinks ? arg(*sinks) : no_arg(), arg(node),
      mask ? type_id(mask->type) : -1, sinks ? 1 : 0, soft_max_params(node).scale);
  check_launch("k_soft_max", node);
}

void launch_argsort(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  if (a->nelements() == 0) return;
  const int descending = argsort_params(node).order == SortOrder::Descending ? 1 : 0;
  const int64_t n = a->ne[0];
  if (n <= kArgsortSharedCols) {
    int npad = 1;
    while (npad < n) npad *= 2;
    const int threads = static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, npad / 2)));
    const size_t smem = static_cast<size_t>(npad) * (sizeof(float) + sizeof(int));
    k_argsort_bitonic<<<row_grid(a->nrows()), threads, smem, ctx.stream>>>(arg(*a), arg(node), npad, descending);
    check_launch("k_argsort_bitonic", node);
    return;
  }
  const dim3 grid(static_cast<unsigned>((n + kRankTile - 1) / kRankTile),
                  static_cast<unsigned>(std::min<int64_t>(a->nrows(), kMaxGridY)), 1);
  k_argsort_rank<<<grid, kRankTile, 0, ctx.stream>>>(arg(*a), arg(node), descending);
  check_launch("k_argsort_rank", node);
}

}  // namespace loom::cuda
