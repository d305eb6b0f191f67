// The OpenCL device family: one Device per OpenCL device of every platform
// (OpenCL0, OpenCL1, ... across platforms), each with its own device memory,
// even where the platform runs on the host CPU (PoCL). A GPU reports type
// GPU; every other kind (CPU, accelerator) reports ACCEL, since Loom's CPU
// type means host memory. The devices of one platform share a cl_context,
// so copies between them stay inside OpenCL. Each device has one in-order
// queue shared by its buffers and backends: a synchronous buffer read sees
// every operation queued before it.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "loom/registry.h"
#include "opencl_buffer.h"
#include "opencl_runtime.h"

namespace loom::opencl {

// One platform's context, shared by its devices.
struct Platform {
  cl_platform_id id = nullptr;
  std::string name;
  ContextHandle context;
};

// Whether an OpenCL kernel exists for this node's op, types and layout
// (opencl_ops.cpp; where operands lie is supports_buffer_type's question).
bool kernel_supports(const Tensor& node);

class OpenClDevice final : public Device {
 public:
  OpenClDevice(int index, std::shared_ptr<Platform> platform, cl_device_id id);

  std::string_view name() const override { return name_; }
  std::string description() const override { return description_; }
  DeviceType type() const override { return type_; }
  MemoryInfo memory_impl() const override;
  DeviceCaps caps() const override { return {.async = true, .events = true, .host_buffer = true}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  BufferType& default_buffer_type() override { return buffer_type_; }
  BufferType* host_buffer_type() override { return &host_buffer_type_; }
  bool supports_op(const Tensor& node) const override { return kernel_supports(node); }
  // Kernels read and write only this device's memory (any operand: the
  // default supports_operand).
  bool supports_buffer_type(const BufferType& type) const override { return &type == &buffer_type_; }
  // Big matrix products pay for copying their weight here.
  bool offload_op(const Tensor& node) const override;

  cl_device_id id() const { return id_; }
  cl_context context() const { return platform_->context.get(); }
  const Platform& platform() const { return *platform_; }
  cl_command_queue queue() const { return queue_.get(); }
  // A second in-order queue with CL_QUEUE_PROFILING_ENABLE, created on first
  // use, for profiled computes only (the main queue stays without profiling,
  // which some drivers charge for).
  cl_command_queue profiling_queue();
  ProgramCache& programs() { return programs_; }
  size_t max_alloc() const { return max_alloc_; }
  size_t alignment() const { return alignment_; }
  size_t max_work_group() const { return max_work_group_; }
  // Work-items that share one row of a quantized mul_mat (mul_mat.cl): 32 on
  // a GPU, 1 on other devices (a CPU runs a whole row per work-item best);
  // LOOM_OPENCL_LANES=N (a power of two up to 64) overrides it.
  int mul_mat_lanes() const { return mul_mat_lanes_; }
  // Whether allocations come out of host memory (a CPU device such as
  // PoCL's): then a buffer larger than the host's available memory is
  // refused with Loom's own message before the driver is asked (PoCL aborts
  // the process when its own allocation fails).
  bool uses_host_memory() const { return uses_host_memory_; }
  void check_host_memory(size_t bytes, std::string_view buffer_type) const;
  // Tracks bytes allocated, for memory().free.
  void note_alloc(size_t bytes) { allocated_ += bytes; }
  void note_free(size_t bytes) { allocated_ -= bytes; }

 private:
  std::string name_;
  bool uses_host_memory_ = false;
  std::string description_;
  DeviceType type_;
  std::shared_ptr<Platform> platform_;
  cl_device_id id_;
  QueueHandle queue_;
  QueueHandle profiling_queue_;
  ProgramCache programs_;
  size_t total_memory_ = 0;
  size_t max_alloc_ = 0;
  size_t alignment_ = 128;
  size_t max_work_group_ = 1;
  int mul_mat_lanes_ = 1;
  std::atomic<size_t> allocated_{0};
  OpenClBufferType buffer_type_;
  OpenClHostBufferType host_buffer_type_;
};

}  // namespace loom::opencl
