// The values a template computes with: undefined, none, booleans, integers,
// floats, strings (UTF-8), lists, dicts (insertion-ordered), namespaces and
// callables. Lists, dicts and namespaces are shared by reference, as in
// Python and JavaScript.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace loom::jinja {

struct Value;

using List = std::vector<Value>;

// A dict keeps its keys in insertion order (tojson and items() show them so).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

// Keyword arguments in the order they were written.
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Value(std::vector<Value>& args, Kwargs& kwargs)>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;  // Dict and Namespace
  std::shared_ptr<Function> fn;

  static Value none() { return with_kind(Kind::None); }
  static Value boolean(bool v) { Value r = with_kind(Kind::Bool); r.b = v; return r; }
  static Value integer(int64_t v) { Value r = with_kind(Kind::Int); r.i = v; return r; }
  static Value number(double v) { Value r = with_kind(Kind::Float); r.f = v; return r; }
  static Value string(std::string v) { Value r = with_kind(Kind::String); r.s = std::move(v); return r; }
  static Value make_list(List items = {});
  static Value make_dict(Dict d = {}, Kind kind = Kind::Dict);
  static Value function(Function f);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_list() const { return kind == Kind::List; }
  bool is_mapping() const { return kind == Kind::Dict || kind == Kind::Namespace; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  double as_double() const { return kind == Kind::Float ? f : kind == Kind::Bool ? double(b) : double(i); }

  bool truthy() const;
  // As {{ value }} prints it: none and undefined print nothing, booleans
  // "true"/"false", floats with a ".0" when whole, lists and dicts as JSON.
  std::string to_output() const;
  // As the operands of '~' and of '+' with a string turn into text in
  // @huggingface/jinja: like to_output, except that a list joins its items
  // with "," (no brackets) and a whole float has no ".0".
  std::string to_concat_text() const;
  const char* kind_name() const;

 private:
  static Value with_kind(Kind k) { Value r; r.kind = k; return r; }
};

// Lists, dicts and namespaces can hold themselves (`{% set ns.me = ns %}`,
// `l.append(l)`), and a closure can hold the scope that holds it: cycles of
// shared_ptr that are never freed. A ValueArena records the lists, dicts and
// functions made on its thread while it lives, and empties those still alive
// when it ends, which breaks every such cycle. One per render; arenas nest.
class ValueArena {
 public:
  ValueArena();
  ~ValueArena();
  ValueArena(const ValueArena&) = delete;
  ValueArena& operator=(const ValueArena&) = delete;

 private:
  friend struct Value;
  template <class T>
  struct Records {
    std::vector<std::weak_ptr<T>> items;
    size_t compact_at = 1024;
    void add(const std::shared_ptr<T>& p);
  };
  ValueArena* outer_;
  Records<List> lists_;
  Records<Dict> dicts_;
  Records<Function> functions_;
};

bool equals(const Value& a, const Value& b);
// Python's ordering of numbers and strings; throws for other kinds.
int compare(const Value& a, const Value& b, bool case_sensitive = true);

struct JsonOptions {
  int indent = -1;  // < 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_separator, key_separator;  // empty: the defaults for the indent
};
// JSON as Python's json.dumps writes it (", " and ": " separators).
std::string to_json(const Value& v, const JsonOptions& options = {}, int depth = 0);

Value from_json(const nlohmann::ordered_json& j);

// Code-point helpers for UTF-8 strings (length, indexing and slices count
// characters, not bytes).
std::vector<std::string> utf8_chars(std::string_view s);

}  // namespace loom::jinja
