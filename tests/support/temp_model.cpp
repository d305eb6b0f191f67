#include "support/temp_model.h"

#include <unistd.h>

#include <filesystem>

namespace loom::test {

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
