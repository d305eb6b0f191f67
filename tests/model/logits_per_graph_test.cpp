// SessionOptions::logits_per_graph: a micro-batch that wants more logits than
// one graph computes ends its graph at the hidden states of those tokens and
// runs the output matrix over them in graphs of logits_per_graph rows. The
// logits are those of a session that computes them all in one graph, row for
// row, and the reserved compute buffers are smaller by the logits not held.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/temp_model.h"

namespace loom {
namespace {

class LogitsPerGraph : public ::testing::TestWithParam<FlashAttn> {
 protected:
  static void SetUpTestSuite() {
    ModelSpec s;
    s.n_vocab = 4096;  // the logits of a micro-batch outweigh its activations
    s.n_embd = 64;
    s.n_layer = 2;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 96;
    s.n_ctx = 256;
    model_ = new test::TempModel("logits_per_graph", s, DType::Q8_0, 11);
  }
  static void TearDownTestSuite() { delete model_; }

  SessionOptions options(int64_t logits_per_graph) const {
    SessionOptions o;
    o.n_ctx = 256;
    o.n_ubatch = 64;
    o.n_threads = 2;
    o.n_seq_max = 2;
    o.flash_attn = GetParam();
    o.logits_per_graph = logits_per_graph;
    return o;
  }
  // Two sequences interleaved; logits wanted for 7 of the 12 tokens, not in
  // runs: chunks of 3 rows take rows from both sequences, the last one short.
  static Batch batch() {
    Batch b;
    const int32_t tokens[] = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
    const bool want[] = {true, false, true, true, false, true, false, false, true, true, false, true};
    for (int i = 0; i < 12; ++i) b.add(tokens[i], i / 2, i % 2, want[i]);
    return b;
  }
  static test::TempModel* model_;
};
test::TempModel* LogitsPerGraph::model_ = nullptr;

// Largest |a - b| over the largest |b|: the chunks' mul_mat may take another
// kernel path than one over all rows, so the sums may round differently.
float relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

TEST_P(LogitsPerGraph, ChunkedLogitsAreThoseOfOneGraph) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  Session whole(*m, options(64));
  Session chunked(*m, options(3));
  const std::vector<float> expected = whole.decode(batch());
  const std::vector<float> got = chunked.decode(batch());
  ASSERT_EQ(expected.size(), 7u * 4096);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_LT(relative_error(got, expected), 1e-5f);

  // A generated token of each sequence: two rows, one graph, as before.
  Batch next;
  next.add(7, 6, 0, true);
  next.add(9, 6, 1, true);
  const std::vector<float> expected_next = whole.decode(next);
  const std::vector<float> got_next = chunked.decode(next);
  ASSERT_EQ(got_next.size(), 2u * 4096);
  EXPECT_LT(relative_error(got_next, expected_next), 1e-5f);
}

TEST_P(LogitsPerGraph, TheReserveHoldsOnlyOneGraphOfLogits) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  Session whole(*m, options(64));
  Session chunked(*m, options(3));
  // 64 - 3 rows of 4096 logits fewer, less whatever else then peaks.
  EXPECT_LT(chunked.compute_buffer_bytes(), whole.compute_buffer_bytes());
  const size_t reserved = chunked.compute_buffer_bytes();
  std::vector<int32_t> prompt(64);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37) % 4096);
  EXPECT_EQ(chunked.decode(prompt, true).size(), 64u * 4096);
  EXPECT_EQ(chunked.compute_buffer_bytes(), reserved);  // every logit, and nothing allocated
}

TEST_P(LogitsPerGraph, NegativeIsRefused) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  EXPECT_THROW(Session(*m, options(-1)), Error);
}

INSTANTIATE_TEST_SUITE_P(Attention, LogitsPerGraph, ::testing::Values(FlashAttn::Off, FlashAttn::On),
                         [](const auto& info) { return std::string(flash_attn_name(info.param)); });

}  // namespace
}  // namespace loom
