// Internal to the graph allocator: liveness analysis with in-place merging,
// the independent lower bound, and the two offset placements. Pure planning:
// nothing here touches buffers or tensor data.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "loom/graph_alloc.h"

namespace loom::alloc_detail {

// Memory owned by one tensor, shared by the tensors that reuse it in place.
struct Block {
  std::vector<Tensor*> members;  // members[0] owns it; the rest took it over in place, in order
  std::vector<size_t> starts;    // step at which each member starts using it
  size_t type = 0;
  size_t size = 0;               // aligned bytes
  size_t first = 0, last = 0;    // steps, inclusive
  bool input = false, output = false;
  size_t chunk = 0, offset = 0;  // filled by a placement
};

struct Analysis {
  std::vector<Block> blocks;
  size_t n_steps = 0;
  size_t n_nodes = 0;
  std::vector<size_t> n_inplace;  // per type
};

// Liveness and in-place decisions. `is_ours` says whether an already placed
// tensor may be planned again (it was placed by this allocator). Throws
// loom::Error on a schedule that is not a valid order of the graph, an
// assignment out of range, or a tensor larger than its type's max_size.
Analysis analyze(const Graph& graph, const Schedule& schedule, const BufferTypeAssignment& assign,
                 std::span<BufferType* const> types, const std::function<bool(const Tensor&)>& is_ours);

// Per type: max over steps of the total size of the blocks alive at that step.
std::vector<size_t> lower_bounds(const Analysis& analysis, size_t n_types);

// Place the blocks of `type`, writing chunk and offset; return each chunk's size.
std::vector<size_t> place_best_fit(Analysis& analysis, size_t type, size_t alignment, size_t max_size);
std::vector<size_t> place_greedy_by_size(Analysis& analysis, size_t type, size_t alignment, size_t max_size);

}  // namespace loom::alloc_detail
