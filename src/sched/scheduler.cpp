// The scheduler: plans (or re-binds) a graph, then runs its splits with the
// copies between them. Ordering between backends: before a split writes a
// backend's memory, every other stream that may still read that memory
// (async copies) is waited for; before a split copies a tensor, the backend
// that produced it is waited for (an event where both have them, else a
// synchronize).
#include "loom/scheduler.h"

#include <cstdlib>
#include <cstring>

#include "loom/error.h"
#include "loom/graph_alloc.h"
#include "loom/log.h"
#include "loom/profiler.h"
#include "loom/registry.h"
#include "sched_plan.h"

namespace loom {

using sched_detail::kNone;


std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::Unassigned: return "unassigned";
    case Placement::User: return "user";
    case Placement::Weight: return "weight";
    case Placement::Offload: return "offload";
    case Placement::Neighbour: return "neighbour";
    case Placement::Fallback: return "fallback";
    case Placement::View: return "view";
    case Placement::Input: return "input";
  }
  return "?";
}

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end) fail("{}='{}' is not an integer", name, v);
  return static_cast<int>(x);
}

}  // namespace

Scheduler::Scheduler(std::vector<Backend*> backends, SchedulerOptions options)
    : backends_(std::move(backends)), options_(std::move(options)), rt_(std::make_unique<Runtime>()) {
  size_t cpu = kNone;
  for (size_t b = 0; b < backends_.size(); ++b) {
    if (!backends_[b]) fail("scheduler: backend {} of {} is null", b, backends_.size());
    for (size_t o = 0; o < b; ++o)
      if (backends_[o] == backends_[b]) fail("scheduler: backend {} is given twice", backends_[b]->name());
    if (cpu == kNone && backends_[b]->device().type() == DeviceType::CPU) cpu = b;
  }
  if (cpu == kNone) {  // the CPU is always there as the fallback
    own_cpu_ = Registry::get().cpu().create_backend();
    backends_.push_back(own_cpu_.get());
    cpu = backends_.size() - 1;
  }
  if (options_.n_copies < 1) fail("scheduler: n_copies must be at least 1 (got {})", options_.n_copies);
  debug_ = options_.debug >= 0 ? options_.debug : env_int("LOOM_SCHED_DEBUG", 0);
  const int env_batch = env_int("LOOM_OFFLOAD_MIN_BATCH", -1);
  Runtime& rt = *rt_;
  for (Backend* b : backends_) {
    BufferType* type = &b->device().default_buffer_type();
    size_t t = 0;
    while (t < rt.types.size() && rt.types[t] != type) ++t;
    if (t == rt.types.size()) rt.types.push_back(type);
    rt.type_of_backend.push_back(t);
    rt.compute_type.push_back(type);
    rt.events.push_back(b->device().caps().events ? b->create_event() : nullptr);
    auto it = options_.offload_min_batch_per_device.find(b->device().name());
    rt.ctx.offload_threshold.push_back(it != options_.offload_min_batch_per_device.end() ? it->second
                                       : options_.offload_min_batch >= 0                 ? options_.offload_min_batch
                                                                                         : env_batch);
  }
  rt.alloc = std::make_unique<GraphAllocator>(rt.types);
  rt.pending_read.assign(backends_.size(), std::vector<uint8_t>(backends_.size(), 0));
  rt.busy.assign(backends_.size(), 0);
  rt.ctx.backends = backends_;
  rt.ctx.compute_type = rt.compute_type;
  rt.ctx.cpu = cpu;
  rt.ctx.user = &user_;
  rt.ctx.preplaced = [this](const Tensor& t) { return t.buffer != nullptr && !rt_->alloc->owns(t); };
}

Scheduler::~Scheduler() {
  try {
    synchronize();
  } catch (const std::exception& e) {
    log(LogLevel::Warn, "scheduler: waiting for the backends at destruction failed: {}", e.what());
  }
}

void Scheduler::set_backend(const Tensor* t, Backend* backend) {
  for (size_t b = 0; b < backends_.size(); ++b)
    if (backends_[b] == backend) {
      user_[t] = b;
      return;
    }
  fail("scheduler: set_backend({}): backend {} is not one of the scheduler's", t ? tensor_label(*t) : "null",
       backend ? backend->name() : "null");
}

Backend* Scheduler::backend_of(const Tensor* t) const {
  if (!plan_) return nullptr;
  auto it = plan_->index.find(t);
  if (it == plan_->index.end() || plan_->backend[it->second] == kNone) return nullptr;
  return backends_[plan_->backend[it->second]];
}

Placement Scheduler::placement_of(const Tensor* t) const {
  if (!plan_) return Placement::Unassigned;
  auto it = plan_->index.find(t);
  return it == plan_->index.end() ? Placement::Unassigned : plan_->why[it->second];
}

void Scheduler::release_buffers() {
  synchronize();
  plan_.reset();
  rt_->alloc->release();
  rebuild_reason_ = "buffers released";
  publish_report();
}

void Scheduler::reset(bool assignments) {
  synchronize();
  plan_.reset();
  if (assignments) user_.clear();
  report_ = SchedReport{};
}

namespace {

// Points the split nodes' operands at their copies (copy set `set`) and back.
class RewriteGuard {
 public:
  RewriteGuard(Scheduler::Plan& plan, const std::vector<sched_detail::Rewrite>& rewrites, size_t set)
      : plan_(plan), rewrites_(rewrites) {
    for (const auto& r : rewrites_) plan_.tensors[r.node]->src[r.slot] = plan_.inputs[r.copy].copies[set];
  }
  ~RewriteGuard() {
    for (const auto& r : rewrites_) plan_.tensors[r.node]->src[r.slot] = plan_.tensors[plan_.inputs[r.copy].source];
  }
  RewriteGuard(const RewriteGuard&) = delete;
  RewriteGuard& operator=(const RewriteGuard&) = delete;

 private:
  Scheduler::Plan& plan_;
  const std::vector<sched_detail::Rewrite>& rewrites_;
};

}  // namespace

void Scheduler::build_plan(Graph& graph, bool for_reserve) {
  Runtime& rt = *rt_;
  Plan& p = *plan_;
  sched_detail::assign_backends(p, rt.ctx);
  sched_detail::build_splits(p, rt.ctx, options_.n_copies);
  for (const auto& in : p.inputs)
    for (Tensor* c : in.copies) p.copy_type.emplace(c, rt.type_of_backend[in.backend]);
  Graph planned;
  for (Tensor* leaf : graph.leafs()) planned.expand(leaf);
  planned.nodes() = sched_detail::allocation_order(p);
  std::vector<sched_detail::Rewrite> all;
  for (const auto& s : p.splits) all.insert(all.end(), s.rewrites.begin(), s.rewrites.end());
  AllocOptions opt;
  opt.assign = [&](const Tensor& t) -> size_t {
    if (auto it = p.index.find(&t); it != p.index.end()) {
      const size_t r = t.view_src ? p.index.at(t.view_src) : it->second;
      const size_t b = p.backend[r];
      if (b == kNone) fail("scheduler: tensor {} needs memory, but no backend can use its source's", tensor_label(t));
      return rt.type_of_backend[b];
    }
    return p.copy_type.at(&t);
  };
  RewriteGuard guard(p, all, 0);
  if (for_reserve) {
    rt.alloc->reserve(planned, opt);
    p.allocated = false;
  } else {
    rt.alloc->allocate(planned, opt);
    p.placed.clear();
    for (const PlannedBlock& b : rt.alloc->plan())
      for (const Tensor* t : b.tensors)
        if (auto it = p.index.find(t); it != p.index.end()) p.placed.push_back({it->second, b.type, b.chunk, b.offset});
    p.allocated = true;
  }
  ++n_builds_;
  publish_report();  // now, while the graph's tensors are alive (names, sizes)
  if (debug_ > 0) print_debug();
}

// A same-structure graph: take over the plan, place tensors at the planned offsets.
void Scheduler::place_from_plan(Graph& graph) {
  (void)graph;
  Plan& p = *plan_;
  Runtime& rt = *rt_;
  for (const auto& pl : p.placed) rt.alloc->buffers(pl.type)[pl.chunk]->place(*p.tensors[pl.tensor], pl.offset);
  for (Tensor* t : p.tensors)
    if (t->view_src && t->view_src->buffer && (!t->buffer || rt.alloc->owns(*t->view_src))) Buffer::place_view(*t);
  for (auto& in : p.inputs)
    for (Tensor* c : in.copies) c->src[0] = p.tensors[in.source];
  for (auto& s : p.splits) {
    auto& nodes = s.graph.nodes();
    for (size_t k = 0; k < s.nodes.size(); ++k) nodes[k] = p.tensors[s.nodes[k]];
  }
}

void Scheduler::reserve(Graph& graph) {
  synchronize();
  plan_ = std::make_unique<Plan>();
  sched_detail::describe_graph(*plan_, graph, rt_->ctx);
  rebuild_reason_ = "reserve";
  build_plan(graph, true);
}

void Scheduler::allocate(Graph& graph) {
  wait_all_pending_reads();  // the caller writes inputs next
  auto next = std::make_unique<Plan>();
  sched_detail::describe_graph(*next, graph, rt_->ctx);
  if (plan_ && plan_->allocated && options_.reuse && next->signature == plan_->signature) {
    plan_->graph = &graph;
    plan_->tensors = std::move(next->tensors);
    plan_->index = std::move(next->index);
    plan_->preplaced = std::move(next->preplaced);
    place_from_plan(graph);
    report_.n_plan_reuses = ++n_reuses_;
    if (debug_ > 1) log_write(LogLevel::Info, fmt::format("sched: graph of {} nodes reuses the plan", graph.size()));
    return;
  }
  if (!plan_) {
    rebuild_reason_ = "first graph";
  } else if (!plan_->allocated) {
    rebuild_reason_ = "first graph after reserve";
  } else if (!options_.reuse) {
    rebuild_reason_ = "reuse is off";
  } else {
    size_t k = 0;
    while (k < next->signature.size() && k < plan_->signature.size() && next->signature[k] == plan_->signature[k]) ++k;
    // Each tensor's facts start with a word holding op/type/flags; find the tensor of word k.
    rebuild_reason_ = next->tensors.size() != plan_->tensors.size()
                          ? fmt::format("{} tensors instead of {}", next->tensors.size(), plan_->tensors.size())
                          : fmt::format("structure differs at word {} of the graph description", k);
    log(LogLevel::Debug, "scheduler: re-planning: {}", rebuild_reason_);
  }
  plan_ = std::move(next);
  build_plan(graph, false);
}

void Scheduler::compute(Graph& graph) { run(graph, true); }
void Scheduler::compute_async(Graph& graph) { run(graph, false); }

void Scheduler::wait_pending_reads_of(size_t x, size_t dst) {
  Runtime& rt = *rt_;
  for (size_t y = 0; y < backends_.size(); ++y) {
    if (!rt.pending_read[x][y]) continue;
    if (rt.events[y] && dst != kNone) rt.events[y]->wait(*backends_[dst]);
    else if (rt.events[y]) rt.events[y]->synchronize();
    else backends_[y]->synchronize();
    rt.pending_read[x][y] = 0;
  }
}

void Scheduler::wait_all_pending_reads() {
  for (size_t x = 0; x < backends_.size(); ++x) wait_pending_reads_of(x, kNone);
}

void Scheduler::synchronize() {
  if (!rt_) return;
  for (size_t b = 0; b < backends_.size(); ++b) backends_[b]->synchronize();
  for (auto& row : rt_->pending_read) std::fill(row.begin(), row.end(), 0);
  std::fill(rt_->busy.begin(), rt_->busy.end(), 0);
}

void Scheduler::run(Graph& graph, bool wait) {
  if (!plan_ || !plan_->allocated || plan_->graph != &graph ||
      plan_->tensors.size() != graph.leafs().size() + graph.nodes().size())
    allocate(graph);
  Plan& p = *plan_;
  Runtime& rt = *rt_;
  const size_t set = rt.n_runs++ % static_cast<size_t>(options_.n_copies);
  // Profiling: decided once per compute; each copy and split is then waited
  // for, so that its time is its own.
  Profiler* prof = options_.profiler && options_.profiler->recording() ? options_.profiler : nullptr;
  if (prof) prof->begin_graph();
  std::vector<size_t> ready, pushed;
  // After a split whose successor runs elsewhere, its backend's threads need
  // not poll for work (a remote or OpenCL device on the same cores would
  // lose them to the spinning).
  const auto idle_after = [&](size_t i) {
    if (i + 1 < p.splits.size() && p.splits[i + 1].backend != p.splits[i].backend)
      backends_[p.splits[i].backend]->idle();
  };
  for (size_t i = 0; i < p.splits.size(); ++i) {
    auto& split = p.splits[i];
    const size_t b = split.backend;
    Backend& be = *backends_[b];
    if (prof) prof->begin_split(be.name());
    wait_pending_reads_of(b, b);  // b is about to write its memory
    // The producers of this split's inputs come first.
    ready.clear();
    for (size_t c : split.inputs) {
      const size_t src = p.inputs[c].source;
      const size_t s = p.backend[p.tensors[src]->view_src ? p.index.at(p.tensors[src]->view_src) : src];
      if (s == kNone || s == b || !rt.busy[s] || std::find(ready.begin(), ready.end(), s) != ready.end()) continue;
      ready.push_back(s);
      if (rt.events[s]) {
        rt.events[s]->record(*backends_[s]);
        rt.events[s]->wait(be);
      } else {
        backends_[s]->synchronize();
        rt.busy[s] = 0;
      }
    }
    bool reads_other = false;
    pushed.clear();
    for (size_t c : split.inputs) {
      const auto& in = p.inputs[c];
      Tensor& src = *p.tensors[in.source];
      Tensor& dst = *in.copies[set];
      const size_t s = p.backend[src.view_src ? p.index.at(src.view_src) : in.source];
      if (in.expert_ids != kNone) {
        const int64_t start = prof ? Profiler::now_ns() : 0;
        copy_used_experts(in.expert_ids, src, dst, b);
        if (prof) prof->add_copy(src, dst, start, Profiler::now_ns());
        continue;
      }
      if (prof) {
        const int64_t start = Profiler::now_ns();
        copy_input_synchronously(src, dst, b, s);
        prof->add_copy(src, dst, start, Profiler::now_ns());
        continue;
      }
      if (be.copy_tensor_async(src, dst)) {
        // Unless b took the bytes already, s must not write them until b has read them.
        const bool taken = be.takes_host_bytes_at_once() && src.buffer && src.buffer->is_host();
        if (s != kNone && s != b && !taken) {
          rt.pending_read[s][b] = 1;
          reads_other = true;
        }
        continue;
      }
      be.synchronize();
      if (s != kNone && s != b && backends_[s]->copy_tensor_async(src, dst)) {
        pushed.push_back(s);
        continue;
      }
      if (s != kNone) backends_[s]->synchronize();
      tensor_copy(src, dst);
    }
    if (reads_other && rt.events[b]) rt.events[b]->record(be);
    for (size_t s : pushed) {
      if (rt.events[s]) {
        rt.events[s]->record(*backends_[s]);
        rt.events[s]->wait(be);
      } else {
        backends_[s]->synchronize();
      }
    }
    RewriteGuard guard(p, split.rewrites, set);
    if (prof) {
      prof->begin_compute();
      rt.node_times.clear();
      const bool timed = be.compute_timed(split.graph, rt.node_times);
      prof->end_split(split.graph.nodes(), rt.node_times, timed);
      idle_after(i);
      continue;
    }
    be.compute(split.graph);
    rt.busy[b] = 1;
    idle_after(i);
  }
  if (prof) prof->end_graph();
  if (wait) synchronize();
}

// Experts `src` (host weights, [K, M, n_expert]) for a mul_mat_id on
// backend b: reads the ids (tensor index `ids`, made by an earlier split),
// then copies each run of consecutive experts they select. The others keep
// whatever bytes they had: the mul_mat_id reads only selected experts.
void Scheduler::copy_used_experts(size_t ids, const Tensor& src, Tensor& dst, size_t b) {
  Plan& p = *plan_;
  const Tensor& t = *p.tensors[ids];
  if (const size_t s = p.backend[t.view_src ? p.index.at(t.view_src) : ids]; s != kNone) {
    backends_[s]->synchronize();
    rt_->busy[s] = 0;
  }
  const size_t span = static_cast<size_t>((t.ne[1] - 1) * t.nb[1] + (t.ne[0] - 1) * t.nb[0]) + sizeof(int32_t);
  std::vector<uint8_t> raw(span);
  tensor_get(t, raw.data(), 0, span);
  const int64_t n_expert = src.ne[2];
  std::vector<uint8_t> used(static_cast<size_t>(n_expert), 0);
  for (int64_t j = 0; j < t.ne[1]; ++j)
    for (int64_t i = 0; i < t.ne[0]; ++i) {
      int32_t id = 0;
      std::memcpy(&id, raw.data() + j * t.nb[1] + i * t.nb[0], sizeof(id));
      if (id < 0 || id >= n_expert)
        fail("scheduler: {} selects expert {} of {} {}, which has {} experts", tensor_label(t), id,
             tensor_label(src), src.shape_string(), n_expert);
      used[static_cast<size_t>(id)] = 1;
    }
  const size_t expert_bytes = src.nb[2];
  Backend& be = *backends_[b];
  for (int64_t e = 0; e < n_expert;) {
    int64_t end = e;
    while (end < n_expert && used[static_cast<size_t>(end)] == used[static_cast<size_t>(e)]) ++end;
    const size_t bytes = static_cast<size_t>(end - e) * expert_bytes;
    if (used[static_cast<size_t>(e)]) {
      const size_t offset = static_cast<size_t>(e) * expert_bytes;
      be.set_tensor_async(dst, static_cast<const uint8_t*>(src.data) + offset, offset, bytes);
      expert_copies_.bytes_copied += bytes;
    } else {
      expert_copies_.bytes_skipped += bytes;
    }
    e = end;
  }
}

// A profiled copy: the same paths as an unprofiled one (the destination's
// stream, else the source's, else through the host), waited for at once.
void Scheduler::copy_input_synchronously(const Tensor& src, Tensor& dst, size_t b, size_t s) {
  Backend& be = *backends_[b];
  if (s != kNone && s != b) backends_[s]->synchronize();
  if (!be.copy_tensor_async(src, dst) && !(s != kNone && s != b && backends_[s]->copy_tensor_async(src, dst)))
    tensor_copy(src, dst);
  be.synchronize();
  if (s != kNone && s != b) backends_[s]->synchronize();
}

void Scheduler::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  Backend* b = backend_of(t.view_src ? t.view_src : &t);
  if (b && t.buffer && b->device().supports_buffer_type(t.buffer->type())) b->get_tensor_async(t, data, offset, size);
  else tensor_get(t, data, offset, size);
}

const SchedReport& Scheduler::report() const {
  return report_;
}

}  // namespace loom
