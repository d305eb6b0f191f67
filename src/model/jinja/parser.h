// Parses template tokens into statements. Unsupported syntax is an error that
// names the line and column.
#pragma once

#include <string_view>

#include "ast.h"

namespace loom::jinja {

// Nesting deeper than this (brackets, blocks) is refused, so that a hostile
// template cannot exhaust the stack while parsing.
inline constexpr int kMaxParseDepth = 200;

Body parse(std::string_view source);

}  // namespace loom::jinja
