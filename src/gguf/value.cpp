// GGUF metadata values and the table of tensor types GGUF files use.
#include <cstring>

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

size_t element_bytes(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    case ValueType::String:
    case ValueType::Array: return 0;
  }
  return 0;
}

namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void store(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}

}  // namespace

Array::Array() = default;
Array::Array(ValueType element_type) : type_(element_type) {}
Array::Array(const Array&) = default;
Array::Array(Array&&) noexcept = default;
Array& Array::operator=(const Array&) = default;
Array& Array::operator=(Array&&) noexcept = default;
Array::~Array() = default;

size_t Array::size() const { return generic() ? items_.size() : count_; }

void Array::reserve(size_t n) {
  if (generic()) items_.reserve(n);
  else if (type_ == ValueType::String) ends_.reserve(n);
  else bytes_.reserve(n * element_bytes(type_));
}

void Array::make_generic() {
  if (generic()) return;
  std::vector<Value> items;
  items.reserve(count_ + 1);
  for (size_t i = 0; i < count_; ++i) items.push_back((*this)[i]);
  items_ = std::move(items);
  generic_ = true;
  count_ = 0;
  bytes_.clear();
  bytes_.shrink_to_fit();
  ends_.clear();
  ends_.shrink_to_fit();
}

void Array::push_back(const Value& v) { push_back(Value(v)); }

void Array::push_back(Value&& v) {
  if (!generic() && v.type != type_) make_generic();
  if (generic()) {
    items_.push_back(std::move(v));
    return;
  }
  switch (type_) {
    case ValueType::U8: store(bytes_, static_cast<uint8_t>(v.as_uint())); break;
    case ValueType::I8: store(bytes_, static_cast<int8_t>(v.as_int())); break;
    case ValueType::U16: store(bytes_, static_cast<uint16_t>(v.as_uint())); break;
    case ValueType::I16: store(bytes_, static_cast<int16_t>(v.as_int())); break;
    case ValueType::U32: store(bytes_, static_cast<uint32_t>(v.as_uint())); break;
    case ValueType::I32: store(bytes_, static_cast<int32_t>(v.as_int())); break;
    case ValueType::U64: store(bytes_, v.as_uint()); break;
    case ValueType::I64: store(bytes_, v.as_int()); break;
    case ValueType::F32: store(bytes_, static_cast<float>(v.as_float())); break;
    case ValueType::F64: store(bytes_, v.as_float()); break;
    case ValueType::Bool: store(bytes_, static_cast<uint8_t>(v.as_bool() ? 1 : 0)); break;
    case ValueType::String: push_string(v.as_string()); return;
    case ValueType::Array: break;  // generic, handled above
  }
  ++count_;
}

void Array::push_string(std::string_view s) {
  if (type_ != ValueType::String) fail("a string pushed onto an array of {}", value_type_name(type_));
  if (generic()) {
    items_.push_back(Value::string(std::string(s)));
    return;
  }
  bytes_.insert(bytes_.end(), s.begin(), s.end());
  ends_.push_back(bytes_.size());
  ++count_;
}

void Array::append_scalars(const uint8_t* p, size_t n) {
  const size_t size = element_bytes(type_);
  if (size == 0 || generic()) fail("raw scalars appended to an array of {}", value_type_name(type_));
  bytes_.insert(bytes_.end(), p, p + n * size);
  count_ += n;
}

std::string_view Array::string_at(size_t i) const {
  if (i >= size()) fail("array index {} out of range ({} elements)", i, size());
  if (generic()) return items_[i].as_string();
  if (type_ != ValueType::String) fail("an array of {} holds no strings", value_type_name(type_));
  const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
  return {reinterpret_cast<const char*>(bytes_.data()) + begin, static_cast<size_t>(ends_[i] - begin)};
}

Value Array::operator[](size_t i) const {
  if (i >= size()) fail("array index {} out of range ({} elements)", i, size());
  if (generic()) return items_[i];
  const uint8_t* p = bytes_.data() + i * element_bytes(type_);
  switch (type_) {
    case ValueType::U8: return {type_, ValueType::U8, uint64_t{load<uint8_t>(p)}};
    case ValueType::I8: return {type_, ValueType::U8, int64_t{load<int8_t>(p)}};
    case ValueType::U16: return {type_, ValueType::U8, uint64_t{load<uint16_t>(p)}};
    case ValueType::I16: return {type_, ValueType::U8, int64_t{load<int16_t>(p)}};
    case ValueType::U32: return {type_, ValueType::U8, uint64_t{load<uint32_t>(p)}};
    case ValueType::I32: return {type_, ValueType::U8, int64_t{load<int32_t>(p)}};
    case ValueType::U64: return {type_, ValueType::U8, load<uint64_t>(p)};
    case ValueType::I64: return {type_, ValueType::U8, load<int64_t>(p)};
    case ValueType::F32: return {type_, ValueType::U8, double{load<float>(p)}};
    case ValueType::F64: return {type_, ValueType::U8, load<double>(p)};
    case ValueType::Bool: return {type_, ValueType::U8, load<uint8_t>(p) != 0};
    case ValueType::String: return Value::string(std::string(string_at(i)));
    case ValueType::Array: break;
  }
  fail("array of {}: no element {}", value_type_name(type_), i);
}

Value Value::array(ValueType element_type, std::vector<Value> items) {
  Array a(element_type);
  a.reserve(items.size());
  for (Value& v : items) a.push_back(std::move(v));
  return array(std::move(a));
}

Value Value::array(Array items) {
  const ValueType t = items.element_type();
  return {ValueType::Array, t, std::move(items)};
}

Value Value::strings(const std::vector<std::string>& items) {
  Array a(ValueType::String);
  a.reserve(items.size());
  for (const auto& s : items) a.push_string(s);
  return array(std::move(a));
}

Value Value::f32s(const std::vector<float>& items) {
  Array a(ValueType::F32);
  a.append_scalars(reinterpret_cast<const uint8_t*>(items.data()), items.size());
  return array(std::move(a));
}

Value Value::i32s(const std::vector<int32_t>& items) {
  Array a(ValueType::I32);
  a.append_scalars(reinterpret_cast<const uint8_t*>(items.data()), items.size());
  return array(std::move(a));
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

const Array& Value::as_array() const {
  if (auto* a = std::get_if<Array>(&data)) return *a;
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
