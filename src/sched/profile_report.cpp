// The profiler's outputs: a table sorted by time and a Chrome trace.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "loom/profiler.h"

namespace loom {
namespace {

struct Sum {
  size_t count = 0;
  int64_t time_ns = 0;
  size_t bytes = 0;
  double flops = 0;
  void add(const NodeProfile& n) {
    ++count;
    time_ns += n.time_ns;
    bytes += n.bytes_read + n.bytes_written;
    flops += n.flops;
  }
};

std::string rate(double amount, int64_t ns, double unit) {
  if (ns <= 0 || amount <= 0) return "-";
  return fmt::format("{:.1f}", amount / (static_cast<double>(ns) * 1e-9) / unit);
}

double ms(int64_t ns) { return static_cast<double>(ns) * 1e-6; }

std::string fit(const std::string& s, size_t width) {
  return s.size() <= width ? s : s.substr(0, width - 1) + "~";
}

template <typename Key>
std::vector<std::pair<Key, Sum>> by_time(const std::map<Key, Sum>& sums) {
  std::vector<std::pair<Key, Sum>> rows(sums.begin(), sums.end());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.time_ns > b.second.time_ns; });
  return rows;
}

// The name with layer numbers as '*' ("blk.3.attn_q" -> "blk.*.attn_q",
// "cache_k_l3" -> "cache_k_l*"), so that a layer's nodes add up over layers.
std::string without_layer(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    const bool blk = name.compare(i, 4, "blk.") == 0;
    const bool l = name.compare(i, 2, "_l") == 0;
    const size_t prefix = blk ? 4 : l ? 2 : 0;
    size_t j = i + prefix;
    while (prefix && j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (prefix && j > i + prefix && (blk || j == name.size() || !std::isalnum(static_cast<unsigned char>(name[j])))) {
      out += std::string_view(name).substr(i, prefix);
      out += '*';
      i = j;
    } else {
      out.push_back(name[i++]);
    }
  }
  return out;
}

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

std::string Profiler::table(size_t top) const {
  std::string out;
  auto o = std::back_inserter(out);
  int64_t graph_ns = 0, compute_ns = 0, copy_ns = 0;
  size_t copy_bytes = 0;
  // A graph or split whose compute threw has no end: it counts as zero.
  const auto span = [](int64_t from, int64_t to) { return std::max<int64_t>(to - from, 0); };
  for (const GraphProfile& g : graphs_) graph_ns += span(g.start_ns, g.end_ns);
  for (const SplitProfile& s : splits_) {
    compute_ns += span(s.compute_ns, s.end_ns);
    copy_ns += span(s.start_ns, s.compute_ns);
    copy_bytes += s.copy_bytes;
  }
  fmt::format_to(o, "profile: {} graphs, {} nodes, {} splits: {:.3f} ms in graphs, {:.3f} ms computing, "
                    "{:.3f} ms copying {:.2f} MiB\n",
                 graphs_.size(), nodes_.size(), splits_.size(), ms(graph_ns), ms(compute_ns), ms(copy_ns),
                 static_cast<double>(copy_bytes) / 1048576.0);
  if (limit_reached())
    fmt::format_to(o, "(recording stopped at the limit of {} nodes: later graphs are not counted)\n", node_limit_);
  fmt::format_to(o, "(time: a node's thread time divided by the threads its split used; %: of the time in graphs; "
                    "GB/s: bytes read and written)\n");
  const auto pct = [&](int64_t ns) { return graph_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(graph_ns) : 0.0; };

  std::map<std::pair<std::string, std::string>, Sum> ops;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Sum> named;
  size_t untimed = 0;
  for (const NodeProfile& n : nodes_) {
    if (!n.timed) ++untimed;
    ops[{std::string(op_name(n.op)), n.backend}].add(n);
    named[{without_layer(n.name), std::string(op_name(n.op)), n.backend, n.shape}].add(n);
  }
  fmt::format_to(o, "\nby op type\n  {:<14} {:<10} {:>8} {:>11} {:>6} {:>10} {:>8} {:>9}\n", "op", "backend", "nodes",
                 "time ms", "%", "avg us", "GB/s", "GFLOP/s");
  for (const auto& [key, s] : by_time(ops))
    fmt::format_to(o, "  {:<14} {:<10} {:>8} {:>11.3f} {:>6.1f} {:>10.2f} {:>8} {:>9}\n", fit(key.first, 14),
                   fit(key.second, 10), s.count, ms(s.time_ns), pct(s.time_ns),
                   static_cast<double>(s.time_ns) * 1e-3 / static_cast<double>(s.count), rate(static_cast<double>(s.bytes), s.time_ns, 1e9),
                   rate(s.flops, s.time_ns, 1e9));
  const auto rows = by_time(named);
  fmt::format_to(o, "\ntop {} nodes (by name and shape, over all graphs and layers)\n  {:<40} {:<10} {:<8} {:<22} {:>6} {:>10} {:>6} {:>9} {:>8} {:>9}\n",
                 std::min(top, rows.size()), "node", "op", "backend", "shape", "count", "time ms", "%", "avg us",
                 "GB/s", "GFLOP/s");
  for (size_t i = 0; i < rows.size() && i < top; ++i) {
    const auto& [key, s] = rows[i];
    const auto& [name, op, backend, shape] = key;
    fmt::format_to(o, "  {:<40} {:<10} {:<8} {:<22} {:>6} {:>10.3f} {:>6.1f} {:>9.2f} {:>8} {:>9}\n", fit(name, 40),
                   fit(op, 10), fit(backend, 8), fit(shape, 22), s.count, ms(s.time_ns), pct(s.time_ns),
                   static_cast<double>(s.time_ns) * 1e-3 / static_cast<double>(s.count),
                   rate(static_cast<double>(s.bytes), s.time_ns, 1e9), rate(s.flops, s.time_ns, 1e9));
  }
  struct SplitSum {
    size_t splits = 0, nodes = 0, copies = 0, bytes = 0;
    int64_t compute_ns = 0, copy_ns = 0;
    bool timed = true;
  };
  std::map<std::string, SplitSum> backends;
  for (const SplitProfile& s : splits_) {
    SplitSum& b = backends[s.backend];
    ++b.splits;
    b.nodes += s.n_nodes;
    b.copies += s.n_copies;
    b.bytes += s.copy_bytes;
    b.compute_ns += span(s.compute_ns, s.end_ns);
    b.copy_ns += span(s.start_ns, s.compute_ns);
    b.timed = b.timed && s.nodes_timed;
  }
  fmt::format_to(o, "\nsplits by backend (copies: the split's inputs copied in before it runs)\n  {:<10} {:>7} {:>8} {:>12} {:>7} {:>10} {:>10} {:>8}  {}\n",
                 "backend", "splits", "nodes", "compute ms", "copies", "copy MiB", "copy ms", "GB/s", "node times");
  for (const auto& [name, b] : backends)
    fmt::format_to(o, "  {:<10} {:>7} {:>8} {:>12.3f} {:>7} {:>10.2f} {:>10.3f} {:>8}  {}\n", fit(name, 10), b.splits,
                   b.nodes, ms(b.compute_ns), b.copies, static_cast<double>(b.bytes) / 1048576.0, ms(b.copy_ns),
                   rate(static_cast<double>(b.bytes), b.copy_ns, 1e9), b.timed ? "per node" : "per split only");
  if (untimed > 0) fmt::format_to(o, "({} nodes ran on backends that time whole splits only)\n", untimed);
  return out;
}

void Profiler::write_chrome_trace(std::ostream& out) const {
  int64_t origin = 0;
  if (!graphs_.empty()) origin = graphs_.front().start_ns;
  for (const GraphProfile& g : graphs_) origin = std::min(origin, g.start_ns);
  const auto us = [origin](int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns - origin) * 1e-3); };
  const auto dur = [](int64_t a, int64_t b) { return fmt::format("{:.3f}", static_cast<double>(std::max<int64_t>(b - a, 0)) * 1e-3); };
  std::map<std::string, int> pid;  // backend -> process id; 0 is the scheduler
  std::map<std::pair<int, int>, bool> lanes;
  for (const SplitProfile& s : splits_) pid.emplace(s.backend, 0);
  int next = 1;
  for (auto& [name, id] : pid) id = next++;
  bool first = true;
  const auto event = [&](const std::string& text) {
    out << (first ? "\n" : ",\n") << text;
    first = false;
  };
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  event(R"({"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "scheduler"}})");
  const char* sched_threads[] = {"graphs", "splits", "copies"};
  for (int t = 0; t < 3; ++t)
    event(fmt::format(R"({{"name": "thread_name", "ph": "M", "pid": 0, "tid": {}, "args": {{"name": "{}"}}}})", t,
                      sched_threads[t]));
  for (const auto& [name, id] : pid)
    event(fmt::format(R"({{"name": "process_name", "ph": "M", "pid": {}, "tid": 0, "args": {{"name": {}}}}})", id,
                      quoted(name)));
  for (size_t i = 0; i < graphs_.size(); ++i) {
    const GraphProfile& g = graphs_[i];
    event(fmt::format(R"({{"name": "graph {}", "cat": "graph", "ph": "X", "ts": {}, "dur": {}, "pid": 0, "tid": 0, "args": {{"nodes": {}, "splits": {}}}}})",
                      i, us(g.start_ns), dur(g.start_ns, g.end_ns), g.n_nodes, g.n_splits));
  }
  for (const SplitProfile& s : splits_)
    event(fmt::format(R"({{"name": {}, "cat": "split", "ph": "X", "ts": {}, "dur": {}, "pid": 0, "tid": 1, "args": {{"graph": {}, "backend": {}, "nodes": {}, "copies": {}, "copy_bytes": {}, "compute_us": {}}}}})",
                      quoted(fmt::format("split {} {}", s.index, s.backend)), us(s.start_ns), dur(s.start_ns, s.end_ns), s.graph, quoted(s.backend),
                      s.n_nodes, s.n_copies, s.copy_bytes, dur(s.compute_ns, s.end_ns)));
  for (const CopyProfile& c : copies_)
    event(fmt::format(R"({{"name": {}, "cat": "copy", "ph": "X", "ts": {}, "dur": {}, "pid": 0, "tid": 2, "args": {{"graph": {}, "from": {}, "to": {}, "bytes": {}}}}})",
                      quoted("copy " + c.tensor), us(c.start_ns), dur(c.start_ns, c.end_ns), c.graph, quoted(c.from),
                      quoted(c.to), c.bytes));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const NodeProfile& n = nodes_[i];
    const int p = pid.at(n.backend);
    for (size_t k = n.first_interval; k < n.first_interval + n.n_intervals; ++k) {
      const NodeTime& t = intervals_[k];
      if (!lanes[{p, t.lane}]) {
        lanes[{p, t.lane}] = true;
        event(fmt::format(R"({{"name": "thread_name", "ph": "M", "pid": {}, "tid": {}, "args": {{"name": "lane {}"}}}})",
                          p, t.lane, t.lane));
      }
      event(fmt::format(R"({{"name": "{}", "cat": "node", "ph": "X", "ts": {}, "dur": {}, "pid": {}, "tid": {}, "args": {{"node": {}, "tensor": {}, "shape": {}, "graph": {}, "bytes_read": {}, "bytes_written": {}, "flops": {:.0f}, "node_us": {}}}}})",
                        op_name(n.op), us(t.start_ns), dur(t.start_ns, t.end_ns), p, t.lane, i, quoted(n.name),
                        quoted(n.shape), n.graph, n.bytes_read, n.bytes_written, n.flops, dur(0, n.time_ns)));
    }
  }
  out << "\n]}\n";
}

std::string Profiler::chrome_trace() const {
  std::ostringstream out;
  write_chrome_trace(out);
  return out.str();
}

}  // namespace loom
