#include "run_chat.h"

#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "args.h"
#include "chat_args.h"
#include "loom/chat_template.h"
#include "loom/error.h"
#include "loom/tokenizer.h"

namespace loom::cli {

int run_chat(const Args& args, const Model& model, Session& session, Sampler& sampler, int n_predict) {
  const Tokenizer& tok = model.tokenizer();
  GgufChatInfo info = chat_info_from_gguf(model.file());
  if (auto path = args.get("--chat-template")) info.chat_template = read_text_file(*path);
  if (info.chat_template.empty())
    fail("'{}' has no tokenizer.chat_template; give one with --chat-template FILE", model.file().path());
  const ChatTemplate tmpl(info.chat_template);

  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (auto sys = args.get("--system-prompt")) messages.push_back({{"role", "system"}, {"content", *sys}});
  std::string fed;  // the text the session holds, in order
  std::string line;
  while (true) {
    std::fputs("\n> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    ChatInputs in;
    in.messages = &messages;
    in.add_generation_prompt = true;
    in.bos_token = info.bos_token;
    in.eos_token = info.eos_token;
    const std::string prompt = apply_chat_template(tmpl, in);
    // Feed only what is new; when the template re-renders the history
    // differently, start the session over with the whole text.
    if (prompt.compare(0, fed.size(), fed) != 0) {
      session.reset();
      fed.clear();
    }
    const std::string delta = prompt.substr(fed.size());
    const bool starts_with_bos = !info.bos_token.empty() && prompt.rfind(info.bos_token, 0) == 0;
    std::vector<int32_t> tokens = tok.encode(delta, fed.empty() && !starts_with_bos, true);
    if (session.n_past() + static_cast<int64_t>(tokens.size()) >= session.n_ctx())
      fail("the conversation needs {} tokens, more than the context of {} (-c)", session.n_past() + tokens.size(),
           session.n_ctx());
    fed = prompt;
    std::vector<float> logits = session.decode(tokens);
    std::string answer;
    for (int generated = 0; generated < n_predict && session.n_past() < session.n_ctx(); ++generated) {
      const int32_t next = sampler.sample(logits);
      if (tok.is_eog(next)) break;
      const std::string piece = tok.token_to_piece(next, false);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      answer += piece;
      const int32_t one[] = {next};
      logits = session.decode(one);
    }
    fed += answer;
    messages.push_back({{"role", "assistant"}, {"content", answer}});
  }
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace loom::cli
