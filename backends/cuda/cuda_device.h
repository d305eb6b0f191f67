// The CUDA device family: one Device per CUDA device the driver reports
// (CUDA0, CUDA1, ... by ordinal), type GPU, each with its own device memory
// (buffer type CUDA<N>) and the family's shared pinned host memory
// (CUDA_Host). Without a driver or a GPU the family registers nothing and
// says why at debug level only.
#pragma once

#include <memory>
#include <string>

#include "cuda_buffer.h"
#include "loom/registry.h"

namespace loom::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string gpu_name;  // "NVIDIA H200"
  int cc = 0;            // 10 * major + minor
  int sm_count = 1;
  size_t total_memory = 0;
};

class CudaDevice final : public Device {
 public:
  CudaDevice(const DeviceInfo& info, CudaHostBufferType& host_type);

  std::string_view name() const override { return name_; }
  std::string description() const override { return description_; }
  DeviceType type() const override { return DeviceType::GPU; }
  MemoryInfo memory_impl() const override;
  DeviceCaps caps() const override { return {.async = true, .events = true, .host_buffer = true}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  BufferType& default_buffer_type() override { return buffer_type_; }
  BufferType* host_buffer_type() override { return &host_type_; }
  // kernel_supports (kernels/cuda_ops.cu): reads op, types, shapes only.
  bool supports_op(const Tensor& node) const override;
  // Kernels read and write only this device's memory (any operand).
  bool supports_buffer_type(const BufferType& type) const override { return &type == &buffer_type_; }
  // Big matrix products pay for copying their weight here.
  bool offload_op(const Tensor& node) const override;

  int ordinal() const { return info_.ordinal; }
  const DeviceInfo& info() const { return info_; }

 private:
  DeviceInfo info_;
  std::string name_;
  std::string description_;
  CudaBufferType buffer_type_;
  CudaHostBufferType& host_type_;
};

}  // namespace loom::cuda
