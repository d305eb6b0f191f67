// loom apply-template: render a chat template (a file, or a GGUF file's
// tokenizer.chat_template) over messages given as JSON, printing exactly
// the rendered bytes.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "args.h"
#include "chat_args.h"
#include "commands.h"
#include "loom/chat_template.h"
#include "loom/error.h"
#include "loom/gguf.h"

namespace loom::cli {
namespace {

nlohmann::ordered_json read_json(const std::string& path, const char* what) {
  const std::string text = read_text_file(path);
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) fail("{} '{}' is not valid JSON", what, path);
  if (!j.is_array()) fail("{} '{}' must hold a JSON array", what, path);
  return j;
}

}  // namespace

int cmd_apply_template(int argc, char** argv) {
  Args args("apply-template",
            "Render a chat template over messages and print exactly the rendered text (no newline added).\n"
            "The template renders as transformers does (trim_blocks, lstrip_blocks).",
            {
                {{"-m", "--model"}, "FILE", "GGUF file: use its tokenizer.chat_template and BOS/EOS token texts"},
                {{"--chat-template"}, "FILE", "template file (Jinja); overrides the model's"},
                {{"--messages"}, "FILE", "JSON array of messages ({\"role\": ..., \"content\": ...}) (required)"},
                {{"--tools"}, "FILE", "JSON array of tool definitions, passed as `tools`"},
                {{"--add-generation-prompt"}, "", "end with the header of the assistant's turn"},
                {{"--bos-token"}, "S", "text of bos_token (default: the model's, else empty)"},
                {{"--eos-token"}, "S", "text of eos_token (default: the model's, else empty)"},
            });
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  if (!args.has("--model") && !args.has("--chat-template")) fail("give a template with -m FILE or --chat-template FILE");
  const auto messages_path = args.get("--messages");
  if (!messages_path) fail("--messages FILE is required");

  GgufChatInfo info;
  if (auto model = args.get("--model")) {
    info = chat_info_from_gguf(*gguf::File::open(*model));
    if (info.chat_template.empty() && !args.has("--chat-template"))
      fail("'{}' has no tokenizer.chat_template; give one with --chat-template FILE", *model);
  }
  if (auto path = args.get("--chat-template")) info.chat_template = read_text_file(*path);

  const nlohmann::ordered_json messages = read_json(*messages_path, "--messages");
  nlohmann::ordered_json tools;
  if (auto path = args.get("--tools")) tools = read_json(*path, "--tools");

  ChatTemplate tmpl(info.chat_template);
  ChatInputs in;
  in.messages = &messages;
  in.tools = args.has("--tools") ? &tools : nullptr;
  in.add_generation_prompt = args.has("--add-generation-prompt");
  in.bos_token = args.get_or("--bos-token", info.bos_token);
  in.eos_token = args.get_or("--eos-token", info.eos_token);
  const std::string out = apply_chat_template(tmpl, in);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace loom::cli
