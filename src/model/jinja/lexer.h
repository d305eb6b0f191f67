// Splits a template into text and the tokens inside {% %} and {{ }} tags,
// applying whitespace control as transformers configures Jinja: one trailing
// newline of the template dropped, trim_blocks (the newline after a block or
// comment tag is removed), lstrip_blocks (spaces and tabs before a block or
// comment tag at the start of a line are removed), and the "-" markers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ast.h"

namespace loom::jinja {

struct Token {
  enum class Type { Text, OpenStatement, CloseStatement, OpenExpression, CloseExpression, Name, String, Int, Float, Op, End };
  Type type;
  std::string text;
  Pos pos;
};

std::vector<Token> tokenize(std::string_view source);

// Throws loom::Error "template line L, column C: message".
[[noreturn]] void syntax_error(Pos pos, const std::string& message);

}  // namespace loom::jinja
