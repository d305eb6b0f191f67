#include "loom/op.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace loom {
namespace {

constexpr std::array<std::string_view, static_cast<size_t>(Op::Count)> kNames = {
    "none",    "get_rows", "set_rows", "cpy",  "cont", "add",  "sub",     "mul",    "div",
    "scale",   "sqr",      "sqrt",     "sum_rows", "mul_mat", "rms_norm", "norm", "rope",
    "soft_max", "silu",    "gelu",     "relu", "argmax", "concat", "view", "reshape", "permute",
    "transpose"};

}  // namespace

std::string_view op_name(Op op) {
  const auto i = static_cast<size_t>(op);
  return i < kNames.size() ? kNames[i] : "?";
}

std::optional<Op> op_from_name(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    const auto n = kNames[i];
    if (n.size() == name.size() && std::equal(n.begin(), n.end(), name.begin(), [](char a, char b) {
          return a == std::tolower(static_cast<unsigned char>(b));
        }))
      return static_cast<Op>(i);
  }
  return std::nullopt;
}

bool op_is_view(Op op) {
  return op == Op::View || op == Op::Reshape || op == Op::Permute || op == Op::Transpose;
}

}  // namespace loom
