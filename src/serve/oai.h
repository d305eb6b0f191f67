// The JSON shapes of OpenAI's completion and chat completion responses,
// whole and as streamed chunks, and its error object.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "task.h"

namespace loom::serve {

struct ResponseInfo {
  std::string id;     // "cmpl-..." or "chatcmpl-..."
  std::string model;
  int64_t created = 0;  // Unix seconds
  bool chat = false;
};

nlohmann::json usage_json(int prompt_tokens, int completion_tokens);
// A choice's "logprobs": null when not asked for (logprobs null); chat:
// {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]};
// completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset}.
nlohmann::json logprobs_json(bool chat, const std::vector<TokenLogprob>* logprobs);
// The whole answer (stream false).
nlohmann::json completion_json(const ResponseInfo& info, const std::string& text,
                               const std::vector<TokenLogprob>* logprobs, const TaskEvent& final);
// One streamed chunk: text so far's new piece and its tokens' logprobs;
// `final` set on the last one (finish_reason and usage). A chat stream's
// first chunk carries the role.
nlohmann::json chunk_json(const ResponseInfo& info, const std::string& text, const std::vector<TokenLogprob>* logprobs,
                          const TaskEvent* final, bool first);
// The JSON text, with bytes that are not UTF-8 (a random or byte-level
// model can end a piece mid-character) replaced by U+FFFD.
std::string json_text(const nlohmann::json& j);
nlohmann::json error_json(int status, const std::string& type, const std::string& param, const std::string& message);

}  // namespace loom::serve
