// GGUF v3 files: a validated reader (mmap by default, or plain reads) and a
// writer. Every offset, size, count, type and dimension is checked against
// the file; a truncated or corrupt file throws loom::Error naming the file,
// the key or tensor, and the numbers involved.
//
// Layout: "GGUF", version, tensor count, metadata count, metadata key/values,
// tensor infos (name, dims, type, offset), padding to the alignment
// (general.alignment, default 32), then the tensor data.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace loom::gguf {

enum class ValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7,
  String = 8, Array = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view value_type_name(ValueType t);

struct Value;

// An array value, stored about as compactly as in the file: scalar elements
// as their little-endian bytes, strings back to back with their end offsets.
// (One Value per element cost some 50 bytes for each byte of a u8 array.)
// Arrays of arrays, and arrays built from Values whose types do not all match
// the element type (for the writer to refuse), keep one Value per element.
class Array {
 public:
  Array();
  explicit Array(ValueType element_type);
  Array(const Array&);
  Array(Array&&) noexcept;
  Array& operator=(const Array&);
  Array& operator=(Array&&) noexcept;
  ~Array();

  ValueType element_type() const { return type_; }
  size_t size() const;
  bool empty() const { return size() == 0; }
  // Element i as a Value (a copy; strings are copied too). Throws when i is out of range.
  Value operator[](size_t i) const;
  // Element i of a string array without a copy.
  std::string_view string_at(size_t i) const;
  // The elements' bytes as in a GGUF file, for compact scalar arrays (else empty).
  const std::vector<uint8_t>& scalar_bytes() const { return bytes_; }
  // Whether the elements are kept one Value each (see above).
  bool generic() const { return generic_ || type_ == ValueType::Array; }
  const std::vector<Value>& items() const { return items_; }

  void reserve(size_t n);
  // Appends an element; a Value whose type is not the element type turns
  // the array generic, so the writer can name the mismatch.
  void push_back(const Value& v);
  void push_back(Value&& v);
  void push_string(std::string_view s);  // for string arrays
  // Appends `n` little-endian scalars of the element type (the reader).
  void append_scalars(const uint8_t* p, size_t n);

 private:
  void make_generic();
  ValueType type_ = ValueType::U8;
  size_t count_ = 0;              // compact elements
  std::vector<uint8_t> bytes_;    // scalars: count_ * element size; strings: the texts
  std::vector<uint64_t> ends_;    // strings: where each text ends in bytes_
  std::vector<Value> items_;      // generic arrays
  bool generic_ = false;
};

// Bytes of one element of a scalar type (0 for String and Array).
size_t element_bytes(ValueType t);

// A metadata value. Integers are held widened (signed in int64, unsigned in
// uint64), floats in double; `type` keeps the exact GGUF type for writing.
struct Value {
  ValueType type = ValueType::U32;
  ValueType array_type = ValueType::U8;  // element type when type == Array
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data;

  static Value u32(uint32_t v) { return {ValueType::U32, ValueType::U8, uint64_t{v}}; }
  static Value i32(int32_t v) { return {ValueType::I32, ValueType::U8, int64_t{v}}; }
  static Value u64(uint64_t v) { return {ValueType::U64, ValueType::U8, v}; }
  static Value f32(float v) { return {ValueType::F32, ValueType::U8, double{v}}; }
  static Value boolean(bool v) { return {ValueType::Bool, ValueType::U8, v}; }
  static Value string(std::string v) { return {ValueType::String, ValueType::U8, std::move(v)}; }
  static Value array(ValueType element_type, std::vector<Value> items);
  static Value array(Array items);
  static Value strings(const std::vector<std::string>& items);
  static Value f32s(const std::vector<float>& items);
  static Value i32s(const std::vector<int32_t>& items);

  bool is_integer() const;
  bool is_float() const { return type == ValueType::F32 || type == ValueType::F64; }
  // Checked conversions; throw loom::Error when the type does not fit.
  int64_t as_int() const;
  uint64_t as_uint() const;
  double as_float() const;  // integers convert too
  bool as_bool() const;
  const std::string& as_string() const;
  const Array& as_array() const;
  std::string to_string(size_t max_items = 8) const;  // for display
};

struct KeyValue {
  std::string key;
  Value value;
};

// A tensor type as stored in GGUF, supported by Loom or not.
struct TypeInfo {
  uint32_t id;
  std::string_view name;
  int block_size;
  size_t type_size;
};
// Null for ids no GGUF writer uses.
const TypeInfo* type_info(uint32_t id);

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};
  uint32_t type = 0;        // GGUF type id (see loom::DType for the supported ones)
  uint64_t offset = 0;      // relative to the data section
  uint64_t size = 0;        // bytes
  uint64_t file_offset = 0; // absolute
};

class File {
 public:
  // Opens and validates `path`. With use_mmap the file is mapped and tensor
  // data can be read in place (data()); otherwise read_tensor() reads it.
  static std::unique_ptr<File> open(const std::string& path, bool use_mmap = true);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return file_size_; }
  size_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  bool mapped() const { return map_ != nullptr; }

  const std::vector<KeyValue>& metadata() const { return metadata_; }
  const Value* find(std::string_view key) const;
  // Typed lookups: throw naming the file and the key when missing or mistyped.
  const Value& get(std::string_view key) const;
  uint64_t get_uint(std::string_view key) const;
  float get_f32(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  std::optional<uint64_t> get_uint_or(std::string_view key) const;
  std::optional<float> get_f32_or(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;
  // The mapped bytes of a tensor (null when not mapped).
  const uint8_t* data(const TensorInfo& t) const;
  const uint8_t* map_base() const { return static_cast<const uint8_t*>(map_); }
  // Reads `size` bytes of a tensor from `offset` within it.
  void read_tensor(const TensorInfo& t, void* dst, uint64_t offset, uint64_t size) const;
  // Reads the mapped bytes [offset, offset + size) of the file into memory
  // and maps them now (no-op when not mapped), as llama.cpp's MAP_POPULATE
  // does. Weights computed in place from the mapping would otherwise fault
  // page by page, from disk when the file is not cached, during the first
  // tokens (a token's embedding row, say: 2-20 ms each on a cold cache).
  void populate(uint64_t offset, uint64_t size) const;

 private:
  File() = default;
  void parse();
  std::string path_;
  int fd_ = -1;
  void* map_ = nullptr;
  uint64_t file_size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::vector<TensorInfo> tensors_;
};

// Builds a GGUF file in memory and writes it atomically (a temporary file
// renamed into place, so a failed write leaves no partial file).
class Writer {
 public:
  void set(std::string key, Value value);  // replaces an existing key
  // Tensor bytes are copied; `ne` has n_dims leading entries.
  void add_tensor(std::string name, uint32_t type, std::vector<int64_t> ne, std::vector<uint8_t> bytes);
  // Tensor bytes produced at write time, one tensor in memory at a time:
  // `fill` receives a buffer of exactly the tensor's size.
  using FillFn = std::function<void(uint8_t* dst, size_t size)>;
  void add_tensor(std::string name, uint32_t type, std::vector<int64_t> ne, FillFn fill);
  // Called after each tensor is written (index, count) for progress output.
  void set_progress(std::function<void(size_t, size_t)> progress) { progress_ = std::move(progress); }
  // Writes to temp_path(path), then renames it to `path`: a failure leaves
  // no partial file, and processes writing the same path at once each
  // rename a whole file.
  void write(const std::string& path) const;
  // "<path>.tmp.<pid>".
  static std::string temp_path(const std::string& path);
  size_t alignment() const;

 private:
  struct PendingTensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    uint64_t size;
    std::vector<uint8_t> bytes;  // or, when empty and size > 0, fill
    FillFn fill;
  };
  std::function<void(size_t, size_t)> progress_;
  std::vector<KeyValue> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace loom::gguf
