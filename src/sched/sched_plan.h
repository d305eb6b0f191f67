// Internal to the scheduler: the plan made for one graph structure
// (assignment, splits, copies, placements) and the passes that build it.
// Tensors are referred to by their index in the plan's tensor list (leafs,
// then nodes, in graph order), so a graph with the same structure can take
// over a plan by re-binding pointers.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/context.h"
#include "loom/graph_alloc.h"
#include "loom/scheduler.h"

namespace loom::sched_detail {

inline constexpr size_t kNone = std::numeric_limits<size_t>::max();

inline Tensor* root_of(Tensor* t) { return t->view_src ? t->view_src : t; }
inline const Tensor* root_of(const Tensor* t) { return t->view_src ? t->view_src : t; }

// Model weights: flagged so, or in a buffer allocated for weights.
inline bool is_weight_memory(const Tensor& root) {
  return (root.flags & kFlagWeight) || (root.buffer && root.buffer->usage() == BufferUsage::Weights);
}

// One copy of a tensor into a backend's memory, made by the first split on
// that backend that reads it.
struct InputCopy {
  size_t source = 0;            // tensor index
  size_t backend = 0;           // destination backend
  size_t split = 0;             // split that makes it
  std::vector<Tensor*> copies;  // one per copy set, owned by the plan's context
  // mul_mat_id experts in host weight memory: the tensor index of the ids
  // that select them. Only the experts those ids use are copied (the ids are
  // made by an earlier split: the mul_mat_id starts its split). kNone: all.
  size_t expert_ids = kNone;
};

// Node `node` reads copy `copy` in operand slot `slot` while its split runs.
struct Rewrite {
  size_t node = 0;
  int slot = 0;
  size_t copy = 0;
};

struct Split {
  size_t backend = 0;
  std::vector<size_t> nodes;       // computing nodes (tensor indices)
  std::vector<size_t> inputs;      // InputCopy indices made at its start
  std::vector<Rewrite> rewrites;   // operands its nodes read from copies
  Graph graph;                     // the nodes, handed to the backend
};

// A planned tensor's place, for re-binding a same-structure graph.
struct Placed {
  size_t tensor = 0;
  size_t type = 0, chunk = 0, offset = 0;
};

// What the assignment pass needs to know about the scheduler.
struct AssignContext {
  std::span<Backend* const> backends;
  std::span<BufferType* const> compute_type;  // per backend
  size_t cpu = 0;                             // the fallback backend
  std::vector<int> offload_threshold;         // per backend: -1 ask the device, 0 never, N rows
  const std::unordered_map<const Tensor*, size_t>* user = nullptr;
  std::function<bool(const Tensor&)> preplaced;  // memory placed by someone else
};

}  // namespace loom::sched_detail

namespace loom {

struct Scheduler::Plan {
  const Graph* graph = nullptr;  // the graph the pointers below belong to
  std::vector<Tensor*> tensors;  // leafs, then nodes
  size_t n_leafs = 0;
  std::unordered_map<const Tensor*, size_t> index;
  std::vector<uint64_t> signature;
  std::vector<uint8_t> preplaced;  // per tensor: its root's memory was placed by someone else

  // Assignment (per tensor). backend is kNone for memory no backend can use.
  std::vector<size_t> backend;
  std::vector<Placement> why;
  std::vector<size_t> because;  // tensor index that decided (weight, root), or kNone
  std::vector<bool> computes;   // a node that runs a kernel (not a view, not a leaf)

  std::vector<sched_detail::Split> splits;
  std::vector<sched_detail::InputCopy> inputs;
  Context copies;  // the copy tensors
  std::unordered_map<const Tensor*, size_t> copy_type;  // copy tensor -> buffer type index

  std::vector<sched_detail::Placed> placed;
  bool allocated = false;

  bool is_leaf(size_t i) const { return i < n_leafs; }
  size_t split_of_copy(size_t c) const { return inputs[c].split; }
};

struct Scheduler::Runtime {
  std::vector<BufferType*> types;      // distinct compute buffer types
  std::vector<size_t> type_of_backend;  // index into types
  std::vector<BufferType*> compute_type;  // per backend
  std::unique_ptr<GraphAllocator> alloc;
  std::vector<std::unique_ptr<Event>> events;  // per backend; null without events
  std::vector<std::vector<uint8_t>> pending_read;  // [memory of X][stream Y]: Y may still read X
  std::vector<uint8_t> busy;                       // backend has work not waited for
  sched_detail::AssignContext ctx;
  size_t n_runs = 0;
  std::vector<NodeTime> node_times;  // a profiled split's (see Profiler)
};

namespace sched_detail {

// Fills plan.tensors/index/signature from `graph`. The signature holds every
// fact the plan depends on, so equal signatures mean the plan can be reused.
void describe_graph(Scheduler::Plan& plan, const Graph& graph, const AssignContext& ctx);

// Fills plan.backend/why/because/computes. Throws loom::Error naming the op
// and tensor when no backend can run a node.
void assign_backends(Scheduler::Plan& plan, const AssignContext& ctx);

// Cuts the splits, creates the copies (n_copies sets) and the rewrites.
void build_splits(Scheduler::Plan& plan, const AssignContext& ctx, int n_copies);

// The order the allocator plans in: each split's copies, then its nodes
// (views where they are needed). Rewrites must be applied while it is used.
std::vector<Tensor*> allocation_order(const Scheduler::Plan& plan);

// Buffer type the memory of tensor i lives in (placed or planned).
BufferType* memory_type(const Scheduler::Plan& plan, const AssignContext& ctx, size_t i);

}  // namespace sched_detail
}  // namespace loom
