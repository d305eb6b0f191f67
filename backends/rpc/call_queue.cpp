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

void CallQueue::wait_quietly(uint64_t position) {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= position; });
}

void CallQueue::wait(uint64_t position) {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return finished_ >= position; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CallQueue::run(std::function<void()> call) { wait(push(std::move(call))); }

void CallQueue::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return stopping_ || !calls_.empty(); });
    if (calls_.empty()) return;  // stopping, and nothing left
    std::function<void()> call = std::move(calls_.front());
    calls_.pop_front();
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
    ++finished_;
    done_.notify_all();
  }
}

}  // namespace loom::rpc
