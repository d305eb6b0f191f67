// Fuzz target: chat-template parsing and rendering (the Jinja subset of
// src/model/jinja). The input is the template source, then a NUL byte and a
// JSON object of variables; without a NUL the whole input is the template,
// rendered with a short conversation as transformers would pass it.
// Everything a hostile template can do must end in output or a loom::Error.
#include <cstdint>
#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loom/chat_template.h"
#include "loom/error.h"

namespace {

constexpr std::string_view kConversation = R"({
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi <b>there</b>"},
    {"role": "assistant", "content": "Hello.", "tool_calls": [{"type": "function",
      "function": {"name": "f", "arguments": {"x": 1, "y": [true, null, 2.5]}}}]},
    {"role": "tool", "content": "{\"ok\": 1}"},
    {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
  ],
  "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
})";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  const std::string_view context = nul == std::string_view::npos ? kConversation : input.substr(nul + 1);
  // A tenth of the default loop budget: under ASan an iteration costs about
  // 20 us (1 us in Release), so the default million would run near
  // libFuzzer's 25 s timeout without finding anything new. The limit itself
  // is tested in chat_template_test.
  loom::TemplateLimits limits;
  limits.max_loop_iterations = 100000;
  try {
    (void)loom::render_template_bytes(source, context, limits);
  } catch (const loom::Error&) {
    // Unsupported syntax, raise_exception() and the render limits end here.
  }
  return 0;
}
