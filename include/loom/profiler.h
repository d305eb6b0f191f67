// The profiler: where the time of a scheduler's graphs goes. A Scheduler
// given one (SchedulerOptions::profiler) records, for every graph it runs,
// each split (backend, the copies of its inputs with their bytes, its
// compute) and, where the backend can time single nodes
// (Backend::compute_timed), each node: op, tensor, shape, backend, the
// threads or queue that ran it, bytes read and written, FLOPs.
//
// Profiling waits for every copy and every split before the next starts, so
// devices that would overlap run one after the other: the figures say what
// each piece costs, not how they overlap. A scheduler without a profiler, or
// with a paused one, checks one flag per compute and reads no clock.
//
// Outputs: table() (op types and the heaviest nodes, sorted by time) and
// chrome_trace() (JSON "X" events that Perfetto and chrome://tracing open;
// one process per backend, one thread per lane, plus the scheduler's graphs,
// splits and copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "loom/backend.h"
#include "loom/op.h"

namespace loom {

struct NodeProfile {
  uint32_t graph = 0, split = 0;  // indices into graphs() and splits()
  Op op = Op::None;
  std::string name;     // node_label: the tensor's name, or what it computes from
  std::string shape;    // "[4096, 32, 1, 1] f32"
  std::string backend;
  bool timed = false;   // the backend timed it (else the times are 0)
  int64_t start_ns = 0, end_ns = 0;  // first start to last end over its lanes
  int64_t busy_ns = 0;  // summed over the lanes that ran it
  // busy_ns divided by the lanes its split used: the node's share of the
  // split's time. The shares of a split's nodes add up to at most the split's
  // compute time; tables sort by it.
  int64_t time_ns = 0;
  size_t bytes_read = 0, bytes_written = 0;
  double flops = 0;
  size_t first_interval = 0, n_intervals = 0;  // into intervals()
};

struct CopyProfile {
  uint32_t graph = 0, split = 0;
  std::string tensor;  // the copied tensor
  std::string from, to;  // buffer types
  size_t bytes = 0;
  int64_t start_ns = 0, end_ns = 0;
};

struct SplitProfile {
  uint32_t graph = 0;
  uint32_t index = 0;  // within its graph
  std::string backend;
  int64_t start_ns = 0;     // copies start
  int64_t compute_ns = 0;   // copies done, compute starts
  int64_t end_ns = 0;       // compute done
  size_t copy_bytes = 0, n_copies = 0;
  size_t first_node = 0, n_nodes = 0;  // into nodes()
  bool nodes_timed = false;            // the backend timed single nodes
  int lanes = 0;                       // threads or queues its nodes ran on
};

struct GraphProfile {
  int64_t start_ns = 0, end_ns = 0;
  size_t n_nodes = 0, n_splits = 0;
};

// What a node reads and writes (operands' bytes; get_rows: the rows it
// gathers) and its floating-point operations (mul_mat and mul_mat_id: 2*M*N*K;
// flash_attn_ext: 2*n_kv*(head_k + head_v) per query head and token;
// element-wise arithmetic: one per element; other ops: 0).
size_t node_bytes_read(const Tensor& node);
// The tensor's name; for an unnamed one its op and its weight operand (else
// its first operand), two levels deep: "mul_mat(blk.0.attn_q.weight)",
// "rope(mul_mat(blk.0.attn_k.weight))".
std::string node_label(const Tensor& node, int depth = 2);
double node_flops(const Tensor& node);

class Profiler {
 public:
  // A paused profiler records nothing (a bench's warm-up).
  void pause() { paused_ = true; }
  void resume() { paused_ = false; }
  // Graphs that start once `node_limit` nodes are recorded are not recorded
  // (a long-running server would otherwise grow without end); the table says
  // so. Default: kDefaultNodeLimit (about 100 MiB of records).
  static constexpr size_t kDefaultNodeLimit = 500'000;
  void set_node_limit(size_t node_limit) { node_limit_ = node_limit; }
  bool limit_reached() const { return nodes_.size() >= node_limit_; }
  bool recording() const { return !paused_ && !limit_reached(); }
  void clear();

  // Called by the scheduler, in this order per graph.
  void begin_graph();
  void begin_split(std::string_view backend);
  void add_copy(const Tensor& src, const Tensor& dst, int64_t start_ns, int64_t end_ns);
  void begin_compute();
  // The split's nodes and what the backend timed (empty when it did not).
  void end_split(std::span<Tensor* const> nodes, std::span<const NodeTime> times, bool timed);
  void end_graph();

  const std::vector<GraphProfile>& graphs() const { return graphs_; }
  const std::vector<SplitProfile>& splits() const { return splits_; }
  const std::vector<CopyProfile>& copies() const { return copies_; }
  const std::vector<NodeProfile>& nodes() const { return nodes_; }
  const std::vector<NodeTime>& intervals() const { return intervals_; }  // node pointers are stale

  // Human-readable: totals, time per op type and backend, the `top` heaviest
  // nodes (summed over graphs by tensor name and shape), splits per backend.
  std::string table(size_t top = 20) const;
  // Chrome trace event format (JSON object with "traceEvents"), times in µs
  // from the first graph's start.
  std::string chrome_trace() const;
  void write_chrome_trace(std::ostream& out) const;

  static int64_t now_ns();

 private:
  bool paused_ = false;
  size_t node_limit_ = kDefaultNodeLimit;
  std::vector<GraphProfile> graphs_;
  std::vector<SplitProfile> splits_;
  std::vector<CopyProfile> copies_;
  std::vector<NodeProfile> nodes_;
  std::vector<NodeTime> intervals_;
};

}  // namespace loom
