// Fuzz target: loom serve's request parsing (src/serve/request.cpp) and the
// streaming text helpers it feeds (text.cpp). The first byte picks the
// route (even: /v1/completions, odd: /v1/chat/completions); the rest is the
// body. Every bad input must end as a RequestError, never a crash or
// another exception.
#include <string_view>

#include "request.h"
#include "text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  loom::serve::RequestLimits limits;
  limits.n_vocab = 32000;
  limits.max_tokens = 4096;
  try {
    const loom::serve::CompletionRequest r = loom::serve::parse_completion_request(body, chat, limits);
    // The request's stop strings over text made of the body itself.
    (void)loom::serve::find_stop(body, r.stop);
    (void)loom::serve::sendable_length(body, r.stop);
  } catch (const loom::serve::RequestError&) {
  }
  return 0;
}
