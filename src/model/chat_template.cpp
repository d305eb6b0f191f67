#include "loom/chat_template.h"

#include <nlohmann/json.hpp>

#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/parser.h"
#include "loom/error.h"

namespace loom {

struct ChatTemplate::Body {
  jinja::Body nodes;
};

ChatTemplate::ChatTemplate(std::string_view source) : body_(std::make_unique<Body>()) {
  body_->nodes = jinja::parse(source);
}

ChatTemplate::~ChatTemplate() = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context, const TemplateLimits& limits) const {
  if (!context.is_object()) fail("template context must be a JSON object");
  const jinja::ValueArena arena;  // first: it outlives every value of this render
  jinja::Interpreter interpreter(limits);
  jinja::Dict globals;
  jinja::add_globals(globals, interpreter);
  for (const auto& [key, value] : context.items()) globals.set(key, jinja::from_json(value));
  auto env = std::make_shared<jinja::Env>();
  for (auto& [key, value] : globals.entries) env->vars[key] = std::move(value);
  return interpreter.render(body_->nodes, env);
}

std::string apply_chat_template(const ChatTemplate& tmpl, const ChatInputs& inputs) {
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  context["messages"] = inputs.messages ? *inputs.messages : nlohmann::ordered_json::array();
  if (inputs.tools) context["tools"] = *inputs.tools;
  context["add_generation_prompt"] = inputs.add_generation_prompt;
  context["bos_token"] = inputs.bos_token;
  context["eos_token"] = inputs.eos_token;
  return tmpl.render(context);
}

std::string render_template_bytes(std::string_view source, std::string_view context_json,
                                  const TemplateLimits& limits) {
  nlohmann::ordered_json context = nlohmann::ordered_json::parse(context_json, nullptr, false);
  if (!context.is_object()) context = nlohmann::ordered_json::object();
  ChatTemplate tmpl(source);
  try {
    return tmpl.render(context, limits);
  } catch (const nlohmann::json::exception& e) {
    fail("template input: {}", e.what());
  }
}

}  // namespace loom
