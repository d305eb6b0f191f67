// What the CUDA kernels can run (kernel_supports) and how a node is launched
// (launch_node), the two functions cuda_launch.h asks of the kernels. The
// conditions are OpenCL's (backends/opencl/opencl_ops.cpp kernel_supports),
// op for op: the same types and layouts, so both GPU backends take the same
// nodes. mul_mat, mul_mat_id and flash_attn_ext decide for themselves
// (supports_* in their files).
#include "launchers.h"
#include "loom/op_params.h"

namespace loom::cuda {
namespace {

bool is_plain_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_quantized(DType t) { return traits(t).is_quantized; }
// The quantized types kernels also write (quantize.cuh); the others are only read.
bool can_quantize(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1;
}
// Quantized tensors must step whole blocks along dim 0.
bool rows_ok(const Tensor& t) { return !is_quantized(t.type) || t.has_contiguous_rows(); }

}  // namespace

bool kernel_supports(const Tensor& node) {
  if (!op_has_kernel(node.op)) return static_cast<size_t>(node.op) < kOpCount;  // nothing to run
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  switch (node.op) {
    case Op::GetRows:
      return node.type == DType::F32 && (is_plain_float(a->type) || is_quantized(a->type)) && rows_ok(*a) &&
             b->type == DType::I32;
    case Op::SetRows:
      return a->type == DType::F32 && b->type == DType::I32 &&
             (is_plain_float(node.type) || can_quantize(node.type)) && rows_ok(node);
    case Op::Cpy:
    case Op::Cont: {
      const DType s = a->type, d = node.type;
      if (!rows_ok(*a) || !rows_ok(node)) return false;
      if (s == DType::I32 || d == DType::I32) return s == d;
      if (is_quantized(d)) return a->ne[0] == node.ne[0] && (s == d || can_quantize(d));
      if (is_quantized(s)) return a->ne[0] == node.ne[0];
      return is_plain_float(s) && is_plain_float(d);
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
      return node.type == DType::F32 && a->type == DType::F32 && b->type == DType::F32;
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Clamp:
    case Op::SumRows:
    case Op::RmsNorm:
    case Op::Norm:
      return node.type == DType::F32 && a->type == DType::F32;
    case Op::Argmax:
    case Op::Argsort:
      return node.type == DType::I32 && a->type == DType::F32;
    case Op::Concat:
      return a->type == b->type && node.type == a->type && (is_plain_float(a->type) || a->type == DType::I32);
    case Op::Rope:
      return node.type == DType::F32 && a->type == DType::F32 && b->type == DType::I32 &&
             (!node.src[2] || node.src[2]->type == DType::F32) &&
             (rope_params(node).mode == RopeMode::Normal || rope_params(node).mode == RopeMode::NeoX);
    case Op::SoftMax:
      return node.type == DType::F32 && a->type == DType::F32 &&
             (!b || ((b->type == DType::F32 || b->type == DType::F16) && b->has_contiguous_rows())) &&
             (!node.src[2] || node.src[2]->type == DType::F32);
    case Op::MulMat:
      return supports_mul_mat(node);
    case Op::MulMatId:
      return supports_mul_mat_id(node);
    case Op::FlashAttnExt:
      return supports_flash_attn(node);
    default:
      return false;  // no CUDA kernel
  }
}

bool launch_node(const Tensor& node, const LaunchContext& ctx) {
  if (!kernel_supports(node)) return false;
  switch (node.op) {
    case Op::GetRows: launch_get_rows(node, ctx); break;
    case Op::SetRows: launch_set_rows(node, ctx); break;
    case Op::Cpy:
    case Op::Cont: launch_cpy(node, ctx); break;
    case Op::Concat: launch_concat(node, ctx); break;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div: launch_binary(node, ctx); break;
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Clamp: launch_unary(node, ctx); break;
    case Op::SumRows: launch_sum_rows(node, ctx); break;
    case Op::Argmax: launch_argmax(node, ctx); break;
    case Op::Argsort: launch_argsort(node, ctx); break;
    case Op::RmsNorm:
    case Op::Norm: launch_norm(node, ctx); break;
    case Op::SoftMax: launch_soft_max(node, ctx); break;
    case Op::Rope: launch_rope(node, ctx); break;
    case Op::MulMat: launch_mul_mat(node, ctx); break;
    case Op::MulMatId: launch_mul_mat_id(node, ctx); break;
    case Op::FlashAttnExt: launch_flash_attn(node, ctx); break;
    default: break;  // a leaf or a view: nothing to run
  }
  return true;
}

}  // namespace loom::cuda
