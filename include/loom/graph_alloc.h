// The graph allocator: plans where every intermediate tensor of a graph
// lives, one plan per buffer type, so that peak memory stays close to the
// lower bound (the largest total size of tensors alive at the same step).
//
// How a plan is made (src/alloc/graph_plan.cpp):
//  1. Liveness. The graph runs as a sequence of steps; each step is a group of
//     nodes that may run at the same time (default: one node per step, graph
//     order). Every tensor that owns memory gets an interval [first, last] of
//     steps: inputs (unplaced leafs, kFlagInput) start at step 0, a node at
//     its own step; it ends at the last step that reads it, itself or through
//     any view of it; outputs (kFlagOutput, also through a view) never end.
//     Views own no memory: a view's consumers keep its source alive, and the
//     source may live in another buffer type than the view's node.
//  2. In-place reuse. A node whose op allows it (op_supports_in_place) takes
//     over its operand's memory when the operand is ours, not a view, not an
//     input or output, is read by no other node from this step on, and has
//     the same type, shape and contiguous strides.
//  3. Offsets. Two placements are computed and the smaller kept per buffer
//     type: a best-fit free-block allocator run over the steps in order
//     (FreeBlockAllocator), and greedy-by-size over the whole intervals. Both
//     split into several chunks (buffers) when the type's max_size is reached.
// Tensors that already have memory placed by someone else (weights, KV cache)
// and kFlagWeight tensors without memory are left alone.
//
// Blocks whose intervals overlap never share memory, so nodes of one group
// never touch each other's memory. The plan depends only on the graph, so
// reserve(g) followed by allocate(g) places tensors exactly as measured.
//
// LOOM_ALLOC_DEBUG=1 prints every allocation and free of the plan placed.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loom/backend.h"
#include "loom/graph.h"

namespace loom {

// Ops whose output may share operand `src_index`'s memory (kOpTable's
// in-place column, op.h): kernels read each element or each whole row before
// writing it. Only same-shape operands are candidates.
bool op_supports_in_place(Op op, int src_index);

// Best-fit allocator over free blocks in chunks of at most max_chunk_size
// bytes. Frees merge with their neighbours; chunks and blocks are unbounded.
// Among the blocks that fit, it prefers one that does not grow its chunk,
// then the smallest; when nothing fits it grows the chunk that grows least,
// or opens a new chunk.
class FreeBlockAllocator {
 public:
  struct Addr {
    size_t chunk = 0;
    size_t offset = 0;
  };
  FreeBlockAllocator(size_t alignment, size_t max_chunk_size);
  // size > 0; rounded up to the alignment. Throws loom::Error when larger than
  // max_chunk_size.
  Addr alloc(size_t size);
  // Returns memory from alloc (same size); throws on a free that overlaps free memory.
  void free(Addr addr, size_t size);

  size_t n_chunks() const { return chunks_.size(); }
  size_t chunk_size(size_t chunk) const { return chunks_[chunk].high_water; }  // bytes ever used
  size_t total_size() const;
  size_t n_free_blocks(size_t chunk) const { return chunks_[chunk].free.size(); }

 private:
  struct Chunk {
    std::map<size_t, size_t> free;  // offset -> size; the tail reaches max_chunk_size
    size_t high_water = 0;
  };
  size_t alignment_;
  size_t max_;
  std::vector<Chunk> chunks_;
};

// Which buffer type (index into the allocator's types) a tensor must live in.
using BufferTypeAssignment = std::function<size_t(const Tensor&)>;

// Execution order: groups of nodes in the order they run; the nodes of one
// group may run at the same time. Every node of the graph appears exactly
// once, after the nodes it reads.
struct Schedule {
  std::vector<std::vector<Tensor*>> groups;
  static Schedule sequential(const Graph& graph);  // one node per group, graph order
};

struct AllocOptions {
  BufferTypeAssignment assign;       // default: type 0 for every tensor
  const Schedule* schedule = nullptr;  // default: Schedule::sequential
  bool allow_grow = true;  // allocate may grow buffers; otherwise it throws with the sizes
};

struct BufferTypeReport {
  std::string name;
  size_t peak = 0;         // bytes the plan needs (all chunks)
  // Largest total (aligned) size of the blocks alive at one step, from the
  // liveness intervals alone (after in-place merging, before any offset is
  // chosen): no placement of these blocks can need less.
  size_t lower_bound = 0;
  size_t n_tensors = 0;    // tensors given memory (in-place ones included)
  size_t n_inplace = 0;    // tensors that reuse their operand's memory
  size_t n_chunks = 0;
  size_t buffer_bytes = 0;  // bytes held in buffers of this type now
  std::string strategy;     // best-fit, greedy-by-size, reserved (offsets of the reserved plan)
  size_t best_fit_peak = 0;  // what each placement needed (0 when the reserved plan was reused)
  size_t greedy_peak = 0;
  double ratio() const { return lower_bound ? static_cast<double>(peak) / lower_bound : 1.0; }
};

struct PlanReport {
  size_t n_steps = 0;
  size_t n_nodes = 0;
  std::vector<BufferTypeReport> types;
  std::string to_json() const;
  std::string to_string() const;  // a small table
};

// One planned block for observability: who owns it and where it lives.
struct PlannedBlock {
  std::vector<const Tensor*> tensors;  // first owns the memory, the rest reuse it in place
  std::vector<std::string> names;
  std::vector<size_t> starts;  // step at which each of `tensors` starts using the memory
  size_t type = 0, chunk = 0, offset = 0, size = 0;
  size_t first = 0, last = 0;  // steps, inclusive
  bool input = false, output = false;
};

class GraphAllocator {
 public:
  explicit GraphAllocator(std::vector<BufferType*> types);
  ~GraphAllocator();
  GraphAllocator(const GraphAllocator&) = delete;
  GraphAllocator& operator=(const GraphAllocator&) = delete;

  // Plans `graph` (the worst case) and grows the buffers to fit it; places
  // nothing. A later allocate of a graph with the same structure and tensors
  // no larger reuses this plan's offsets, so it never reallocates.
  void reserve(const Graph& graph, const AllocOptions& options = {});
  // Plans `graph` and places its tensors (views included). Grows buffers when
  // needed (or throws loom::Error with the sizes if !allow_grow); a failed
  // allocation throws OutOfMemory.
  void allocate(Graph& graph, const AllocOptions& options = {});

  // Drops the buffers and the reserved plan. The memory is freed once the
  // tensors placed in it are gone too; the next allocate plans afresh and
  // allocates what that graph needs.
  void release();

  // Whether `t` was placed by this allocator (in any buffer it ever
  // allocated): by buffer identity, not by address.
  bool owns(const Tensor& t) const;

  const PlanReport& report() const { return report_; }
  const std::vector<PlannedBlock>& plan() const { return plan_; }  // of the last reserve/allocate
  size_t buffer_size(size_t type) const;                           // all chunks
  const std::vector<std::shared_ptr<Buffer>>& buffers(size_t type) const { return buffers_[type]; }
  size_t n_buffer_allocations() const { return n_allocations_; }
  // Writes the last plan as rows "step offset size tensor type chunk" (one per
  // block per step it is alive) for scripts/plot-memory.
  void write_trace(const std::string& path) const;

 private:
  struct Planned;
  Planned make_plan(const Graph& graph, const AllocOptions& options, bool try_reserved);
  void ensure_buffers(const Planned& plan, bool allow_grow);
  void publish(const Planned& plan);  // fills plan_ and report_
  void print_debug() const;

  std::vector<BufferType*> types_;
  std::vector<std::vector<std::shared_ptr<Buffer>>> buffers_;  // per type, per chunk
  std::vector<std::weak_ptr<Buffer>> ever_allocated_;          // identity for owns()
  std::unique_ptr<Planned> reserved_;
  std::vector<PlannedBlock> plan_;
  PlanReport report_;
  size_t n_allocations_ = 0;
};

}  // namespace loom
