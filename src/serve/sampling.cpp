#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

namespace loom::serve {

SlotSampler::SlotSampler(const SamplingParams& p)
    : params_(p),
      sampler_(SamplerOptions{.temperature = p.temperature, .top_k = p.top_k, .top_p = p.top_p, .min_p = p.min_p,
                              .seed = p.seed}) {}

void apply_penalties(std::span<float> logits, std::span<const int32_t> history, const SamplingParams& p) {
  if (p.repeat_last_n <= 0 || (p.repeat_penalty == 1.0f && p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f))
    return;
  const size_t n = std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
  std::unordered_map<int32_t, int> counts;
  for (int32_t t : history.last(n)) ++counts[t];
  for (const auto& [t, count] : counts) {
    if (t < 0 || static_cast<size_t>(t) >= logits.size()) continue;
    float& l = logits[t];
    l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    l -= static_cast<float>(count) * p.frequency_penalty + p.presence_penalty;
  }
}

int32_t SlotSampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  work_.assign(logits.begin(), logits.end());
  apply_penalties(work_, history, params_);
  for (const auto& [t, bias] : params_.logit_bias)
    if (static_cast<size_t>(t) < work_.size()) work_[t] += bias;
  return sampler_.sample(work_);
}

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int n_top) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprobs out;
  out.logprob = logits[token] - log_z;
  const size_t k = std::min(static_cast<size_t>(std::max(n_top, 0)), logits.size());
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  for (size_t i = 0; i < k; ++i) out.top.emplace_back(ids[i], logits[ids[i]] - log_z);
  return out;
}

}  // namespace loom::serve
