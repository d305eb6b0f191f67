// Chat templates: a model's tokenizer.chat_template is a Jinja template that
// turns a list of messages into the prompt text. Loom carries a small Jinja
// interpreter for the subset real chat templates use, and renders the way
// transformers does (trim_blocks and lstrip_blocks on, the template's final
// newline dropped); its output is compared byte for byte with the npm
// package @huggingface/jinja in the parity tests.
//
// Unsupported syntax, a failed raise_exception() and the limits below give a
// loom::Error that names the template line and column.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace loom {

namespace jinja {
struct Node;
}

// Bounds on what one render may do, so that a hostile template ends with an
// error instead of exhausting the stack, the memory or the time.
struct TemplateLimits {
  int max_depth = 400;                   // nested evaluation and macro calls
  size_t max_loop_iterations = 1000000;  // for-loop iterations in one render, all loops together
  size_t max_output_bytes = 64u << 20;   // the rendered text and any string built on the way
};

class ChatTemplate {
 public:
  // Parses the template; throws loom::Error naming the line and column of
  // the first unsupported or malformed construct.
  explicit ChatTemplate(std::string_view source);
  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

  // Renders with the keys of `context` (a JSON object) as variables.
  std::string render(const nlohmann::ordered_json& context, const TemplateLimits& limits = {}) const;

 private:
  struct Body;
  std::unique_ptr<Body> body_;
};

// The variables transformers passes to a chat template.
struct ChatInputs {
  const nlohmann::ordered_json* messages = nullptr;  // a JSON array of {role, content, ...}
  const nlohmann::ordered_json* tools = nullptr;     // optional JSON array
  bool add_generation_prompt = false;
  std::string bos_token, eos_token;
};
std::string apply_chat_template(const ChatTemplate& tmpl, const ChatInputs& inputs);

// Parses `source` and renders it with `context_json` (a JSON object; invalid
// JSON renders with an empty context). For fuzz targets: every failure is a
// loom::Error.
std::string render_template_bytes(std::string_view source, std::string_view context_json,
                                  const TemplateLimits& limits = {});

}  // namespace loom
