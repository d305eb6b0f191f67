// CPU kernels: one function per op. The backend splits each node into tasks
// (kernel_tasks) that threads claim one at a time; a kernel computes the share
// of task `ith` of `nth` (split_range). A node may have two phases (mul_mat
// packs its b operand, then multiplies); all tasks of a phase finish before
// the next phase or node starts.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "loom/op_params.h"
#include "loom/tensor.h"

namespace loom::cpu {

// Kernels cannot throw across the thread pool; a bad value in the data (an
// out-of-range row index) is reported here and thrown after the graph ends.
class ErrorSink {
 public:
  void report(std::string message) {
    std::lock_guard lock(mutex_);
    if (!failed_.exchange(true)) message_ = std::move(message);
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  const std::string& message() const { return message_; }

 private:
  std::mutex mutex_;
  std::atomic<bool> failed_{false};
  std::string message_;
};

struct ComputeParams {
  int64_t ith = 0;  // task index
  int64_t nth = 1;  // tasks of this phase
  int thread = 0;   // the pool thread running the task (per-thread scratch)
  int n_threads = 1;
  uint8_t* wdata = nullptr;  // scratch shared by all threads of this node
  size_t wsize = 0;
  ErrorSink* errors = nullptr;
  uint64_t serial = 0;             // unique per node phase and compute call (never 0)
  uint64_t* thread_tag = nullptr;  // this thread's own word: a kernel may record a serial there
};

// The range [begin, end) of `n` items that thread ith of nth handles.
struct Range {
  int64_t begin, end;
};
inline Range split_range(int64_t n, int64_t ith, int64_t nth) {
  return {n * ith / nth, n * (ith + 1) / nth};
}

// Whether a CPU kernel exists for this node's op and types.
bool kernel_supports(const Tensor& node);
// Scratch bytes the node's kernel needs.
size_t kernel_work_size(const Tensor& node, int n_threads);
// Phases of the node's kernel (1; 2 for mul_mat and flash_attn_ext, 5 for mul_mat_id) and the tasks of each.
int kernel_phases(const Tensor& node);
// Ops other than the matrix products get one task per kMinElementsPerTask
// output elements, at most n_threads: a row op on one token is one task.
int64_t kernel_tasks(const Tensor& node, int phase, int n_threads);
inline constexpr int64_t kMinElementsPerTask = 16384;
// Runs task params.ith of params.nth of the node's phase.
void compute_node(const ComputeParams& params, Tensor& node, int phase = 0);

// Per-op entry points (kernels/*.cpp).
void compute_get_rows(const ComputeParams& p, Tensor& dst);
void compute_set_rows(const ComputeParams& p, Tensor& dst);
void compute_cpy(const ComputeParams& p, Tensor& dst);  // Cpy and Cont
void compute_binary(const ComputeParams& p, Tensor& dst);
void compute_unary(const ComputeParams& p, Tensor& dst);
void compute_sum_rows(const ComputeParams& p, Tensor& dst);
void compute_argmax(const ComputeParams& p, Tensor& dst);
void compute_concat(const ComputeParams& p, Tensor& dst);
void compute_norm(const ComputeParams& p, Tensor& dst);  // RmsNorm and Norm
void compute_rope(const ComputeParams& p, Tensor& dst);
void compute_soft_max(const ComputeParams& p, Tensor& dst);
void compute_mul_mat(const ComputeParams& p, Tensor& dst, int phase);
int64_t mul_mat_tasks(const Tensor& dst, int phase, int n_threads);
size_t mul_mat_work_size(const Tensor& dst, int n_threads);
void compute_mul_mat_id(const ComputeParams& p, Tensor& dst, int phase);
int64_t mul_mat_id_tasks(const Tensor& dst, int phase, int n_threads);
size_t mul_mat_id_work_size(const Tensor& dst, int n_threads);
inline constexpr int kMulMatIdPhases = 5;
void compute_argsort(const ComputeParams& p, Tensor& dst);
// flash_attn_ext: phase 0 attends (units of a KV head's query heads x a
// block of rows, maybe split over KV chunks), phase 1 merges the chunks
// (no tasks when there are none).
void compute_flash_attn(const ComputeParams& p, Tensor& dst, int phase);
int64_t flash_attn_tasks(const Tensor& dst, int phase, int n_threads);
size_t flash_attn_work_size(const Tensor& dst, int n_threads);

// Address of element row (i1, i2, i3) of t.
inline char* row_ptr(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

}  // namespace loom::cpu
