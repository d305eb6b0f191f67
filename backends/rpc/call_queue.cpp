#include "call_queue.h"

#include <utility>

namespace loom::rpc {

CallQueue::CallQueue() : thread_([this] { loop(); }) {}

CallQueue::~CallQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_one();
  thread_.join();
}

uint64_t CallQueue::push(std::function<void()> call) {
  uint64_t position;
  {
    std::lock_guard lock(mutex_);
    calls_.push_back(std::move(call));
    position = ++pushed_;
  }
  queued_.notify_one();
  return position;
}

uint64_t CallQueue::last() const {
  std::lock_guard lock(mutex_);
  return pushed_;
}

// Calls run one at a time, in order, on whichever thread gets them first:
// the queue's own, or a waiter whose position is not reached while nothing
// runs (a generation step's compute then runs on the thread that waits for
// it, without two thread hand-offs per call).
void CallQueue::wait_locked(std::unique_lock<std::mutex>& lock, uint64_t position) {
  while (finished_ < position) {
    if (!calls_.empty() && !running_)
      run_front(lock);
    else
      done_.wait(lock);
  }
}

void CallQueue::wait_quietly(uint64_t position) {
  std::unique_lock lock(mutex_);
  wait_locked(lock, position);
}

void CallQueue::wait(uint64_t position) {
  std::unique_lock lock(mutex_);
  wait_locked(lock, position);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CallQueue::run(std::function<void()> call) { wait(push(std::move(call))); }

void CallQueue::run_front(std::unique_lock<std::mutex>& lock) {
  std::function<void()> call = std::move(calls_.front());
  calls_.pop_front();
  running_ = true;
  if (!error_) {  // after a failure, the calls that followed it are dropped
    lock.unlock();
    std::exception_ptr failed;
    try {
      call();
    } catch (...) {
      failed = std::current_exception();
    }
    call = nullptr;  // what it holds goes before the waiter hears of it
    lock.lock();
    if (failed) error_ = failed;
  }
  running_ = false;
  ++finished_;
  done_.notify_all();
  if (!calls_.empty()) queued_.notify_one();  // the queue's thread takes the rest
}

void CallQueue::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return !running_ && (stopping_ || !calls_.empty()); });
    if (calls_.empty()) return;  // stopping, and nothing left
    run_front(lock);
  }
}

}  // namespace loom::rpc
