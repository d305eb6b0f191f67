#include "loom/graph_alloc.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <tuple>

#include "graph_plan.h"
#include "loom/error.h"
#include "loom/log.h"
#include "loom/tensor_alloc.h"

namespace loom {

using alloc_detail::Analysis;
using alloc_detail::Block;

bool op_supports_in_place(Op op, int src_index) {
  return static_cast<size_t>(op) < kOpCount && op_info(op).may_overwrite(src_index);
}

Schedule Schedule::sequential(const Graph& graph) {
  Schedule s;
  s.groups.reserve(graph.nodes().size());
  for (Tensor* n : graph.nodes()) s.groups.push_back({n});
  return s;
}

struct GraphAllocator::Planned {
  Analysis analysis;
  std::vector<std::vector<size_t>> chunk_sizes;  // per type, per chunk
  std::vector<size_t> lower_bound;               // per type
  std::vector<std::string> strategy;             // per type
  std::vector<size_t> best_fit_peak, greedy_peak;  // per type
};

namespace {

bool debug_enabled() {
  const char* env = std::getenv("LOOM_ALLOC_DEBUG");
  return env && *env && std::strcmp(env, "0") != 0;
}

// The same blocks in the same order with the same lifetimes, none larger:
// the reserved offsets are valid for this graph.
bool fits_reserved(const Analysis& reserved, const Analysis& now) {
  if (reserved.blocks.size() != now.blocks.size() || reserved.n_steps != now.n_steps) return false;
  for (size_t i = 0; i < now.blocks.size(); ++i) {
    const Block &r = reserved.blocks[i], &b = now.blocks[i];
    if (r.type != b.type || r.first != b.first || r.last != b.last || r.members.size() != b.members.size() ||
        b.size > r.size)
      return false;
  }
  return true;
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

GraphAllocator::GraphAllocator(std::vector<BufferType*> types) : types_(std::move(types)), buffers_(types_.size()) {
  if (types_.empty()) fail("graph allocator: at least one buffer type is needed");
  for (BufferType* t : types_)
    if (!t) fail("graph allocator: a buffer type is null");
}

GraphAllocator::~GraphAllocator() = default;

bool GraphAllocator::owns(const Tensor& t) const {
  if (!t.buffer) return false;
  for (const auto& w : ever_allocated_)  // same control block: the very buffer, even after a regrow
    if (!w.owner_before(t.buffer) && !t.buffer.owner_before(w)) return true;
  return false;
}

size_t GraphAllocator::buffer_size(size_t type) const {
  size_t total = 0;
  for (const auto& b : buffers_.at(type))
    if (b) total += b->size();
  return total;
}

GraphAllocator::Planned GraphAllocator::make_plan(const Graph& graph, const AllocOptions& options, bool try_reserved) {
  Schedule sequential;
  if (!options.schedule) sequential = Schedule::sequential(graph);
  const Schedule& schedule = options.schedule ? *options.schedule : sequential;
  Planned p;
  p.analysis = alloc_detail::analyze(graph, schedule, options.assign, types_,
                                     [this](const Tensor& t) { return owns(t); });
  p.lower_bound = alloc_detail::lower_bounds(p.analysis, types_.size());
  p.chunk_sizes.resize(types_.size());
  p.strategy.assign(types_.size(), "");
  p.best_fit_peak.assign(types_.size(), 0);
  p.greedy_peak.assign(types_.size(), 0);
  if (try_reserved && reserved_ && fits_reserved(reserved_->analysis, p.analysis)) {
    for (size_t i = 0; i < p.analysis.blocks.size(); ++i) {
      Block& b = p.analysis.blocks[i];
      b.chunk = reserved_->analysis.blocks[i].chunk;
      b.offset = reserved_->analysis.blocks[i].offset;
    }
    for (size_t t = 0; t < types_.size(); ++t) {
      p.chunk_sizes[t].assign(reserved_->chunk_sizes[t].size(), 0);
      p.strategy[t] = "reserved";
    }
    for (const Block& b : p.analysis.blocks)
      p.chunk_sizes[b.type][b.chunk] = std::max(p.chunk_sizes[b.type][b.chunk], b.offset + b.size);
    return p;
  }
  for (size_t t = 0; t < types_.size(); ++t) {
    BufferType& bt = *types_[t];
    auto& blocks = p.analysis.blocks;
    const auto best_fit = alloc_detail::place_best_fit(p.analysis, t, bt.alignment(), bt.max_size());
    std::vector<std::pair<size_t, size_t>> saved;  // (chunk, offset) of this type's blocks
    for (const Block& b : blocks)
      if (b.type == t) saved.emplace_back(b.chunk, b.offset);
    const auto greedy = alloc_detail::place_greedy_by_size(p.analysis, t, bt.alignment(), bt.max_size());
    auto total = [](const std::vector<size_t>& v) {
      size_t s = 0;
      for (size_t x : v) s += x;
      return s;
    };
    p.best_fit_peak[t] = total(best_fit);
    p.greedy_peak[t] = total(greedy);
    if (total(greedy) < total(best_fit)) {
      p.chunk_sizes[t] = greedy;
      p.strategy[t] = "greedy-by-size";
    } else {
      size_t k = 0;
      for (Block& b : blocks)
        if (b.type == t) std::tie(b.chunk, b.offset) = saved[k++];
      p.chunk_sizes[t] = best_fit;
      p.strategy[t] = "best-fit";
    }
  }
  return p;
}

void GraphAllocator::ensure_buffers(const Planned& plan, bool allow_grow) {
  for (size_t t = 0; t < types_.size(); ++t) {
    auto& bufs = buffers_[t];
    const auto& need = plan.chunk_sizes[t];
    if (bufs.size() < need.size()) bufs.resize(need.size());
    for (size_t c = 0; c < need.size(); ++c) {
      if (need[c] == 0 || (bufs[c] && bufs[c]->size() >= need[c])) continue;
      const size_t have = bufs[c] ? bufs[c]->size() : 0;
      if (!allow_grow)
        fail("graph allocator: buffer type {} chunk {}: the graph needs {} bytes, {} are reserved (growing is off)",
             types_[t]->name(), c, need[c], have);
      if (bufs[c])
        log(LogLevel::Debug, "graph allocator: growing {} chunk {} from {} to {} bytes", types_[t]->name(), c, have,
            need[c]);
      bufs[c] = alloc_buffer_or_throw(*types_[t], need[c],
                                      fmt::format("graph allocator: chunk {} of {} (plan needs {} bytes of this type)",
                                                  c, types_[t]->name(), [&] {
                                                    size_t s = 0;
                                                    for (size_t x : need) s += x;
                                                    return s;
                                                  }()));
      bufs[c]->set_usage(BufferUsage::Compute);
      ever_allocated_.push_back(bufs[c]);
      ++n_allocations_;
    }
  }
  std::erase_if(ever_allocated_, [](const std::weak_ptr<Buffer>& w) { return w.expired(); });
}

void GraphAllocator::release() {
  for (auto& bufs : buffers_) bufs.clear();  // ever_allocated_ still knows them: their tensors stay "owned"
  reserved_.reset();
  plan_.clear();
  for (BufferTypeReport& r : report_.types) r.buffer_bytes = 0;
}

void GraphAllocator::reserve(const Graph& graph, const AllocOptions& options) {
  Planned p = make_plan(graph, options, false);
  ensure_buffers(p, true);
  publish(p);
  reserved_ = std::make_unique<Planned>(std::move(p));
}

void GraphAllocator::allocate(Graph& graph, const AllocOptions& options) {
  Planned p = make_plan(graph, options, true);
  ensure_buffers(p, options.allow_grow);
  for (const Block& b : p.analysis.blocks) {
    Buffer& buf = *buffers_[b.type][b.chunk];
    for (Tensor* m : b.members) buf.place(*m, b.offset);
  }
  // Views take their source's memory, whoever placed it.
  auto place_view = [&](Tensor* t) {
    if (t->view_src && t->view_src->buffer && (!t->buffer || owns(*t->view_src))) Buffer::place_view(*t);
  };
  for (Tensor* t : graph.leafs()) place_view(t);
  for (Tensor* t : graph.nodes()) place_view(t);
  publish(p);
  if (debug_enabled()) print_debug();
}

void GraphAllocator::publish(const Planned& p) {
  plan_.clear();
  plan_.reserve(p.analysis.blocks.size());
  for (const Block& b : p.analysis.blocks) {
    PlannedBlock pb;
    for (Tensor* m : b.members) {
      pb.tensors.push_back(m);
      pb.names.push_back(tensor_label(*m, TensorLabel::Bare));
    }
    pb.starts = b.starts;
    pb.type = b.type;
    pb.chunk = b.chunk;
    pb.offset = b.offset;
    pb.size = b.size;
    pb.first = b.first;
    pb.last = b.last;
    pb.input = b.input;
    pb.output = b.output;
    plan_.push_back(std::move(pb));
  }
  report_ = PlanReport{};
  report_.n_steps = p.analysis.n_steps;
  report_.n_nodes = p.analysis.n_nodes;
  for (size_t t = 0; t < types_.size(); ++t) {
    BufferTypeReport r;
    r.name = std::string(types_[t]->name());
    for (size_t s : p.chunk_sizes[t]) r.peak += s;
    r.lower_bound = p.lower_bound[t];
    r.n_inplace = p.analysis.n_inplace[t];
    for (const Block& b : p.analysis.blocks)
      if (b.type == t) r.n_tensors += b.members.size();
    r.n_chunks = p.chunk_sizes[t].size();
    r.buffer_bytes = buffer_size(t);
    r.strategy = p.strategy[t];
    r.best_fit_peak = p.best_fit_peak[t];
    r.greedy_peak = p.greedy_peak[t];
    report_.types.push_back(std::move(r));
  }
}

void GraphAllocator::print_debug() const {
  struct Event {
    size_t step;
    int order;  // allocations and reuses before frees within a step
    std::string text;
  };
  std::vector<Event> events;
  for (const PlannedBlock& b : plan_) {
    const std::string where = fmt::format("{}[{}] offset {} size {}", types_[b.type]->name(), b.chunk, b.offset, b.size);
    events.push_back({b.first, 0, fmt::format("alloc  {} {}", b.names[0], where)});
    for (size_t k = 1; k < b.names.size(); ++k)
      events.push_back({b.starts[k], 1, fmt::format("reuse  {} in place of {} {}", b.names[k], b.names[k - 1], where)});
    if (!b.output)
      events.push_back({b.last, 2, fmt::format("free   {} {}", b.names.back(), where)});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& x, const Event& y) { return std::tie(x.step, x.order) < std::tie(y.step, y.order); });
  for (const Event& e : events) log_write(LogLevel::Debug, fmt::format("alloc: step {:4} {}", e.step, e.text));
  log_write(LogLevel::Debug, report_.to_string());
}

void GraphAllocator::write_trace(const std::string& path) const {
  std::ofstream out(path);
  if (!out) fail("graph allocator: cannot write the trace file '{}'", path);
  out << "# step\toffset\tsize\ttensor\ttype\tchunk\n";
  for (const PlannedBlock& b : plan_) {
    size_t k = 0;
    for (size_t s = b.first; s <= b.last; ++s) {
      while (k + 1 < b.starts.size() && b.starts[k + 1] <= s) ++k;
      std::string name = b.names[k];
      for (char& c : name)
        if (c == ' ' || c == '\t' || c == '\n') c = '_';
      out << s << '\t' << b.offset << '\t' << b.size << '\t' << name << '\t' << types_[b.type]->name() << '\t'
          << b.chunk << '\n';
    }
  }
  if (!out) fail("graph allocator: writing the trace file '{}' failed", path);
}

std::string PlanReport::to_json() const {
  std::string s = fmt::format("{{\"n_steps\": {}, \"n_nodes\": {}, \"buffer_types\": [", n_steps, n_nodes);
  for (size_t i = 0; i < types.size(); ++i) {
    const BufferTypeReport& r = types[i];
    s += fmt::format(
        "{}{{\"name\": \"{}\", \"peak\": {}, \"lower_bound\": {}, \"ratio\": {:.6f}, \"n_tensors\": {}, "
        "\"n_inplace\": {}, \"n_chunks\": {}, \"buffer_bytes\": {}, \"strategy\": \"{}\", \"best_fit_peak\": {}, "
        "\"greedy_peak\": {}}}",
        i ? ", " : "", json_escape(r.name), r.peak, r.lower_bound, r.ratio(), r.n_tensors, r.n_inplace, r.n_chunks,
        r.buffer_bytes, r.strategy, r.best_fit_peak, r.greedy_peak);
  }
  return s + "]}";
}

std::string PlanReport::to_string() const {
  std::string s = fmt::format("{:<14} {:>12} {:>12} {:>7} {:>8} {:>8} {:>6}  {}\n", "buffer type", "peak MiB",
                              "bound MiB", "ratio", "tensors", "in-place", "chunks", "strategy");
  for (const BufferTypeReport& r : types)
    s += fmt::format("{:<14} {:>12.3f} {:>12.3f} {:>7.4f} {:>8} {:>8} {:>6}  {}\n", r.name, r.peak / 1048576.0,
                     r.lower_bound / 1048576.0, r.ratio(), r.n_tensors, r.n_inplace, r.n_chunks, r.strategy);
  return s;
}

}  // namespace loom
