// Filters (x | name(args)) and tests (x is name arg).
#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "builtins.h"
#include "interpreter.h"
#include "loom/error.h"

namespace loom::jinja {
namespace {

const Value* arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name) {
  if (index < args.size()) return &args[index];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

bool flag(const std::vector<Value>& args, const Kwargs& kwargs, size_t index, const char* name) {
  const Value* v = arg(args, kwargs, index, name);
  return v && v->truthy();
}

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  return s;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      c = static_cast<char>(start ? std::toupper(u) : std::tolower(u));
      start = false;
    } else {
      start = !std::isalnum(u);
    }
  }
  return out;
}

// item.a.b, where each part names a dict key or a list index.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t k = 0;
  while (true) {
    const size_t dot = path.find('.', k);
    const std::string part = path.substr(k, dot == std::string::npos ? std::string::npos : dot - k);
    if (v.is_mapping()) {
      const Value* f = v.dict->find(part);
      v = f ? *f : Value();
    } else if (v.is_list() && !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) {
      const size_t i = std::stoul(part);
      v = i < v.list->size() ? (*v.list)[i] : Value();
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    k = dot + 1;
  }
}

List as_list(const Value& v, const char* filter_name) {
  if (v.is_list()) return *v.list;
  if (v.is_string()) {
    List out;
    for (auto& c : utf8_chars(v.s)) out.push_back(Value::string(std::move(c)));
    return out;
  }
  if (v.is_mapping()) {
    List out;
    for (const auto& [k, x] : v.dict->entries) out.push_back(Value::string(k));
    return out;
  }
  if (v.is_undefined()) return {};
  fail("filter '{}' needs a list, not {}", filter_name, v.kind_name());
}

std::string indent(const std::string& s, const std::string& pad, bool first, bool blank) {
  std::string out;
  size_t k = 0;
  bool first_line = true;
  while (true) {
    const size_t nl = s.find('\n', k);
    const std::string line = s.substr(k, nl == std::string::npos ? std::string::npos : nl - k);
    if ((first || !first_line) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    k = nl + 1;
    first_line = false;
  }
  return out;
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, const std::vector<Value>& args) {
  using K = Value::Kind;
  auto need_arg = [&]() -> const Value& {
    if (args.empty()) fail("test '{}' needs an argument", name);
    return args[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.b;
  if (name == "false") return v.kind == K::Bool && !v.b;
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "mapping") return v.kind == K::Dict;
  if (name == "iterable") return v.is_list() || v.is_string();
  if (name == "sequence") return v.is_list() || v.is_string() || v.kind == K::Dict;
  if (name == "callable") return v.kind == K::Function;
  if (name == "odd" || name == "even") {
    if (v.kind != K::Int) fail("test '{}' needs an integer, not {}", name, v.kind_name());
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = need_arg();
    if (v.kind != K::Int || d.kind != K::Int || d.i == 0) fail("test 'divisibleby' needs integers (and a non-zero divisor)");
    return v.i % d.i == 0;
  }
  if (name == "lower") return v.is_string() && v.s == map_ascii(v.s, ::tolower);
  if (name == "upper") return v.is_string() && v.s == map_ascii(v.s, ::toupper);
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return equals(v, need_arg());
  if (name == "ne" || name == "!=") return !equals(v, need_arg());
  if (name == "in") {
    const Value& c = need_arg();
    if (c.is_list()) return std::any_of(c.list->begin(), c.list->end(), [&](const Value& x) { return equals(v, x); });
    if (c.is_string() && v.is_string()) return c.s.find(v.s) != std::string::npos;
    if (c.is_mapping() && v.is_string()) return c.dict->find(v.s) != nullptr;
    return false;
  }
  if (name == "gt" || name == "greaterthan") return compare(v, need_arg()) > 0;
  if (name == "ge") return compare(v, need_arg()) >= 0;
  if (name == "lt" || name == "lessthan") return compare(v, need_arg()) < 0;
  if (name == "le") return compare(v, need_arg()) <= 0;
  fail("unknown test '{}'", name);
}

Value filter(const std::string& name, const Value& v, std::vector<Value>& args, Kwargs& kwargs, Interpreter& in) {
  using K = Value::Kind;
  auto need_string = [&]() -> const std::string& {
    if (!v.is_string()) fail("filter '{}' needs a string, not {}", name, v.kind_name());
    return v.s;
  };
  if (name == "safe") return v;
  if (name == "tojson") {
    JsonOptions o;
    if (const Value* i = arg(args, kwargs, 0, "indent"); i && i->kind == K::Int) o.indent = static_cast<int>(i->i);
    o.ensure_ascii = flag({}, kwargs, 0, "ensure_ascii");
    o.sort_keys = flag({}, kwargs, 0, "sort_keys");
    if (const Value* s = arg({}, kwargs, 0, "separators"); s && s->is_list() && s->list->size() == 2) {
      o.item_separator = (*s->list)[0].s;
      o.key_separator = (*s->list)[1].s;
    }
    std::string out = to_json(v, o);
    in.check_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (name == "string") return v.is_string() ? v : Value::string(v.to_output());
  if (name == "length" || name == "count") {
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_mapping()) return Value::integer(static_cast<int64_t>(v.dict->entries.size()));
    if (v.is_string()) return Value::integer(static_cast<int64_t>(utf8_chars(v.s).size()));
    if (v.is_undefined()) return Value::integer(0);
    fail("filter '{}' needs a list, dict or string, not {}", name, v.kind_name());
  }
  if (name == "default" || name == "d") {
    const Value* d = arg(args, kwargs, 0, "default_value");
    const bool boolean = flag(args, kwargs, 1, "boolean");
    if (v.is_undefined() || (boolean && !v.truthy())) return d ? *d : Value::string("");
    return v;
  }
  if (name == "upper") return Value::string(map_ascii(need_string(), ::toupper));
  if (name == "lower") return Value::string(map_ascii(need_string(), ::tolower));
  if (name == "title") return Value::string(title_case(need_string()));
  if (name == "capitalize") {
    std::string s = need_string();
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
    return Value::string(std::move(s));
  }
  if (name == "trim") {
    const std::string& s = need_string();
    const size_t b = s.find_first_not_of(" \t\n\r\v\f");
    if (b == std::string::npos) return Value::string("");
    return Value::string(s.substr(b, s.find_last_not_of(" \t\n\r\v\f") - b + 1));
  }
  if (name == "replace") {
    const std::string& s = need_string();
    const Value* from = arg(args, kwargs, 0, "old");
    const Value* to = arg(args, kwargs, 1, "new");
    if (!from || !to || !from->is_string() || !to->is_string()) fail("replace needs two strings");
    const Value* count_arg = arg(args, kwargs, 2, "count");
    int64_t count = count_arg && count_arg->kind == K::Int ? count_arg->i : -1;
    std::string out;
    if (from->s.empty()) {  // Python inserts `new` between characters and at both ends
      auto chars = utf8_chars(s);
      for (size_t k = 0; k <= chars.size(); ++k) {
        if (count < 0 || static_cast<int64_t>(k) < count) out += to->s;
        if (k < chars.size()) out += chars[k];
        in.check_bytes(out.size());
      }
      return Value::string(std::move(out));
    }
    size_t k = 0;
    for (int64_t done = 0; count < 0 || done < count; ++done) {
      const size_t at = s.find(from->s, k);
      if (at == std::string::npos) break;
      out.append(s, k, at - k);
      out += to->s;
      in.check_bytes(out.size());
      k = at + from->s.size();
    }
    out.append(s, k);
    return Value::string(std::move(out));
  }
  if (name == "indent") {
    const Value* w = arg(args, kwargs, 0, "width");
    std::string pad = w && w->is_string() ? w->s : std::string(w && w->kind == K::Int ? std::clamp<int64_t>(w->i, 0, 1 << 16) : 4, ' ');
    return Value::string(indent(need_string(), pad, flag(args, kwargs, 1, "first"), flag(args, kwargs, 2, "blank")));
  }
  if (name == "int") {
    const Value* d = arg(args, kwargs, 0, "default");
    const Value fallback = d ? *d : Value::integer(0);
    if (v.kind == K::Int) return v;
    if (v.kind == K::Float) return std::isfinite(v.f) ? Value::integer(static_cast<int64_t>(std::trunc(v.f))) : fallback;
    if (v.kind == K::Bool) return Value::integer(v.b);
    if (v.is_string()) {
      try {
        size_t used = 0;
        const long long x = std::stoll(v.s, &used, 10);
        return Value::integer(x);
      } catch (const std::exception&) {
        return fallback;
      }
    }
    return fallback;
  }
  if (name == "float") {
    const Value* d = arg(args, kwargs, 0, "default");
    if (v.is_number() || v.kind == K::Bool) return Value::number(v.as_double());
    if (v.is_string()) {
      try {
        return Value::number(std::stod(v.s));
      } catch (const std::exception&) {
      }
    }
    return d ? *d : Value::number(0.0);
  }
  if (name == "abs") {
    if (v.kind == K::Int) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == K::Float) return Value::number(std::fabs(v.f));
    fail("filter 'abs' needs a number, not {}", v.kind_name());
  }
  if (name == "bool") return Value::boolean(v.truthy());
  if (name == "items") {
    if (v.is_undefined()) return Value::make_list();
    if (!v.is_mapping()) fail("filter 'items' needs a dict, not {}", v.kind_name());
    List out;
    for (const auto& [k, x] : v.dict->entries) out.push_back(Value::make_list({Value::string(k), x}));
    return Value::make_list(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_mapping()) fail("filter 'dictsort' needs a dict, not {}", v.kind_name());
    const bool case_sensitive = flag(args, kwargs, 0, "case_sensitive");
    const Value* by = arg(args, kwargs, 1, "by");
    const bool by_value = by && by->is_string() && by->s == "value";
    const bool reverse = flag(args, kwargs, 2, "reverse");
    List out;
    for (const auto& [k, x] : v.dict->entries) out.push_back(Value::make_list({Value::string(k), x}));
    std::stable_sort(out.begin(), out.end(), [&](const Value& a, const Value& b) {
      const int c = compare((*a.list)[by_value], (*b.list)[by_value], case_sensitive);
      return reverse ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(out));
  }
  // The filters below work on sequences.
  if (name == "list") return Value::make_list(as_list(v, "list"));
  if (name == "first" || name == "last") {
    List items = as_list(v, name.c_str());
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      auto chars = utf8_chars(v.s);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    List items = as_list(v, "reverse");
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (name == "join") {
    List items = as_list(v, "join");
    const Value* sep = arg(args, kwargs, 0, "d");
    const Value* attribute = arg(args, kwargs, 1, "attribute");
    std::string out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k && sep) out += sep->to_output();
      out += (attribute && attribute->is_string() ? attribute_path(items[k], attribute->s) : items[k]).to_output();
      in.check_bytes(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "unique") {
    List out;
    for (const auto& x : as_list(v, "unique"))
      if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return equals(x, y); })) out.push_back(x);
    return Value::make_list(std::move(out));
  }
  if (name == "sort") {
    List items = as_list(v, "sort");
    const bool reverse = flag(args, kwargs, 0, "reverse");
    const bool case_sensitive = flag(args, kwargs, 1, "case_sensitive");
    const Value* attribute = arg(args, kwargs, 2, "attribute");
    auto key = [&](const Value& x) { return attribute && attribute->is_string() ? attribute_path(x, attribute->s) : x; };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      const int c = compare(key(a), key(b), case_sensitive);
      return reverse ? c > 0 : c < 0;
    });
    return Value::make_list(std::move(items));
  }
  if (name == "min" || name == "max" || name == "sum") {
    List items = as_list(v, name.c_str());
    if (name == "sum") {
      Value total = Value::integer(0);
      for (const auto& x : items) total = arithmetic("+", total, x, in);
      return total;
    }
    if (items.empty()) return Value();
    Value best = items[0];
    for (const auto& x : items)
      if ((compare(x, best, false) < 0) == (name == "min") && compare(x, best, false) != 0) best = x;
    return best;
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attribute = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "selectattr" || name == "select";
    size_t at = 0;
    std::string attribute;
    if (by_attribute) {
      if (args.empty() || !args[0].is_string()) fail("filter '{}' needs an attribute name", name);
      attribute = args[at++].s;
    }
    std::string test;
    if (at < args.size()) {
      if (!args[at].is_string()) fail("filter '{}' needs a test name", name);
      test = args[at++].s;
    }
    std::vector<Value> test_args(args.begin() + static_cast<std::ptrdiff_t>(at), args.end());
    List out;
    for (const auto& item : as_list(v, name.c_str())) {
      const Value x = by_attribute ? attribute_path(item, attribute) : item;
      const bool r = test.empty() ? x.truthy() : apply_test(test, x, test_args);
      if (r == keep) out.push_back(item);
    }
    return Value::make_list(std::move(out));
  }
  if (name == "map") {
    List out;
    if (const Value* attribute = arg({}, kwargs, 0, "attribute")) {
      if (!attribute->is_string()) fail("map(attribute=...) needs a string");
      const Value* dflt = arg({}, kwargs, 0, "default");
      for (const auto& item : as_list(v, "map")) {
        Value x = attribute_path(item, attribute->s);
        out.push_back(x.is_undefined() && dflt ? *dflt : x);
      }
      return Value::make_list(std::move(out));
    }
    if (args.empty() || !args[0].is_string()) fail("map needs attribute=NAME or a filter name");
    std::vector<Value> rest(args.begin() + 1, args.end());
    for (const auto& item : as_list(v, "map")) {
      std::vector<Value> a = rest;
      Kwargs kw = kwargs;
      out.push_back(filter(args[0].s, item, a, kw, in));
    }
    return Value::make_list(std::move(out));
  }
  fail("unknown filter '{}'", name);
}

}  // namespace loom::jinja
