// How a session sizes its compute buffers (SessionOptions::compute_buffers):
// Worst reserves once for a full micro-batch over the whole context and
// never allocates again; Grow starts with nothing and follows the longest
// context seen, up to the worst case; shrink_compute_buffers() gives the
// memory back. All three compute the same logits. A decode that fails
// (here: an injected allocation failure while growing) leaves the cache's
// cells as they were, so the same decode can be retried.
#include <gtest/gtest.h>


#include "loom/error.h"
#include "loom/fault_injection.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/temp_model.h"

namespace loom {
namespace {

class ComputeBuffersTest : public ::testing::TestWithParam<FlashAttn> {
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
    model_ = new test::TempModel("compute_buffers", s, DType::Q8_0, 9);
  }
  static void TearDownTestSuite() {
    delete model_;
  }

  SessionOptions options(ComputeBuffers c) const {
    SessionOptions o;
    o.n_ctx = 512;
    o.n_ubatch = 64;
    o.n_threads = 2;
    o.flash_attn = GetParam();
    o.compute_buffers = c;
    return o;
  }
  static const std::vector<int32_t>& prompt() {
    static const std::vector<int32_t> p = {3, 14, 15, 92, 65};
    return p;
  }
  // 300 tokens: five micro-batches of 64 and one of 44, crossing 256 cells.
  static const std::vector<int32_t>& filler() {
    static const std::vector<int32_t> f = [] {
      std::vector<int32_t> v(300);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>((i * 37) % 300);
      return v;
    }();
    return f;
  }
  static test::TempModel* model_;
};
test::TempModel* ComputeBuffersTest::model_ = nullptr;

TEST_P(ComputeBuffersTest, GrowFollowsTheContextUpToTheWorstCase) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  Session worst(*m, options(ComputeBuffers::Worst));
  Session grow(*m, options(ComputeBuffers::Grow));
  const size_t reserved = worst.compute_buffer_bytes();
  EXPECT_GT(reserved, 0u);
  EXPECT_EQ(grow.compute_buffer_bytes(), 0u);

  EXPECT_EQ(grow.decode(prompt(), true), worst.decode(prompt(), true));
  const size_t after_prompt = grow.compute_buffer_bytes();
  EXPECT_GT(after_prompt, 0u);
  EXPECT_LT(after_prompt, reserved);
  EXPECT_EQ(worst.compute_buffer_bytes(), reserved);  // the reserve fits every graph

  EXPECT_EQ(grow.decode(filler(), true), worst.decode(filler(), true));
  const size_t after_filler = grow.compute_buffer_bytes();
  EXPECT_GT(after_filler, after_prompt);
  EXPECT_LE(after_filler, reserved);
  EXPECT_EQ(worst.compute_buffer_bytes(), reserved);

  // One more token: a smaller graph keeps what was grown.
  const int32_t next = 7;
  EXPECT_EQ(grow.decode(std::span(&next, 1)), worst.decode(std::span(&next, 1)));
  EXPECT_EQ(grow.compute_buffer_bytes(), after_filler);
}

TEST_P(ComputeBuffersTest, ShrinkGivesTheMemoryBack) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  Session fresh(*m, options(ComputeBuffers::Grow));
  const std::vector<float> expected = fresh.decode(prompt(), true);
  const size_t fresh_bytes = fresh.compute_buffer_bytes();

  for (ComputeBuffers c : {ComputeBuffers::Grow, ComputeBuffers::Worst}) {
    SCOPED_TRACE(std::string(compute_buffers_name(c)));
    Session s(*m, options(c));
    s.decode(filler());
    EXPECT_GT(s.compute_buffer_bytes(), fresh_bytes);
    s.shrink_compute_buffers();
    EXPECT_EQ(s.compute_buffer_bytes(), 0u);
    s.reset();
    EXPECT_EQ(s.decode(prompt(), true), expected);
    EXPECT_EQ(s.compute_buffer_bytes(), fresh_bytes);
  }
}

TEST_P(ComputeBuffersTest, AFailedGrowthLeavesTheCacheAsItWas) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  Session reference(*m, options(ComputeBuffers::Grow));
  reference.decode(prompt());
  const std::vector<float> expected = reference.decode(filler(), true);

  Session s(*m, options(ComputeBuffers::Grow));
  s.decode(prompt());
  // Count the allocations the filler makes, then fail the last of them: the
  // micro-batches before it are already in the cache when it fails.
  uint64_t allocations = 0;
  {
    Session probe(*m, options(ComputeBuffers::Grow));
    probe.decode(prompt());
    fault::arm(fault::Site::BufferAlloc, 0);
    probe.decode(filler());
    allocations = fault::visits(fault::Site::BufferAlloc);
    fault::disarm();
  }
  ASSERT_GT(allocations, 0u);
  fault::arm(fault::Site::BufferAlloc, allocations);
  EXPECT_THROW(s.decode(filler()), Error);
  fault::disarm();
  EXPECT_EQ(s.cells().used(), static_cast<int64_t>(prompt().size()));
  EXPECT_EQ(s.n_past(), static_cast<int64_t>(prompt().size()));
  EXPECT_EQ(s.decode(filler(), true), expected);
}

INSTANTIATE_TEST_SUITE_P(Attention, ComputeBuffersTest, ::testing::Values(FlashAttn::Off, FlashAttn::On),
                         [](const auto& info) { return std::string(flash_attn_name(info.param)); });

}  // namespace
}  // namespace loom
