#include "loom/op.h"

#include <algorithm>
#include <cctype>

namespace loom {

std::string_view op_name(Op op) {
  return static_cast<size_t>(op) < kOpCount ? kOpTable[static_cast<size_t>(op)].name : "?";
}

std::optional<Op> op_from_name(std::string_view name) {
  for (const OpInfo& info : kOpTable) {
    const auto n = info.name;
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        }))
      return info.op;
  }
  return std::nullopt;
}

}  // namespace loom
