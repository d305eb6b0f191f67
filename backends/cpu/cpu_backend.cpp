#include "cpu_backend.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <thread>

#include "cpu_features.h"
#include "loom/error.h"

namespace loom::cpu {
namespace {

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

int default_thread_count() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

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
  return std::make_unique<CpuBackend>(*this, options.n_threads > 0 ? options.n_threads : default_thread_count());
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

CpuBackend::CpuBackend(CpuDevice& device, int n_threads)
    : device_(device), pool_(std::make_unique<ThreadPool>(n_threads)) {}

void CpuBackend::set_n_threads(int n) {
  check_thread_count(n);
  if (n < 1) n = default_thread_count();
  if (n != pool_->size()) pool_ = std::make_unique<ThreadPool>(n);
}

void CpuBackend::compute(Graph& graph) {
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
    need = std::max(need, kernel_work_size(*node, nth));
    if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
    for (int phase = 0; phase < kernel_phases(*node); ++phase) {
      const int64_t n = kernel_tasks(*node, phase, nth);
      if (n > std::numeric_limits<int>::max())
        fail("CPU: node '{}' {} splits into {} tasks, more than {}", node->name, node->shape_string(), n,
             std::numeric_limits<int>::max());
      if (n > 0) steps_.push_back({node, phase, static_cast<int>(n)});
    }
  }
  if (work_.size() < need) work_.resize(need);
  if (counters_size_ < steps_.size()) {
    counters_size_ = std::max(steps_.size(), 2 * counters_size_);
    counters_ = std::make_unique<StepCounters[]>(counters_size_);
  }
  for (size_t i = 0; i < steps_.size(); ++i) {
    counters_[i].next.store(0, std::memory_order_relaxed);
    counters_[i].done.store(0, std::memory_order_relaxed);
  }
  if (thread_tags_.size() != static_cast<size_t>(nth)) thread_tags_.assign(nth, ThreadTag{});
  const uint64_t first_serial = serial_ + 1;
  serial_ += steps_.size();
  ErrorSink errors;
  pool_->run([&](int thread) { run_steps(thread, first_serial, errors); });
  if (errors.failed()) throw Error(errors.message());
}

// Every thread walks the steps in order, claiming tasks until none is left,
// then waits for the step's last task before going on. A thread that is
// descheduled (more threads than free cores) holds up the others only while
// it holds a task: the running threads take the rest of its share.
void CpuBackend::run_steps(int thread, uint64_t first_serial, ErrorSink& errors) {
  const int nth = pool_->size();
  ComputeParams p{0, 1, thread, nth, work_.data(), work_.size(), &errors};
  p.thread_tag = &thread_tags_[thread].value;
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& step = steps_[i];
    StepCounters& c = counters_[i];
    p.nth = step.n_tasks;
    p.serial = first_serial + i;
    for (int t = c.next.fetch_add(1, std::memory_order_relaxed); t < step.n_tasks;
         t = c.next.fetch_add(1, std::memory_order_relaxed)) {
      p.ith = t;
      compute_node(p, *step.node, step.phase);
      if (c.done.fetch_add(1, std::memory_order_acq_rel) + 1 == step.n_tasks) c.done.notify_all();
    }
    // Wait for the tasks other threads still hold: spin briefly (they are
    // usually microseconds away), then sleep on the counter.
    int done = c.done.load(std::memory_order_acquire);
    for (int spins = 0; done != step.n_tasks && spins < kWaitSpins; ++spins) {
      _mm_pause();
      done = c.done.load(std::memory_order_acquire);
    }
    while (done != step.n_tasks) {
      c.done.wait(done, std::memory_order_acquire);
      done = c.done.load(std::memory_order_acquire);
    }
  }
}

}  // namespace loom::cpu

namespace loom {
std::unique_ptr<BackendFamily> register_cpu_backend() { return std::make_unique<cpu::CpuFamily>(); }
}  // namespace loom
