#include "tensor_pattern.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <memory>

#include "loom/error.h"

namespace loom {
namespace {

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> message{};
  pcre2_get_error_message(code, message.data(), message.size());
  return reinterpret_cast<const char*>(message.data());
}

}  // namespace

TensorPattern::TensorPattern(const std::string& pattern) : pattern_(pattern) {
  if (pattern.size() > kMaxLength)
    fail("the pattern is {} bytes long; the limit for a tensor override pattern is {} bytes", pattern.size(),
         kMaxLength);
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), 0, &error, &offset, nullptr);
  if (!code_) fail("the pattern is not a valid regular expression ({} at offset {})", pcre2_message(error), offset);
}

TensorPattern::~TensorPattern() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool TensorPattern::search(std::string_view name) const {
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_create(nullptr), pcre2_match_context_free);
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create(1, nullptr), pcre2_match_data_free);
  if (!context || !match) fail("tensor override pattern '{}': out of memory", pattern_);
  pcre2_set_match_limit(context.get(), kMatchLimit);
  const int rc = pcre2_match(static_cast<pcre2_code*>(code_), reinterpret_cast<PCRE2_SPTR>(name.data()), name.size(),
                             0, 0, match.get(), context.get());
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc == PCRE2_ERROR_MATCHLIMIT)
    fail("pattern '{}' needs more than {} steps to search '{}' (the limit for a tensor override pattern); "
         "simplify it",
         pattern_, kMatchLimit, name);
  fail("pattern '{}': searching '{}' failed: {}", pattern_, name, pcre2_message(rc));
}

}  // namespace loom
