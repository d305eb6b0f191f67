// The patterns of tensor overrides (-ot): a Perl-compatible regular
// expression (PCRE2) searched in weight names. A pattern comes from the user,
// so its cost is bounded: at most kMaxLength bytes, and each search at most
// kMatchLimit backtracking steps; past either limit it is refused with an
// error that names the limit (a nested quantifier such as (a|a)*b would
// otherwise take exponential time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom {

class TensorPattern {
 public:
  static constexpr size_t kMaxLength = 256;
  static constexpr uint32_t kMatchLimit = 100000;

  // Throws loom::Error for an invalid pattern or one longer than kMaxLength.
  explicit TensorPattern(const std::string& pattern);
  ~TensorPattern();
  TensorPattern(const TensorPattern&) = delete;
  TensorPattern& operator=(const TensorPattern&) = delete;

  // Whether the pattern occurs in `name`; throws loom::Error when the search
  // needs more than kMatchLimit steps.
  bool search(std::string_view name) const;

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code
};

}  // namespace loom
