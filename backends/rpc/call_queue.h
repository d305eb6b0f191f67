// The calls of one rpc client to one server, in order, one at a time, on a
// thread of their own or on a thread that waits for them: the stream behind
// the async operations and events of remote devices.
// A call that fails keeps its error, the calls queued after it are dropped
// (they depended on it), and the next wait throws that error. Positions in
// the queue are numbered from 1; an event is such a number.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace loom::rpc {

class CallQueue {
 public:
  CallQueue();
  ~CallQueue();  // runs what is queued, then stops its thread
  CallQueue(const CallQueue&) = delete;
  CallQueue& operator=(const CallQueue&) = delete;

  // Queues `call` and returns its position.
  uint64_t push(std::function<void()> call);
  // The position of the last call queued (0: none yet).
  uint64_t last() const;
  // Waits until every call up to `position` has run, then throws the error
  // of a failed call, if any (once: the queue goes on afterwards).
  void wait(uint64_t position);
  // As wait, but keeps the error for the next wait (for a wait by another
  // queue, which must not take this queue's error from its own waiter).
  void wait_quietly(uint64_t position);
  // Runs `call` after everything queued and returns when it has run,
  // throwing its error or an earlier one.
  void run(std::function<void()> call);

 private:
  void loop();
  void wait_locked(std::unique_lock<std::mutex>& lock, uint64_t position);
  void run_front(std::unique_lock<std::mutex>& lock);  // the first call; needs one queued and none running

  mutable std::mutex mutex_;
  std::condition_variable queued_, done_;
  std::deque<std::function<void()>> calls_;
  uint64_t pushed_ = 0, finished_ = 0;
  std::exception_ptr error_;
  bool stopping_ = false;
  bool running_ = false;  // a call is running (on any thread)
  std::thread thread_;
};

}  // namespace loom::rpc
