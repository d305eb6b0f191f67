// A compute graph: every tensor reachable from the outputs, in an order where
// each node comes after its operands. Leafs are tensors with no op (inputs,
// weights); nodes are everything computed, views included.
#pragma once

#include <span>
#include <unordered_set>
#include <vector>

#include "loom/tensor.h"

namespace loom {

class Graph {
 public:
  Graph() = default;
  // Collects the graph that produces `outputs` (marked kFlagOutput).
  static Graph build(std::span<Tensor* const> outputs);
  static Graph build(Tensor* output) { return build(std::span<Tensor* const>(&output, 1)); }

  // Adds `t` and everything it depends on (idempotent).
  void expand(Tensor* t);

  const std::vector<Tensor*>& nodes() const { return nodes_; }
  const std::vector<Tensor*>& leafs() const { return leafs_; }
  std::vector<Tensor*>& nodes() { return nodes_; }
  size_t size() const { return nodes_.size(); }

 private:
  void visit(Tensor* t);
  std::vector<Tensor*> nodes_;
  std::vector<Tensor*> leafs_;
  std::unordered_set<const Tensor*> visited_;
};

}  // namespace loom
