// GGUF metadata values and the table of tensor types GGUF files use.
#include <fmt/format.h>

#include "loom/error.h"
#include "loom/gguf.h"

namespace loom::gguf {

std::string_view value_type_name(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "?";
}

Value Value::strings(const std::vector<std::string>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (const auto& s : items) v.push_back(string(s));
  return array(ValueType::String, std::move(v));
}

Value Value::f32s(const std::vector<float>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (float f : items) v.push_back(f32(f));
  return array(ValueType::F32, std::move(v));
}

Value Value::i32s(const std::vector<int32_t>& items) {
  std::vector<Value> v;
  v.reserve(items.size());
  for (int32_t i : items) v.push_back(i32(i));
  return array(ValueType::I32, std::move(v));
}

bool Value::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}

int64_t Value::as_int() const {
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  if (auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) fail("value {} does not fit a signed integer", *u);
    return static_cast<int64_t>(*u);
  }
  fail("a {} value is not an integer", value_type_name(type));
}

uint64_t Value::as_uint() const {
  if (auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (auto* i = std::get_if<int64_t>(&data)) {
    if (*i < 0) fail("value {} is negative where a count or size is expected", *i);
    return static_cast<uint64_t>(*i);
  }
  fail("a {} value is not an integer", value_type_name(type));
}

double Value::as_float() const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  if (is_integer()) return std::holds_alternative<int64_t>(data) ? static_cast<double>(std::get<int64_t>(data))
                                                                 : static_cast<double>(std::get<uint64_t>(data));
  fail("a {} value is not a number", value_type_name(type));
}

bool Value::as_bool() const {
  if (auto* b = std::get_if<bool>(&data)) return *b;
  fail("a {} value is not a bool", value_type_name(type));
}

const std::string& Value::as_string() const {
  if (auto* s = std::get_if<std::string>(&data)) return *s;
  fail("a {} value is not a string", value_type_name(type));
}

const std::vector<Value>& Value::as_array() const {
  if (auto* a = std::get_if<std::vector<Value>>(&data)) return *a;
  fail("a {} value is not an array", value_type_name(type));
}

std::string Value::to_string(size_t max_items) const {
  switch (type) {
    case ValueType::String: return fmt::format("\"{}\"", as_string());
    case ValueType::Bool: return as_bool() ? "true" : "false";
    case ValueType::F32:
    case ValueType::F64: return fmt::format("{}", as_float());
    case ValueType::Array: {
      const auto& items = as_array();
      std::string s = fmt::format("[{} x {}] [", items.size(), value_type_name(array_type));
      for (size_t i = 0; i < items.size() && i < max_items; ++i)
        s += (i ? ", " : "") + items[i].to_string(max_items);
      if (items.size() > max_items) s += ", ...";
      return s + "]";
    }
    default:
      return std::holds_alternative<int64_t>(data) ? fmt::format("{}", std::get<int64_t>(data))
                                                   : fmt::format("{}", std::get<uint64_t>(data));
  }
}

const TypeInfo* type_info(uint32_t id) {
  // Block sizes and bytes per block of the ggml types found in GGUF files.
  static constexpr TypeInfo kTypes[] = {
      {0, "f32", 1, 4},       {1, "f16", 1, 2},       {2, "q4_0", 32, 18},    {3, "q4_1", 32, 20},
      {6, "q5_0", 32, 22},    {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},    {9, "q8_1", 32, 36},
      {10, "q2_K", 256, 84},  {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176},
      {14, "q6_K", 256, 210}, {15, "q8_K", 256, 292}, {20, "iq4_nl", 32, 18}, {23, "iq4_xs", 256, 136},
      {24, "i8", 1, 1},       {25, "i16", 1, 2},      {26, "i32", 1, 4},      {27, "i64", 1, 8},
      {28, "f64", 1, 8},      {30, "bf16", 1, 2},     {39, "mxfp4", 32, 17},
  };
  for (const auto& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

}  // namespace loom::gguf
