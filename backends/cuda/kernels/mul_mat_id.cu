// mul_mat_id (loom/ops.h): d[i, s, t] = dot(row i of expert ids[s, t] of
// as, b[:, s % b.ne1, t]). One warp per output row per (s, t), the expert
// id read on the device: an id outside [0, n_expert) is reported
// (report_error) and its column left unwritten, with no read of as.
// Weights f32, f16, bf16 or any quantized type (one 32-element chunk per
// lane); b and ids with any strides.
#include <algorithm>
#include <string>

#include "common.cuh"
#include "launchers.h"
#include "quants.cuh"

namespace loom::cuda {
namespace {

constexpr int kWarps = 4;  // rows of as per block
constexpr int64_t kMaxGridY = 65535;

template <DType T>
__device__ __forceinline__ float load_weight(const char* p) {
  if constexpr (T == DType::F32) return *reinterpret_cast<const float*>(p);
  else if constexpr (T == DType::F16) return load_f16(p);
  else return load_bf16(p);
}

// grid (ceil(M / kWarps), min(n_used * n_tokens, kMaxGridY)), block 32 * kWarps.
template <DType T>
__global__ void __launch_bounds__(32 * kWarps)
    k_mul_mat_id(TensorArg as, TensorArg b, TensorArg ids, TensorArg d, int* errors, int label) {
  const int lane = threadIdx.x % 32;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (i >= as.ne[1]) return;  // the whole warp; no block-wide barriers
  const int64_t K = as.ne[0], n_used = ids.ne[0], total = ids.ne[0] * ids.ne[1];
  const int64_t bnb0 = b.nb[0];
  for (int64_t z = blockIdx.y; z < total; z += gridDim.y) {
    const int64_t s = z % n_used, t = z / n_used;
    const int e = *reinterpret_cast<const int32_t*>(ids.elem(s, t, 0, 0));
    if (e < 0 || e >= as.ne[2]) {
      if (lane == 0 && i == 0) report_error(errors, label, e);
      continue;
    }
    const char* arow = as.row(i, e, 0);
    const char* bcol = b.row(s % b.ne[1], t, 0);
    float acc = 0.0f;
    if constexpr (is_quant_type(static_cast<int>(T))) {
      for (int64_t ch = lane; ch < K / 32; ch += 32) {
        float w[32];
        dequant_row_chunk32<T>(arow, ch, w);
        const char* bp = bcol + ch * 32 * bnb0;
#pragma unroll
        for (int j = 0; j < 32; ++j) acc += w[j] * *reinterpret_cast<const float*>(bp + j * bnb0);
      }
    } else {
      constexpr int64_t es = T == DType::F32 ? 4 : 2;
      for (int64_t k = lane; k < K; k += 32)
        acc += load_weight<T>(arow + k * es) * *reinterpret_cast<const float*>(bcol + k * bnb0);
    }
    acc = warp_sum(acc);
    if (lane == 0) *reinterpret_cast<float*>(d.row(s, t, 0) + i * d.nb[0]) = acc;
  }
}

}  // namespace

bool supports_mul_mat_id(const Tensor& node) {
  const Tensor* as = node.src[0];
  const Tensor* b = node.src[1];
  const Tensor* ids = node.src[2];
  if (!as || !b || !ids) return false;
  const DType t = as->type;
  return node.type == DType::F32 && b->type == DType::F32 && ids->type == DType::I32 && as->has_contiguous_rows() &&
         (t == DType::F32 || t == DType::F16 || t == DType::BF16 || is_quant_type(type_id(t)));
}

void launch_mul_mat_id(const Tensor& node, const LaunchContext& ctx) {
  const Tensor& as = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  const int64_t total = ids.ne[0] * ids.ne[1];
  if (node.nelements() == 0 || total == 0) return;
  const int label = ctx.error_label("mul_mat_id '" + node.name + "': expert id of '" + ids.name + "' outside [0, " +
                                    std::to_string(as.ne[2]) + ")");
  const dim3 grid(blocks_for(as.ne[1], kWarps), static_cast<unsigned>(std::min(total, kMaxGridY)));
  const dim3 block(32 * kWarps);
  auto go = [&](auto tag) {
    constexpr DType T = decltype(tag)::value;
    k_mul_mat_id<T><<<grid, block, 0, ctx.stream>>>(arg(as), arg(b), arg(ids), arg(node), ctx.errors, label);
  };
  if (!dispatch_quant_type(type_id(as.type), go)) {
    switch (as.type) {
      case DType::F32: go(std::integral_constant<DType, DType::F32>{}); break;
      case DType::F16: go(std::integral_constant<DType, DType::F16>{}); break;
      default: go(std::integral_constant<DType, DType::BF16>{}); break;
    }
  }
  check(cudaGetLastError(), "launching k_mul_mat_id");
}

}  // namespace loom::cuda
