// The backend scheduler: runs one graph across several backends.
//
//  1. Assignment. Every node gets a backend, in this order of precedence:
//     user (set_backend), weight location (a node that writes into, or reads,
//     memory placed by someone else — weights, KV cache — runs where that
//     memory can be used), op offload (a node whose weight is in host memory
//     runs on a higher-priority device whose threshold the batch reaches; the
//     weight is copied over), then the unconstrained nodes, chosen so that the
//     number of backend changes along the graph order is the minimum possible
//     (ties go to the higher-priority backend). Views follow their source;
//     unplaced graph inputs live on the CPU, where the caller sets them.
//  2. Splits: maximal runs of computing nodes on one backend. Every operand a
//     split reads from memory its backend cannot use gets one copy per
//     backend, made at the start of the first split that needs it and reused
//     by later readers there. Copies and split-local tensors are planned by
//     one GraphAllocator (one plan per buffer type).
//  3. Execution in order, with async copies and events where backends have
//     them; a backend's memory is never rewritten while another stream may
//     still be reading it. compute_async + n_copies > 1 let consecutive
//     graphs (micro-batches) overlap across devices.
//  4. Reuse: a graph with the same structure as the last one (every token)
//     keeps the assignment, splits and tensor offsets; only pointers are
//     re-bound. Rebuilds are counted and logged at debug level with the reason.
//
// Backends are given in priority order; a CPU backend is added at the end
// when none is given. LOOM_SCHED_DEBUG=1 prints one header per split, =2 also
// every node with its backend and why. LOOM_OFFLOAD_MIN_BATCH sets the
// offload threshold when the options leave it to the devices.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "loom/backend.h"
#include "loom/graph.h"

namespace loom {

class Profiler;

struct SchedulerOptions {
  // Op offload: a mul_mat whose weight is in host memory runs on a device
  // listed before the weight's backend when b has at least this many rows
  // (a mul_mat_id: tokens; only the experts they select are copied).
  // -1: ask each device (Device::offload_op), unless LOOM_OFFLOAD_MIN_BATCH
  // is set; 0: never offload.
  int offload_min_batch = -1;
  // Per device name ("OpenCL0"); overrides offload_min_batch for that device.
  std::map<std::string, int, std::less<>> offload_min_batch_per_device;
  // Sets of split-input copies for graphs in flight (pipeline parallelism
  // with compute_async); 1 = off.
  int n_copies = 1;
  // Keep the plan when the next graph has the same structure.
  bool reuse = true;
  // -1: LOOM_SCHED_DEBUG (0 none, 1 split headers, 2 every node).
  int debug = -1;
  // Records every split, copy and node of each compute (profiler.h); null:
  // off, at the cost of one check per compute. Not owned; must outlive the
  // scheduler's computes.
  Profiler* profiler = nullptr;
};

enum class Placement { Unassigned, User, Weight, Offload, Neighbour, Fallback, View, Input };
std::string_view placement_name(Placement p);

struct SplitInputReport {
  std::string tensor;
  std::string from;  // buffer type the bytes come from
  size_t bytes = 0;
};

struct SplitReport {
  std::string backend;
  size_t first_node = 0;  // index in graph.nodes() of the split's first node
  size_t n_nodes = 0;     // computing nodes (views excluded)
  std::vector<SplitInputReport> inputs;  // copies made at the start of this split
  size_t copy_bytes = 0;
};

struct SchedBufferReport {
  std::string backend;
  std::string buffer_type;
  size_t bytes = 0;  // compute buffer held now (all chunks)
};

struct SchedReport {
  std::vector<SplitReport> splits;
  size_t n_copies = 0;    // tensors copied per compute
  size_t copy_bytes = 0;  // bytes copied per compute
  size_t n_offloaded = 0;
  std::vector<size_t> nodes_per_backend;  // computing nodes, by backend index
  std::vector<SchedBufferReport> buffers;
  size_t n_plan_builds = 0;  // assignments + plans made (first graph, changed structure)
  size_t n_plan_reuses = 0;  // graphs that kept the previous plan
  std::string last_rebuild_reason;
  size_t n_splits() const { return splits.size(); }
  std::string to_string() const;
  std::string to_json() const;
};

class Scheduler {
 public:
  explicit Scheduler(std::vector<Backend*> backends, SchedulerOptions options = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The backends in priority order (the CPU fallback included).
  const std::vector<Backend*>& backends() const { return backends_; }

  // Pins a tensor (node or unplaced input) to a backend; wins over every rule.
  void set_backend(const Tensor* t, Backend* backend);
  // After allocate: the backend a tensor was given (null if not in the graph).
  Backend* backend_of(const Tensor* t) const;
  Placement placement_of(const Tensor* t) const;

  // Plans `graph` as the worst case and sizes the compute buffers; places nothing.
  void reserve(Graph& graph);
  // Assigns, splits and places every tensor of `graph` (reusing the last plan
  // when the structure is unchanged). The caller then sets the inputs
  // (kFlagInput leafs) with tensor_set and calls compute.
  void allocate(Graph& graph);
  // Runs `graph` (allocating it first if allocate was not called for it):
  // copies split inputs, computes every split, waits for all backends.
  void compute(Graph& graph);
  // Same, without the final wait: the next graph may start while this one
  // finishes. Call synchronize() before reading outputs.
  void compute_async(Graph& graph);
  void synchronize();
  // Reads a tensor's bytes in the order of the stream that owns its memory,
  // so that an output of a graph computed with compute_async is read before
  // the next graph overwrites it; `data` is filled by synchronize().
  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size);

  // Figures of the last plan; valid after the graph itself is gone.
  const SchedReport& report() const;
  // Graphviz picture of the last graph's splits: nodes coloured by backend,
  // copies as dashed edges.
  void write_dot(const std::string& path) const;

  // Frees the compute buffers and forgets the plan (and the reserve): the
  // next graph is planned and allocated at its own size. The memory goes
  // once the graphs placed in it are destroyed.
  void release_buffers();

  // Forgets the plan (and the user assignments if `assignments`).
  void reset(bool assignments = false);

  // mul_mat_id experts in host memory that run on another device: only the
  // experts a batch selects are copied. Bytes of expert weights copied and
  // left behind, summed over the computes so far.
  struct ExpertCopies {
    uint64_t bytes_copied = 0, bytes_skipped = 0;
  };
  const ExpertCopies& expert_copies() const { return expert_copies_; }

  struct Plan;  // src/sched

 private:
  void build_plan(Graph& graph, bool for_reserve);
  void place_from_plan(Graph& graph);
  void run(Graph& graph, bool wait);
  void copy_input_synchronously(const Tensor& src, Tensor& dst, size_t b, size_t s);
  void copy_used_experts(size_t ids, const Tensor& src, Tensor& dst, size_t b);
  void wait_pending_reads_of(size_t backend, size_t dst);  // dst == SIZE_MAX: the host waits
  void wait_all_pending_reads();
  void publish_report();
  void print_debug() const;

  std::vector<Backend*> backends_;
  std::unique_ptr<Backend> own_cpu_;
  SchedulerOptions options_;
  int debug_ = 0;
  std::unordered_map<const Tensor*, size_t> user_;  // tensor -> backend index
  std::unique_ptr<Plan> plan_;
  struct Runtime;
  std::unique_ptr<Runtime> rt_;
  SchedReport report_;  // published when a plan is built; reuse updates the counters
  size_t n_builds_ = 0, n_reuses_ = 0;
  ExpertCopies expert_copies_;
  std::string rebuild_reason_;
};

}  // namespace loom
