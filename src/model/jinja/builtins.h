// The functions a template can reach: filters (x | name), tests (x is name),
// methods of strings, lists and dicts (x.name(...)), operators on values and
// the global functions (range, namespace, raise_exception, strftime_now).
// Errors are plain loom::Error; the interpreter adds the template position.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ast.h"
#include "value.h"

namespace loom::jinja {

class Interpreter;

Value filter(const std::string& name, const Value& operand, std::vector<Value>& args, Kwargs& kwargs, Interpreter& in);
bool apply_test(const std::string& name, const Value& operand, const std::vector<Value>& args);
// The method or property `name` of a value, bound to it; undefined when it has none.
Value method(const Value& object, const std::string& name, Interpreter& in);
Value arithmetic(const std::string& op, const Value& a, const Value& b, Interpreter& in);
List slice(const List& items, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step, Pos pos);
void add_globals(Dict& globals, Interpreter& in);

}  // namespace loom::jinja
