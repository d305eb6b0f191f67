#include "support/temp_model.h"

#include <unistd.h>

#include <filesystem>

namespace loom::test {

ModelSpec tiny_spec(const std::string& arch, int64_t n_layer, int64_t n_ctx) {
  ModelSpec s;
  s.arch = arch;
  s.n_vocab = 320;
  s.n_embd = 64;
  s.n_layer = n_layer;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = n_ctx;
  return s;
}

TempModel::TempModel(const std::string& tag, const ModelSpec& spec, DType type, uint64_t seed)
    : path_((std::filesystem::temp_directory_path() / ("loom_" + tag + "_" + std::to_string(::getpid()) + ".gguf"))
                .string()) {
  write_random_model(spec, type, seed, path_);
}

TempModel::~TempModel() {
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

}  // namespace loom::test
