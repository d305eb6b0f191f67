// A request in flight: what the engine sends back to the HTTP handler
// (text pieces, then one final event), and the handler's way to cancel it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "request.h"

namespace loom::serve {

// One generated token's log-probability under the model (log-softmax of its
// logits, before penalties and logit_bias), with the most likely tokens at
// that step, best first.
struct TokenLogprob {
  std::string piece;  // the token's text (bytes; may end mid-character)
  float logprob = 0;
  size_t text_offset = 0;  // where the piece starts in the generated text
  std::vector<std::pair<std::string, float>> top;
};

struct TaskEvent {
  std::string text;  // new text (may be empty on the final event)
  std::vector<TokenLogprob> logprobs;  // the tokens whose text `text` completes (when asked for)
  bool done = false;
  std::string finish_reason;  // final: "stop" or "length" ("" with an error)
  std::string error;          // final: why generation failed
  int prompt_tokens = 0, completion_tokens = 0;
};

class Task {
 public:
  Task(CompletionRequest request, std::vector<int32_t> prompt)
      : request(std::move(request)), prompt(std::move(prompt)) {}

  const CompletionRequest request;
  const std::vector<int32_t> prompt;

  void push(TaskEvent e) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // The next event, or none after `timeout`.
  std::optional<TaskEvent> pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
    TaskEvent e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // The client went away: the engine frees the slot at its next step.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<TaskEvent> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace loom::serve
