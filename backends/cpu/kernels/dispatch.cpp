#include "kernels.h"
#include "loom/error.h"

namespace loom::cpu {

bool kernel_supports(const Tensor& node) {
  switch (node.op) {
    case Op::None:
    case Op::View:
    case Op::Reshape:
    case Op::Permute:
    case Op::Transpose:
    case Op::GetRows:
    case Op::SetRows:
    case Op::Cpy:
    case Op::Cont:
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu:
    case Op::SumRows:
    case Op::Argmax:
    case Op::Concat:
    case Op::RmsNorm:
    case Op::Norm:
    case Op::Rope:
    case Op::SoftMax:
    case Op::MulMat:
      return true;
    case Op::Count:
      break;
  }
  return false;
}

size_t kernel_work_size(const Tensor& node, int n_threads) {
  if (node.op == Op::MulMat) return mul_mat_work_size(node, n_threads);
  return 0;
}

int kernel_phases(const Tensor& node) { return node.op == Op::MulMat ? 2 : 1; }

int64_t kernel_tasks(const Tensor& node, int phase, int n_threads) {
  if (node.op == Op::MulMat) return mul_mat_tasks(node, phase, n_threads);
  return n_threads;
}

void compute_node(const ComputeParams& p, Tensor& node, int phase) {
  switch (node.op) {
    case Op::None:
    case Op::View:
    case Op::Reshape:
    case Op::Permute:
    case Op::Transpose:
      return;
    case Op::GetRows: return compute_get_rows(p, node);
    case Op::SetRows: return compute_set_rows(p, node);
    case Op::Cpy:
    case Op::Cont: return compute_cpy(p, node);
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div: return compute_binary(p, node);
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu: return compute_unary(p, node);
    case Op::SumRows: return compute_sum_rows(p, node);
    case Op::Argmax: return compute_argmax(p, node);
    case Op::Concat: return compute_concat(p, node);
    case Op::RmsNorm:
    case Op::Norm: return compute_norm(p, node);
    case Op::Rope: return compute_rope(p, node);
    case Op::SoftMax: return compute_soft_max(p, node);
    case Op::MulMat: return compute_mul_mat(p, node, phase);
    case Op::Count: break;
  }
  fail("CPU: no kernel for op {} (tensor '{}')", op_name(node.op), node.name);
}

}  // namespace loom::cpu
