// The CPU device family: one device "CPU", buffer types CPU, CPU_Mapped and
// CPU_Repack (interleaved quantized weights for mul_mat, see repack.h), and a
// backend that runs graphs on a persistent thread pool.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "host_buffer.h"
#include "kernels/kernels.h"
#include "repack.h"
#include "loom/registry.h"
#include "thread_pool.h"

namespace loom::cpu {

class CpuDevice final : public Device {
 public:
  CpuDevice();
  std::string_view name() const override { return "CPU"; }
  std::string description() const override;
  DeviceType type() const override { return DeviceType::CPU; }
  MemoryInfo memory_impl() const override;
  DeviceCaps caps() const override { return {.buffer_from_host_ptr = true}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  BufferType& default_buffer_type() override { return cpu_type_; }
  std::vector<BufferType*> buffer_types() override { return {&cpu_type_, &mapped_type_, &repack_type_}; }
  std::shared_ptr<Buffer> buffer_from_host_ptr(void* ptr, size_t size) override;
  BufferType* host_ptr_buffer_type() override { return &mapped_type_; }
  bool supports_op(const Tensor& node) const override { return kernel_supports(node); }
  // Host memory for any operand; CPU_Repack only where a repacked weight can
  // be read (see the definition).
  bool supports_operand(const Tensor& node, int slot, const BufferType& type) const override;
  bool supports_buffer_type(const BufferType& type) const override {
    return type.is_host() || &type == &repack_type_;
  }

 private:
  HostBufferType cpu_type_;
  HostBufferType mapped_type_;
  RepackBufferType repack_type_;
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(CpuDevice& device, int n_threads);
  Device& device() const override { return device_; }
  void compute(Graph& graph) override;
  void set_n_threads(int n) override;
  int n_threads() const { return pool_->size(); }

 private:
  // One phase of one node: its tasks are claimed through `next`, and `done`
  // counts finished ones; the next step starts when done == n_tasks.
  struct Step {
    Tensor* node;
    int phase;
    int n_tasks;
  };
  struct alignas(64) StepCounters {
    std::atomic<int> next{0};
    alignas(64) std::atomic<int> done{0};
  };
  void run_steps(int thread, uint64_t first_serial, ErrorSink& errors);
  static constexpr int kWaitSpins = 2048;

  CpuDevice& device_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<uint8_t> work_;  // scratch, grown to the largest node's need
  std::vector<Step> steps_;
  std::unique_ptr<StepCounters[]> counters_;
  size_t counters_size_ = 0;
  uint64_t serial_ = 0;  // ComputeParams::serial of the last step run
  struct alignas(64) ThreadTag {
    uint64_t value = 0;
  };
  std::vector<ThreadTag> thread_tags_;
};

int default_thread_count();

}  // namespace loom::cpu
