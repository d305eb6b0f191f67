#include "text.h"

#include <algorithm>

namespace loom::serve {

size_t find_stop(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = std::string_view::npos;
  for (const auto& s : stops) best = std::min(best, text.find(s));
  return best;
}

namespace {

// Bytes of a trailing UTF-8 character that is not complete yet (0 when none).
size_t incomplete_utf8_tail(std::string_view text) {
  for (size_t back = 1; back <= std::min<size_t>(4, text.size()); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace

size_t sendable_length(std::string_view text, const std::vector<std::string>& stops) {
  size_t n = text.size() - incomplete_utf8_tail(text);
  // Hold back a tail that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stops)
    for (size_t k = std::min(s.size() - 1, n); k > hold; --k)
      if (text.substr(n - k, k) == std::string_view(s).substr(0, k)) {
        hold = k;
        break;
      }
  return n - hold;
}

}  // namespace loom::serve
