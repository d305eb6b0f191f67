// POST /v1/completions and /v1/chat/completions: parse, submit to the
// engine, then answer whole or stream Server-Sent Events ("data: {chunk}"
// per piece, "data: [DONE]" last).
//
// A client that goes away cancels its task, which frees its slot (or its
// place in the queue) at the engine's next step. httplib 0.11 tells that a
// client left only by a failed write, so no response goes more than kProbe
// without writing: a stream writes an SSE comment line (": ping"), which
// clients ignore; an answer not done within kFirstWait is sent chunked,
// with a space (JSON allows leading whitespace) every kProbe before the
// body. Such an answer has status 200 once the first space is out: an
// error after that (the server stopping, a failed decode) comes as an
// error object in the body.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "loom/model.h"
#include "oai.h"
#include "routes.h"

namespace loom::serve {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);
constexpr auto kProbe = std::chrono::milliseconds(500);
constexpr auto kFirstWait = std::chrono::seconds(1);

ResponseInfo response_info(bool chat, const ServerOptions& options) {
  static std::atomic<uint64_t> counter{0};
  ResponseInfo info;
  info.chat = chat;
  info.model = options.model_name;
  info.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", ++counter);
  info.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return info;
}

// A whole answer as it comes in.
struct Whole {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  std::optional<TaskEvent> final;
};

// Takes the task's events until its last one (true) or `until` (false).
bool collect(Task& task, Whole& w, Clock::time_point until) {
  while (!w.final) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    if (left.count() <= 0) return false;
    std::optional<TaskEvent> e = task.pop(std::min(left, std::chrono::milliseconds(kPoll)));
    if (!e) continue;
    w.text += e->text;
    w.logprobs.insert(w.logprobs.end(), e->logprobs.begin(), e->logprobs.end());
    if (e->done) w.final = std::move(e);
  }
  return true;
}

std::string whole_body(const Whole& w, const Task& task, const ResponseInfo& info) {
  if (!w.final->error.empty()) return json_text(error_json(500, "server_error", "", w.final->error));
  return json_text(completion_json(info, w.text, task.request.logprobs >= 0 ? &w.logprobs : nullptr, *w.final));
}

void answer_whole(std::shared_ptr<Task> task, const ResponseInfo& info, httplib::Response& res) {
  auto whole = std::make_shared<Whole>();
  if (collect(*task, *whole, Clock::now() + kFirstWait)) {
    if (!whole->final->error.empty()) throw RequestError(500, "server_error", "", whole->final->error);
    res.set_content(whole_body(*whole, *task, info), "application/json");
    return;
  }
  res.set_chunked_content_provider(
      "application/json",
      [task, info, whole](size_t, httplib::DataSink& sink) {
        try {
          while (!collect(*task, *whole, Clock::now() + kProbe))
            if (!sink.write(" ", 1)) return false;
          const std::string body = whole_body(*whole, *task, info);
          if (!sink.write(body.data(), body.size())) return false;
          sink.done();
          return true;
        } catch (const std::exception&) {
          return false;  // nothing may escape into httplib's worker thread
        }
      },
      [task](bool success) {
        if (!success) task->cancel();
      });
}

bool send_event(httplib::DataSink& sink, const std::string& data) {
  const std::string line = "data: " + data + "\n\n";
  return sink.write(line.data(), line.size());
}

// Writes the task's events as they come until its last one; false when the
// client went away (httplib then drops the connection and the releaser
// cancels the task).
bool stream_events(Task& task, const ResponseInfo& info, bool& first, httplib::DataSink& sink) {
  auto written = Clock::now();
  while (true) {
    std::optional<TaskEvent> e = task.pop(kPoll);
    if (!e) {
      if (Clock::now() - written < kProbe) continue;
      constexpr std::string_view ping = ": ping\n\n";
      if (!sink.write(ping.data(), ping.size())) return false;
      written = Clock::now();
      continue;
    }
    if (e->done && !e->error.empty()) {
      send_event(sink, json_text(error_json(500, "server_error", "", e->error)));
    } else {
      const std::vector<TokenLogprob>* logprobs = task.request.logprobs >= 0 ? &e->logprobs : nullptr;
      if (!send_event(sink, json_text(chunk_json(info, e->text, logprobs, e->done ? &*e : nullptr, first)))) return false;
    }
    written = Clock::now();
    first = false;
    if (e->done) {
      send_event(sink, "[DONE]");
      sink.done();
      return true;
    }
  }
}

void answer_stream(std::shared_ptr<Task> task, const ResponseInfo& info, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [task, info, first = true](size_t, httplib::DataSink& sink) mutable {
        try {
          return stream_events(*task, info, first, sink);
        } catch (const std::exception&) {
          return false;  // nothing may escape into httplib's worker thread
        }
      },
      [task](bool success) {
        if (!success) task->cancel();
      });
}

void handle(bool chat, Engine& engine, const ServerOptions& options, const httplib::Request& req,
            httplib::Response& res) {
  RequestLimits limits;
  limits.n_vocab = static_cast<int32_t>(engine.model().hparams().n_vocab);
  limits.max_tokens = static_cast<int>(engine.slot_ctx());
  CompletionRequest request = parse_completion_request(req.body, chat, limits);
  const bool stream = request.stream;
  std::shared_ptr<Task> task = engine.submit(std::move(request));
  const ResponseInfo info = response_info(chat, options);
  if (stream)
    answer_stream(std::move(task), info, res);
  else
    answer_whole(std::move(task), info, res);
}

}  // namespace

void add_completion_routes(httplib::Server& http, Engine& engine, const ServerOptions& options) {
  for (const char* path : {"/v1/completions", "/completions", "/completion"})
    http.Post(path, [&engine, &options](const httplib::Request& req, httplib::Response& res) {
      handle(false, engine, options, req, res);
    });
  for (const char* path : {"/v1/chat/completions", "/chat/completions"})
    http.Post(path, [&engine, &options](const httplib::Request& req, httplib::Response& res) {
      handle(true, engine, options, req, res);
    });
}

}  // namespace loom::serve
