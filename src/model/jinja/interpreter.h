// Renders a parsed template. Scopes follow Jinja: a for loop and a macro call
// open a new scope, if does not; set writes to the current scope, and
// namespace() objects carry values out of loops.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "ast.h"
#include "loom/chat_template.h"

namespace loom::jinja {

struct Env {
  std::shared_ptr<Env> parent;
  std::unordered_map<std::string, Value> vars;
  const Value* lookup(const std::string& name) const;
};

class Interpreter {
 public:
  explicit Interpreter(const TemplateLimits& limits) : limits_(limits) {}
  std::string render(const Body& body, const std::shared_ptr<Env>& globals);

  // Called by builtins (range, string repetition) before they build a value
  // of `n` items or bytes.
  void check_items(size_t n) const;
  void check_bytes(size_t n) const;

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const std::shared_ptr<Env>& env, std::string& out);
  Flow exec_node(const Node& n, const std::shared_ptr<Env>& env, std::string& out);
  void exec_for(const Node& n, const std::shared_ptr<Env>& env, std::string& out);
  // One run of a for loop's body over `iterable`; `depth` counts the calls of
  // a recursive loop's loop(items), from 1.
  void loop_over(const Node& n, const std::shared_ptr<Env>& env, const Value& iterable, int64_t depth,
                 std::string& out);
  void assign(const Expr& target, Value value, Env& env);
  void define_macro(const Node& n, const std::shared_ptr<Env>& env);
  Value call_macro(const Node& n, const std::shared_ptr<Env>& closure, std::vector<Value>& args, Kwargs& kwargs,
                   const Value& caller);

  Value eval(const Expr& e, const std::shared_ptr<Env>& env);
  Value eval_inner(const Expr& e, const std::shared_ptr<Env>& env);
  Value eval_binary(const Expr& e, const std::shared_ptr<Env>& env);
  Value eval_member(const Value& object, const Value& key, Pos pos);
  Value eval_slice(const Expr& e, const std::shared_ptr<Env>& env);
  void eval_args(const std::vector<Arg>& args, const std::shared_ptr<Env>& env, std::vector<Value>& positional,
                 Kwargs& kwargs);
  Value apply_filter(const Expr& f, Value operand, const std::shared_ptr<Env>& env);

  struct Deeper;
  const TemplateLimits& limits_;
  int depth_ = 0;
  size_t iterations_ = 0;
};

// [[noreturn]] error with the template position, for runtime errors.
[[noreturn]] void runtime_error(Pos pos, const std::string& message);

}  // namespace loom::jinja
