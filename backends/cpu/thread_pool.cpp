#include "thread_pool.h"

#include <algorithm>

#include "spin_wait.h"

namespace loom::cpu {

ThreadPool::ThreadPool(int n_threads, int poll)
    : n_threads_(n_threads < 1 ? 1 : n_threads), poll_(std::clamp(poll, 0, kMaxPoll)) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
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
  parked_.store(false, std::memory_order_relaxed);
  bool sleeping;
  {
    std::lock_guard lock(mutex_);
    task_ = &fn;
    generation_.fetch_add(1, std::memory_order_release);
    sleeping = sleepers_ > 0;
  }
  if (sleeping) wake_.notify_all();
  fn(0);
  // Workers finish within a node or two of us: spin, then give the core away.
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
    const auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    const auto parked = [&] { return parked_.load(std::memory_order_relaxed); };
    spin_then_sleep(poll_, fresh, parked, [&] {
      std::unique_lock lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, fresh);
      --sleepers_;
    });
    seen = generation_.load(std::memory_order_acquire);
    const std::function<void(int)>* task;
    {
      // task_ and stop_ were written before the generation we saw; the lock
      // is uncontended (run() holds it only to publish).
      std::lock_guard lock(mutex_);
      if (stop_) return;
      task = task_;
    }
    (*task)(ith);
    running_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace loom::cpu
