#include "oai.h"

namespace loom::serve {

using nlohmann::json;

json usage_json(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

json head(const ResponseInfo& info, const char* object) {
  return {{"id", info.id}, {"object", object}, {"created", info.created}, {"model", info.model}};
}

json finish_reason(const TaskEvent* final) { return final ? json(final->finish_reason) : json(nullptr); }

json bytes_json(const std::string& piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(c);
  return bytes;
}

}  // namespace

json logprobs_json(bool chat, const std::vector<TokenLogprob>* logprobs) {
  if (!logprobs) return nullptr;
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : *logprobs) {
      json top = json::array();
      for (const auto& [piece, logprob] : t.top)
        top.push_back({{"token", piece}, {"logprob", logprob}, {"bytes", bytes_json(piece)}});
      content.push_back({{"token", t.piece}, {"logprob", t.logprob}, {"bytes", bytes_json(t.piece)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const TokenLogprob& t : *logprobs) {
    tokens.push_back(t.piece);
    token_logprobs.push_back(t.logprob);
    json top = json::object();  // two tokens with one text: the likelier one's
    for (const auto& [piece, logprob] : t.top)
      if (!top.contains(piece)) top[piece] = logprob;
    top_logprobs.push_back(top);
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

json completion_json(const ResponseInfo& info, const std::string& text, const std::vector<TokenLogprob>* logprobs,
                     const TaskEvent& final) {
  json r = head(info, info.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", final.finish_reason}, {"logprobs", logprobs_json(info.chat, logprobs)}};
  if (info.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  r["choices"] = json::array({choice});
  r["usage"] = usage_json(final.prompt_tokens, final.completion_tokens);
  return r;
}

json chunk_json(const ResponseInfo& info, const std::string& text, const std::vector<TokenLogprob>* logprobs,
               const TaskEvent* final, bool first) {
  json r = head(info, info.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_reason(final)}, {"logprobs", logprobs_json(info.chat, logprobs)}};
  if (info.chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || !final) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  r["choices"] = json::array({choice});
  if (final) r["usage"] = usage_json(final->prompt_tokens, final->completion_tokens);
  return r;
}

std::string json_text(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json error_json(int status, const std::string& type, const std::string& param, const std::string& message) {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)}, {"code", status}}}};
}

}  // namespace loom::serve
