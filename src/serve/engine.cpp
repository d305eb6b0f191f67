#include "engine.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loom/tokenizer.h"
#include "sampling.h"
#include "text.h"

namespace loom::serve {

namespace {

// Used when the model file has no tokenizer.chat_template.
constexpr const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// A final event; error "" for a normal end.
TaskEvent final_event(const std::string& error) {
  TaskEvent e;
  e.done = true;
  e.error = error;
  return e;
}

}  // namespace

struct Engine::Slot {
  int32_t id = 0;
  std::shared_ptr<Task> task;     // null: idle
  std::vector<int32_t> cached;    // the tokens in the cache for this sequence, in order
  std::vector<int32_t> pending;   // prompt tokens still to decode
  std::optional<SlotSampler> sampler;
  int32_t next = -1;              // the sampled token to decode next step (-1: none)
  int generated = 0;
  int max_tokens = 0;
  std::string text;               // generated text (stop strings cut it)
  size_t sent = 0;                // bytes of text already sent
  size_t cut = std::string::npos;  // where a stop string cut the text
  std::vector<TokenLogprob> logprobs;  // one per generated token, when the request asks
  size_t logprobs_sent = 0;
};

Engine::Engine(const Model& model, const EngineOptions& options) : model_(model), options_(options) {
  if (options_.n_slots < 1) throw RequestError(500, "server_error", "", "the number of slots must be at least 1");
  SessionOptions session = options_.session;
  session.n_seq_max = options_.n_slots;  // a slot is a sequence
  session_ = std::make_unique<Session>(model, session);
  slot_ctx_ = session_->n_ctx() / options_.n_slots;
  if (slot_ctx_ < 2)
    throw RequestError(500, "server_error", "",
                       fmt::format("a context of {} gives {} slots fewer than 2 cells each (raise -c or lower -np)",
                                   session_->n_ctx(), options_.n_slots));
  template_ = std::make_unique<ChatTemplate>(options_.chat_template.empty() ? kChatMl : options_.chat_template);
  for (int i = 0; i < options_.n_slots; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->id = i;
  }
  stats_.kv_cells = session_->n_ctx();
  count_slots();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<int32_t> Engine::prompt_tokens(const CompletionRequest& r) const {
  const Tokenizer& tok = model_.tokenizer();
  if (!r.chat) {
    if (!r.prompt_tokens.empty()) {
      for (int32_t t : r.prompt_tokens)
        if (t >= tok.n_vocab())
          throw RequestError(400, "invalid_request_error", "prompt",
                             fmt::format("token id {} is outside the vocabulary [0, {})", t, tok.n_vocab()));
      return r.prompt_tokens;
    }
    return tok.encode(r.prompt, true, true);
  }
  ChatInputs in;
  in.messages = &r.messages;
  in.add_generation_prompt = true;
  in.bos_token = options_.bos_token;
  in.eos_token = options_.eos_token;
  std::string text;
  try {
    std::lock_guard lock(template_mutex_);
    text = apply_chat_template(*template_, in);
  } catch (const std::exception& e) {
    throw RequestError(400, "invalid_request_error", "messages", fmt::format("chat template: {}", e.what()));
  }
  const bool starts_with_bos = !in.bos_token.empty() && text.rfind(in.bos_token, 0) == 0;
  return tok.encode(text, !starts_with_bos, true);
}

std::shared_ptr<Task> Engine::submit(CompletionRequest request) {
  std::vector<int32_t> prompt = prompt_tokens(request);
  if (prompt.empty()) throw RequestError(400, "invalid_request_error", "prompt", "the prompt has no tokens");
  if (static_cast<int64_t>(prompt.size()) >= slot_ctx_)
    throw RequestError(400, "invalid_request_error", request.chat ? "messages" : "prompt",
                       fmt::format("the prompt has {} tokens; a slot's context holds {} (-c {} over -np {})",
                                   prompt.size(), slot_ctx_, session_->n_ctx(), options_.n_slots));
  auto task = std::make_shared<Task>(std::move(request), std::move(prompt));
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= options_.max_queue)
      throw RequestError(503, "server_busy", "", fmt::format("{} requests are waiting; try again later", queue_.size()));
    queue_.push_back(task);
    ++stats_.requests;
    stats_.queued = queue_.size();
  }
  cv_.notify_all();
  return task;
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock lock(mutex_);
      const auto busy = [this] {
        return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->task != nullptr; });
      };
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || busy(); });
      if (stop_) break;
    }
    assign_waiting();
    step();
    std::lock_guard lock(mutex_);
    stats_.kv_cells_used = session_->cells().used();
    count_slots();
  }
  for (auto& s : slots_)
    if (s->task) finish(*s, "", "the server is shutting down");
  std::lock_guard lock(mutex_);
  for (auto& t : queue_) t->push(final_event("the server is shutting down"));
  queue_.clear();
}

void Engine::assign_waiting() {
  while (true) {
    std::shared_ptr<Task> task;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return;
      // Skip requests whose client already left.
      if (queue_.front()->cancelled()) {
        queue_.front()->push(final_event("cancelled"));
        queue_.pop_front();
        stats_.queued = queue_.size();
        ++stats_.cancelled;
        continue;
      }
      if (std::none_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->task == nullptr; })) return;
      task = queue_.front();
      queue_.pop_front();
      stats_.queued = queue_.size();
    }
    // The idle slot whose cache shares the longest prefix with the prompt.
    Slot* best = nullptr;
    size_t best_keep = 0;
    for (auto& s : slots_)
      if (!s->task) {
        const size_t keep = common_prefix(s->cached, task->prompt);
        if (!best || keep > best_keep) best = s.get(), best_keep = keep;
      }
    Slot& s = *best;
    // At least the last prompt token is decoded again: its logits start the
    // answer. A sliding-window cache may no longer hold the window before the
    // shared prefix's end: then the whole prompt is decoded again.
    size_t keep = std::min(best_keep, task->prompt.size() - 1);
    if (!session_->can_continue(s.id, static_cast<int32_t>(keep))) keep = 0;
    session_->seq_rm(s.id, static_cast<int32_t>(keep));
    s.cached.resize(keep);
    s.pending.assign(task->prompt.begin() + static_cast<std::ptrdiff_t>(keep), task->prompt.end());
    s.task = task;
    s.sampler.emplace(task->request.sampling);
    s.next = -1;
    s.generated = 0;
    const int room = static_cast<int>(slot_ctx_ - static_cast<int64_t>(task->prompt.size()));
    s.max_tokens = std::min(task->request.max_tokens.value_or(room), room);
    s.text.clear();
    s.sent = 0;
    s.cut = std::string::npos;
    s.logprobs.clear();
    s.logprobs_sent = 0;
    std::lock_guard lock(mutex_);
    stats_.prompt_tokens += task->prompt.size();
    stats_.prompt_tokens_cached += keep;
    count_slots();
  }
}

void Engine::finish(Slot& s, const std::string& reason, const std::string& error) {
  if (error.empty()) emit_new_text(s, true);
  TaskEvent e = final_event(error);
  e.finish_reason = reason;
  e.prompt_tokens = static_cast<int>(s.task->prompt.size());
  e.completion_tokens = s.generated;
  s.task->push(std::move(e));
  s.task.reset();
  s.pending.clear();
  s.next = -1;
}

// Sends the text that is safe to send, with the log-probabilities of the
// tokens it completes; at the end, of every token left, but those that
// start at or after where a stop string cut the text.
void Engine::emit_new_text(Slot& s, bool final) {
  const size_t n = final ? s.text.size() : sendable_length(s.text, s.task->request.stop);
  TaskEvent e;
  while (s.logprobs_sent < s.logprobs.size()) {
    const TokenLogprob& t = s.logprobs[s.logprobs_sent];
    if (final ? t.text_offset >= s.cut : t.text_offset + t.piece.size() > n) break;
    e.logprobs.push_back(t);
    ++s.logprobs_sent;
  }
  if (n <= s.sent && e.logprobs.empty()) return;
  if (n > s.sent) e.text = s.text.substr(s.sent, n - s.sent);
  s.task->push(std::move(e));
  s.sent = std::max(s.sent, n);
}

void Engine::step() {
  // Drop slots whose client left.
  for (auto& s : slots_)
    if (s->task && s->task->cancelled()) {
      finish(*s, "", "cancelled");
      std::lock_guard lock(mutex_);
      ++stats_.cancelled;
    }

  // One batch: the next token of each generating slot, then prompt chunks.
  Batch batch;
  std::vector<Slot*> rows;  // the slot of each logits row, in batch order
  int64_t budget = options_.n_step_tokens;
  for (auto& s : slots_)
    if (s->task && s->next >= 0) {
      batch.add(s->next, static_cast<int32_t>(s->cached.size()), s->id, true);
      s->cached.push_back(s->next);
      rows.push_back(s.get());
      --budget;
    }
  for (auto& s : slots_) {
    if (!s->task || s->pending.empty() || budget <= 0) continue;
    const size_t n = std::min<size_t>(s->pending.size(), static_cast<size_t>(budget));
    for (size_t i = 0; i < n; ++i) {
      const bool last = i + 1 == s->pending.size();
      batch.add(s->pending[i], static_cast<int32_t>(s->cached.size()), s->id, last);
      s->cached.push_back(s->pending[i]);
      if (last) rows.push_back(s.get());
    }
    s->pending.erase(s->pending.begin(), s->pending.begin() + static_cast<std::ptrdiff_t>(n));
    budget -= static_cast<int64_t>(n);
  }
  if (batch.size() == 0) return;

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  try {
    logits = session_->decode(batch);
  } catch (const std::exception& e) {
    // The batch's cells are in an unknown state: drop the slots' caches.
    for (auto& s : slots_) {
      if (!s->task) continue;
      session_->seq_rm(s->id);
      s->cached.clear();
      finish(*s, "", e.what());
    }
    return;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const Tokenizer& tok = model_.tokenizer();
  const size_t n_vocab = static_cast<size_t>(model_.hparams().n_vocab);
  uint64_t sampled = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    Slot& s = *rows[r];
    const std::span<const float> row = std::span(logits).subspan(r * n_vocab, n_vocab);
    const int32_t token = s.sampler->sample(row, s.cached);
    s.next = -1;
    if (tok.is_eog(token)) {
      finish(s, "stop");
      continue;
    }
    ++s.generated;
    ++sampled;
    const std::string piece = tok.token_to_piece(token, false);
    if (s.task->request.logprobs >= 0) {
      const TokenLogprobs lp = token_logprobs(row, token, s.task->request.logprobs);
      TokenLogprob& t = s.logprobs.emplace_back();
      t.piece = piece;
      t.logprob = lp.logprob;
      t.text_offset = s.text.size();
      for (const auto& [id, logprob] : lp.top) t.top.emplace_back(tok.token_to_piece(id, false), logprob);
    }
    s.text += piece;
    if (size_t at = find_stop(s.text, s.task->request.stop); at != std::string::npos) {
      s.text.resize(at);
      s.cut = at;
      finish(s, "stop");
      continue;
    }
    if (s.generated >= s.max_tokens) {
      finish(s, "length");
      continue;
    }
    s.next = token;
    emit_new_text(s, false);
  }

  std::lock_guard lock(mutex_);
  stats_.generated_tokens += sampled;
  stats_.decode_seconds += seconds;
  ++stats_.decode_steps;
}

void Engine::count_slots() {
  stats_.slots_busy = static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [](const auto& s) { return s->task != nullptr; }));
  stats_.slots_idle = options_.n_slots - stats_.slots_busy;
  stats_.slots.clear();
  for (const auto& s : slots_)
    stats_.slots.push_back({.id = s->id,
                            .busy = s->task != nullptr,
                            .n_cached = static_cast<int64_t>(s->cached.size()),
                            .n_prompt = s->task ? static_cast<int64_t>(s->task->prompt.size()) : 0,
                            .n_pending = static_cast<int64_t>(s->pending.size()),
                            .generated = s->task ? s->generated : 0});
}

}  // namespace loom::serve
