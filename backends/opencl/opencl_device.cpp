#include "opencl_device.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "loom/error.h"
#include "loom/log.h"
#include "opencl_backend.h"

namespace loom::opencl {
namespace {

// "OpenCL 1.2 pocl" -> 102.
int opencl_version(const std::string& s) {
  int major = 0, minor = 0;
  if (std::sscanf(s.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return 0;
  return major * 100 + minor;
}

class OpenClFamily final : public BackendFamily {
 public:
  std::string_view name() const override { return "OpenCL"; }
  std::vector<Device*> devices() override {
    std::vector<Device*> out;
    for (auto& d : devices_) out.push_back(d.get());
    return out;
  }
  void add(std::unique_ptr<OpenClDevice> d) { devices_.push_back(std::move(d)); }
  bool empty() const { return devices_.empty(); }

 private:
  std::vector<std::unique_ptr<OpenClDevice>> devices_;
};

// The usable devices of one platform: available, with a compiler, OpenCL 1.2+.
std::vector<cl_device_id> usable_devices(cl_platform_id platform, const std::string& platform_name) {
  cl_uint n = 0;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::vector<cl_device_id> ids(n);
  check(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr), "clGetDeviceIDs");
  std::vector<cl_device_id> out;
  for (cl_device_id id : ids) {
    const std::string name = device_string(id, CL_DEVICE_NAME);
    if (!device_value<cl_bool>(id, CL_DEVICE_AVAILABLE) || !device_value<cl_bool>(id, CL_DEVICE_COMPILER_AVAILABLE) ||
        opencl_version(device_string(id, CL_DEVICE_VERSION)) < 102) {
      log(LogLevel::Info, "OpenCL: skipping {} on {}: unavailable, no compiler, or older than OpenCL 1.2", name,
          platform_name);
      continue;
    }
    out.push_back(id);
  }
  return out;
}

// LOOM_OPENCL_LANES, or `fallback` when unset or not a power of two in 1..64.
int lanes_from_env(int fallback) {
  const char* v = std::getenv("LOOM_OPENCL_LANES");
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end == '\0' && n >= 1 && n <= 64 && (n & (n - 1)) == 0) return static_cast<int>(n);
  log(LogLevel::Warn, "LOOM_OPENCL_LANES='{}' is not a power of two from 1 to 64; ignored", v);
  return fallback;
}

}  // namespace

OpenClDevice::OpenClDevice(int index, std::shared_ptr<Platform> platform, cl_device_id id)
    : name_("OpenCL" + std::to_string(index)),
      platform_(std::move(platform)),
      id_(id),
      programs_(platform_->context.get(), id, name_),
      buffer_type_(*this),
      host_buffer_type_(*this) {
  const auto cl_type = device_value<cl_device_type>(id, CL_DEVICE_TYPE);
  type_ = (cl_type & CL_DEVICE_TYPE_GPU) ? DeviceType::GPU : DeviceType::ACCEL;
  uses_host_memory_ = (cl_type & CL_DEVICE_TYPE_CPU) || device_value<cl_bool>(id, CL_DEVICE_HOST_UNIFIED_MEMORY);
  total_memory_ = device_value<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
  max_alloc_ = device_value<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  max_work_group_ = device_value<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  mul_mat_lanes_ = lanes_from_env(type_ == DeviceType::GPU ? 32 : 1);
  alignment_ = std::max<size_t>(128, device_value<cl_uint>(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
  description_ = fmt::format("{} ({}, {}, {} compute units)", device_string(id, CL_DEVICE_NAME), platform_->name,
                             device_string(id, CL_DEVICE_VERSION),
                             device_value<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS));
  cl_int status = CL_SUCCESS;
  queue_ = QueueHandle(clCreateCommandQueue(context(), id, 0, &status));
  check(status, fmt::format("creating the command queue of {}", name_));
}

cl_command_queue OpenClDevice::profiling_queue() {
  if (!profiling_queue_) {
    cl_int status = CL_SUCCESS;
    profiling_queue_ = QueueHandle(clCreateCommandQueue(context(), id_, CL_QUEUE_PROFILING_ENABLE, &status));
    check(status, fmt::format("creating the profiling queue of {}", name_));
  }
  return profiling_queue_.get();
}

MemoryInfo OpenClDevice::memory_impl() const {
  const size_t used = allocated_.load();
  return {used < total_memory_ ? total_memory_ - used : 0, total_memory_};
}

void OpenClDevice::check_host_memory(size_t bytes, std::string_view buffer_type) const {
  if (!uses_host_memory_) return;
  const size_t available = Registry::get().cpu().memory().free;
  if (bytes > available)
    fail("buffer type {}: cannot allocate {} bytes ({} MiB): {} keeps its memory in host memory, where only {} MiB "
         "is available",
         buffer_type, bytes, bytes >> 20, name_, available >> 20);
}

std::unique_ptr<Backend> OpenClDevice::create_backend(const BackendOptions&) {
  return std::make_unique<OpenClBackend>(*this);
}

bool OpenClDevice::offload_op(const Tensor& node) const {
  if (type_ != DeviceType::GPU || !node.src[1]) return false;
  if (node.op == Op::MulMat) return node.src[1]->ne[1] >= 32;
  return node.op == Op::MulMatId && node.src[1]->ne[2] >= 32;  // tokens; only their experts are copied
}

}  // namespace loom::opencl

namespace loom {

std::unique_ptr<BackendFamily> register_opencl_backend() {
  using namespace opencl;
  cl_uint n_platforms = 0;
  if (clGetPlatformIDs(0, nullptr, &n_platforms) != CL_SUCCESS || n_platforms == 0) {
    log(LogLevel::Debug, "OpenCL: no platform found");
    return nullptr;
  }
  std::vector<cl_platform_id> platforms(n_platforms);
  if (clGetPlatformIDs(n_platforms, platforms.data(), nullptr) != CL_SUCCESS) return nullptr;
  auto family = std::make_unique<OpenClFamily>();
  int index = 0;
  for (cl_platform_id pid : platforms) {
    // A broken driver must not take the other devices (or the CPU) down with it.
    try {
      auto platform = std::make_shared<Platform>();
      platform->id = pid;
      platform->name = platform_string(pid, CL_PLATFORM_NAME);
      const auto ids = usable_devices(pid, platform->name);
      if (ids.empty()) continue;
      const cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(pid), 0};
      cl_int status = CL_SUCCESS;
      platform->context = ContextHandle(
          clCreateContext(props, static_cast<cl_uint>(ids.size()), ids.data(), nullptr, nullptr, &status));
      check(status, fmt::format("creating a context on {}", platform->name));
      for (cl_device_id id : ids) family->add(std::make_unique<OpenClDevice>(index++, platform, id));
    } catch (const Error& e) {
      log(LogLevel::Warn, "OpenCL: {}", e.what());
    }
  }
  if (family->empty()) return nullptr;
  return family;
}

}  // namespace loom
