// The JSON bodies of the OpenAI-style completion requests, parsed and
// checked into plain structs. Unknown fields are ignored (as OpenAI does);
// a field of the wrong type or out of range is a RequestError, which the
// server answers with status 400 and an OpenAI-style error object.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::serve {

struct RequestError : std::runtime_error {
  RequestError(int status, std::string type, std::string param, const std::string& message)
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)) {}
  int status;
  std::string type;   // "invalid_request_error", "authentication_error", ...
  std::string param;  // the offending field, "" when none
};

// What a request may ask for, from the server's settings.
struct RequestLimits {
  size_t max_stop = 16;       // stop strings
  int max_tokens = 1 << 20;   // the largest max_tokens (the slot context bounds it further)
  int32_t n_vocab = 0;        // logit_bias token ids must be below it
  int max_top_logprobs = 20;  // top_logprobs (chat) and logprobs (completions)
};

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  uint64_t seed = 0;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repeat_penalty = 1.0f;  // llama.cpp's: positive logits divided, negative multiplied
  int repeat_last_n = 64;       // tokens the penalties look back over
  std::vector<std::pair<int32_t, float>> logit_bias;
};

struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::string prompt;                  // /v1/completions text
  std::vector<int32_t> prompt_tokens;  // /v1/completions given as token ids
  nlohmann::ordered_json messages;     // /v1/chat/completions: [{role, content: string}]
  bool stream = false;
  std::optional<int> max_tokens;       // absent: until end of generation or the slot's context
  std::vector<std::string> stop;
  // Log-probabilities of the generated tokens: -1 none, else how many of
  // the most likely tokens to list with each (chat: logprobs true and
  // top_logprobs; completions: logprobs N).
  int logprobs = -1;
  SamplingParams sampling;
};

// Parses a /v1/completions (chat false) or /v1/chat/completions body.
CompletionRequest parse_completion_request(std::string_view body, bool chat, const RequestLimits& limits);

// The deepest nesting of arrays and objects a request body may have.
inline constexpr int kMaxRequestNesting = 32;

// Parses a JSON body that must be an object, nested at most
// kMaxRequestNesting deep; RequestError otherwise.
nlohmann::json parse_json_object(std::string_view body);

}  // namespace loom::serve
