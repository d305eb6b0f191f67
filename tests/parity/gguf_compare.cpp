// Compares two quantized GGUF files tensor by tensor, for the quantize
// parity test: the same tensors, each with the same type and the same bytes,
// and the same metadata keys with general.file_type and
// general.quantization_version equal. Prints one line per tensor type
// ("q4_K: 9 tensors, 9 byte-identical") and every difference.
//
// usage: gguf-compare LLAMA.gguf LOOM.gguf     (exit 1 on any difference)
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "loom/error.h"
#include "loom/gguf.h"

using loom::gguf::File;

namespace {

std::string type_label(uint32_t id) {
  const auto* t = loom::gguf::type_info(id);
  return t ? std::string(t->name) : "type " + std::to_string(id);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LLAMA.gguf LOOM.gguf\n", argv[0]);
    return 2;
  }
  try {
    const auto a = File::open(argv[1]);
    const auto b = File::open(argv[2]);
    int differences = 0;
    auto differ = [&](const std::string& what) {
      std::printf("  DIFFERENT %s\n", what.c_str());
      ++differences;
    };
    std::set<std::string> keys_a, keys_b;
    for (const auto& kv : a->metadata()) keys_a.insert(kv.key);
    for (const auto& kv : b->metadata()) keys_b.insert(kv.key);
    if (keys_a != keys_b) differ("metadata keys");
    for (const char* key : {"general.file_type", "general.quantization_version"}) {
      const auto va = a->get_uint_or(key), vb = b->get_uint_or(key);
      if (va != vb) differ(std::string(key) + ": " + std::to_string(va.value_or(0)) + " vs " + std::to_string(vb.value_or(0)));
    }
    std::map<std::string, std::pair<int, int>> per_type;  // type -> tensors, identical
    if (a->tensors().size() != b->tensors().size())
      differ(std::to_string(a->tensors().size()) + " vs " + std::to_string(b->tensors().size()) + " tensors");
    for (const auto& ta : a->tensors()) {
      const auto* tb = b->find_tensor(ta.name);
      if (!tb) {
        differ("tensor " + ta.name + " missing in " + argv[2]);
        continue;
      }
      if (ta.type != tb->type) {
        differ(ta.name + ": " + type_label(ta.type) + " vs " + type_label(tb->type));
        continue;
      }
      auto& [count, same] = per_type[type_label(ta.type)];
      ++count;
      if (ta.size == tb->size && std::memcmp(a->data(ta), b->data(*tb), ta.size) == 0) ++same;
      else differ(ta.name + " (" + type_label(ta.type) + "): bytes");
    }
    for (const auto& [type, counts] : per_type)
      std::printf("  %s: %d tensors, %d byte-identical\n", type.c_str(), counts.first, counts.second);
    return differences ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gguf-compare: %s\n", e.what());
    return 1;
  }
}
