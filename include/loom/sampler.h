// Picks the next token from logits: greedy when temperature <= 0, otherwise
// top-k, top-p and min-p filtering, then temperature and a seeded draw.
// The filters apply in llama.cpp's default order: top-k, top-p, min-p, temperature.
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace loom {

struct SamplerOptions {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.05f;       // <= 0: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options);
  int32_t sample(std::span<const float> logits);

 private:
  SamplerOptions options_;
  std::mt19937_64 rng_;
};

}  // namespace loom
