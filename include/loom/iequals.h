// ASCII case-insensitive comparison, for names users type (ops, types,
// devices, buffer types).
#pragma once

#include <algorithm>
#include <cctype>
#include <string_view>

namespace loom {

inline bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

}  // namespace loom
