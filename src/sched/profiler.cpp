// The profiler's records: what the scheduler reports per graph, split, copy
// and node, and what each node costs in bytes and FLOPs (see profiler.h).
#include "loom/profiler.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include <fmt/format.h>

#include "loom/tensor.h"

namespace loom {

int64_t Profiler::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t node_bytes_read(const Tensor& node) {
  if (node.op == Op::GetRows && node.src[0] && node.src[1]) {
    // Only the gathered rows of the table are read, and the indices.
    const Tensor& table = *node.src[0];
    const size_t row = table.ne[1] > 0 ? table.nbytes() / static_cast<size_t>(table.ne[1] * table.ne[2] * table.ne[3])
                                       : 0;
    return row * static_cast<size_t>(node.src[1]->nelements()) + node.src[1]->nbytes();
  }
  size_t bytes = 0;
  for (const Tensor* s : node.src)
    if (s) bytes += s->nbytes();
  return bytes;
}

double node_flops(const Tensor& node) {
  const double n = static_cast<double>(node.nelements());
  switch (node.op) {
    case Op::MulMat:
    case Op::MulMatId:
      // Each output element is a dot product of src0's rows (K = ne[0]).
      return node.src[0] ? 2.0 * static_cast<double>(node.src[0]->ne[0]) * n : 0.0;
    case Op::FlashAttnExt: {
      // Per query vector (head, token): K^T q over n_kv rows and p V back.
      const Tensor *k = node.src[1], *v = node.src[2];
      if (!k || !v || node.ne[0] == 0) return 0.0;
      const double vectors = n / static_cast<double>(node.ne[0]);
      return vectors * static_cast<double>(k->ne[1]) * 2.0 * static_cast<double>(k->ne[0] + v->ne[0]);
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
      return n;
    default:
      return 0.0;
  }
}

std::string node_label(const Tensor& node, int depth) {
  if (!node.name.empty()) return node.name;
  std::string label(op_name(node.op));
  if (depth <= 0) return label;
  // A weight says most about what a node is; else follow the first operand.
  const Tensor* operand = node.src[0];
  for (const Tensor* s : node.src)
    if (s && (s->flags & kFlagWeight) && !s->name.empty()) {
      operand = s;
      break;
    }
  if (operand) label = fmt::format("{}({})", label, node_label(*operand, depth - 1));
  return label;
}

void Profiler::clear() {
  graphs_.clear();
  splits_.clear();
  copies_.clear();
  nodes_.clear();
  intervals_.clear();
}

void Profiler::begin_graph() { graphs_.push_back({.start_ns = now_ns()}); }

void Profiler::begin_split(std::string_view backend) {
  GraphProfile& g = graphs_.back();
  SplitProfile s;
  s.graph = static_cast<uint32_t>(graphs_.size() - 1);
  s.index = static_cast<uint32_t>(g.n_splits++);
  s.backend = std::string(backend);
  s.start_ns = now_ns();
  s.first_node = nodes_.size();
  splits_.push_back(std::move(s));
}

void Profiler::add_copy(const Tensor& src, const Tensor& dst, int64_t start_ns, int64_t end_ns) {
  SplitProfile& s = splits_.back();
  const Tensor* root = src.view_src ? src.view_src : &src;
  CopyProfile c;
  c.graph = s.graph;
  c.split = static_cast<uint32_t>(splits_.size() - 1);
  c.tensor = src.name;
  c.from = root->buffer ? std::string(root->buffer->type().name()) : "?";
  c.to = dst.buffer ? std::string(dst.buffer->type().name()) : "?";
  c.bytes = dst.nbytes();
  c.start_ns = start_ns;
  c.end_ns = end_ns;
  s.copy_bytes += c.bytes;
  ++s.n_copies;
  copies_.push_back(std::move(c));
}

void Profiler::begin_compute() { splits_.back().compute_ns = now_ns(); }

void Profiler::end_split(std::span<Tensor* const> nodes, std::span<const NodeTime> times, bool timed) {
  SplitProfile& s = splits_.back();
  s.end_ns = now_ns();
  s.nodes_timed = timed;
  const uint32_t split = static_cast<uint32_t>(splits_.size() - 1);
  std::unordered_map<const Tensor*, size_t> index;
  index.reserve(nodes.size());
  for (Tensor* t : nodes) {
    index.emplace(t, nodes_.size());
    NodeProfile n;
    n.graph = s.graph;
    n.split = split;
    n.op = t->op;
    n.name = node_label(*t);
    n.shape = t->shape_string();
    n.backend = s.backend;
    n.bytes_read = node_bytes_read(*t);
    n.bytes_written = t->nbytes();
    n.flops = node_flops(*t);
    nodes_.push_back(std::move(n));
  }
  s.n_nodes = nodes.size();
  // Intervals grouped by node, in the order the nodes ran.
  std::vector<NodeTime> sorted(times.begin(), times.end());
  std::stable_sort(sorted.begin(), sorted.end(), [&](const NodeTime& a, const NodeTime& b) {
    const auto ia = index.find(a.node), ib = index.find(b.node);
    return (ia == index.end() ? SIZE_MAX : ia->second) < (ib == index.end() ? SIZE_MAX : ib->second);
  });
  int max_lane = -1;
  for (const NodeTime& t : sorted) {
    auto it = index.find(t.node);
    if (it == index.end()) continue;  // not one of the split's nodes
    NodeProfile& n = nodes_[it->second];
    if (!n.timed) {
      n.timed = true;
      n.start_ns = t.start_ns;
      n.end_ns = t.end_ns;
      n.first_interval = intervals_.size();
    }
    n.start_ns = std::min(n.start_ns, t.start_ns);
    n.end_ns = std::max(n.end_ns, t.end_ns);
    n.busy_ns += t.end_ns - t.start_ns;
    ++n.n_intervals;
    intervals_.push_back(t);
    max_lane = std::max(max_lane, t.lane);
  }
  s.lanes = max_lane + 1;
  for (size_t i = s.first_node; i < nodes_.size(); ++i) nodes_[i].time_ns = s.lanes > 0 ? nodes_[i].busy_ns / s.lanes : 0;
}

void Profiler::end_graph() {
  GraphProfile& g = graphs_.back();
  g.end_ns = now_ns();
  g.n_nodes = 0;
  for (auto it = splits_.rbegin(); it != splits_.rend() && it->graph == graphs_.size() - 1; ++it) g.n_nodes += it->n_nodes;
}

}  // namespace loom
