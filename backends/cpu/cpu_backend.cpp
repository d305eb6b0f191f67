#include "cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <thread>

#include "cpu_features.h"
#include "loom/cpu_cores.h"
#include "loom/error.h"
#include "spin_wait.h"

namespace loom::cpu {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CpuFamily final : public BackendFamily {
 public:
  std::string_view name() const override { return "CPU"; }
  std::vector<Device*> devices() override { return {&device_}; }

 private:
  CpuDevice device_;
};

size_t meminfo_kib(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string k;
  size_t v;
  std::string unit;
  while (in >> k >> v >> unit)
    if (k == key) return v;
  return 0;
}

}  // namespace

int default_thread_count() { return physical_cores(); }

CpuDevice::CpuDevice()
    : cpu_type_("CPU", this, false), mapped_type_("CPU_Mapped", this, true), repack_type_(this) {}

std::string CpuDevice::description() const {
  const CpuFeatures& f = cpu_features();
  return f.model_name + " (" + f.summary() + ")";
}

MemoryInfo CpuDevice::memory_impl() const {
  return {meminfo_kib("MemAvailable:") * 1024, meminfo_kib("MemTotal:") * 1024};
}

namespace {

void check_thread_count(int n) {
  if (n > kMaxThreads) fail("CPU backend: {} threads asked for; at most {} (kMaxThreads)", n, kMaxThreads);
}

}  // namespace

std::unique_ptr<Backend> CpuDevice::create_backend(const BackendOptions& options) {
  check_thread_count(options.n_threads);
  if (options.poll < 0 || options.poll > kMaxPoll)
    fail("CPU backend: poll level {} is outside [0, {}]", options.poll, kMaxPoll);
  return std::make_unique<CpuBackend>(*this, options.n_threads > 0 ? options.n_threads : default_thread_count(),
                                      options.poll);
}

std::shared_ptr<Buffer> CpuDevice::buffer_from_host_ptr(void* ptr, size_t size) {
  return mapped_type_.wrap(ptr, size);
}

// Host memory: any operand. CPU_Repack: a tensor it stores interleaved
// (repackable: its type and shape, not a view) only as mul_mat's src0, read
// whole; a tensor it stores plain, anywhere. Other memory: no.
bool CpuDevice::supports_operand(const Tensor& node, int slot, const BufferType& type) const {
  if (type.is_host()) return true;
  if (&type != &repack_type_) return false;
  const Tensor* s = slot >= 0 && slot < kMaxSrc ? node.src[slot] : nullptr;
  if (!s) return true;
  const Tensor& root = s->view_src ? *s->view_src : *s;
  return !repackable(root) || (node.op == Op::MulMat && slot == 0 && s == &root);
}

CpuBackend::CpuBackend(CpuDevice& device, int n_threads, int poll)
    : device_(device), pool_(std::make_unique<ThreadPool>(n_threads, poll)) {}

void CpuBackend::set_n_threads(int n) {
  check_thread_count(n);
  if (n < 1) n = default_thread_count();
  if (n != pool_->size()) pool_ = std::make_unique<ThreadPool>(n, pool_->poll());
}

void CpuBackend::compute(Graph& graph) {
  const uint64_t first_serial = prepare(graph);
  ErrorSink errors;
  // A graph of single tasks (a token's embedding row before a remote or GPU
  // split) runs here: waking the pool would cost more than the work.
  const bool alone = std::all_of(groups_.begin(), groups_.end(), [](const Group& g) { return g.n_tasks == 1; });
  if (alone) run_groups<false>(0, first_serial, errors);
  else pool_->run([&](int thread) { run_groups<false>(thread, first_serial, errors); });
  if (errors.failed()) throw Error(errors.message());
}

bool CpuBackend::compute_timed(Graph& graph, std::vector<NodeTime>& times) {
  const uint64_t first_serial = prepare(graph);
  thread_times_.resize(pool_->size());
  for (auto& t : thread_times_) {
    t.clear();
    t.reserve(steps_.size());
  }
  ErrorSink errors;
  pool_->run([&](int thread) { run_groups<true>(thread, first_serial, errors); });
  if (errors.failed()) throw Error(errors.message());
  for (const auto& t : thread_times_) times.insert(times.end(), t.begin(), t.end());
  return true;
}

// Checks the nodes, cuts them into steps and groups, sizes the scratch;
// returns the serial of the first step.
uint64_t CpuBackend::prepare(Graph& graph) {
  const int nth = pool_->size();
  size_t need = 0;
  steps_.clear();
  for (Tensor* node : graph.nodes()) {
    if (!kernel_supports(*node))
      fail("CPU: op {} is not supported (tensor '{}' {})", op_name(node->op), node->name, node->shape_string());
    if (!node->data && node->nbytes() > 0)
      fail("CPU: tensor '{}' {} has no memory; allocate the graph first", node->name, node->shape_string());
    for (int i = 0; i < kMaxSrc; ++i) {
      const Tensor* s = node->src[i];
      const Tensor* root = s && s->view_src ? s->view_src : s;
      if (root && root->buffer && !device_.supports_operand(*node, i, root->buffer->type()))
        fail("CPU: operand '{}' of '{}' ({}) is in {} memory, which the CPU cannot read there", s->name, node->name,
             op_name(node->op), root->buffer->type().name());
    }
    const size_t work = kernel_work_size(*node, nth);
    need = std::max(need, work);
    if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
    for (int phase = 0; phase < kernel_phases(*node); ++phase) {
      const int64_t n = kernel_tasks(*node, phase, nth);
      if (n > std::numeric_limits<int>::max())
        fail("CPU: node '{}' {} splits into {} tasks, more than {}", node->name, node->shape_string(), n,
             std::numeric_limits<int>::max());
      if (n > 0) steps_.push_back({node, phase, static_cast<int>(n), work > 0});
    }
  }
  if (work_.size() < need) work_.resize(need);
  plan_groups();
  if (counters_size_ < groups_.size()) {
    counters_size_ = std::max(groups_.size(), 2 * counters_size_);
    counters_ = std::make_unique<GroupCounters[]>(counters_size_);
  }
  for (size_t i = 0; i < groups_.size(); ++i) {
    counters_[i].next.store(0, std::memory_order_relaxed);
    counters_[i].done.store(0, std::memory_order_relaxed);
  }
  if (thread_tags_.size() != static_cast<size_t>(nth)) thread_tags_.assign(nth, ThreadTag{});
  const uint64_t first_serial = serial_ + 1;
  serial_ += steps_.size();
  return first_serial;
}

// The bytes a step reads and writes: its node, its operands, and the shared
// scratch (work_) for nodes that use it (mul_mat packs b there, and threads'
// private areas lie at offsets that depend on the node).
void CpuBackend::add_accesses(const Step& step, std::vector<Access>& out) const {
  const auto add = [&out](const Tensor* t, bool write) {
    if (!t || !t->data || t->nbytes() == 0) return;
    const auto* b = static_cast<const uint8_t*>(t->data);
    out.push_back({b, b + t->nbytes(), write});
  };
  add(step.node, true);
  for (const Tensor* s : step.node->src) add(s, false);
  if (step.uses_work && !work_.empty())
    out.push_back({work_.data(), work_.data() + work_.size(), true});
}

// Cuts the steps into groups and decides where threads must wait: before a
// group that overlaps, with a write on either side, what the groups since
// the last wait touch (a read of an earlier output, or a write into memory
// the allocator reused while an earlier step may still read it).
void CpuBackend::plan_groups() {
  groups_.clear();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const bool single = steps_[i].n_tasks == 1;
    if (single && !groups_.empty() && groups_.back().n_tasks == 1) {
      ++groups_.back().n_steps;
      continue;
    }
    groups_.push_back({static_cast<uint32_t>(i), 1, steps_[i].n_tasks, false});
  }
  const auto conflict = [](const Access& a, const Access& b) {
    return (a.write || b.write) && a.begin < b.end && b.begin < a.end;
  };
  n_waits_ = 0;
  window_.clear();
  for (Group& g : groups_) {
    accesses_.clear();
    for (uint32_t s = g.first_step; s < g.first_step + g.n_steps; ++s) add_accesses(steps_[s], accesses_);
    g.wait_before = std::any_of(accesses_.begin(), accesses_.end(), [&](const Access& a) {
      return std::any_of(window_.begin(), window_.end(), [&](const Access& w) { return conflict(a, w); });
    });
    if (g.wait_before) {
      ++n_waits_;
      window_.clear();
    }
    window_.insert(window_.end(), accesses_.begin(), accesses_.end());
  }
}

void CpuBackend::wait_done(size_t group) const {
  const std::atomic<int>& done = counters_[group].done;
  const int n = groups_[group].n_tasks;
  spin_then_sleep(
      pool_->poll(), [&] { return done.load(std::memory_order_acquire) == n; },
      [&] {
        const int d = done.load(std::memory_order_acquire);
        if (d != n) done.wait(d, std::memory_order_acquire);
      });
}

// Every thread walks the groups in order, claiming tasks until none is left;
// before a group marked wait_before it waits for the earlier groups' tasks
// that other threads still hold. A thread that is descheduled (more threads
// than free cores) holds up the others only while it holds a task: the
// running threads take the rest of its share.
// kTimed: each thread also notes when it ran each step (one interval per
// step, stretched over the tasks it claims in a row); a separate
// instantiation, so that an untimed compute reads no clock.
template <bool kTimed>
void CpuBackend::run_groups(int thread, uint64_t first_serial, ErrorSink& errors) {
  const int nth = pool_->size();
  [[maybe_unused]] std::vector<NodeTime>* times = kTimed ? &thread_times_[thread] : nullptr;
  [[maybe_unused]] uint32_t last_timed_step = std::numeric_limits<uint32_t>::max();
  ComputeParams p{0, 1, thread, nth, work_.data(), work_.size(), &errors};
  p.thread_tag = &thread_tags_[thread].value;
  size_t waited = 0;  // groups before this index are known finished
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    if (group.wait_before)
      for (; waited < g; ++waited) wait_done(waited);
    GroupCounters& c = counters_[g];
    for (int t = c.next.fetch_add(1, std::memory_order_relaxed); t < group.n_tasks;
         t = c.next.fetch_add(1, std::memory_order_relaxed)) {
      for (uint32_t s = group.first_step; s < group.first_step + group.n_steps; ++s) {
        const Step& step = steps_[s];
        p.nth = step.n_tasks;
        p.ith = step.n_tasks == 1 ? 0 : t;
        p.serial = first_serial + s;
        if constexpr (kTimed) {
          const int64_t start = steady_ns();
          compute_node(p, *step.node, step.phase);
          const int64_t end = steady_ns();
          if (last_timed_step == s) {
            times->back().end_ns = end;
          } else {
            times->push_back({step.node, thread, start, end});
            last_timed_step = s;
          }
        } else {
          compute_node(p, *step.node, step.phase);
        }
      }
      if (c.done.fetch_add(1, std::memory_order_acq_rel) + 1 == group.n_tasks) c.done.notify_all();
    }
  }
}

}  // namespace loom::cpu

namespace loom {
std::unique_ptr<BackendFamily> register_cpu_backend() { return std::make_unique<cpu::CpuFamily>(); }
}  // namespace loom
