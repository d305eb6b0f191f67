// loom inspect FILE: a GGUF file's metadata and tensor table (--json too).
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "loom/gguf.h"

namespace loom::cli {
namespace {

nlohmann::json to_json(const gguf::Value& v) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::String: return v.as_string();
    case ValueType::Bool: return v.as_bool();
    case ValueType::F32:
    case ValueType::F64: return v.as_float();
    case ValueType::Array: {
      nlohmann::json a = nlohmann::json::array();
      const gguf::Array& items = v.as_array();
      for (size_t i = 0; i < items.size(); ++i) a.push_back(to_json(items[i]));
      return a;
    }
    default:
      return std::holds_alternative<int64_t>(v.data) ? nlohmann::json(v.as_int()) : nlohmann::json(v.as_uint());
  }
}

std::string dump(const nlohmann::json& j) {
  // Metadata strings and paths need not be UTF-8: invalid bytes become U+FFFD.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// JSON text written to stdout in pieces: metadata arrays are streamed element
// by element, since one nlohmann array for a 64 MiB u8 array held 64M json
// values (3.3 GB).
class JsonOut {
 public:
  JsonOut& operator<<(std::string_view s) {
    buf_ += s;
    if (buf_.size() >= (1u << 20)) flush();
    return *this;
  }
  void value(const gguf::Value& v) {
    if (v.type != gguf::ValueType::Array) {
      *this << (v.is_integer() ? (std::holds_alternative<int64_t>(v.data) ? fmt::format("{}", v.as_int())
                                                                          : fmt::format("{}", v.as_uint()))
                               : dump(to_json(v)));
      return;
    }
    const gguf::Array& items = v.as_array();
    *this << "[";
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) *this << ", ";
      value(items[i]);
    }
    *this << "]";
  }
  void flush() {
    std::fwrite(buf_.data(), 1, buf_.size(), stdout);
    buf_.clear();
  }

 private:
  std::string buf_;
};

std::string type_label(uint32_t id) {
  const gguf::TypeInfo* t = gguf::type_info(id);
  return t ? std::string(t->name) : fmt::format("type {}", id);
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  Args args("inspect", "Print a GGUF file's metadata and tensor table.\nusage: loom inspect FILE [options]",
            {{{"--json"}, "", "print JSON (arrays in full)"},
             {{"--max-items"}, "N", "array items shown per key in the table view (default 8)"},
             {{"--no-tensors"}, "", "omit the tensor table"}});
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  if (args.positional().size() != 1) {
    std::fputs(args.help().c_str(), stderr);
    return 1;
  }
  auto file = gguf::File::open(args.positional()[0]);
  const bool tensors = !args.has("--no-tensors");
  if (args.has("--json")) {
    JsonOut out;
    out << "{\n  \"path\": " << dump(file->path()) << ",\n  \"version\": " << dump(file->version())
        << ",\n  \"alignment\": " << dump(file->alignment()) << ",\n  \"data_offset\": " << dump(file->data_offset())
        << ",\n  \"file_size\": " << dump(file->file_size()) << ",\n  \"metadata\": {";
    bool first = true;
    for (const auto& kv : file->metadata()) {
      out << (first ? "\n    " : ",\n    ") << dump(kv.key) << ": ";
      out.value(kv.value);
      first = false;
    }
    out << (first ? "}" : "\n  }");
    if (tensors) {
      out << ",\n  \"tensors\": [";
      first = true;
      for (const auto& t : file->tensors()) {
        const nlohmann::json j = {{"name", t.name},
                                  {"type", type_label(t.type)},
                                  {"ne", std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims)},
                                  {"offset", t.file_offset},
                                  {"size", t.size}};
        out << (first ? "\n    " : ",\n    ") << dump(j);
        first = false;
      }
      out << (first ? "]" : "\n  ]");
    }
    out << "\n}\n";
    out.flush();
    return 0;
  }
  const size_t max_items = static_cast<size_t>(std::max(0, args.get_int("--max-items", 8)));
  std::printf("%s: GGUF v%u, %zu metadata keys, %zu tensors, alignment %zu, data at %llu, %llu bytes\n\n",
              file->path().c_str(), file->version(), file->metadata().size(), file->tensors().size(),
              file->alignment(), static_cast<unsigned long long>(file->data_offset()),
              static_cast<unsigned long long>(file->file_size()));
  for (const auto& kv : file->metadata())
    std::printf("  %-40s %-7s %s\n", kv.key.c_str(), std::string(gguf::value_type_name(kv.value.type)).c_str(),
                kv.value.to_string(max_items).c_str());
  if (!tensors) return 0;
  std::printf("\n  %-40s %-6s %-28s %14s %12s\n", "tensor", "type", "shape", "offset", "bytes");
  uint64_t total = 0;
  for (const auto& t : file->tensors()) {
    std::string shape;
    for (uint32_t d = 0; d < t.n_dims; ++d) shape += (d ? " x " : "") + std::to_string(t.ne[d]);
    std::printf("  %-40s %-6s %-28s %14llu %12llu\n", t.name.c_str(), type_label(t.type).c_str(), shape.c_str(),
                static_cast<unsigned long long>(t.file_offset), static_cast<unsigned long long>(t.size));
    total += t.size;
  }
  std::printf("\n  %zu tensors, %.2f MiB of tensor data\n", file->tensors().size(), total / 1048576.0);
  return 0;
}

}  // namespace loom::cli
