// A model file written for a test, with write_random_model's reproducible
// weights, at "<temp dir>/loom_<tag>_<pid>.gguf" (the pid keeps concurrent
// test processes apart); the file is removed when the object goes away.
#pragma once

#include <cstdint>
#include <string>

#include "loom/types.h"
#include "model_gen/model_gen.h"

namespace loom::test {

// A tiny model of `arch` that runs in milliseconds: vocabulary 320,
// embedding 64, 4 heads (2 for k and v), feed-forward 96, the given layers
// and training context.
ModelSpec tiny_spec(const std::string& arch, int64_t n_layer, int64_t n_ctx);

class TempModel {
 public:
  TempModel(const std::string& tag, const ModelSpec& spec, DType type, uint64_t seed);
  ~TempModel();
  TempModel(const TempModel&) = delete;
  TempModel& operator=(const TempModel&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace loom::test
