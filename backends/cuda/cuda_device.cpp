#include "cuda_device.h"

#include <vector>

#include "cuda_backend.h"
#include "cuda_runtime.h"
#include "loom/error.h"
#include "loom/log.h"

namespace loom::cuda {
namespace {

class CudaFamily final : public BackendFamily {
 public:
  std::string_view name() const override { return "CUDA"; }
  std::vector<Device*> devices() override {
    std::vector<Device*> out;
    for (auto& d : devices_) out.push_back(d.get());
    return out;
  }
  CudaHostBufferType& host_type() { return host_type_; }
  void add(std::unique_ptr<CudaDevice> d) {
    if (devices_.empty()) host_type_.set_device(d.get());
    devices_.push_back(std::move(d));
  }
  bool empty() const { return devices_.empty(); }

 private:
  CudaHostBufferType host_type_;  // declared first: the devices refer to it
  std::vector<std::unique_ptr<CudaDevice>> devices_;
};

}  // namespace

CudaDevice::CudaDevice(const DeviceInfo& info, CudaHostBufferType& host_type)
    : info_(info),
      name_("CUDA" + std::to_string(info.ordinal)),
      description_(fmt::format("{} (compute capability {}.{}, {} multiprocessors, {})", info.gpu_name, info.cc / 10,
                               info.cc % 10, info.sm_count, human_bytes(info.total_memory))),
      buffer_type_(*this),
      host_type_(host_type) {}

MemoryInfo CudaDevice::memory_impl() const {
  size_t free = 0, total = 0;
  try {
    DeviceGuard guard(info_.ordinal);
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) return {free, total};
    cudaGetLastError();
  } catch (const Error& e) {
    log(LogLevel::Debug, "{}: cannot read its free memory: {}", name_, e.what());
  }
  return {0, info_.total_memory};
}

std::unique_ptr<Backend> CudaDevice::create_backend(const BackendOptions&) {
  return std::make_unique<CudaBackend>(*this);
}

bool CudaDevice::supports_op(const Tensor& node) const { return kernel_supports(node); }

bool CudaDevice::offload_op(const Tensor& node) const {
  return (node.op == Op::MulMat || node.op == Op::MulMatId) && node.src[1] && node.src[1]->ne[1] >= 32;
}

}  // namespace loom::cuda

namespace loom {

std::unique_ptr<BackendFamily> register_cuda_backend() {
  using namespace cuda;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count <= 0) {
    cudaGetLastError();
    // No driver or no GPU is the ordinary case on most machines: debug only.
    if (status != cudaSuccess)
      log(LogLevel::Debug, "CUDA: no device: cudaGetDeviceCount: {} ({})", cudaGetErrorName(status),
          cudaGetErrorString(status));
    else
      log(LogLevel::Debug, "CUDA: no device: cudaGetDeviceCount found none");
    return nullptr;
  }
  auto family = std::make_unique<CudaFamily>();
  for (int i = 0; i < count; ++i) {
    // A device the driver cannot describe must not take the others (or the CPU) down with it.
    cudaDeviceProp props{};
    const cudaError_t s = cudaGetDeviceProperties(&props, i);
    if (s != cudaSuccess) {
      cudaGetLastError();
      log(LogLevel::Warn, "CUDA: skipping device {}: cudaGetDeviceProperties: {} ({})", i, cudaGetErrorName(s),
          cudaGetErrorString(s));
      continue;
    }
    DeviceInfo info;
    info.ordinal = i;
    info.gpu_name = props.name;
    info.cc = props.major * 10 + props.minor;
    info.sm_count = props.multiProcessorCount > 0 ? props.multiProcessorCount : 1;
    info.total_memory = props.totalGlobalMem;
    family->add(std::make_unique<CudaDevice>(info, family->host_type()));
  }
  if (family->empty()) return nullptr;
  return family;
}

}  // namespace loom
