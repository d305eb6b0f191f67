#include "cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "cpu_features.h"
#include "kernels/kernels.h"
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

CpuDevice::CpuDevice() : cpu_type_("CPU", this, false), mapped_type_("CPU_Mapped", this, true) {}

std::string CpuDevice::description() const {
  const CpuFeatures& f = cpu_features();
  return f.model_name + " (" + f.summary() + ")";
}

MemoryInfo CpuDevice::memory() const {
  return {meminfo_kib("MemAvailable:") * 1024, meminfo_kib("MemTotal:") * 1024};
}

std::unique_ptr<Backend> CpuDevice::create_backend(const BackendOptions& options) {
  return std::make_unique<CpuBackend>(*this, options.n_threads > 0 ? options.n_threads : default_thread_count());
}

std::shared_ptr<Buffer> CpuDevice::buffer_from_host_ptr(void* ptr, size_t size) {
  return mapped_type_.wrap(ptr, size);
}

bool CpuDevice::supports_op(const Tensor& node) const {
  if (!kernel_supports(node)) return false;
  for (const Tensor* s : node.src)
    if (s && s->buffer && !s->buffer->is_host()) return false;
  return true;
}

CpuBackend::CpuBackend(CpuDevice& device, int n_threads)
    : device_(device), pool_(std::make_unique<ThreadPool>(n_threads)) {}

void CpuBackend::set_n_threads(int n) {
  if (n < 1) n = default_thread_count();
  if (n != pool_->size()) pool_ = std::make_unique<ThreadPool>(n);
}

void CpuBackend::compute(Graph& graph) {
  const int nth = pool_->size();
  size_t need = 0;
  for (Tensor* node : graph.nodes()) {
    if (!kernel_supports(*node))
      fail("CPU: op {} is not supported (tensor '{}' {})", op_name(node->op), node->name, node->shape_string());
    if (!node->data && node->nbytes() > 0)
      fail("CPU: tensor '{}' {} has no memory; allocate the graph first", node->name, node->shape_string());
    for (const Tensor* s : node->src)
      if (s && s->buffer && !s->buffer->is_host())
        fail("CPU: operand '{}' of '{}' is in {} memory, which the CPU cannot read", s->name, node->name,
             s->buffer->type().name());
    need = std::max(need, kernel_work_size(*node, nth));
  }
  if (work_.size() < need) work_.resize(need);
  ErrorSink errors;
  auto& nodes = graph.nodes();
  pool_->run([&](int ith) {
    ComputeParams p{ith, nth, work_.data(), work_.size(), pool_.get(), &errors};
    for (Tensor* node : nodes) {
      if (op_is_view(node->op) || node->op == Op::None || node->nelements() == 0) continue;
      compute_node(p, *node);
      pool_->barrier();
    }
  });
  if (errors.failed()) throw Error(errors.message());
}

}  // namespace loom::cpu

namespace loom {
std::unique_ptr<BackendFamily> register_cpu_backend() { return std::make_unique<cpu::CpuFamily>(); }
}  // namespace loom
