#include "request.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace loom::serve {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw RequestError(400, "invalid_request_error", param, message);
}

// The field `key` of `body` when present and not null.
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* key, double def, double lo, double hi) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number()) bad(key, fmt::format("'{}' must be a number", key));
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, d));
  return d;
}

int64_t integer(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_number_integer() && !(v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()))
    bad(key, fmt::format("'{}' must be an integer", key));
  const double d = v->get<double>();
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
    bad(key, fmt::format("'{}' must be in [{}, {}], got {}", key, lo, hi, d));
  return static_cast<int64_t>(d);
}

// Any 64-bit integer, negative ones taken modulo 2^64 (as llama.cpp's seed).
uint64_t seed(const json& body, uint64_t def) {
  const json* v = field(body, "seed");
  if (!v) return def;
  if (v->is_number_unsigned()) return v->get<uint64_t>();
  if (v->is_number_integer()) return static_cast<uint64_t>(v->get<int64_t>());
  bad("seed", "'seed' must be an integer");
}

bool boolean(const json& body, const char* key, bool def) {
  const json* v = field(body, key);
  if (!v) return def;
  if (!v->is_boolean()) bad(key, fmt::format("'{}' must be true or false", key));
  return v->get<bool>();
}

// A message's content: a string, or an array of {type: "text", text} parts.
std::string content_text(const json& content, size_t index) {
  const std::string param = fmt::format("messages[{}].content", index);
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad(param, "'content' must be a string or an array of text parts");
  std::string text;
  for (const json& part : content) {
    const json* t = part.is_object() ? field(part, "text") : nullptr;
    if (!t || !t->is_string()) bad(param, "each content part must be an object with a string 'text'");
    text += t->get<std::string>();
  }
  return text;
}

nlohmann::ordered_json parse_messages(const json& body) {
  const json* m = field(body, "messages");
  if (!m || !m->is_array() || m->empty()) bad("messages", "'messages' must be a non-empty array");
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const json* role = msg.is_object() ? field(msg, "role") : nullptr;
    if (!role || !role->is_string()) bad(fmt::format("messages[{}].role", i), "each message needs a string 'role'");
    const json* content = field(msg, "content");
    out.push_back({{"role", role->get<std::string>()}, {"content", content ? content_text(*content, i) : ""}});
  }
  return out;
}

void parse_prompt(const json& body, CompletionRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required");
  if (p->is_string()) {
    r.prompt = p->get<std::string>();
    return;
  }
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {  // OpenAI's one-prompt batch
    r.prompt = (*p)[0].get<std::string>();
    return;
  }
  if (p->is_array() && !p->empty()) {
    for (const json& t : *p) {
      if (!t.is_number_integer()) bad("prompt", "'prompt' must be a string or an array of token ids");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id > INT32_MAX) bad("prompt", fmt::format("token id {} is out of range", id));
      r.prompt_tokens.push_back(static_cast<int32_t>(id));
    }
    return;
  }
  bad("prompt", "'prompt' must be a string or a non-empty array of token ids");
}

std::vector<std::string> parse_stop(const json& body, const RequestLimits& limits) {
  const json* s = field(body, "stop");
  if (!s) return {};
  std::vector<std::string> out;
  if (s->is_string()) {
    out.push_back(s->get<std::string>());
  } else if (s->is_array()) {
    for (const json& x : *s) {
      if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
      out.push_back(x.get<std::string>());
    }
  } else {
    bad("stop", "'stop' must be a string or an array of strings");
  }
  if (out.size() > limits.max_stop)
    bad("stop", fmt::format("{} stop strings given, at most {} allowed", out.size(), limits.max_stop));
  for (const auto& x : out)
    if (x.empty()) bad("stop", "stop strings must not be empty");
  return out;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const json& body, const RequestLimits& limits) {
  const json* b = field(body, "logit_bias");
  if (!b) return {};
  if (!b->is_object()) bad("logit_bias", "'logit_bias' must be an object mapping token ids to numbers");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : b->items()) {
    int64_t id = -1;
    try {
      size_t used = 0;
      id = std::stoll(key, &used);
      if (used != key.size()) id = -1;
    } catch (const std::exception&) {
    }
    if (id < 0 || id >= limits.n_vocab)
      bad("logit_bias", fmt::format("logit_bias key '{}' is not a token id in [0, {})", key, limits.n_vocab));
    if (!value.is_number() || !std::isfinite(value.get<double>()))
      bad("logit_bias", fmt::format("logit_bias for token {} must be a finite number", id));
    out.emplace_back(static_cast<int32_t>(id), std::clamp(value.get<float>(), -100.0f, 100.0f));
  }
  return out;
}

// OpenAI's two shapes: chat has logprobs (bool) and top_logprobs (int);
// completions has logprobs (int, how many top tokens).
int parse_logprobs(const json& body, bool chat, const RequestLimits& limits) {
  if (!chat) return static_cast<int>(integer(body, "logprobs", -1, 0, limits.max_top_logprobs));
  const bool on = boolean(body, "logprobs", false);
  const int top = static_cast<int>(integer(body, "top_logprobs", 0, 0, limits.max_top_logprobs));
  if (field(body, "top_logprobs") && !on) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  return on ? top : -1;
}

}  // namespace

nlohmann::json parse_json_object(std::string_view body) {
  // No request field nests deeper than a few levels; a body nesting deeper is
  // refused while it is parsed, before it costs memory or recursion.
  const auto limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxRequestNesting)
      bad("", fmt::format("the request body nests deeper than {} levels (the limit on JSON nesting)",
                          kMaxRequestNesting));
    return true;
  };
  json j = json::parse(body, limit_depth, false);
  if (j.is_discarded()) bad("", "the request body is not valid JSON");
  if (!j.is_object()) bad("", "the request body must be a JSON object");
  return j;
}

CompletionRequest parse_completion_request(std::string_view body, bool chat, const RequestLimits& limits) {
  const json j = parse_json_object(body);
  CompletionRequest r;
  r.chat = chat;
  if (const json* m = field(j, "model"); m && m->is_string()) r.model = m->get<std::string>();
  if (chat)
    r.messages = parse_messages(j);
  else
    parse_prompt(j, r);
  r.stream = boolean(j, "stream", false);
  // max_tokens (OpenAI), max_completion_tokens (its newer name) or n_predict (llama.cpp); -1: no limit.
  for (const char* key : {"max_tokens", "max_completion_tokens", "n_predict"})
    if (field(j, key)) {
      const int64_t n = integer(j, key, -1, -1, limits.max_tokens);
      if (n == 0) bad(key, fmt::format("'{}' must be at least 1 (or -1 for no limit)", key));
      if (n > 0) r.max_tokens = static_cast<int>(n);
    }
  r.stop = parse_stop(j, limits);
  r.logprobs = parse_logprobs(j, chat, limits);
  SamplingParams& s = r.sampling;
  s.temperature = static_cast<float>(number(j, "temperature", s.temperature, 0.0, 100.0));
  s.top_k = static_cast<int>(integer(j, "top_k", s.top_k, 0, INT32_MAX));
  s.top_p = static_cast<float>(number(j, "top_p", s.top_p, 0.0, 1.0));
  s.min_p = static_cast<float>(number(j, "min_p", s.min_p, 0.0, 1.0));
  s.seed = seed(j, s.seed);
  s.presence_penalty = static_cast<float>(number(j, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(number(j, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repeat_penalty = static_cast<float>(number(j, "repeat_penalty", 1.0, 0.0, 100.0));
  s.repeat_last_n = static_cast<int>(integer(j, "repeat_last_n", s.repeat_last_n, 0, 1 << 20));
  s.logit_bias = parse_logit_bias(j, limits);
  return r;
}

}  // namespace loom::serve
