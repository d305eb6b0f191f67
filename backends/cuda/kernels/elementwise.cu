// Element-wise F32 kernels (as backends/opencl/kernels/elementwise.cl, with
// the CPU's formulas, backends/cpu/kernels/elementwise.cpp): add, sub, mul,
// div with b repeating along every dim where it is smaller, and the unary
// ops. Products and sums are rounded one at a time (__fmul_rn, __fadd_rn),
// as the CPU computes them. Every element is read and written by the same
// thread, so a result may take over its operand's memory (in place).
#include "launchers.h"
#include "ops_util.cuh"

namespace loom::cuda {
namespace {

enum BinaryOp : int { kAdd, kSub, kMul, kDiv };
enum UnaryOp : int { kScale, kSqr, kSqrt, kSilu, kGelu, kRelu, kTanh, kSigmoid, kClamp };

template <int OP>
__device__ __forceinline__ float binary_value(float x, float y) {
  if constexpr (OP == kAdd) return __fadd_rn(x, y);
  else if constexpr (OP == kSub) return __fsub_rn(x, y);
  else if constexpr (OP == kMul) return __fmul_rn(x, y);
  else return __fdiv_rn(x, y);
}

// p0, p1: scale's factor and bias, or clamp's min and max.
template <int OP>
__device__ __forceinline__ float unary_value(float x, float p0, float p1) {
  if constexpr (OP == kScale) {
    return __fadd_rn(__fmul_rn(x, p0), p1);
  } else if constexpr (OP == kSqr) {
    return __fmul_rn(x, x);
  } else if constexpr (OP == kSqrt) {
    return __fsqrt_rn(x);
  } else if constexpr (OP == kSilu) {
    return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x)));
  } else if constexpr (OP == kGelu) {  // tanh approximation, as the CPU
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const float inner = __fmul_rn(__fmul_rn(kSqrt2OverPi, x), __fadd_rn(1.0f, __fmul_rn(__fmul_rn(0.044715f, x), x)));
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(inner)));
  } else if constexpr (OP == kRelu) {
    return x > 0.0f ? x : 0.0f;
  } else if constexpr (OP == kTanh) {
    return tanhf(x);
  } else if constexpr (OP == kSigmoid) {
    return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
  } else {  // clamp as std::min(std::max(x, lo), hi): a NaN stays NaN
    const float y = x < p0 ? p0 : x;
    return p1 < y ? p1 : y;
  }
}

// Rows of d along y, elements along x; b's indices wrap modulo its sizes.
template <int OP>
__global__ void k_binary(TensorArg a, TensorArg b, TensorArg d) {
  const int64_t rows = d.ne[1] * d.ne[2] * d.ne[3];
  const int64_t n = d.ne[0];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3;
    row_coords(d, r, i1, i2, i3);
    const char* ar = a.row(i1, i2, i3);
    const char* br = b.row(i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    char* dr = d.row(i1, i2, i3);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += step) {
      const int64_t j0 = i0 < b.ne[0] ? i0 : i0 % b.ne[0];
      const float x = *reinterpret_cast<const float*>(ar + i0 * a.nb[0]);
      const float y = *reinterpret_cast<const float*>(br + j0 * b.nb[0]);
      *reinterpret_cast<float*>(dr + i0 * d.nb[0]) = binary_value<OP>(x, y);
    }
  }
}

template <int OP>
__global__ void k_unary(TensorArg a, TensorArg d, float p0, float p1) {
  const int64_t rows = d.ne[1] * d.ne[2] * d.ne[3];
  const int64_t n = d.ne[0];
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t r = first_row(); r < rows; r += row_step()) {
    int64_t i1, i2, i3;
    row_coords(d, r, i1, i2, i3);
    const char* ar = a.row(i1, i2, i3);
    char* dr = d.row(i1, i2, i3);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i0 < n; i0 += step) {
      const float x = *reinterpret_cast<const float*>(ar + i0 * a.nb[0]);
      *reinterpret_cast<float*>(dr + i0 * d.nb[0]) = unary_value<OP>(x, p0, p1);
    }
  }
}

template <int OP>
void run_binary(const Tensor& node, const LaunchContext& ctx, const char* name) {
  const ElementGrid g = element_grid(node.ne[0], node.nrows());
  k_binary<OP><<<g.grid, g.block, 0, ctx.stream>>>(arg(*node.src[0]), arg(*node.src[1]), arg(node));
  check_launch(name, node);
}

template <int OP>
void run_unary(const Tensor& node, const LaunchContext& ctx, const char* name, float p0, float p1) {
  const ElementGrid g = element_grid(node.ne[0], node.nrows());
  k_unary<OP><<<g.grid, g.block, 0, ctx.stream>>>(arg(*node.src[0]), arg(node), p0, p1);
  check_launch(name, node);
}

}  // namespace

void launch_binary(const Tensor& node, const LaunchContext& ctx) {
  if (node.nelements() == 0) return;
  switch (node.op) {
    case Op::Add: return run_binary<kAdd>(node, ctx, "k_binary<add>");
    case Op::Sub: return run_binary<kSub>(node, ctx, "k_binary<sub>");
    case Op::Mul: return run_binary<kMul>(node, ctx, "k_binary<mul>");
    case Op::Div: return run_binary<kDiv>(node, ctx, "k_binary<div>");
    default: return;
  }
}

void launch_unary(const Tensor& node, const LaunchContext& ctx) {
  if (node.nelements() == 0) return;
  switch (node.op) {
    case Op::Scale: {
      const ScaleParams p = scale_params(node);
      return run_unary<kScale>(node, ctx, "k_unary<scale>", p.scale, p.bias);
    }
    case Op::Sqr: return run_unary<kSqr>(node, ctx, "k_unary<sqr>", 0.0f, 0.0f);
    case Op::Sqrt: return run_unary<kSqrt>(node, ctx, "k_unary<sqrt>", 0.0f, 0.0f);
    case Op::Silu: return run_unary<kSilu>(node, ctx, "k_unary<silu>", 0.0f, 0.0f);
    case Op::Gelu: return run_unary<kGelu>(node, ctx, "k_unary<gelu>", 0.0f, 0.0f);
    case Op::Relu: return run_unary<kRelu>(node, ctx, "k_unary<relu>", 0.0f, 0.0f);
    case Op::Tanh: return run_unary<kTanh>(node, ctx, "k_unary<tanh>", 0.0f, 0.0f);
    case Op::Sigmoid: return run_unary<kSigmoid>(node, ctx, "k_unary<sigmoid>", 0.0f, 0.0f);
    case Op::Clamp: {
      const ClampParams p = clamp_params(node);
      return run_unary<kClamp>(node, ctx, "k_unary<clamp>", p.min, p.max);
    }
    default: return;
  }
}

}  // namespace loom::cuda
