// A session keeps the last micro-batch's graph and runs it again while the
// shape stays (generated tokens attend to a padded number of cache cells):
// the logits are those of a session that builds every graph, and of any
// poll level.
#include <gtest/gtest.h>

#include <algorithm>

#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/temp_model.h"

namespace loom {
namespace {

class SessionGraphReuse : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ModelSpec s;
    s.n_vocab = 300;
    s.n_embd = 64;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 96;
    s.n_ctx = 512;
    model_ = new test::TempModel("graph_reuse", s, DType::Q8_0, 5);
  }
  static void TearDownTestSuite() {
    delete model_;
  }

  // A prompt, then greedy generation: every decode's logits, concatenated.
  static std::vector<float> generate(const Model& m, SessionOptions o, SessionStats* stats = nullptr) {
    o.n_ctx = 320;
    Session s(m, o);
    std::vector<float> all = s.decode(std::vector<int32_t>{3, 14, 15, 92, 65}, true);
    // Past a padding boundary (256 cells): the shape changes once.
    std::vector<int32_t> filler(250, 7);
    s.decode(filler);
    int32_t token = 1;
    for (int i = 0; i < 12; ++i) {
      const std::vector<float> logits = s.decode(std::vector<int32_t>{token});
      all.insert(all.end(), logits.begin(), logits.end());
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    if (stats) *stats = s.stats();
    return all;
  }
  static test::TempModel* model_;
};
test::TempModel* SessionGraphReuse::model_ = nullptr;

TEST_F(SessionGraphReuse, SameLogitsWithAndWithoutReuse) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  SessionStats on_stats, off_stats;
  const auto on = generate(*m, {.n_threads = 2, .reuse_graph = true}, &on_stats);
  const auto off = generate(*m, {.n_threads = 2, .reuse_graph = false}, &off_stats);
  EXPECT_EQ(on, off);
  // 14 graphs: the prompt, the filler, 12 tokens. The first token is a new
  // shape (one token, 256 cells), the second crosses into the next 256
  // (capped at the context, 320); the other 10 reuse the graph before.
  EXPECT_EQ(on_stats.n_graphs(), 14);
  EXPECT_EQ(on_stats.graphs_reused, 10);
  EXPECT_EQ(off_stats.graphs_reused, 0);
  EXPECT_EQ(off_stats.graphs_built, 14);
  EXPECT_GT(on_stats.host_ns, 0);
  EXPECT_GT(on_stats.compute_ns, 0);
}

TEST_F(SessionGraphReuse, SameLogitsAtEveryPollLevel) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  const auto want = generate(*m, {.n_threads = 2, .poll = 0});
  EXPECT_EQ(generate(*m, {.n_threads = 2, .poll = 100}), want);
  EXPECT_EQ(generate(*m, {.n_threads = 3, .poll = 50}), want);
}

TEST_F(SessionGraphReuse, PollOutsideTheRangeIsRefused) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  EXPECT_THROW(Session(*m, {.n_ctx = 32, .poll = 101}), Error);
}

}  // namespace
}  // namespace loom
