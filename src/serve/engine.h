// The generation engine behind `loom serve`: N slots, each a sequence of
// one Session (a unified KV cache), run by one thread with continuous
// batching. Every step decodes one batch holding the next token of every
// generating slot and a chunk of each new prompt; a request that arrives
// joins at the next step, and waits in a queue while every slot is busy.
// A slot keeps its tokens in the cache after a request, and the next
// request given to it reuses the longest common prefix.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loom/chat_template.h"
#include "loom/model.h"
#include "task.h"

namespace loom::serve {

struct EngineOptions {
  int n_slots = 1;
  SessionOptions session;     // n_ctx is shared by the slots: n_ctx / n_slots each
  int64_t n_step_tokens = 512;  // tokens per decode step, all slots together
  size_t max_queue = 1024;    // waiting requests beyond the slots (more: 503)
  std::string chat_template;  // Jinja; empty: a ChatML template
  std::string bos_token, eos_token;
};

// One slot, for the status view.
struct SlotStats {
  int id = 0;
  bool busy = false;
  int64_t n_cached = 0;   // tokens of this sequence in the KV cache
  int64_t n_prompt = 0;   // the current request's prompt tokens (0 when idle)
  int64_t n_pending = 0;  // of them still to decode
  int generated = 0;      // tokens generated for the current request
};

// Figures for /metrics, /health and the slot view.
struct EngineStats {
  uint64_t requests = 0, cancelled = 0, prompt_tokens = 0, prompt_tokens_cached = 0, generated_tokens = 0;
  double decode_seconds = 0;  // time spent in decode steps
  uint64_t decode_steps = 0;
  int64_t kv_cells_used = 0, kv_cells = 0;
  size_t queued = 0;
  int slots_idle = 0, slots_busy = 0;
  std::vector<SlotStats> slots;
};

class Engine {
 public:
  Engine(const Model& model, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Turns the request into prompt tokens (the chat template for chat), checks
  // them against a slot's context and queues the task. RequestError: a
  // prompt that is empty or too long (400), a full queue (503).
  std::shared_ptr<Task> submit(CompletionRequest request);

  const Model& model() const { return model_; }
  int64_t slot_ctx() const { return slot_ctx_; }
  int n_slots() const { return options_.n_slots; }
  EngineStats stats() const;

 private:
  struct Slot;
  std::vector<int32_t> prompt_tokens(const CompletionRequest& r) const;
  void loop();
  void assign_waiting();
  void step();
  void finish(Slot& s, const std::string& reason, const std::string& error = "");
  void emit_new_text(Slot& s, bool final);
  void count_slots();  // with mutex_ held

  const Model& model_;
  EngineOptions options_;
  int64_t slot_ctx_ = 0;
  std::unique_ptr<Session> session_;  // the engine thread's alone
  std::unique_ptr<ChatTemplate> template_;
  mutable std::mutex template_mutex_;
  std::vector<std::unique_ptr<Slot>> slots_;

  mutable std::mutex mutex_;  // guards queue_, stats_, stop_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  EngineStats stats_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace loom::serve
