// Many sequences in one Session: the cache cells' tags (KvCells), the masks
// built from them, and decoding several interleaved sequences against
// decoding each alone, on the CPU, with layers split across the CPU and two
// OpenCL devices, and with rows split over the two (-sm row).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "loom/error.h"
#include "loom/kv_cells.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/model_checks.h"
#include "test_devices.h"

namespace loom {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(KvCells, TagsCopiesRemovesAndKeeps) {
  KvCells c(6);
  for (int32_t p = 0; p < 3; ++p) c.occupy(c.find_free(1)[0], 0, p);
  EXPECT_EQ(c.used(), 3);
  c.seq_cp(0, 1, 0, 2);  // seq 1 shares positions 0 and 1
  EXPECT_TRUE(c.has(1, 1));
  EXPECT_FALSE(c.has(2, 1));
  EXPECT_EQ(c.seq_pos_max(1), 1);
  c.occupy(c.find_free(1)[0], 1, 2);
  EXPECT_EQ(c.used(), 4);
  EXPECT_EQ(c.n_kv(), 4);
  c.seq_rm(0);  // cells 0 and 1 stay (seq 1), cell 2 is freed
  EXPECT_EQ(c.used(), 3);
  EXPECT_EQ(c.seq_pos_max(0), -1);
  EXPECT_EQ(c.find_free(1)[0], 2);
  c.seq_rm(1, 1);  // positions >= 1
  EXPECT_EQ(c.used(), 1);
  EXPECT_EQ(c.n_kv(), 1);
  c.occupy(1, 2, 0);
  c.seq_keep(2);
  EXPECT_EQ(c.used(), 1);
  EXPECT_TRUE(c.has(1, 2));
  EXPECT_THROW(c.find_free(6), Error);
}

TEST(KvCells, VacateFreesACellWhateverItHolds) {
  KvCells c(3);
  c.occupy(0, 0, 0);
  c.occupy(1, 0, 1);
  c.seq_cp(0, 1);  // both cells shared by sequences 0 and 1
  c.vacate(1);
  EXPECT_EQ(c.used(), 1);
  EXPECT_FALSE(c.has(1, 0));
  EXPECT_FALSE(c.has(1, 1));
  EXPECT_EQ(c.seq_pos_max(1), 0);
  EXPECT_EQ(c.n_kv(), 1);
  c.vacate(1);  // already free: nothing changes
  EXPECT_EQ(c.used(), 1);
  c.occupy(1, 2, 5);  // free again for anyone
  EXPECT_EQ(c.used(), 2);
}

TEST(KvCells, DropOlderAndTagUndoIt) {
  KvCells c(4);
  for (int32_t p = 0; p < 3; ++p) c.occupy(p, 0, p);
  c.seq_cp(0, 1, 0, 1);  // cell 0 shared with sequence 1
  const auto dropped = c.drop_older(0, 2);
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0].cell, 0);
  EXPECT_EQ(dropped[1].pos, 1);
  EXPECT_EQ(c.used(), 2);   // cell 0 stays for sequence 1, cell 1 is free
  EXPECT_TRUE(c.has(0, 1));
  EXPECT_FALSE(c.has(0, 0));
  for (const auto& d : dropped) c.tag(d.cell, 0, d.pos);
  EXPECT_EQ(c.used(), 3);
  EXPECT_TRUE(c.has(0, 0));
  EXPECT_TRUE(c.has(1, 0));
  EXPECT_EQ(c.pos(1), 1);
  EXPECT_THROW(c.tag(2, 1, 7), Error);  // cell 2 holds position 2
  try {
    c.find_free(2, "sliding-window KV cache");
    FAIL() << "2 free cells of 1";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window KV cache full"), std::string::npos) << e.what();
  }
}

TEST(KvCells, MaskIsCausalPerSequenceWithOptionalWindow) {
  KvCells c(4);
  c.occupy(0, 0, 0);
  c.occupy(1, 1, 0);
  c.occupy(2, 0, 1);
  c.occupy(3, 0, 2);
  const int32_t seqs[] = {0, 1};
  const int32_t pos[] = {2, 0};
  std::vector<float> m(8);
  fill_kq_mask(c, seqs, pos, 4, 0, m);
  EXPECT_EQ(m, (std::vector<float>{0, -kInf, 0, 0, -kInf, 0, -kInf, -kInf}));
  fill_kq_mask(c, seqs, pos, 4, 2, m);  // window 2: position 0 is too far from 2
  EXPECT_EQ(m, (std::vector<float>{-kInf, -kInf, 0, 0, -kInf, 0, -kInf, -kInf}));
}

std::string temp_model() {
  return (std::filesystem::temp_directory_path() / ("loom_multi_seq_test_" + std::to_string(::getpid()) + ".gguf"))
      .string();
}

enum class Placing { Cpu, OpenCLLayers, OpenCLRows };

class MultiSeq : public ::testing::TestWithParam<Placing> {
 protected:
  static void SetUpTestSuite() {
    path_ = temp_model();
    ModelSpec s;
    s.n_vocab = 320;
    s.n_embd = 64;
    s.n_layer = 3;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 96;
    s.n_ctx = 128;
    write_random_model(s, DType::F32, 7, path_);
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }

  std::unique_ptr<Model> load() {
    if (GetParam() == Placing::Cpu) return Model::load(path_, {&Registry::get().cpu()});
    PlacementOptions p{.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}};  // layers: CPU, OpenCL0, OpenCL1
    if (GetParam() == Placing::OpenCLRows) p = {.n_gpu_layers = 4, .split_mode = SplitMode::Row, .tensor_split = {1.0f, 1.0f}};
    return Model::load(path_, test::cpu_and_devices_of(test::DeviceKind::OpenCL), {.placement = p});
  }
  void SetUp() override {
    if (GetParam() != Placing::Cpu) REQUIRE_OPENCL(2);
  }

  static std::string path_;
};
std::string MultiSeq::path_;

int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

using test::relative_error;

// Documented tolerance (max |diff| over max |logit|): interleaving changes
// only the order of the cells attention sums over and the micro-batch
// shapes, so the logits agree to float rounding. Measured: up to 1.7e-5 on
// the CPU and with layers split over two PoCL devices, 3e-6 with rows split.
constexpr double kTolerance = 1e-4;

const std::vector<std::vector<int32_t>> kPrompts = {{5, 17, 99, 3, 250}, {42, 8}, {7, 7, 130, 64, 12, 301, 9, 44}};
constexpr int kSteps = 6;

// Greedy generation per prompt, alone in a session: the logits of every step.
std::vector<std::vector<std::vector<float>>> alone(const Model& m) {
  std::vector<std::vector<std::vector<float>>> out;
  for (const auto& prompt : kPrompts) {
    Session s(m, {.n_ctx = 64});
    auto& steps = out.emplace_back();
    steps.push_back(s.decode(prompt));
    for (int i = 0; i < kSteps; ++i) {
      const int32_t next = argmax(steps.back());
      steps.push_back(s.decode(std::span(&next, 1)));
    }
  }
  return out;
}

TEST_P(MultiSeq, InterleavedSequencesMatchEachAlone) {
  auto m = load();
  const auto want = alone(*m);
  const int64_t n_vocab = m->hparams().n_vocab;
  Session s(*m, {.n_ctx = 64, .n_ubatch = 4});  // micro-batches cut across sequences
  Batch b;
  for (size_t pos = 0; pos < 8; ++pos)  // round-robin by position: the sequences' cells interleave
    for (size_t q = 0; q < kPrompts.size(); ++q)
      if (pos < kPrompts[q].size())
        b.add(kPrompts[q][pos], static_cast<int32_t>(pos), static_cast<int32_t>(q), pos + 1 == kPrompts[q].size());
  std::vector<float> logits = s.decode(b);
  ASSERT_EQ(logits.size(), kPrompts.size() * n_vocab);
  // Rows come in batch order: the prompt of length 2 ends first.
  const size_t order[] = {1, 0, 2};
  for (int step = 0; step <= kSteps; ++step) {
    std::vector<std::vector<float>> got(kPrompts.size());
    for (size_t r = 0; r < kPrompts.size(); ++r) {
      const size_t q = step == 0 ? order[r] : r;
      got[q].assign(logits.begin() + r * n_vocab, logits.begin() + (r + 1) * n_vocab);
    }
    b.clear();
    for (size_t q = 0; q < kPrompts.size(); ++q) {
      EXPECT_LT(relative_error(got[q], want[q][step]), kTolerance) << "sequence " << q << " step " << step;
      EXPECT_EQ(argmax(got[q]), argmax(want[q][step])) << "sequence " << q << " step " << step;
      b.add(argmax(got[q]), static_cast<int32_t>(kPrompts[q].size() + step), static_cast<int32_t>(q), true);
    }
    if (step < kSteps) logits = s.decode(b);
  }
}

TEST_P(MultiSeq, SharedPrefixMatchesWholePrompt) {
  auto m = load();
  const std::vector<int32_t> prefix = {11, 12, 13, 14}, tail_a = {200, 5}, tail_b = {9};
  std::vector<int32_t> whole_a = prefix, whole_b = prefix;
  whole_a.insert(whole_a.end(), tail_a.begin(), tail_a.end());
  whole_b.insert(whole_b.end(), tail_b.begin(), tail_b.end());
  Session ref(*m, {.n_ctx = 32});
  const auto want_a = ref.decode(whole_a);
  ref.reset();
  const auto want_b = ref.decode(whole_b);

  Session s(*m, {.n_ctx = 32});
  s.decode(prefix);  // sequence 0
  s.seq_cp(0, 1);
  EXPECT_EQ(s.cells().used(), 4);  // shared, not copied
  Batch b;
  for (size_t i = 0; i < tail_a.size(); ++i) b.add(tail_a[i], static_cast<int32_t>(4 + i), 0, i + 1 == tail_a.size());
  b.add(tail_b[0], 4, 1, true);
  const auto got = s.decode(b);
  const int64_t n_vocab = m->hparams().n_vocab;
  ASSERT_EQ(got.size(), 2u * n_vocab);
  EXPECT_LT(relative_error(std::span(got).first(n_vocab), want_a), kTolerance);
  EXPECT_LT(relative_error(std::span(got).subspan(n_vocab), want_b), kTolerance);
  // Dropping sequence 0 frees only its own tail; the prefix stays for 1.
  s.seq_rm(0);
  EXPECT_EQ(s.cells().used(), 5);
  EXPECT_EQ(s.cells().seq_pos_max(1), 4);
}

TEST_P(MultiSeq, MalformedBatchesAreRefused) {
  auto m = load();
  Session s(*m, {.n_ctx = 8});
  Batch b;
  b.add(1, 0, -1, true);
  EXPECT_THROW(s.decode(b), Error);
  b.clear();
  b.add(1, 0, 0, true);
  b.want_logits.pop_back();
  EXPECT_THROW(s.decode(b), Error);
  b.clear();
  for (int i = 0; i < 9; ++i) b.add(1, i, 0, false);
  EXPECT_THROW(s.decode(b), Error);  // more tokens than cells
  EXPECT_EQ(s.cells().used(), 0);
}

std::string placing_name(const ::testing::TestParamInfo<Placing>& info) {
  constexpr const char* kNames[] = {"Cpu", "OpenCLLayers", "OpenCLRows"};
  return kNames[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Placement, MultiSeq, ::testing::Values(Placing::Cpu, Placing::OpenCLLayers, Placing::OpenCLRows),
                         placing_name);

}  // namespace
}  // namespace loom
