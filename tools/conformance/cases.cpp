// The case list and what it shares: operand layouts, names, the filter.
#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "conformance/cases.h"
#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"

namespace loom::conformance {

Tensor* CaseGraph::input(DType type, std::array<int64_t, 4> ne, Fill fill) {
  Tensor* t = ctx.new_tensor(type, std::span<const int64_t>(ne.data(), 4));
  t->name = fmt::format("in{}", inputs_.size());
  t->flags |= kFlagInput;
  inputs_.push_back({t, fill});
  return t;
}

namespace detail {

Tensor* operand(CaseGraph& g, DType type, Shape ne, Layout layout, Fill fill) {
  Context& ctx = g.ctx;
  switch (layout) {
    case Layout::Contiguous: return g.input(type, ne, fill);
    case Layout::Transposed: return transpose(ctx, g.input(type, {ne[1], ne[0], ne[2], ne[3]}, fill));
    case Layout::Permuted: return permute(ctx, g.input(type, {ne[0], ne[2], ne[1], ne[3]}, fill), {0, 2, 1, 3});
    case Layout::Shuffled: return permute(ctx, g.input(type, {ne[2], ne[0], ne[1], ne[3]}, fill), {2, 0, 1, 3});
    case Layout::Strided: {
      const int64_t block = traits(type).block_size;
      Tensor* leaf = g.input(type, {ne[0] + 2 * block, ne[1], ne[2], ne[3]}, fill);
      return view(ctx, leaf, ne, {leaf->nb[1], leaf->nb[2], leaf->nb[3]}, row_size(type, block));
    }
    case Layout::Reshaped: return reshape(ctx, g.input(type, {ne[0], ne[1] * ne[2] * ne[3], 1, 1}, fill), ne);
  }
  fail("conformance: unknown layout");
}

std::string shape_name(const Shape& ne, Layout layout) {
  static constexpr const char* kSuffix[] = {"", ":T", ":perm", ":shuf", ":view", ":resh"};
  return fmt::format("[{},{},{},{}]{}", ne[0], ne[1], ne[2], ne[3], kSuffix[static_cast<int>(layout)]);
}

std::string type_str(DType type) { return std::string(type_name(type)); }

}  // namespace detail

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> list;
    detail::add_movement_cases(list);
    detail::add_elementwise_cases(list);
    detail::add_matmul_cases(list);
    detail::add_row_cases(list);
    detail::add_family_cases(list);
    detail::add_attention_cases(list);
    std::unordered_set<std::string> names;
    for (const Case& c : list)
      if (!names.insert(c.name).second) fail("conformance: two cases are named '{}'", c.name);
    return list;
  }();
  return cases;
}

std::vector<Op> tested_ops() {
  std::vector<Op> ops;
  for (const Case& c : all_cases())
    if (std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  return ops;
}

bool Filter::matches(const Case& c) const {
  if (!op) return true;
  if (!op_is_view(*op)) return c.op == *op;
  CaseGraph g;
  Graph graph = Graph::build(c.build(g));
  return std::any_of(graph.nodes().begin(), graph.nodes().end(), [&](const Tensor* n) { return n->op == *op; });
}

}  // namespace loom::conformance
