// POST /v1/completions and /v1/chat/completions: parse, submit to the
// engine, then answer whole or stream Server-Sent Events ("data: {chunk}"
// per piece, "data: [DONE]" last). A stream whose client goes away cancels
// its task, which frees the slot at the engine's next step.
#include <httplib.h>

#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "loom/model.h"
#include "oai.h"
#include "routes.h"

namespace loom::serve {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(100);

ResponseInfo response_info(bool chat, const ServerOptions& options) {
  static std::atomic<uint64_t> counter{0};
  ResponseInfo info;
  info.chat = chat;
  info.model = options.model_name;
  info.id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", ++counter);
  info.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return info;
}

void answer_whole(Task& task, const ResponseInfo& info, httplib::Response& res) {
  std::string text;
  while (true) {
    std::optional<TaskEvent> e = task.pop(kPoll);
    if (!e) continue;
    text += e->text;
    if (!e->done) continue;
    if (!e->error.empty()) throw RequestError(500, "server_error", "", e->error);
    res.set_content(json_text(completion_json(info, text, *e)), "application/json");
    return;
  }
}

bool send_event(httplib::DataSink& sink, const std::string& data) {
  const std::string line = "data: " + data + "\n\n";
  return sink.write(line.data(), line.size());
}

// Writes the task's events as they come until its last one; false when the
// client went away (httplib then drops the connection and the releaser
// cancels the task).
bool stream_events(Task& task, const ResponseInfo& info, bool& first, httplib::DataSink& sink) {
  while (true) {
    std::optional<TaskEvent> e = task.pop(kPoll);
    if (!e) {
      if (!sink.is_writable()) return false;
      continue;
    }
    if (e->done && !e->error.empty()) {
      send_event(sink, json_text(error_json(500, "server_error", "", e->error)));
    } else if (!send_event(sink, json_text(chunk_json(info, e->text, e->done ? &*e : nullptr, first)))) {
      return false;
    }
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
    answer_whole(*task, info, res);
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
