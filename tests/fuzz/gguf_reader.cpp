// Fuzz target: the GGUF reader on arbitrary bytes, mapped and with plain
// reads, then every accessor on whatever it accepted.
#include <cstring>
#include <vector>

#include "fuzz_support.h"
#include "loom/error.h"
#include "loom/gguf.h"

namespace {

using loom::gguf::File;
using loom::gguf::Value;
using loom::gguf::ValueType;

template <class F>
void expect_error_or_value(F&& f) {
  try {
    f();
  } catch (const loom::Error&) {
  }
}

void touch_value(const Value& v) {
  (void)v.to_string();
  (void)v.is_integer();
  (void)v.is_float();
  expect_error_or_value([&] { (void)v.as_int(); });
  expect_error_or_value([&] { (void)v.as_uint(); });
  expect_error_or_value([&] { (void)v.as_float(); });
  expect_error_or_value([&] { (void)v.as_bool(); });
  expect_error_or_value([&] { (void)v.as_string(); });
  expect_error_or_value([&] {
    const auto& a = v.as_array();
    (void)value_type_name(a.element_type());
    const size_t n = a.size();
    (void)a.scalar_bytes();
    for (size_t i : {size_t{0}, n / 2, n - 1, n}) {  // n: out of range, must throw
      if (n == 0 && i != 0) continue;
      expect_error_or_value([&] { touch_value(a[i]); });
      if (a.element_type() == ValueType::String && !a.generic() && i < n) (void)a.string_at(i);
    }
  });
}

void touch_file(const File& f) {
  (void)f.version();
  (void)f.alignment();
  // data_offset() may lie past the end of a file with no tensor data (the
  // padding is not stored); every tensor must lie inside the file.
  (void)f.data_offset();
  const uint64_t file_size = f.file_size();
  for (const auto& kv : f.metadata()) {
    touch_value(kv.value);
    if (f.find(kv.key) == nullptr) __builtin_trap();
    expect_error_or_value([&] { (void)f.get(kv.key); });
    expect_error_or_value([&] { (void)f.get_uint(kv.key); });
    expect_error_or_value([&] { (void)f.get_f32(kv.key); });
    expect_error_or_value([&] { (void)f.get_string(kv.key); });
    expect_error_or_value([&] { (void)f.get_uint_or(kv.key); });
    expect_error_or_value([&] { (void)f.get_f32_or(kv.key); });
  }
  expect_error_or_value([&] { (void)f.get("no.such.key"); });
  uint8_t bytes[2];
  for (const auto& t : f.tensors()) {
    if (f.find_tensor(t.name) == nullptr) __builtin_trap();
    (void)loom::gguf::type_info(t.type);
    if (t.file_offset + t.size > file_size) __builtin_trap();  // the reader's own promise
    if (t.size == 0) continue;
    if (const uint8_t* p = f.data(t)) {
      volatile uint8_t first = p[0], last = p[t.size - 1];
      (void)first, (void)last;
    }
    expect_error_or_value([&] { f.read_tensor(t, bytes, 0, 1); });
    expect_error_or_value([&] { f.read_tensor(t, bytes, t.size - 1, 1); });
    expect_error_or_value([&] { f.read_tensor(t, bytes, t.size, 1); });  // past the end: must throw
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loom::fuzz::InputFile input;
  const std::string& path = input.write(data, size);
  for (bool use_mmap : {true, false}) {
    std::unique_ptr<File> f;
    try {
      f = File::open(path, use_mmap);
    } catch (const loom::Error&) {
      return 0;
    }
    touch_file(*f);
  }
  return 0;
}
