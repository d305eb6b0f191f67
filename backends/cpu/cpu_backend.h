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
  CpuBackend(CpuDevice& device, int n_threads, int poll = kDefaultPoll);
  Device& device() const override { return device_; }
  void compute(Graph& graph) override;
  // Times every node on every thread that ran a task of it (one interval
  // per thread and node; lane = thread).
  bool compute_timed(Graph& graph, std::vector<NodeTime>& times) override;
  void set_n_threads(int n) override;
  void idle() override { pool_->park(); }
  int n_threads() const { return pool_->size(); }
  int poll() const { return pool_->poll(); }
  // Hand-offs of the last compute: groups run, and the waits between them.
  size_t last_groups() const { return groups_.size(); }
  size_t last_waits() const { return n_waits_; }

 private:
  // One phase of one node, split into n_tasks tasks; uses_work: its kernel
  // uses the shared scratch.
  struct Step {
    Tensor* node;
    int phase;
    int n_tasks;
    bool uses_work;
  };
  // What threads hand off: one step's tasks, or a chain of single-task steps
  // that one thread runs in order (no hand-off inside). Threads wait for the
  // groups before this one only where it touches memory they write or read
  // (wait_before); else they go on claiming its tasks.
  struct Group {
    uint32_t first_step, n_steps;
    int n_tasks;
    bool wait_before;
  };
  // Tasks are claimed through `next`; `done` counts finished ones.
  struct alignas(64) GroupCounters {
    std::atomic<int> next{0};
    alignas(64) std::atomic<int> done{0};
  };
  struct Access {
    const uint8_t *begin, *end;
    bool write;
  };
  uint64_t prepare(Graph& graph);
  void plan_groups();
  void add_accesses(const Step& step, std::vector<Access>& out) const;
  template <bool kTimed>
  void run_groups(int thread, uint64_t first_serial, ErrorSink& errors);
  void wait_done(size_t group) const;

  CpuDevice& device_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<uint8_t> work_;  // scratch, grown to the largest node's need
  std::vector<Step> steps_;
  std::vector<Group> groups_;
  size_t n_waits_ = 0;
  std::vector<Access> window_, accesses_;  // plan_groups' scratch
  std::unique_ptr<GroupCounters[]> counters_;
  size_t counters_size_ = 0;
  uint64_t serial_ = 0;  // ComputeParams::serial of the last step run
  struct alignas(64) ThreadTag {
    uint64_t value = 0;
  };
  std::vector<ThreadTag> thread_tags_;
  std::vector<std::vector<NodeTime>> thread_times_;  // compute_timed's, per thread
};

// Physical cores this process may run on (one thread per core).
int default_thread_count();

}  // namespace loom::cpu
