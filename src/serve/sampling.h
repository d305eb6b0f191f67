// One slot's token choice: the request's penalties and logit_bias applied
// to the logits, then loom::Sampler (top-k, top-p, min-p, temperature and a
// seeded draw; greedy at temperature 0).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/sampler.h"
#include "request.h"

namespace loom::serve {

class SlotSampler {
 public:
  explicit SlotSampler(const SamplingParams& params);
  // Picks the next token after `history` (the prompt and what came so far).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplingParams params_;
  Sampler sampler_;
  std::vector<float> work_;
};

// Applies llama.cpp's penalties over the last repeat_last_n tokens of
// history: repeat (divide positive logits, multiply negative ones),
// frequency (times the count) and presence (once per seen token).
void apply_penalties(std::span<float> logits, std::span<const int32_t> history, const SamplingParams& params);

// The log-softmax of logits at `token`, and the n_top most likely tokens
// with theirs, best first (ties: the lower id first).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n_top);

}  // namespace loom::serve
