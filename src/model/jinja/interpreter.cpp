#include "interpreter.h"

#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "builtins.h"
#include "lexer.h"
#include "loom/error.h"

namespace loom::jinja {

namespace {
// An error that already names its template position.
class PositionedError : public Error {
 public:
  using Error::Error;
};
}  // namespace

void runtime_error(Pos pos, const std::string& message) {
  throw PositionedError(fmt::format("template line {}, column {}: {}", pos.line, pos.column, message));
}

const Value* Env::lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end()) return &it->second;
  }
  return nullptr;
}

// The entry of a recursive loop's `loop` dict that makes it callable.
constexpr const char* kCallKey = "__call__";

struct Interpreter::Deeper {
  Deeper(Interpreter& in, Pos pos) : in(in) {
    if (++in.depth_ > in.limits_.max_depth)
      runtime_error(pos, fmt::format("nesting or recursion deeper than {} levels (template limit)", in.limits_.max_depth));
  }
  ~Deeper() { --in.depth_; }
  Interpreter& in;
};

void Interpreter::check_items(size_t n) const {
  if (n > limits_.max_loop_iterations)
    fail("{} items exceed the template limit of {} loop iterations", n, limits_.max_loop_iterations);
}

void Interpreter::check_bytes(size_t n) const {
  if (n > limits_.max_output_bytes) fail("a string of {} bytes exceeds the template limit of {} bytes", n, limits_.max_output_bytes);
}

std::string Interpreter::render(const Body& body, const std::shared_ptr<Env>& globals) {
  std::string out;
  exec(body, globals, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Env>& env, std::string& out) {
  for (const auto& n : body) {
    const Flow f = exec_node(*n, env, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_node(const Node& n, const std::shared_ptr<Env>& env, std::string& out) {
  Deeper guard(*this, n.pos);
  switch (n.kind) {
    case Node::Kind::Text: out += n.text; break;
    case Node::Kind::Output: out += eval(*n.expr, env).to_output(); break;
    case Node::Kind::If: return exec(eval(*n.expr, env).truthy() ? n.body : n.else_body, env, out);
    case Node::Kind::For: exec_for(n, env, out); break;
    case Node::Kind::Set: assign(*n.target, eval(*n.expr, env), *env); break;
    case Node::Kind::SetBlock: {
      std::string text;
      exec(n.body, env, text);
      assign(*n.target, Value::string(std::move(text)), *env);
      break;
    }
    case Node::Kind::Macro: define_macro(n, env); break;
    case Node::Kind::CallBlock: {
      // caller() renders the block's body; the macro is called with it.
      const Node* block = &n;
      std::shared_ptr<Env> block_env = env;
      Value caller = Value::function([this, block, block_env](std::vector<Value>& args, Kwargs& kwargs) {
        return call_macro(*block, block_env, args, kwargs, Value());
      });
      const Expr& call = *n.expr;
      Value fn = eval(*call.object, env);
      if (fn.kind != Value::Kind::Function || !fn.fn) runtime_error(call.pos, "'call' needs a macro");
      std::vector<Value> args;
      Kwargs kwargs;
      eval_args(call.args, env, args, kwargs);
      kwargs.emplace_back("caller", caller);
      out += (*fn.fn)(args, kwargs).to_output();
      break;
    }
    case Node::Kind::FilterBlock: {
      std::string text;
      exec(n.body, env, text);
      out += apply_filter(*n.filter, Value::string(std::move(text)), env).to_output();
      break;
    }
    case Node::Kind::Break: return Flow::Break;
    case Node::Kind::Continue: return Flow::Continue;
  }
  if (out.size() > limits_.max_output_bytes)
    runtime_error(n.pos, fmt::format("output exceeds the template limit of {} bytes", limits_.max_output_bytes));
  return Flow::Normal;
}

void Interpreter::exec_for(const Node& n, const std::shared_ptr<Env>& env, std::string& out) {
  loop_over(n, env, eval(*n.expr, env), 1, out);
}

void Interpreter::loop_over(const Node& n, const std::shared_ptr<Env>& env, const Value& iterable, int64_t depth,
                            std::string& out) {
  auto scope = std::make_shared<Env>();
  scope->parent = env;
  List candidates;
  switch (iterable.kind) {
    case Value::Kind::List: candidates = *iterable.list; break;
    case Value::Kind::Dict:
      for (const auto& [k, v] : iterable.dict->entries) candidates.push_back(Value::string(k));
      break;
    case Value::Kind::String:
      for (auto& c : utf8_chars(iterable.s)) candidates.push_back(Value::string(std::move(c)));
      break;
    case Value::Kind::Undefined: break;  // an undefined value iterates as empty, as in Jinja
    default: runtime_error(n.expr->pos, fmt::format("cannot iterate over a {}", iterable.kind_name()));
  }
  List items;
  if (n.condition) {
    for (auto& c : candidates) {
      auto test_scope = std::make_shared<Env>();
      test_scope->parent = scope;
      assign(*n.target, c, *test_scope);
      if (eval(*n.condition, test_scope).truthy()) items.push_back(std::move(c));
    }
  } else {
    items = std::move(candidates);
  }
  for (size_t k = 0; k < items.size(); ++k) {
    if (++iterations_ > limits_.max_loop_iterations)
      runtime_error(n.pos, fmt::format("more than {} loop iterations (template limit)", limits_.max_loop_iterations));
    const auto len = static_cast<int64_t>(items.size());
    const auto i = static_cast<int64_t>(k);
    Dict loop;
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(len - i));
    loop.set("revindex0", Value::integer(len - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == len - 1));
    loop.set("length", Value::integer(len));
    loop.set("previtem", k > 0 ? items[k - 1] : Value());
    loop.set("nextitem", k + 1 < items.size() ? items[k + 1] : Value());
    loop.set("depth", Value::integer(depth));
    loop.set("depth0", Value::integer(depth - 1));
    if (n.recursive)  // loop(items): the body again over items, one level deeper
      loop.set(kCallKey, Value::function([this, &n, env, depth](std::vector<Value>& args, Kwargs&) {
        if (args.size() != 1) runtime_error(n.pos, fmt::format("loop() takes 1 argument, got {}", args.size()));
        Deeper deeper(*this, n.pos);
        std::string text;
        loop_over(n, env, args[0], depth + 1, text);
        return Value::string(std::move(text));
      }));
    scope->vars["loop"] = Value::make_dict(std::move(loop));
    assign(*n.target, items[k], *scope);
    if (exec(n.body, scope, out) == Flow::Break) break;
  }
  if (items.empty()) exec(n.else_body, scope, out);
}

void Interpreter::assign(const Expr& target, Value value, Env& env) {
  switch (target.kind) {
    case Expr::Kind::Name: env.vars[target.name] = std::move(value); return;
    case Expr::Kind::Tuple: {
      if (!value.is_list()) runtime_error(target.pos, fmt::format("cannot unpack a {}", value.kind_name()));
      if (value.list->size() != target.items.size())
        runtime_error(target.pos, fmt::format("cannot unpack {} values into {} names", value.list->size(), target.items.size()));
      for (size_t k = 0; k < target.items.size(); ++k) assign(*target.items[k], (*value.list)[k], env);
      return;
    }
    case Expr::Kind::Attribute: {
      const Value* ns = env.lookup(target.object->name);
      if (!ns || ns->kind != Value::Kind::Namespace)
        runtime_error(target.pos, fmt::format("cannot set '{}.{}': '{}' is not a namespace", target.object->name,
                                              target.name, target.object->name));
      ns->dict->set(target.name, std::move(value));
      return;
    }
    default: runtime_error(target.pos, "cannot assign to this expression");
  }
}

void Interpreter::define_macro(const Node& n, const std::shared_ptr<Env>& env) {
  const Node* macro = &n;
  std::weak_ptr<Env> weak = env;  // the scope holds the macro: a strong reference would be a cycle
  env->vars[n.text] = Value::function([this, macro, weak](std::vector<Value>& args, Kwargs& kwargs) {
    Value caller;
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
      if (it->first == "caller") {
        caller = it->second;
        kwargs.erase(it);
        break;
      }
    auto closure = weak.lock();
    if (!closure) fail("macro '{}' called after its scope ended", macro->text);
    return call_macro(*macro, closure, args, kwargs, caller);
  });
}

Value Interpreter::call_macro(const Node& n, const std::shared_ptr<Env>& closure, std::vector<Value>& args,
                              Kwargs& kwargs, const Value& caller) {
  Deeper guard(*this, n.pos);
  auto scope = std::make_shared<Env>();
  scope->parent = closure;
  if (!caller.is_undefined()) scope->vars["caller"] = caller;
  std::vector<const Arg*> pending_defaults;
  for (size_t k = 0; k < n.params.size(); ++k) {
    const Arg& p = n.params[k];
    Value v;
    bool given = k < args.size();
    if (given) v = args[k];
    for (auto it = kwargs.begin(); !given && it != kwargs.end(); ++it)
      if (it->first == p.name) {
        v = it->second;
        kwargs.erase(it);
        given = true;
        break;
      }
    if (!given && p.value) pending_defaults.push_back(&p);
    scope->vars[p.name] = v;
  }
  Dict extra;
  for (auto& [k, v] : kwargs) extra.set(k, v);
  scope->vars["kwargs"] = Value::make_dict(std::move(extra));
  List varargs;
  for (size_t k = n.params.size(); k < args.size(); ++k) varargs.push_back(args[k]);
  scope->vars["varargs"] = Value::make_list(std::move(varargs));
  for (const Arg* p : pending_defaults) scope->vars[p->name] = eval(*p->value, scope);
  std::string out;
  exec(n.body, scope, out);
  return Value::string(std::move(out));
}

void Interpreter::eval_args(const std::vector<Arg>& args, const std::shared_ptr<Env>& env,
                            std::vector<Value>& positional, Kwargs& kwargs) {
  for (const Arg& a : args) {
    if (a.name.empty())
      positional.push_back(eval(*a.value, env));
    else
      kwargs.emplace_back(a.name, eval(*a.value, env));
  }
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Env>& env) {
  Deeper guard(*this, e.pos);
  try {
    return eval_inner(e, env);
  } catch (const PositionedError&) {
    throw;
  } catch (const Error& err) {
    runtime_error(e.pos, err.what());
  }
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Env>& env) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: {
      const Value* v = env->lookup(e.name);
      return v ? *v : Value();
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      List items;
      for (const auto& i : e.items) items.push_back(eval(*i, env));
      return Value::make_list(std::move(items));
    }
    case Expr::Kind::Dict: {
      Dict d;
      for (size_t k = 0; k + 1 < e.items.size(); k += 2) {
        Value key = eval(*e.items[k], env);
        if (!key.is_string()) runtime_error(e.items[k]->pos, fmt::format("dict keys must be strings, not {}", key.kind_name()));
        d.set(key.s, eval(*e.items[k + 1], env));
      }
      return Value::make_dict(std::move(d));
    }
    case Expr::Kind::Attribute: return eval_member(eval(*e.object, env), Value::string(e.name), e.pos);
    case Expr::Kind::Subscript: return eval_member(eval(*e.object, env), eval(*e.items[0], env), e.pos);
    case Expr::Kind::Slice: return eval_slice(e, env);
    case Expr::Kind::Call: {
      std::vector<Value> args;
      Kwargs kwargs;
      Value fn = eval(*e.object, env);
      if (fn.kind == Value::Kind::Dict)  // a recursive loop's `loop`
        if (const Value* call = fn.dict->find(kCallKey)) fn = *call;
      if (fn.kind != Value::Kind::Function || !fn.fn) {
        const std::string what = e.object->kind == Expr::Kind::Name || e.object->kind == Expr::Kind::Attribute
                                     ? "'" + e.object->name + "'" : "this expression";
        runtime_error(e.pos, fmt::format("{} is not callable (it is {})", what, fn.kind_name()));
      }
      eval_args(e.args, env, args, kwargs);
      return (*fn.fn)(args, kwargs);
    }
    case Expr::Kind::Filter: return apply_filter(e, eval(*e.object, env), env);
    case Expr::Kind::Test: {
      Value operand = eval(*e.object, env);
      std::vector<Value> args;
      Kwargs kwargs;
      eval_args(e.args, env, args, kwargs);
      const bool r = apply_test(e.name, operand, args);
      return Value::boolean(e.negate ? !r : r);
    }
    case Expr::Kind::Unary: {
      Value v = eval(*e.object, env);
      if (e.name == "not") return Value::boolean(!v.truthy());
      const int sign = e.name == "-" ? -1 : 1;
      if (v.kind == Value::Kind::Float) return Value::number(sign * v.f);
      if (v.kind == Value::Kind::Bool) return Value::integer(sign * int64_t(v.b));
      if (v.kind == Value::Kind::Int) {
        if (sign < 0 && v.i == INT64_MIN) runtime_error(e.pos, "integer overflow in unary '-'");
        return Value::integer(sign * v.i);
      }
      runtime_error(e.pos, fmt::format("unary '{}' needs a number, not {}", e.name, v.kind_name()));
    }
    case Expr::Kind::Binary: return eval_binary(e, env);
    case Expr::Kind::Ternary:
      if (eval(*e.items[1], env).truthy()) return eval(*e.items[0], env);
      return e.items[2] ? eval(*e.items[2], env) : Value();
  }
  return Value();
}

Value Interpreter::eval_member(const Value& object, const Value& key, Pos pos) {
  if (object.is_mapping()) {
    if (!key.is_string()) runtime_error(pos, fmt::format("dict keys are strings, not {}", key.kind_name()));
    if (const Value* v = object.dict->find(key.s)) return *v;
    return object.kind == Value::Kind::Dict ? method(object, key.s, *this) : Value();
  }
  if (object.is_list() || object.is_string()) {
    if (key.kind == Value::Kind::Int) {
      if (object.is_list()) {
        const auto n = static_cast<int64_t>(object.list->size());
        const int64_t k = key.i < 0 ? key.i + n : key.i;
        return k >= 0 && k < n ? (*object.list)[k] : Value();
      }
      auto chars = utf8_chars(object.s);
      const auto n = static_cast<int64_t>(chars.size());
      const int64_t k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? Value::string(chars[k]) : Value();
    }
    if (key.is_string()) return method(object, key.s, *this);
    runtime_error(pos, fmt::format("cannot index a {} with a {}", object.kind_name(), key.kind_name()));
  }
  if (key.is_string()) return method(object, key.s, *this);
  return Value();
}

Value Interpreter::eval_slice(const Expr& e, const std::shared_ptr<Env>& env) {
  Value object = eval(*e.object, env);
  std::optional<int64_t> bounds[3];
  for (int k = 0; k < 3; ++k) {
    if (!e.items[k]) continue;
    Value v = eval(*e.items[k], env);
    if (v.is_none() || v.is_undefined()) continue;
    if (v.kind != Value::Kind::Int) runtime_error(e.items[k]->pos, fmt::format("slice bounds must be integers, not {}", v.kind_name()));
    bounds[k] = v.i;
  }
  if (object.is_list()) return Value::make_list(slice(*object.list, bounds[0], bounds[1], bounds[2], e.pos));
  if (object.is_string()) {
    List chars;
    for (auto& c : utf8_chars(object.s)) chars.push_back(Value::string(std::move(c)));
    std::string out;
    for (const auto& c : slice(chars, bounds[0], bounds[1], bounds[2], e.pos)) out += c.s;
    return Value::string(std::move(out));
  }
  runtime_error(e.pos, fmt::format("cannot slice a {}", object.kind_name()));
}

Value Interpreter::eval_binary(const Expr& e, const std::shared_ptr<Env>& env) {
  const std::string& op = e.name;
  Value a = eval(*e.left, env);
  if (op == "and") return a.truthy() ? eval(*e.right, env) : a;
  if (op == "or") return a.truthy() ? a : eval(*e.right, env);
  Value b = eval(*e.right, env);
  if (op == "==") return Value::boolean(equals(a, b));
  if (op == "!=") return Value::boolean(!equals(a, b));
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_list()) {
      for (const auto& item : *b.list) found = found || equals(a, item);
    } else if (b.is_string() && a.is_string()) {
      found = b.s.find(a.s) != std::string::npos;
    } else if (b.is_mapping() && a.is_string()) {
      found = b.dict->find(a.s) != nullptr;
    } else if (!b.is_undefined()) {
      runtime_error(e.pos, fmt::format("'in' needs a list, string or dict on the right, not {}", b.kind_name()));
    }
    return Value::boolean(op == "in" ? found : !found);
  }
  if (op == "~") {
    if (a.is_none() || b.is_none()) {
      // none prints as nothing elsewhere; concatenating it is an error in the reference renderer
      runtime_error(e.pos, "cannot concatenate none with '~'");
    }
    std::string s = a.to_concat_text() + b.to_concat_text();
    check_bytes(s.size());
    return Value::string(std::move(s));
  }
  if (a.is_undefined() || b.is_undefined())
    runtime_error(e.pos, fmt::format("'{}' on an undefined value", op));
  if (a.is_none() || b.is_none()) runtime_error(e.pos, fmt::format("'{}' on none", op));
  return arithmetic(op, a, b, *this);
}

Value Interpreter::apply_filter(const Expr& f, Value operand, const std::shared_ptr<Env>& env) {
  std::vector<Value> args;
  Kwargs kwargs;
  eval_args(f.args, env, args, kwargs);
  try {
    return filter(f.name, operand, args, kwargs, *this);
  } catch (const PositionedError&) {
    throw;
  } catch (const Error& err) {
    runtime_error(f.pos, err.what());
  }
}

}  // namespace loom::jinja
