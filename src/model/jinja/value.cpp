#include "value.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loom/error.h"

namespace loom::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

namespace {
thread_local ValueArena* t_arena = nullptr;
}  // namespace

ValueArena::ValueArena() : outer_(t_arena) { t_arena = this; }

ValueArena::~ValueArena() {
  t_arena = outer_;
  // Move each survivor's contents out before dropping them, so that nothing
  // is destroyed while its container is being emptied.
  for (auto& w : lists_.items)
    if (auto p = w.lock()) List().swap(*p);
  for (auto& w : dicts_.items)
    if (auto p = w.lock()) decltype(p->entries)().swap(p->entries);
  for (auto& w : functions_.items)
    if (auto p = w.lock()) Function().swap(*p);
}

template <class T>
void ValueArena::Records<T>::add(const std::shared_ptr<T>& p) {
  // A weak_ptr keeps a make_shared block's memory: drop the expired ones as
  // the records grow, so a long render holds only what is still alive.
  if (items.size() >= compact_at) {
    std::erase_if(items, [](const std::weak_ptr<T>& w) { return w.expired(); });
    compact_at = std::max<size_t>(1024, items.size() * 2);
  }
  items.push_back(p);
}

Value Value::make_list(List items) {
  Value r = with_kind(Kind::List);
  r.list = std::make_shared<List>(std::move(items));
  if (t_arena) t_arena->lists_.add(r.list);
  return r;
}

Value Value::make_dict(Dict d, Kind kind) {
  Value r = with_kind(kind);
  r.dict = std::make_shared<Dict>(std::move(d));
  if (t_arena) t_arena->dicts_.add(r.dict);
  return r;
}

Value Value::function(Function f) {
  Value r = with_kind(Kind::Function);
  r.fn = std::make_shared<Function>(std::move(f));
  if (t_arena) t_arena->functions_.add(r.fn);
  return r;
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return b;
    case Kind::Int: return i != 0;
    case Kind::Float: return f != 0.0;
    case Kind::String: return !s.empty();
    case Kind::List: return !list->empty();
    case Kind::Dict: return !dict->entries.empty();
    case Kind::Namespace:
    case Kind::Function: return true;
  }
  return false;
}

const char* Value::kind_name() const {
  switch (kind) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "none";
    case Kind::Bool: return "boolean";
    case Kind::Int: return "integer";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "namespace";
    case Kind::Function: return "function";
  }
  return "?";
}

namespace {

// A double as JavaScript's Number#toString writes it (shortest round trip).
std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == std::trunc(v) && std::fabs(v) < 1e21) return fmt::format("{:.0f}", v);
  return fmt::format("{}", v);
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t k = 0; k < s.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else if (c >= 0x80 && ensure_ascii) {
          // Decode one UTF-8 sequence and write it as \uXXXX (surrogate pairs above U+FFFF).
          int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
          uint32_t cp = len == 1 ? c : c & (0x3F >> (len - 1));
          for (int m = 1; m < len && k + 1 < s.size(); ++m) cp = (cp << 6) | (static_cast<unsigned char>(s[++k]) & 0x3F);
          if (cp >= 0x10000) {
            cp -= 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
          } else {
            out += fmt::format("\\u{:04x}", cp);
          }
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& o, int depth) {
  std::string item_sep = o.item_separator, key_sep = o.key_separator;
  if (item_sep.empty()) item_sep = o.indent >= 0 ? "," : ", ";
  if (key_sep.empty()) key_sep = ": ";
  const bool indented = o.indent > 0;
  const std::string pad = indented ? std::string(o.indent, ' ') : "";
  std::string base = "\n";
  for (int d = 0; d < depth; ++d) base += pad;
  const std::string child = base + pad;
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return "null";
    case Value::Kind::Bool: return v.b ? "true" : "false";
    case Value::Kind::Int: return std::to_string(v.i);
    case Value::Kind::Float: return js_number(v.f);
    case Value::Kind::String: {
      std::string out;
      append_json_string(out, v.s, o.ensure_ascii);
      return out;
    }
    case Value::Kind::List: {
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        if (indented) out += child;
        out += to_json((*v.list)[k], o, depth + 1);
      }
      if (indented && !v.list->empty()) out += base;
      return out + "]";
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      auto entries = v.dict->entries;
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::string out = "{";
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k) out += item_sep;
        if (indented) out += child;
        append_json_string(out, entries[k].first, o.ensure_ascii);
        out += key_sep;
        out += to_json(entries[k].second, o, depth + 1);
      }
      if (indented && !entries.empty()) out += base;
      return out + "}";
    }
    case Value::Kind::Function: fail("cannot convert a function to JSON");
  }
  return "";
}

std::string Value::to_output() const {
  switch (kind) {
    case Kind::Undefined:
    case Kind::None: return "";
    case Kind::Bool: return b ? "true" : "false";
    case Kind::Int: return std::to_string(i);
    case Kind::Float:
      if (f == 0.0 && std::signbit(f)) return "-0.0";
      if (f == std::trunc(f) && std::isfinite(f)) return fmt::format("{:.1f}", f);
      return js_number(f);
    case Kind::String: return s;
    case Kind::Function: return "[function]";
    default: return to_json(*this);
  }
}

std::string Value::to_concat_text() const {
  if (kind == Kind::Float) return js_number(f);
  if (kind != Kind::List) return to_output();
  std::string out;
  for (size_t k = 0; k < list->size(); ++k) out += (k ? "," : "") + (*list)[k].to_output();
  return out;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if (a.kind != b.kind) {
    // A boolean equals the number it stands for (true == 1), as in Python.
    if ((a.kind == Value::Kind::Bool && b.is_number()) || (b.kind == Value::Kind::Bool && a.is_number()))
      return a.as_double() == b.as_double();
    return false;
  }
  switch (a.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::Bool: return a.b == b.b;
    case Value::Kind::String: return a.s == b.s;
    case Value::Kind::List:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!equals((*a.list)[k], (*b.list)[k])) return false;
      return true;
    case Value::Kind::Dict:
    case Value::Kind::Namespace:
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, v] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(v, *other)) return false;
      }
      return true;
    case Value::Kind::Function: return a.fn == b.fn;
    default: return false;
  }
}

namespace {
std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

int compare(const Value& a, const Value& b, bool case_sensitive) {
  const bool a_num = a.is_number() || a.kind == Value::Kind::Bool;
  const bool b_num = b.is_number() || b.kind == Value::Kind::Bool;
  if (a_num && b_num) {
    const double x = a.as_double(), y = b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const std::string x = case_sensitive ? a.s : ascii_lower(a.s), y = case_sensitive ? b.s : ascii_lower(b.s);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail("cannot compare {} with {}", a.kind_name(), b.kind_name());
}

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case T::number_float: {
      // JSON has one number type: a whole float becomes an integer, as in JavaScript.
      const double d = j.get<double>();
      if (d == std::trunc(d) && std::fabs(d) < 9.007199254740992e15) return Value::integer(static_cast<int64_t>(d));
      return Value::number(d);
    }
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      List items;
      for (const auto& e : j) items.push_back(from_json(e));
      return Value::make_list(std::move(items));
    }
    case T::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.set(k, from_json(e));
      return Value::make_dict(std::move(d));
    }
    default: fail("unsupported JSON value in template input");
  }
}

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    len = std::min(len, s.size() - k);
    out.emplace_back(s.substr(k, len));
    k += len;
  }
  return out;
}

}  // namespace loom::jinja
