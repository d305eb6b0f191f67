#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "loom/align.h"
#include "loom/error.h"
#include "loom/gguf.h"

namespace loom::gguf {
namespace {

class Sink {
 public:
  explicit Sink(std::FILE* f, const std::string& path) : f_(f), path_(path) {}
  void bytes(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) fail("writing {} failed: {}", path_, std::strerror(errno));
    pos_ += n;
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof v);
  }
  void string(std::string_view s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(size_t align) {
    static const uint8_t zeros[256] = {};
    while (pos_ % align) bytes(zeros, std::min<size_t>(sizeof zeros, align - pos_ % align));
  }
  uint64_t pos() const { return pos_; }

 private:
  std::FILE* f_;
  const std::string& path_;
  uint64_t pos_ = 0;
};

void write_value(Sink& s, const Value& v, bool with_type) {
  if (with_type) s.put<uint32_t>(static_cast<uint32_t>(v.type));
  switch (v.type) {
    case ValueType::U8: s.put<uint8_t>(static_cast<uint8_t>(v.as_uint())); break;
    case ValueType::I8: s.put<int8_t>(static_cast<int8_t>(v.as_int())); break;
    case ValueType::U16: s.put<uint16_t>(static_cast<uint16_t>(v.as_uint())); break;
    case ValueType::I16: s.put<int16_t>(static_cast<int16_t>(v.as_int())); break;
    case ValueType::U32: s.put<uint32_t>(static_cast<uint32_t>(v.as_uint())); break;
    case ValueType::I32: s.put<int32_t>(static_cast<int32_t>(v.as_int())); break;
    case ValueType::U64: s.put<uint64_t>(v.as_uint()); break;
    case ValueType::I64: s.put<int64_t>(v.as_int()); break;
    case ValueType::F32: s.put<float>(static_cast<float>(v.as_float())); break;
    case ValueType::F64: s.put<double>(v.as_float()); break;
    case ValueType::Bool: s.put<uint8_t>(v.as_bool() ? 1 : 0); break;
    case ValueType::String: s.string(v.as_string()); break;
    case ValueType::Array: {
      const Array& items = v.as_array();
      if (items.element_type() != v.array_type)
        fail("array of {} holds {} elements", value_type_name(v.array_type), value_type_name(items.element_type()));
      s.put<uint32_t>(static_cast<uint32_t>(v.array_type));
      s.put<uint64_t>(items.size());
      if (!items.generic() && v.array_type == ValueType::String) {
        for (size_t i = 0; i < items.size(); ++i) s.string(items.string_at(i));
      } else if (!items.generic()) {
        s.bytes(items.scalar_bytes().data(), items.scalar_bytes().size());  // already GGUF's layout
      } else {
        for (const Value& item : items.items()) {
          if (item.type != v.array_type)
            fail("array of {} holds a {} element", value_type_name(v.array_type), value_type_name(item.type));
          write_value(s, item, false);
        }
      }
      break;
    }
  }
}

}  // namespace

void Writer::set(std::string key, Value value) {
  for (auto& kv : metadata_)
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  metadata_.push_back({std::move(key), std::move(value)});
}

size_t Writer::alignment() const {
  for (const auto& kv : metadata_)
    if (kv.key == "general.alignment") return kv.value.as_uint();
  return 32;
}

namespace {

uint64_t checked_size(const std::string& name, uint32_t type, const std::vector<int64_t>& ne) {
  const TypeInfo* ti = type_info(type);
  if (!ti) fail("tensor '{}': unknown type id {}", name, type);
  if (ne.empty() || ne.size() > 4) fail("tensor '{}': {} dims (1 to 4 allowed)", name, ne.size());
  for (int64_t n : ne)
    if (n <= 0) fail("tensor '{}': dim {} is not positive", name, n);
  if (ne[0] % ti->block_size) fail("tensor '{}': ne0 {} is not a multiple of {}", name, ne[0], ti->block_size);
  uint64_t size = static_cast<uint64_t>(ne[0] / ti->block_size) * ti->type_size;
  for (size_t d = 1; d < ne.size(); ++d) size *= static_cast<uint64_t>(ne[d]);
  return size;
}

}  // namespace

void Writer::add_tensor(std::string name, uint32_t type, std::vector<int64_t> ne, std::vector<uint8_t> bytes) {
  const uint64_t size = checked_size(name, type, ne);
  if (size != bytes.size()) fail("tensor '{}': {} bytes given, its shape needs {}", name, bytes.size(), size);
  for (const auto& t : tensors_)
    if (t.name == name) fail("tensor '{}' added twice", name);
  tensors_.push_back({std::move(name), type, std::move(ne), size, std::move(bytes), nullptr});
}

void Writer::add_tensor(std::string name, uint32_t type, std::vector<int64_t> ne, FillFn fill) {
  const uint64_t size = checked_size(name, type, ne);
  for (const auto& t : tensors_)
    if (t.name == name) fail("tensor '{}' added twice", name);
  tensors_.push_back({std::move(name), type, std::move(ne), size, {}, std::move(fill)});
}

std::string Writer::temp_path(const std::string& path) { return fmt::format("{}.tmp.{}", path, getpid()); }

void Writer::write(const std::string& path) const {
  const std::string tmp = temp_path(path);
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail("cannot create {}: {}", tmp, std::strerror(errno));
  try {
    Sink s(f, path);
    const size_t align = alignment();
    s.put<uint32_t>(0x46554747);
    s.put<uint32_t>(3);
    s.put<uint64_t>(tensors_.size());
    s.put<uint64_t>(metadata_.size());
    for (const auto& kv : metadata_) {
      s.string(kv.key);
      write_value(s, kv.value, true);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      s.string(t.name);
      s.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
      for (int64_t n : t.ne) s.put<uint64_t>(static_cast<uint64_t>(n));
      s.put<uint32_t>(t.type);
      s.put<uint64_t>(offset);
      offset += align_up(t.size, align);
    }
    s.pad_to(align);
    std::vector<uint8_t> scratch;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const auto& t = tensors_[i];
      if (t.fill) {
        scratch.assign(t.size, 0);
        t.fill(scratch.data(), scratch.size());
        s.bytes(scratch.data(), scratch.size());
      } else {
        s.bytes(t.bytes.data(), t.bytes.size());
      }
      s.pad_to(align);
      if (progress_) progress_(i + 1, tensors_.size());
    }
    if (std::fflush(f) != 0 || fsync(fileno(f)) != 0) fail("writing {} failed: {}", path, std::strerror(errno));
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  std::fclose(f);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail("cannot move {} to {}: {}", tmp, path, ec.message());
  }
}

}  // namespace loom::gguf
