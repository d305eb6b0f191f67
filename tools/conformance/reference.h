// The scalar reference the conformance suite checks devices against. Written
// for clarity, not speed: plain loops over the logical 4-D index, double
// arithmetic, no code shared with any backend's kernels. Values live in
// RefMemory, one dense array per root tensor (a leaf or a computed node), and
// views read their root through their own strides and offset, exactly as a
// device reads memory.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "loom/graph.h"
#include "loom/tensor.h"

namespace loom::conformance {

// A dense 4-D array of doubles in logical order (i0 fastest).
struct Dense {
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  std::vector<double> v;

  explicit Dense(std::array<int64_t, 4> shape)
      : ne(shape), v(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]), 0.0) {}
  double& at(int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return v[static_cast<size_t>(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0)];
  }
};

class RefMemory {
 public:
  // The values of a root tensor (not a view) in logical order, e.g. read back
  // from the device after the inputs were filled.
  void set_root(const Tensor& root, std::vector<double> values);
  // Element (i0, i1, i2, i3) of `t` (a root or a view of one).
  double at(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) const;
  // Every element of `t` in logical order.
  std::vector<double> read(const Tensor& t) const;
  // Stores a node's values (logical order) into its memory, rounded to its
  // type as a device would store them (f16, bf16, quantized blocks, i32).
  void write(const Tensor& node, const std::vector<double>& values);

 private:
  const Tensor& root_of(const Tensor& t) const { return t.view_src ? *t.view_src : t; }
  size_t flat_index(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) const;
  std::unordered_map<const Tensor*, std::vector<double>> roots_;
};

// The expected values of one computed (non-view) node, in logical order.
std::vector<double> reference_op(const Tensor& node, const RefMemory& memory);
// Computes every non-view node of the graph in order into `memory`.
void evaluate(const Graph& graph, RefMemory& memory);

}  // namespace loom::conformance
