// A persistent pool of worker threads for the CPU backend. run(fn) executes
// fn(ith) on every thread (the caller is thread 0) and returns when all are
// done. How threads share a graph's work is the backend's business
// (cpu_backend.cpp: tasks that threads claim). Idle workers poll for the next
// run for a while (the poll level, see spin_wait.h), then sleep on a
// condition variable, so that back-to-back graphs (one per token) start
// without a wake-up; park() sends them to sleep at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "loom/backend.h"

namespace loom::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads, int poll = kDefaultPoll);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  int poll() const { return poll_; }
  void run(const std::function<void(int ith)>& fn);
  // Idle workers stop polling and sleep until the next run (Backend::idle).
  void park() { parked_.store(true, std::memory_order_relaxed); }

 private:
  void worker(int ith);

  int n_threads_;
  int poll_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(int)>* task_ = nullptr;  // written before generation_ is bumped
  std::atomic<uint64_t> generation_{0};  // bumped per run(), under mutex_ (no lost wake-up)
  int sleepers_ = 0;                     // guarded by mutex_
  bool stop_ = false;                    // guarded by mutex_
  std::atomic<int> running_{0};
  std::atomic<bool> parked_{false};  // cleared by run()
};

}  // namespace loom::cpu
