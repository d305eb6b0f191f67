#include "loom/sampler.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "loom/error.h"

namespace loom {

Sampler::Sampler(const SamplerOptions& options) : options_(options), rng_(options.seed) {}

int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) fail("sampler: no logits");
  if (options_.temperature <= 0.0f)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());

  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
  std::sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < c.size()) c.resize(options_.top_k);

  auto softmax = [&c](float temperature) {
    double sum = 0.0;
    for (auto& x : c) sum += (x.p = std::exp((x.logit - c.front().logit) / temperature));
    for (auto& x : c) x.p = static_cast<float>(x.p / sum);
  };
  softmax(1.0f);
  if (options_.top_p < 1.0f) {
    double cum = 0.0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += c[i].p;
      if (cum >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (options_.min_p > 0.0f) {
    const float threshold = c.front().p * options_.min_p;
    size_t keep = 1;
    while (keep < c.size() && c[keep].p >= threshold) ++keep;
    c.resize(keep);
  }
  softmax(options_.temperature);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double r = u(rng_), cum = 0.0;
  for (const auto& x : c) {
    cum += x.p;
    if (r < cum) return x.id;
  }
  return c.back().id;
}

}  // namespace loom
