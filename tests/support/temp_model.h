// A model file written for a test, with write_random_model's reproducible
// weights, at "<temp dir>/loom_<tag>_<pid>.gguf" (the pid keeps concurrent
// test processes apart); the file is removed when the object goes away.
#pragma once

#include <cstdint>
#include <string>

#include "loom/types.h"
#include "model_gen/model_gen.h"

namespace loom::test {

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
