#include "thread_pool.h"

#include <immintrin.h>

namespace loom::cpu {

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads < 1 ? 1 : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  running_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    ++generation_;
  }
  wake_.notify_all();
  fn(0);
  // Workers finish within a node or two of us; spin, then yield.
  for (int spins = 0; running_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

void ThreadPool::worker(int ith) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      task = task_;
    }
    (*task)(ith);
    running_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace loom::cpu
