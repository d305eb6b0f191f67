// Observability: the report (splits, copies, buffer sizes, plan rebuilds),
// LOOM_SCHED_DEBUG output and the Graphviz picture of the splits.
#include <fstream>

#include <nlohmann/json.hpp>

#include "loom/error.h"
#include "loom/graph_alloc.h"
#include "loom/log.h"
#include "loom/scheduler.h"
#include "sched_plan.h"

namespace loom {

using sched_detail::kNone;

namespace {

std::string human_bytes(size_t n) {
  if (n >= (size_t{1} << 20)) return fmt::format("{:.2f} MiB", n / 1048576.0);
  if (n >= 1024) return fmt::format("{:.1f} KiB", n / 1024.0);
  return fmt::format("{} B", n);
}

}  // namespace

void Scheduler::publish_report() {
  report_ = SchedReport{};
  report_.n_plan_builds = n_builds_;
  report_.n_plan_reuses = n_reuses_;
  report_.last_rebuild_reason = rebuild_reason_;
  report_.nodes_per_backend.assign(backends_.size(), 0);
  for (size_t t = 0; t < rt_->types.size(); ++t) {
    SchedBufferReport r;
    for (size_t b = 0; b < backends_.size(); ++b)
      if (rt_->type_of_backend[b] == t) {
        if (!r.backend.empty()) r.backend += ',';
        r.backend += backends_[b]->name();
      }
    r.buffer_type = std::string(rt_->types[t]->name());
    r.bytes = rt_->alloc->buffer_size(t);
    report_.buffers.push_back(std::move(r));
  }
  if (!plan_) return;
  const Plan& p = *plan_;
  for (const auto& split : p.splits) {
    SplitReport s;
    s.backend = std::string(backends_[split.backend]->name());
    s.first_node = split.nodes.front() - p.n_leafs;
    s.n_nodes = split.nodes.size();
    report_.nodes_per_backend[split.backend] += split.nodes.size();
    for (size_t c : split.inputs) {
      const Tensor& src = *p.tensors[p.inputs[c].source];
      const BufferType* from = sched_detail::memory_type(p, rt_->ctx, p.inputs[c].source);
      s.inputs.push_back({tensor_label(src, TensorLabel::Bare), from ? std::string(from->name()) : "?", src.nbytes()});
      s.copy_bytes += src.nbytes();
    }
    report_.n_copies += s.inputs.size();
    report_.copy_bytes += s.copy_bytes;
    report_.splits.push_back(std::move(s));
  }
  for (Placement w : p.why) report_.n_offloaded += w == Placement::Offload;
}

std::string SchedReport::to_string() const {
  std::string s = fmt::format("{} splits, {} copies ({}) per compute, {} offloaded nodes; plans built {}, reused {}\n",
                              splits.size(), n_copies, human_bytes(copy_bytes), n_offloaded, n_plan_builds,
                              n_plan_reuses);
  for (size_t k = 0; k < splits.size(); ++k)
    s += fmt::format("  split {:3}: {:<10} {:5} nodes from node {:5}, {:3} inputs ({})\n", k, splits[k].backend,
                     splits[k].n_nodes, splits[k].first_node, splits[k].inputs.size(),
                     human_bytes(splits[k].copy_bytes));
  for (const auto& b : buffers)
    s += fmt::format("  compute buffer {:<12} ({}): {}\n", b.buffer_type, b.backend, human_bytes(b.bytes));
  return s;
}

std::string SchedReport::to_json() const {
  nlohmann::json j;
  j["n_splits"] = splits.size();
  j["n_copies"] = n_copies;
  j["copy_bytes"] = copy_bytes;
  j["n_offloaded"] = n_offloaded;
  j["n_plan_builds"] = n_plan_builds;
  j["n_plan_reuses"] = n_plan_reuses;
  j["last_rebuild_reason"] = last_rebuild_reason;
  j["nodes_per_backend"] = nodes_per_backend;
  for (const auto& sp : splits) {
    nlohmann::json js{{"backend", sp.backend}, {"first_node", sp.first_node}, {"n_nodes", sp.n_nodes},
                      {"copy_bytes", sp.copy_bytes}};
    js["inputs"] = nlohmann::json::array();
    for (const auto& in : sp.inputs) js["inputs"].push_back({{"tensor", in.tensor}, {"from", in.from}, {"bytes", in.bytes}});
    j["splits"].push_back(std::move(js));
  }
  for (const auto& b : buffers) j["buffers"].push_back({{"backend", b.backend}, {"buffer_type", b.buffer_type}, {"bytes", b.bytes}});
  return j.dump(2);
}

void Scheduler::print_debug() const {
  const Plan& p = *plan_;
  auto why = [&](size_t i) -> std::string {
    const Tensor& t = *p.tensors[i];
    const std::string cause = p.because[i] == kNone ? "" : tensor_label(*p.tensors[p.because[i]], TensorLabel::Bare);
    const Tensor* root = p.because[i] == kNone ? nullptr : p.tensors[p.because[i]];
    const std::string where = root && root->buffer ? std::string(root->buffer->type().name()) : "";
    switch (p.why[i]) {
      case Placement::Weight: return fmt::format("weight {} in {}", cause, where);
      case Placement::Offload:
        return fmt::format("offload: weight {} in {}, batch {}", cause, where, t.src[1] ? t.src[1]->ne[1] : 0);
      case Placement::View: return fmt::format("view of {}", cause);
      default: return std::string(placement_name(p.why[i]));
    }
  };
  std::string out;
  size_t k = 0;
  for (const auto& split : p.splits) {
    std::string inputs;
    for (size_t c : split.inputs) {
      const Tensor& src = *p.tensors[p.inputs[c].source];
      inputs += fmt::format(" [{} {}]", tensor_label(src, TensorLabel::Bare), human_bytes(src.nbytes()));
    }
    out += fmt::format("## SPLIT #{}: {} # {} nodes, {} inputs:{}\n", k++, backends_[split.backend]->name(),
                       split.nodes.size(), split.inputs.size(), inputs);
    if (debug_ < 2) continue;
    for (size_t i : split.nodes) {
      const Tensor& t = *p.tensors[i];
      out += fmt::format("  node {:5} {:<24} {:<10} {:<28} {:<8} ({})\n", i - p.n_leafs,
                         tensor_label(t, TensorLabel::Bare), op_name(t.op), t.shape_string(),
                         backends_[p.backend[i]]->name(), why(i));
    }
  }
  if (debug_ >= 2) {
    out += "## views and leafs\n";
    for (size_t i = 0; i < p.tensors.size(); ++i) {
      if (p.computes[i]) continue;
      const Tensor& t = *p.tensors[i];
      out += fmt::format("  {} {:<24} {:<10} {:<8} ({})\n", p.is_leaf(i) ? "leaf" : "view",
                         tensor_label(t, TensorLabel::Bare), op_name(t.op),
                         p.backend[i] == kNone ? "-" : backends_[p.backend[i]]->name(), why(i));
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  log_write(LogLevel::Info, out);
}

void Scheduler::write_dot(const std::string& path) const {
  if (!plan_) fail("scheduler: write_dot('{}'): no graph has been planned yet", path);
  const Plan& p = *plan_;
  static constexpr const char* kColors[] = {"#8ecae6", "#ffb703", "#90be6d", "#f28482", "#cdb4db", "#bde0fe"};
  auto color = [&](size_t b) { return b == kNone ? "#dddddd" : kColors[b % std::size(kColors)]; };
  auto esc = [](std::string s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o;
  };
  std::ofstream out(path);
  if (!out) fail("scheduler: cannot write the dot file '{}'", path);
  out << "digraph splits {\n  rankdir=TB;\n  node [style=filled, fontsize=10];\n";
  out << "  subgraph cluster_legend { label=\"backends\";";
  for (size_t b = 0; b < backends_.size(); ++b)
    out << fmt::format(" legend{} [label=\"{}\", fillcolor=\"{}\", shape=box];", b, esc(std::string(backends_[b]->name())),
                       color(b));
  out << " }\n";
  for (size_t k = 0; k < p.splits.size(); ++k) {
    const auto& split = p.splits[k];
    out << fmt::format("  subgraph cluster_{} {{ label=\"split {}: {} ({} nodes)\";\n", k, k,
                       esc(std::string(backends_[split.backend]->name())), split.nodes.size());
    for (size_t i : split.nodes)
      out << fmt::format("    t{} [label=\"{}\\n{}\", fillcolor=\"{}\"];\n", i,
                         esc(tensor_label(*p.tensors[i], TensorLabel::Bare)), op_name(p.tensors[i]->op),
                         color(split.backend));
    out << "  }\n";
  }
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    if (p.computes[i]) continue;
    out << fmt::format("  t{} [label=\"{}\", shape={}, fillcolor=\"{}\"];\n", i,
                       esc(tensor_label(*p.tensors[i], TensorLabel::Bare)), p.is_leaf(i) ? "box" : "ellipse",
                       color(p.backend[i]));
  }
  std::vector<std::vector<size_t>> copied(p.tensors.size());  // node -> copy ids it reads
  for (const auto& split : p.splits)
    for (const auto& r : split.rewrites) copied[r.node].push_back(r.copy);
  for (size_t i = p.n_leafs; i < p.tensors.size(); ++i) {
    const Tensor& t = *p.tensors[i];
    for (const Tensor* s : t.src) {
      if (!s) continue;
      const size_t si = p.index.at(s);
      bool via_copy = false;
      for (size_t c : copied[i]) via_copy = via_copy || p.inputs[c].source == si;
      out << fmt::format("  t{} -> t{}{};\n", si, i,
                         via_copy ? fmt::format(" [style=dashed, color=red, label=\"{}\"]", human_bytes(s->nbytes()))
                                  : std::string());
    }
  }
  out << "}\n";
  if (!out) fail("scheduler: writing the dot file '{}' failed", path);
}

}  // namespace loom
