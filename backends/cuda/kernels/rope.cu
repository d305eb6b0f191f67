// rope, normal and NeoX modes, optional freq factors (as backends/opencl/
// kernels/rows.cl's k_rope and the CPU's compute_rope): pair k of the first
// n_dims elements turns by theta = freq_scale * position * inv_freq[k],
// inv_freq[k] = base^(-2k / n_dims) / factor[k]; normal mode pairs (2k,
// 2k+1), NeoX (k, k + n_dims / 2); cos and sin are scaled by attn_factor;
// elements past n_dims pass through. The position of row (i1, i2, i3) is
// positions[i2].
//
// The CPU computes in f32 with glibc's powf/cosf/sinf (within about half an
// ulp); here pow, cos and sin are taken in f64 and rounded once to f32 (the
// nearest f32, so at most a last-bit difference where glibc's is not), and
// the f32 products and sums are rounded one at a time as on the CPU.
#include "launchers.h"
#include "ops_util.cuh"

namespace loom::cuda {
namespace {

// Rows of a along y; along x, k < n_dims / 2 rotates pair k and the others
// copy element n_dims + (k - n_dims / 2). Each thread reads its elements
// before writing the same elements (in place is fine).
__global__ void k_rope(TensorArg a, TensorArg pos, TensorArg ff, TensorArg d, int n_dims, int neox, int has_ff,
                       float base, float freq_scale, float mscale) {
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  const int half = n_dims / 2;
  const int64_t items = half + (a.ne[0] - n_dims);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3;
    row_coords(a, r, i1, i2, i3);
    const char* in = a.row(i1, i2, i3);
    char* out = d.row(i1, i2, i3);
    const int position = *reinterpret_cast<const int32_t*>(pos.data + i2 * pos.nb[0]);
    for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < items; k += step) {
      if (k >= half) {
        const int64_t j = n_dims + (k - half);
        *reinterpret_cast<float*>(out + j * d.nb[0]) = *reinterpret_cast<const float*>(in + j * a.nb[0]);
        continue;
      }
      // inv_freq = powf(base, -2.0f * k / n_dims) (the exponent in f32, as the CPU).
      const float exponent = __fdiv_rn(-2.0f * static_cast<float>(k), static_cast<float>(n_dims));
      float inv_freq = static_cast<float>(pow(static_cast<double>(base), static_cast<double>(exponent)));
      if (has_ff) inv_freq = __fdiv_rn(inv_freq, *reinterpret_cast<const float*>(ff.data + k * ff.nb[0]));
      const float theta = __fmul_rn(__fmul_rn(freq_scale, static_cast<float>(position)), inv_freq);
      double sd, cd;
      sincos(static_cast<double>(theta), &sd, &cd);
      const float c = __fmul_rn(static_cast<float>(cd), mscale);
      const float s = __fmul_rn(static_cast<float>(sd), mscale);
      const int64_t j0 = neox ? k : 2 * k;
      const int64_t j1 = neox ? k + half : 2 * k + 1;
      const float x0 = *reinterpret_cast<const float*>(in + j0 * a.nb[0]);
      const float x1 = *reinterpret_cast<const float*>(in + j1 * a.nb[0]);
      *reinterpret_cast<float*>(out + j0 * d.nb[0]) = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
      *reinterpret_cast<float*>(out + j1 * d.nb[0]) = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    }
  }
}

}  // namespace

void launch_rope(const Tensor& node, const LaunchContext& ctx) {
  const Tensor* a = node.src[0];
  const Tensor* positions = node.src[1];
  const Tensor* factors = node.src[2];
  const RopeParams p = rope_params(node);
  const int n_dims = p.n_dims > 0 ? p.n_dims : static_cast<int>(a->ne[0]);  // ops.cpp stores it resolved
  const int64_t items = n_dims / 2 + (a->ne[0] - n_dims);
  if (a->nelements() == 0 || items <= 0) return;
  const ElementGrid g = element_grid(items, a->nrows());
  k_rope<<<g.grid, g.block, 0, ctx.stream>>>(arg(*a), arg(*positions), factors ? arg(*factors) : no_arg(), arg(node),
                                             n_dims, p.mode == RopeMode::NeoX ? 1 : 0, factors ? 1 : 0, p.freq_base,
                                             p.freq_scale, p.attn_factor);
  check_launch("k_rope", node);
}

}  // namespace loom::cuda
