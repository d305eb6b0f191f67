// The CPU's kernel table: which function runs each op. Leaves and views
// (kOpTable) run nothing; every other op needs a row here.
#include <algorithm>
#include <array>

#include "kernels.h"
#include "loom/error.h"

namespace loom::cpu {
namespace {

using Kernel = void (*)(const ComputeParams& p, Tensor& node, int phase);

constexpr std::array<Kernel, kOpCount> kKernels = [] {
  std::array<Kernel, kOpCount> k{};
  auto set = [&k](Op op, Kernel f) { k[static_cast<size_t>(op)] = f; };
  set(Op::GetRows, [](const ComputeParams& p, Tensor& n, int) { compute_get_rows(p, n); });
  set(Op::SetRows, [](const ComputeParams& p, Tensor& n, int) { compute_set_rows(p, n); });
  for (Op op : {Op::Cpy, Op::Cont}) set(op, [](const ComputeParams& p, Tensor& n, int) { compute_cpy(p, n); });
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div})
    set(op, [](const ComputeParams& p, Tensor& n, int) { compute_binary(p, n); });
  for (Op op : {Op::Scale, Op::Sqr, Op::Sqrt, Op::Silu, Op::Gelu, Op::Relu, Op::Tanh, Op::Sigmoid, Op::Clamp})
    set(op, [](const ComputeParams& p, Tensor& n, int) { compute_unary(p, n); });
  set(Op::SumRows, [](const ComputeParams& p, Tensor& n, int) { compute_sum_rows(p, n); });
  set(Op::Argmax, [](const ComputeParams& p, Tensor& n, int) { compute_argmax(p, n); });
  set(Op::Concat, [](const ComputeParams& p, Tensor& n, int) { compute_concat(p, n); });
  for (Op op : {Op::RmsNorm, Op::Norm}) set(op, [](const ComputeParams& p, Tensor& n, int) { compute_norm(p, n); });
  set(Op::Rope, [](const ComputeParams& p, Tensor& n, int) { compute_rope(p, n); });
  set(Op::SoftMax, [](const ComputeParams& p, Tensor& n, int) { compute_soft_max(p, n); });
  set(Op::MulMat, [](const ComputeParams& p, Tensor& n, int phase) { compute_mul_mat(p, n, phase); });
  set(Op::MulMatId, [](const ComputeParams& p, Tensor& n, int phase) { compute_mul_mat_id(p, n, phase); });
  set(Op::Argsort, [](const ComputeParams& p, Tensor& n, int) { compute_argsort(p, n); });
  set(Op::FlashAttnExt, [](const ComputeParams& p, Tensor& n, int phase) { compute_flash_attn(p, n, phase); });
  return k;
}();

constexpr bool every_kernel_op_has_a_kernel() {
  for (const OpInfo& info : kOpTable)
    if (op_has_kernel(info.op) != (kKernels[static_cast<size_t>(info.op)] != nullptr)) return false;
  return true;
}
static_assert(every_kernel_op_has_a_kernel(), "every op of kOpTable that runs a kernel needs a CPU kernel here");

}  // namespace

bool kernel_supports(const Tensor& node) {
  return static_cast<size_t>(node.op) < kOpCount &&
         (!op_has_kernel(node.op) || kKernels[static_cast<size_t>(node.op)] != nullptr);
}

size_t kernel_work_size(const Tensor& node, int n_threads) {
  if (node.op == Op::MulMat) return mul_mat_work_size(node, n_threads);
  if (node.op == Op::MulMatId) return mul_mat_id_work_size(node, n_threads);
  if (node.op == Op::FlashAttnExt) return flash_attn_work_size(node, n_threads);
  return 0;
}

int kernel_phases(const Tensor& node) {
  return node.op == Op::MulMat || node.op == Op::FlashAttnExt ? 2 : node.op == Op::MulMatId ? kMulMatIdPhases : 1;
}

int64_t kernel_tasks(const Tensor& node, int phase, int n_threads) {
  if (node.op == Op::MulMat) return mul_mat_tasks(node, phase, n_threads);
  if (node.op == Op::MulMatId) return mul_mat_id_tasks(node, phase, n_threads);
  if (node.op == Op::FlashAttnExt) return flash_attn_tasks(node, phase, n_threads);
  // A small op costs less on one thread than handing parts of it to others.
  const int64_t by_size = std::max<int64_t>(node.nelements() / kMinElementsPerTask, 1);
  return std::min<int64_t>(by_size, n_threads);
}

void compute_node(const ComputeParams& p, Tensor& node, int phase) {
  if (!op_has_kernel(node.op)) return;
  const Kernel k = static_cast<size_t>(node.op) < kOpCount ? kKernels[static_cast<size_t>(node.op)] : nullptr;
  if (!k) fail("CPU: no kernel for op {} (tensor '{}')", op_name(node.op), node.name);
  k(p, node, phase);
}

}  // namespace loom::cpu
