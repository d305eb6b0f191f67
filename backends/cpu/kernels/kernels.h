// CPU kernels: one function per op, each computing its share of the rows of
// one node. All threads call every kernel; `ith` of `nth` picks the share.
// Kernels that need a second phase (mul_mat quantizes its b operand first)
// call params.barrier() between phases.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "loom/tensor.h"

namespace loom::cpu {

class ThreadPool;

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
  int ith = 0;
  int nth = 1;
  uint8_t* wdata = nullptr;  // scratch shared by all threads of this node
  size_t wsize = 0;
  ThreadPool* pool = nullptr;
  ErrorSink* errors = nullptr;
  void barrier() const;
};

// The range [begin, end) of `n` items that thread ith of nth handles.
struct Range {
  int64_t begin, end;
};
inline Range split_range(int64_t n, int ith, int nth) {
  return {n * ith / nth, n * (ith + 1) / nth};
}

// Whether a CPU kernel exists for this node's op and types.
bool kernel_supports(const Tensor& node);
// Scratch bytes the node's kernel needs.
size_t kernel_work_size(const Tensor& node, int n_threads);
// Runs the node's kernel (its share for params.ith).
void compute_node(const ComputeParams& params, Tensor& node);

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
void compute_mul_mat(const ComputeParams& p, Tensor& dst);
size_t mul_mat_work_size(const Tensor& dst, int n_threads);

// Address of element row (i1, i2, i3) of t.
inline char* row_ptr(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t.data) + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

}  // namespace loom::cpu
