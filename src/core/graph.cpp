#include "loom/graph.h"

#include <utility>

namespace loom {

Graph Graph::build(std::span<Tensor* const> outputs) {
  Graph g;
  for (Tensor* t : outputs) {
    t->flags |= kFlagOutput;
    g.expand(t);
  }
  return g;
}

void Graph::expand(Tensor* t) { visit(t); }

void Graph::visit(Tensor* root) {
  // Iterative post-order DFS: deep graphs (hundreds of layers) must not
  // overflow the stack.
  std::vector<std::pair<Tensor*, int>> stack;
  if (!visited_.insert(root).second) return;
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    if (next < kMaxSrc) {
      Tensor* s = t->src[next++];
      if (s && visited_.insert(s).second) stack.emplace_back(s, 0);
      continue;
    }
    if (t->op == Op::None)
      leafs_.push_back(t);
    else
      nodes_.push_back(t);
    stack.pop_back();
  }
}

}  // namespace loom
