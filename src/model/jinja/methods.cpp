// Methods of strings and dicts, operators, slices and the global functions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>

#include <fmt/format.h>

#include "builtins.h"
#include "interpreter.h"
#include "loom/error.h"

namespace loom::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(std::string_view s, bool left, bool right, const Value* chars) {
  auto strip_char = [&](char c) { return chars && chars->is_string() ? chars->s.find(c) != std::string::npos : is_ws(c); };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strip_char(s[b])) ++b;
  if (right)
    while (e > b && strip_char(s[e - 1])) --e;
  return std::string(s.substr(b, e - b));
}

const Value* arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name) {
  if (index < args.size()) return &args[index];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

Value bound(Function f) { return Value::function(std::move(f)); }

bool starts_or_ends(const std::string& s, const Value& pattern, bool start) {
  auto one = [&](const Value& p) {
    if (!p.is_string()) fail("{}() needs a string or a list of strings", start ? "startswith" : "endswith");
    return p.s.size() <= s.size() && (start ? s.compare(0, p.s.size(), p.s) == 0
                                            : s.compare(s.size() - p.s.size(), p.s.size(), p.s) == 0);
  };
  if (pattern.is_list()) {
    for (const auto& p : *pattern.list)
      if (one(p)) return true;
    return false;
  }
  return one(pattern);
}

// str.format with {}, {0} and {name} fields and {{ }} escapes; format specs
// and conversions ({:>4}, {!r}) are refused.
std::string python_format(const std::string& s, const std::vector<Value>& args, const Kwargs& kwargs) {
  std::string out;
  size_t next_auto = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    if ((c == '{' || c == '}') && k + 1 < s.size() && s[k + 1] == c) {
      out += c;
      ++k;
      continue;
    }
    if (c == '}') fail("format(): single '}}' in the format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t end = s.find('}', k);
    if (end == std::string::npos) fail("format(): '{{' without a closing '}}'");
    const std::string field = s.substr(k + 1, end - k - 1);
    if (field.find_first_of(":!.[") != std::string::npos) fail("format(): field '{{{}}}' is not supported", field);
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t i = field.empty() ? next_auto++ : std::stoul(field);
      if (i >= args.size()) fail("format(): no argument for field {}", i);
      v = &args[i];
    } else {
      for (const auto& [key, value] : kwargs)
        if (key == field) v = &value;
      if (!v) fail("format(): no argument named '{}'", field);
    }
    out += v->to_output();
    k = end;
  }
  return out;
}

Value string_method(const Value& self, const std::string& name, Interpreter& in) {
  const std::string s = self.s;
  if (name == "length") return Value::integer(static_cast<int64_t>(utf8_chars(s).size()));
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return bound([s, name, &in](std::vector<Value>&, Kwargs&) {
      std::vector<Value> no_args;
      Kwargs no_kwargs;
      return filter(name, Value::string(s), no_args, no_kwargs, in);
    });
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return bound([s, name](std::vector<Value>& args, Kwargs&) {
      return Value::string(strip(s, name != "rstrip", name != "lstrip", args.empty() ? nullptr : &args[0]));
    });
  if (name == "startswith" || name == "endswith")
    return bound([s, name](std::vector<Value>& args, Kwargs&) {
      if (args.empty()) fail("{}() needs an argument", name);
      return Value::boolean(starts_or_ends(s, args[0], name == "startswith"));
    });
  if (name == "split")
    return bound([s](std::vector<Value>& args, Kwargs& kwargs) {
      const Value* sep = arg(args, kwargs, 0, "sep");
      const Value* max = arg(args, kwargs, 1, "maxsplit");
      int64_t maxsplit = max && max->kind == Value::Kind::Int ? max->i : -1;
      List parts;
      if (!sep || sep->is_none()) {  // split on runs of whitespace
        size_t k = 0;
        while (k < s.size()) {
          while (k < s.size() && is_ws(s[k])) ++k;
          if (k >= s.size()) break;
          if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
            parts.push_back(Value::string(s.substr(k)));
            break;
          }
          size_t e = k;
          while (e < s.size() && !is_ws(s[e])) ++e;
          parts.push_back(Value::string(s.substr(k, e - k)));
          k = e;
        }
      } else {
        if (!sep->is_string()) fail("split() separator must be a string");
        if (sep->s.empty()) fail("split() separator is empty");
        size_t k = 0;
        while (true) {
          const size_t at = s.find(sep->s, k);
          if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit)) {
            parts.push_back(Value::string(s.substr(k)));
            break;
          }
          parts.push_back(Value::string(s.substr(k, at - k)));
          k = at + sep->s.size();
        }
      }
      return Value::make_list(std::move(parts));
    });
  if (name == "replace")
    return bound([s, &in](std::vector<Value>& args, Kwargs& kwargs) {
      return filter("replace", Value::string(s), args, kwargs, in);
    });
  if (name == "format")
    return bound([s](std::vector<Value>& args, Kwargs& kwargs) { return Value::string(python_format(s, args, kwargs)); });
  if (name == "join")
    return bound([s](std::vector<Value>& args, Kwargs&) {
      if (args.empty() || !args[0].is_list()) fail("join() needs a list");
      std::string out;
      for (size_t k = 0; k < args[0].list->size(); ++k) out += (k ? s : "") + (*args[0].list)[k].to_output();
      return Value::string(std::move(out));
    });
  return Value();
}

Value dict_method(const Value& self, const std::string& name, Interpreter& in) {
  auto d = self.dict;
  if (name == "get")
    return bound([d](std::vector<Value>& args, Kwargs&) {
      if (args.empty() || !args[0].is_string()) fail("get() needs a string key");
      if (const Value* v = d->find(args[0].s)) return *v;
      return args.size() > 1 ? args[1] : Value::none();
    });
  if (name == "items" || name == "keys" || name == "values")
    return bound([d, name](std::vector<Value>&, Kwargs&) {
      List out;
      for (const auto& [k, v] : d->entries) {
        if (name == "items") out.push_back(Value::make_list({Value::string(k), v}));
        if (name == "keys") out.push_back(Value::string(k));
        if (name == "values") out.push_back(v);
      }
      return Value::make_list(std::move(out));
    });
  if (name == "dictsort")
    return bound([self, &in](std::vector<Value>& args, Kwargs& kwargs) {
      return filter("dictsort", self, args, kwargs, in);
    });
  return Value();
}

}  // namespace

Value method(const Value& object, const std::string& name, Interpreter& in) {
  if (object.is_string()) return string_method(object, name, in);
  if (object.kind == Value::Kind::Dict) return dict_method(object, name, in);
  if (object.is_list() && name == "length") return Value::integer(static_cast<int64_t>(object.list->size()));
  return Value();
}

Value arithmetic(const std::string& op, const Value& a, const Value& b, Interpreter& in) {
  const bool nums = (a.is_number() || a.kind == Value::Kind::Bool) && (b.is_number() || b.kind == Value::Kind::Bool);
  if (nums) {
    const bool is_float = a.kind == Value::Kind::Float || b.kind == Value::Kind::Float;
    const double x = a.as_double(), y = b.as_double();
    const int64_t xi = a.kind == Value::Kind::Bool ? a.b : a.i, yi = b.kind == Value::Kind::Bool ? b.b : b.i;
    // Integer results that do not fit in 64 bits are an error, not a wrap.
    if (op == "+" || op == "-" || op == "*") {
      if (is_float) return Value::number(op == "+" ? x + y : op == "-" ? x - y : x * y);
      int64_t r = 0;
      const bool overflow = op == "+" ? __builtin_add_overflow(xi, yi, &r)
                            : op == "-" ? __builtin_sub_overflow(xi, yi, &r)
                                        : __builtin_mul_overflow(xi, yi, &r);
      if (overflow) fail("integer overflow in '{}'", op);
      return Value::integer(r);
    }
    if (op == "<") return Value::boolean(x < y);
    if (op == ">") return Value::boolean(x > y);
    if (op == "<=") return Value::boolean(x <= y);
    if (op == ">=") return Value::boolean(x >= y);
    if ((op == "/" || op == "//" || op == "%") && y == 0) fail("division by zero");
    if (op == "/") return Value::number(x / y);
    if (op == "//") return is_float ? Value::number(std::floor(x / y)) : Value::integer(static_cast<int64_t>(std::floor(x / y)));
    if (op == "%") {
      if (is_float) return Value::number(x - y * std::floor(x / y));
      if (yi == -1) return Value::integer(0);  // INT64_MIN % -1 traps in C++
      const int64_t m = xi % yi;
      return Value::integer(m != 0 && ((m < 0) != (yi < 0)) ? m + yi : m);
    }
    if (op == "**") {
      const double p = std::pow(x, y);
      if (!std::isfinite(p)) fail("'**' result is not a finite number");
      if (is_float || y < 0) return Value::number(p);
      if (std::fabs(p) >= 9.2e18) fail("integer overflow in '**'");
      return Value::integer(static_cast<int64_t>(p));
    }
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    List out = *a.list;
    out.insert(out.end(), b.list->begin(), b.list->end());
    return Value::make_list(std::move(out));
  }
  if (op == "+" && (a.is_string() || b.is_string())) {
    std::string s = a.to_concat_text() + b.to_concat_text();
    in.check_bytes(s.size());
    return Value::string(std::move(s));
  }
  if (op == "*" && (a.is_string() || b.is_string()) && (a.kind == Value::Kind::Int || b.kind == Value::Kind::Int)) {
    const Value& str = a.is_string() ? a : b;
    const int64_t n = std::max<int64_t>(0, a.is_string() ? b.i : a.i);
    if (n > 0 && !str.s.empty()) in.check_bytes(static_cast<size_t>(n) > SIZE_MAX / str.s.size() ? SIZE_MAX : str.s.size() * n);
    std::string out;
    for (int64_t k = 0; k < n; ++k) out += str.s;
    return Value::string(std::move(out));
  }
  if ((op == "<" || op == ">" || op == "<=" || op == ">=") && a.is_string() && b.is_string()) {
    const int c = compare(a, b);
    return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
  }
  fail("unsupported operand types for '{}': {} and {}", op, a.kind_name(), b.kind_name());
}

List slice(const List& items, std::optional<int64_t> start, std::optional<int64_t> stop, std::optional<int64_t> step, Pos pos) {
  const int64_t n = static_cast<int64_t>(items.size());
  if (step.value_or(1) == 0) runtime_error(pos, "slice step cannot be zero");
  // A step longer than the list takes one item; clamping keeps k + step in range.
  const int64_t st = std::clamp<int64_t>(step.value_or(1), -(n + 1), n + 1);
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt, int64_t lo, int64_t hi) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lo, hi);
  };
  List out;
  if (st > 0) {
    const int64_t b = clamp(start, 0, 0, n), e = clamp(stop, n, 0, n);
    for (int64_t k = b; k < e; k += st) out.push_back(items[k]);
  } else {
    const int64_t b = clamp(start, n - 1, -1, n - 1), e = clamp(stop, -1, -1, n - 1);
    for (int64_t k = b; k > e; k += st) out.push_back(items[k]);
  }
  return out;
}

void add_globals(Dict& globals, Interpreter& in) {
  globals.set("range", Value::function([&in](std::vector<Value>& args, Kwargs&) {
    for (const auto& a : args)
      if (a.kind != Value::Kind::Int) fail("range() needs integers");
    if (args.empty() || args.size() > 3) fail("range() takes 1 to 3 integers");
    int64_t start = args.size() == 1 ? 0 : args[0].i, stop = args.size() == 1 ? args[0].i : args[1].i;
    const int64_t step = args.size() == 3 ? args[2].i : 1;
    if (step == 0) fail("range() step cannot be zero");
    const double count = std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)));
    in.check_items(static_cast<size_t>(std::min(count, 1e18)));
    List out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
      out.push_back(Value::integer(k));
      if (__builtin_add_overflow(k, step, &k)) break;
    }
    return Value::make_list(std::move(out));
  }));
  globals.set("namespace", Value::function([](std::vector<Value>& args, Kwargs& kwargs) {
    Dict d;
    if (!args.empty()) {
      if (!args[0].is_mapping()) fail("namespace() takes a dict or keyword arguments");
      d = *args[0].dict;
    }
    for (auto& [k, v] : kwargs) d.set(k, v);
    return Value::make_dict(std::move(d), Value::Kind::Namespace);
  }));
  globals.set("dict", Value::function([](std::vector<Value>&, Kwargs& kwargs) {
    Dict d;
    for (auto& [k, v] : kwargs) d.set(k, v);
    return Value::make_dict(std::move(d));
  }));
  globals.set("raise_exception", Value::function([](std::vector<Value>& args, Kwargs&) -> Value {
    fail("raise_exception: {}", args.empty() ? std::string() : args[0].to_output());
  }));
  globals.set("strftime_now", Value::function([](std::vector<Value>& args, Kwargs&) {
    if (args.empty() || !args[0].is_string()) fail("strftime_now() needs a format string");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, args[0].s.c_str(), &tm);
    return Value::string(std::string(buf, n));
  }));
}

}  // namespace loom::jinja
