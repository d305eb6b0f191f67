// flash_attn_ext (loom/ops.h): for each query row r, head h and batch b,
// softmax(softcap(scale * K^T q) + slope * mask) V, with an online softmax
// so the logits never leave shared memory.
//
// One block of kWarps warps per (r, h, b). q sits in shared memory. KV rows
// go in tiles of kTile: warp w scores rows w, w + kWarps, ... of the tile
// (lanes split the head dimension, warp_sum), then every thread takes the
// tile's max, rescales its running sums and accumulates V for its output
// elements i = tid, tid + kThreads, ... (at most kPerThread of them). K and
// V are f32, f16, bf16 (any strides) or a quantized type (rows of whole
// blocks), read element by element; query head h reads KV head
// h / (n_head / n_head_kv) and KV batch b / (ne3 / k3) (as the reference).
// A row masked entirely gives zeros.
//
// Few (row, head, batch) units and many KV rows (decoding): the KV rows are
// split over `splits` blocks per unit, each leaving its running max, sum and
// unnormalized V sums in scratch slot 0, and k_flash_attn_combine merges them.
#include <algorithm>

#include "common.cuh"
#include "launchers.h"
#include "loom/op_params.h"
#include "quants.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTile = 32;       // KV rows per tile
constexpr int kMaxHead = 512;   // head sizes of q/k and of v (as OpenCL)
constexpr int kPerThread = kMaxHead / kThreads;

bool is_plain_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool readable(DType t) { return is_plain_float(t) || is_quant_type(type_id(t)); }

// Element i of a K or V row of type `type` (nb0: the element stride of plain types).
__device__ __forceinline__ float load_kv(const char* row, int type, int64_t i, int64_t nb0) {
  if (type == static_cast<int>(DType::F32)) return *reinterpret_cast<const float*>(row + i * nb0);
  if (type == static_cast<int>(DType::F16)) return load_f16(row + i * nb0);
  if (type == static_cast<int>(DType::BF16)) return load_bf16(row + i * nb0);
  const int be = quant_block_elems(type), bb = quant_block_bytes(type);
  return dequant_elem(type, row + (i / be) * bb, static_cast<int>(i % be));
}

__device__ __forceinline__ float load_mask(const char* p, int type) {
  return type == static_cast<int>(DType::F16) ? load_f16(p) : *reinterpret_cast<const float*>(p);
}

// grid (n_q * n_head * ne3, splits), block kThreads. mask_type < 0: no mask.
// Block (x, y) covers KV rows [y * kv_chunk, (y + 1) * kv_chunk) of unit x.
// partial == nullptr (one split): the result goes to d. Else unit x, split y
// writes {max, sum, acc[0..Dv)} at partial + (x * splits + y) * (2 + Dv).
__global__ void __launch_bounds__(kThreads)
    k_flash_attn(TensorArg q, TensorArg k, int k_type, TensorArg v, int v_type, TensorArg m, int mask_type,
                 TensorArg d, float scale, float max_bias, float softcap, int64_t kv_chunk, float* partial) {
  __shared__ float qs[kMaxHead];
  __shared__ float scores[kTile];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int64_t H = q.ne[2], n_q = q.ne[1];
  const int64_t idx = blockIdx.x;
  const int64_t h = idx % H, r = (idx / H) % n_q, b = idx / (H * n_q);
  const int64_t D = q.ne[0], Dv = v.ne[0];
  const int64_t kv_begin = static_cast<int64_t>(blockIdx.y) * kv_chunk;
  const int64_t n_kv = min(k.ne[1], kv_begin + kv_chunk);  // this block's end
  const int64_t hk = h / (H / k.ne[2]), bk = b / (q.ne[3] / k.ne[3]);

  float slope = 1.0f;
  if (max_bias > 0.0f) {
    int64_t n2 = 1;
    while (n2 * 2 <= H) n2 *= 2;
    const float m0 = powf(2.0f, -max_bias / static_cast<float>(n2));
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / static_cast<float>(n2));
    slope = h < n2 ? powf(m0, static_cast<float>(h + 1)) : powf(m1, static_cast<float>(2 * (h - n2) + 1));
  }
  const bool capped = softcap > 0.0f;
  const float sc = capped ? scale / softcap : scale;

  for (int64_t i = tid; i < D; i += kThreads) qs[i] = *reinterpret_cast<const float*>(q.elem(i, r, h, b));
  const char* mrow = mask_type >= 0 ? m.row(r, h % m.ne[2], b % m.ne[3]) : nullptr;
  __syncthreads();

  float acc[kPerThread];
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) acc[e] = 0.0f;
  float run_max = -INFINITY, run_sum = 0.0f;

  for (int64_t j0 = kv_begin; j0 < n_kv; j0 += kTile) {
    // Scores of the tile, one warp per KV row.
    for (int jj = warp; jj < kTile; jj += kWarps) {
      const int64_t j = j0 + jj;
      float s = -INFINITY;
      if (j < n_kv) {
        const float mv = mrow ? load_mask(mrow + j * m.nb[0], mask_type) : 0.0f;
        if (mv != -INFINITY) {
          const char* krow = k.row(j, hk, bk);
          float dot = 0.0f;
          for (int64_t i = lane; i < D; i += 32) dot += qs[i] * load_kv(krow, k_type, i, k.nb[0]);
          dot = warp_sum(dot);
          s = dot * sc;
          if (capped) s = softcap * tanhf(s);
          s += slope * mv;
        }
      }
      if (lane == 0) scores[jj] = s;
    }
    __syncthreads();
    float tile_max = -INFINITY;
    for (int jj = 0; jj < kTile; ++jj) tile_max = fmaxf(tile_max, scores[jj]);
    if (tile_max != -INFINITY) {  // the same for every thread of the block
      const float new_max = fmaxf(run_max, tile_max);
      const float c = run_max == -INFINITY ? 0.0f : expf(run_max - new_max);
      run_max = new_max;
      run_sum *= c;
#pragma unroll
      for (int e = 0; e < kPerThread; ++e) acc[e] *= c;
      const int nt = static_cast<int>(min(static_cast<int64_t>(kTile), n_kv - j0));
      for (int jj = 0; jj < nt; ++jj) {
        const float s = scores[jj];
        if (s == -INFINITY) continue;
        const float p = expf(s - new_max);
        run_sum += p;
        const char* vrow = v.row(j0 + jj, hk, bk);
#pragma unroll
        for (int e = 0; e < kPerThread; ++e) {
          const int64_t i = tid + static_cast<int64_t>(e) * kThreads;
          if (i < Dv) acc[e] += p * load_kv(vrow, v_type, i, v.nb[0]);
        }
      }
    }
    __syncthreads();  // scores is rewritten by the next tile
  }

  if (partial) {
    float* part = partial + (idx * gridDim.y + blockIdx.y) * (2 + Dv);
    if (tid == 0) {
      part[0] = run_max;
      part[1] = run_sum;
    }
#pragma unroll
    for (int e = 0; e < kPerThread; ++e) {
      const int64_t i = tid + static_cast<int64_t>(e) * kThreads;
      if (i < Dv) part[2 + i] = acc[e];
    }
    return;
  }
  const float inv = run_sum > 0.0f ? 1.0f / run_sum : 0.0f;
  char* out = d.row(h, r, b);
#pragma unroll
  for (int e = 0; e < kPerThread; ++e) {
    const int64_t i = tid + static_cast<int64_t>(e) * kThreads;
    if (i < Dv) *reinterpret_cast<float*>(out + i * d.nb[0]) = acc[e] * inv;
  }
}

// grid (n_q * n_head * ne3), block kThreads: merges the splits of each unit
// (k_flash_attn's partial results); splits that saw no row have max -inf.
__global__ void __launch_bounds__(kThreads)
    k_flash_attn_combine(const float* partial, int splits, TensorArg d, int64_t H, int64_t n_q) {
  const int64_t idx = blockIdx.x, Dv = d.ne[0], stride = 2 + Dv;
  const int64_t h = idx % H, r = (idx / H) % n_q, b = idx / (H * n_q);
  const float* part = partial + idx * splits * stride;
  float mx = -INFINITY;
  for (int sp = 0; sp < splits; ++sp) mx = fmaxf(mx, part[sp * stride]);
  float sum = 0.0f;
  for (int sp = 0; sp < splits; ++sp) {
    const float ms = part[sp * stride];
    if (ms != -INFINITY) sum += part[sp * stride + 1] * expf(ms - mx);
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  char* out = d.row(h, r, b);
  for (int64_t i = threadIdx.x; i < Dv; i += kThreads) {
    float acc = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
      const float ms = part[sp * stride];
      if (ms != -INFINITY) acc += part[sp * stride + 2 + i] * expf(ms - mx);
    }
    *reinterpret_cast<float*>(out + i * d.nb[0]) = acc * inv;
  }
}

}  // namespace

bool supports_flash_attn(const Tensor& node) {
  const Tensor* q = node.src[0];
  const Tensor* k = node.src[1];
  const Tensor* v = node.src[2];
  const Tensor* mask = node.src[3];
  if (!q || !k || !v) return false;
  const auto rows_ok = [](const Tensor& t) { return !is_quant_type(type_id(t.type)) || t.has_contiguous_rows(); };
  return node.type == DType::F32 && q->type == DType::F32 && readable(k->type) && readable(v->type) && rows_ok(*k) &&
         rows_ok(*v) && q->ne[0] <= kMaxHead && v->ne[0] <= kMaxHead &&
         (!mask || ((mask->type == DType::F32 || mask->type == DType::F16) && mask->has_contiguous_rows()));
}

void launch_flash_attn(const Tensor& node, const LaunchContext& ctx) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  const Tensor* mask = node.src[3];
  if (node.nelements() == 0) return;
  const FlashAttnParams fp = flash_attn_params(node);
  const int64_t units = q.ne[1] * q.ne[2] * q.ne[3], n_kv = k.ne[1];
  // Split the KV rows when the units alone would leave most multiprocessors
  // idle: enough splits for about two blocks per multiprocessor, each of at
  // least kMinSplitRows rows (whole tiles).
  constexpr int64_t kMinSplitRows = 256;
  int64_t splits = 1;
  if (units < 2 * static_cast<int64_t>(ctx.sm_count) && n_kv >= 2 * kMinSplitRows)
    splits = std::min((2 * ctx.sm_count + units - 1) / units, n_kv / kMinSplitRows);
  int64_t chunk = (n_kv + splits - 1) / splits;
  chunk = std::max<int64_t>(kTile, (chunk + kTile - 1) / kTile * kTile);
  splits = std::max<int64_t>(1, (n_kv + chunk - 1) / chunk);
  float* partial = nullptr;
  if (splits > 1)
    partial = static_cast<float*>(
        ctx.scratch->get(0, static_cast<size_t>(units * splits * (2 + v.ne[0])) * sizeof(float)));
  const dim3 grid(static_cast<unsigned>(units), static_cast<unsigned>(splits));
  k_flash_attn<<<grid, kThreads, 0, ctx.stream>>>(arg(q), arg(k), type_id(k.type), arg(v), type_id(v.type),
                                                  mask ? arg(*mask) : no_arg(), mask ? type_id(mask->type) : -1,
                                                  arg(node), fp.scale, fp.max_bias, fp.softcap,
                                                  splits > 1 ? chunk : std::max<int64_t>(n_kv, 1), partial);
  check(cudaGetLastError(), "launching k_flash_attn");
  if (splits > 1) {
    k_flash_attn_combine<<<static_cast<unsigned>(units), kThreads, 0, ctx.stream>>>(
        partial, static_cast<int>(splits), arg(node), q.ne[2], q.ne[1]);
    check(cudaGetLastError(), "launching k_flash_attn_combine");
  }
}

}  // namespace loom::cuda
