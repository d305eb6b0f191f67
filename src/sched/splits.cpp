// Splits and copies: maximal runs of computing nodes on one backend, one
// copy per (tensor, backend) for operands in memory the backend cannot use,
// and the order in which the graph allocator plans them.
#include <functional>
#include <map>

#include "loom/error.h"
#include "sched_plan.h"

namespace loom::sched_detail {

void build_splits(Scheduler::Plan& plan, const AssignContext& ctx, int n_copies) {
  plan.splits.clear();
  plan.inputs.clear();
  std::map<std::pair<const Tensor*, size_t>, size_t> copy_of;  // (tensor, backend) -> input copy
  auto needs_copy = [&](const Tensor& node, int j, size_t b) {
    const BufferType* type = memory_type(plan, ctx, plan.index.at(node.src[j]));
    return !type || !ctx.backends[b]->device().supports_operand(node, j, *type);
  };
  // A mul_mat_id whose experts are host weights copied to its backend starts
  // a split, so that its ids are known before the copy (copy_used_experts).
  auto copies_experts = [&](const Tensor& node, size_t b) {
    if (node.op != Op::MulMatId || copy_of.count({node.src[0], b}) || !needs_copy(node, 0, b)) return false;
    const Tensor& root = *root_of(node.src[0]);
    return root.buffer && root.buffer->type().is_host() && is_weight_memory(root) && !node.src[0]->view_src;
  };
  for (size_t i = plan.n_leafs; i < plan.tensors.size(); ++i) {
    if (!plan.computes[i]) continue;
    const size_t b = plan.backend[i];
    Tensor* node = plan.tensors[i];
    const bool experts = copies_experts(*node, b);
    if (plan.splits.empty() || plan.splits.back().backend != b || experts) {
      plan.splits.emplace_back();
      plan.splits.back().backend = b;
    }
    Split& split = plan.splits.back();
    const size_t k = plan.splits.size() - 1;
    split.nodes.push_back(i);
    for (int j = 0; j < kMaxSrc; ++j) {
      Tensor* s = node->src[j];
      if (!s) continue;
      const size_t si = plan.index.at(s);
      if (!needs_copy(*node, j, b)) continue;
      auto [it, added] = copy_of.try_emplace({s, b}, plan.inputs.size());
      if (added) {
        InputCopy in;
        in.source = si;
        in.backend = b;
        in.split = k;
        if (j == 0 && experts) in.expert_ids = plan.index.at(node->src[2]);
        for (int c = 0; c < n_copies; ++c) {
          Tensor* copy = plan.copies.new_node();
          copy->type = s->type;
          copy->ne = s->ne;
          copy->nb = s->nb;  // same layout: the bytes are copied as they are
          copy->op = Op::Cont;
          copy->src[0] = s;
          copy->name = n_copies > 1 ? fmt::format("{}#{}#{}", s->name, ctx.backends[b]->name(), c)
                                    : fmt::format("{}#{}", s->name, ctx.backends[b]->name());
          // Sets in flight at once must never share memory.
          if (n_copies > 1) copy->flags |= kFlagOutput;
          in.copies.push_back(copy);
        }
        split.inputs.push_back(plan.inputs.size());
        plan.inputs.push_back(std::move(in));
      }
      split.rewrites.push_back({i, j, it->second});
    }
  }
  // Partial expert copies only where every reader is a mul_mat_id with the same ids.
  for (const Split& split : plan.splits)
    for (const Rewrite& r : split.rewrites) {
      InputCopy& in = plan.inputs[r.copy];
      const Tensor& node = *plan.tensors[r.node];
      if (in.expert_ids != kNone &&
          (node.op != Op::MulMatId || r.slot != 0 || plan.index.at(node.src[2]) != in.expert_ids))
        in.expert_ids = kNone;
    }
  for (Split& split : plan.splits) {
    split.graph = Graph();
    for (size_t i : split.nodes) split.graph.nodes().push_back(plan.tensors[i]);
  }
}

std::vector<Tensor*> allocation_order(const Scheduler::Plan& plan) {
  const size_t n = plan.tensors.size();
  std::vector<size_t> split_of(n, kNone);
  for (size_t k = 0; k < plan.splits.size(); ++k)
    for (size_t i : plan.splits[k].nodes) split_of[i] = k;
  std::vector<Tensor*> order;
  order.reserve(n + plan.inputs.size());
  std::vector<bool> emitted(n, false);
  // Emits node i after whatever it reads that is not emitted yet (only views
  // can be: every computing node of an earlier split already is).
  std::function<void(size_t)> emit = [&](size_t i) {
    if (plan.is_leaf(i) || emitted[i]) return;
    emitted[i] = true;
    for (const Tensor* s : plan.tensors[i]->src) {
      if (!s) continue;
      auto it = plan.index.find(s);
      if (it != plan.index.end()) emit(it->second);
    }
    if (plan.tensors[i]->view_src) emit(plan.index.at(plan.tensors[i]->view_src));
    order.push_back(plan.tensors[i]);
  };
  size_t next_split = 0;
  for (size_t i = plan.n_leafs; i < n; ++i) {
    if (plan.computes[i] && split_of[i] == next_split && plan.splits[next_split].nodes.front() == i) {
      for (size_t c : plan.splits[next_split].inputs) {
        emit(plan.inputs[c].source);
        for (Tensor* copy : plan.inputs[c].copies) order.push_back(copy);
      }
      ++next_split;
    }
    emit(i);
  }
  return order;
}

}  // namespace loom::sched_detail
