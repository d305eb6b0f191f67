#include <gtest/gtest.h>

#include <map>

#include "loom/error.h"
#include "loom/sampler.h"

namespace loom {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.9f, -5.0f, 0.5f};

TEST(Sampler, GreedyPicksTheLargestLogit) {
  Sampler s({.temperature = 0.0f});
  EXPECT_EQ(s.sample(kLogits), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  Sampler s({.temperature = 5.0f, .top_k = 1, .seed = 3});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(kLogits), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  Sampler a({.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 42});
  Sampler b({.temperature = 1.5f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 42});
  for (int i = 0; i < 50; ++i) EXPECT_EQ(a.sample(kLogits), b.sample(kLogits));
}

TEST(Sampler, FiltersRemoveUnlikelyTokens) {
  // min-p 0.5 keeps tokens with at least half the top probability: 1 and 2.
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.5f, .seed = 1});
  std::map<int, int> seen;
  for (int i = 0; i < 500; ++i) ++seen[s.sample(kLogits)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  // top-p 0.5: token 1 alone carries ~0.47 of the mass, so 1 and 2 remain.
  Sampler p({.temperature = 1.0f, .top_k = 0, .top_p = 0.5f, .min_p = 0.0f, .seed = 1});
  std::map<int, int> seen_p;
  for (int i = 0; i < 500; ++i) ++seen_p[p.sample(kLogits)];
  EXPECT_EQ(seen_p.size(), 2u);
}

TEST(Sampler, FollowsTheDistribution) {
  // Two tokens with logits differing by ln 3: probabilities 0.75 / 0.25.
  const std::vector<float> logits = {std::log(3.0f), 0.0f};
  Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 9});
  int zeros = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) zeros += s.sample(logits) == 0;
  EXPECT_NEAR(zeros / static_cast<double>(n), 0.75, 0.02);
}

TEST(Sampler, EmptyLogitsAreAnError) {
  Sampler s({});
  EXPECT_THROW(s.sample({}), Error);
}

}  // namespace
}  // namespace loom
