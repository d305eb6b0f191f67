#include "loom/op.h"

#include "loom/iequals.h"

namespace loom {

std::string_view op_name(Op op) {
  return static_cast<size_t>(op) < kOpCount ? kOpTable[static_cast<size_t>(op)].name : "?";
}

std::optional<Op> op_from_name(std::string_view name) {
  for (const OpInfo& info : kOpTable) {
    if (iequals(info.name, name)) return info.op;
  }
  return std::nullopt;
}

}  // namespace loom
