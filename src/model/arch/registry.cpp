// The supported families, one line each in kFamilies.
#include <span>

#include "arch.h"

namespace loom {

const Arch& llama_arch();
const Arch& qwen2_arch();
const Arch& qwen3_arch();
const Arch& phi3_arch();
const Arch& gemma2_arch();
const Arch& gemma3_arch();
const Arch& qwen3moe_arch();

namespace {

std::span<const Arch* const> families() {
  static const Arch* const kFamilies[] = {&llama_arch(), &qwen2_arch(), &qwen3_arch(), &phi3_arch(),
                                          &gemma2_arch(), &gemma3_arch(),
                                          &qwen3moe_arch()};
  return kFamilies;
}

}  // namespace

const Arch* find_arch(std::string_view name) {
  for (const Arch* a : families())
    if (a->name() == name) return a;
  return nullptr;
}

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const Arch* a : families()) names.emplace_back(a->name());
  return names;
}

}  // namespace loom
