// A persistent pool of worker threads for the CPU backend. run(fn) executes
// fn(ith) on every thread (the caller is thread 0) and returns when all are
// done. How threads share a graph's work is the backend's business
// (cpu_backend.cpp: tasks that threads claim). Idle workers sleep on a
// condition variable.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  void run(const std::function<void(int ith)>& fn);

 private:
  void worker(int ith);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  const std::function<void(int)>* task_ = nullptr;
  uint64_t generation_ = 0;  // bumped per run(); guarded by mutex_
  bool stop_ = false;
  std::atomic<int> running_{0};

};

}  // namespace loom::cpu
