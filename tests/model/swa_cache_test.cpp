// The sliding-window layers' own KV cache (SessionOptions::swa_full off):
// n_swa * n_seq_max + n_ubatch cells, rounded up to 256, whose cells are
// reused once no later token of their sequence can see them. Checked against
// full-context caches (swa_full) over enough tokens to wrap the window cache
// several times, on the CPU and with layers on two OpenCL devices; the
// refusals when a sequence goes back past its window; and a decode that
// throws half-way leaving the window cache as it was.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "loom/error.h"
#include "loom/fault_injection.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/model_checks.h"
#include "support/temp_model.h"
#include "test_devices.h"

namespace loom {
namespace {

// gemma3: layers 0-4 windowed (3 positions), 5 global, and with 4 layers
// every layer windowed; gemma2: even layers windowed.
ModelSpec spec(const std::string& arch, int64_t n_layer) {
  ModelSpec s = test::tiny_spec(arch, n_layer, 1024);
  s.n_swa = 3;
  return s;
}

std::vector<int32_t> tokens(size_t n) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % 320);
  return t;
}

using test::relative_error;

size_t kv_bytes(const Session& s) {
  size_t total = 0;
  for (const auto& [name, bytes] : s.kv_cache_bytes_by_buffer_type()) total += bytes;
  return total;
}

// The cells attention sums over come in another order, so the logits agree
// to float rounding, not bit for bit.
constexpr double kTolerance = 1e-4;

enum class Placing { Cpu, OpenCLLayers };

struct Case {
  std::string arch;
  int64_t n_layer;
  Placing placing;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.arch << " with " << c.n_layer << " layers" << (c.placing == Placing::Cpu ? " on the CPU" : " on two OpenCL devices");
}

class SwaCache : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().placing == Placing::OpenCLLayers) REQUIRE_OPENCL(2);
    file_ = std::make_unique<test::TempModel>("swa_cache_" + GetParam().arch, spec(GetParam().arch, GetParam().n_layer),
                                              DType::F32, 3);
  }
  std::unique_ptr<Model> load() const {
    if (GetParam().placing == Placing::Cpu) return Model::load(file_->path(), {&Registry::get().cpu()});
    PlacementOptions p{.n_gpu_layers = static_cast<int>(GetParam().n_layer), .tensor_split = {1.0f, 1.0f}};
    return Model::load(file_->path(), test::cpu_and_devices_of(test::DeviceKind::OpenCL), {.placement = p});
  }
  std::unique_ptr<test::TempModel> file_;
};

// 600 tokens (the window cache has 256 cells) in micro-batches of 7, then 20
// generated one at a time: every logit row against full-context caches.
TEST_P(SwaCache, MatchesFullContextCachesAcrossWrapArounds) {
  auto m = load();
  const SessionOptions full{.n_ctx = 1024, .n_ubatch = 7, .swa_full = true};
  SessionOptions own = full;
  own.swa_full = false;
  Session ref(*m, full), s(*m, own);
  EXPECT_EQ(ref.swa_cache_cells(), 0);
  EXPECT_EQ(s.swa_cache_cells(), 256);  // 3 + 7, rounded up
  const auto prompt = tokens(600);
  const auto want = ref.decode(prompt, true), got = s.decode(prompt, true);
  const int64_t nv = m->hparams().n_vocab;
  ASSERT_EQ(got.size(), want.size());
  for (size_t t = 0; t < prompt.size(); t += 1)
    ASSERT_LT(relative_error(std::span(got).subspan(t * nv, nv), std::span(want).subspan(t * nv, nv)), kTolerance)
        << "prompt token " << t;
  std::vector<float> a(want.end() - nv, want.end()), b(got.end() - nv, got.end());
  for (int i = 0; i < 20; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(a.begin(), a.end()) - a.begin());
    ASSERT_EQ(std::max_element(b.begin(), b.end()) - b.begin(), next) << "generated token " << i;
    a = ref.decode(std::span(&next, 1));
    b = s.decode(std::span(&next, 1));
    ASSERT_LT(relative_error(b, a), kTolerance) << "generated token " << i;
  }
  // The windowed layers hold 256 cells instead of 1024.
  const HParams& h = m->hparams();
  int64_t windowed = 0;
  for (const Layer& L : m->layers()) windowed += L.swa ? 1 : 0;
  EXPECT_GT(windowed, 0);
  EXPECT_EQ(windowed == h.n_layer, GetParam().n_layer == 4);
  const size_t per_cell_layer = 2 * static_cast<size_t>(h.n_embd_kv()) * 2;  // K and V rows, f16
  EXPECT_EQ(kv_bytes(ref) - kv_bytes(s), static_cast<size_t>(windowed) * (1024 - 256) * per_cell_layer);
}

// Sequences interleaved in one batch, each with its own window, against each
// alone; a sequence id past n_seq_max is refused, naming it.
TEST_P(SwaCache, SequencesKeepTheirOwnWindows) {
  auto m = load();
  const int64_t nv = m->hparams().n_vocab;
  const auto p0 = tokens(300), p1 = tokens(301);
  Session alone(*m, {.n_ctx = 1024, .n_ubatch = 5});
  const auto want0 = alone.decode(p0);
  alone.reset();
  const auto want1 = alone.decode(std::span(p1).subspan(1));

  Session s(*m, {.n_ctx = 1024, .n_ubatch = 5, .n_seq_max = 2});
  EXPECT_EQ(s.swa_cache_cells(), 256);  // 2 * 3 + 5, rounded up
  Batch b;
  for (size_t i = 0; i < 300; ++i) {
    b.add(p0[i], static_cast<int32_t>(i), 0, i == 299);
    b.add(p1[i + 1], static_cast<int32_t>(i), 1, i == 299);
  }
  const auto got = s.decode(b);
  ASSERT_EQ(got.size(), 2u * nv);
  EXPECT_LT(relative_error(std::span(got).first(nv), want0), kTolerance);
  EXPECT_LT(relative_error(std::span(got).subspan(nv), want1), kTolerance);

  b.clear();
  b.add(1, 0, 2, true);
  try {
    s.decode(b);
    FAIL() << "sequence 2 of 2 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("n_seq_max"), std::string::npos) << e.what();
  }
}

// After 100 tokens the window cache holds only the last 2 positions: going
// back to position 50 is refused (can_continue says so first), removing the
// whole sequence starts it again, and with swa_full going back is fine.
TEST_P(SwaCache, GoingBackPastTheWindowIsRefused) {
  auto m = load();
  Session s(*m, {.n_ctx = 1024, .n_ubatch = 8});
  const auto prompt = tokens(100);
  s.decode(prompt);
  EXPECT_TRUE(s.can_continue(0, 100));
  EXPECT_FALSE(s.can_continue(0, 50));
  s.seq_rm(0, 50);
  EXPECT_EQ(s.n_past(), 50);
  try {
    s.decode(std::span(prompt).subspan(50, 1));
    FAIL() << "going back to position 50 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sliding-window cache has dropped"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--swa-full"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.n_past(), 50);  // the refused decode took no cell
  s.seq_rm(0);
  EXPECT_TRUE(s.can_continue(0, 0));
  const auto again = s.decode(std::span(prompt).first(60));

  Session full(*m, {.n_ctx = 1024, .n_ubatch = 8, .swa_full = true});
  full.decode(prompt);
  full.seq_rm(0, 50);
  EXPECT_TRUE(full.can_continue(0, 50));
  const auto back = full.decode(std::span(prompt).subspan(50, 10));
  EXPECT_LT(relative_error(again, back), kTolerance);
}

// A decode whose second micro-batch fails (its compute buffers cannot be
// allocated, before its graph runs) leaves both caches as they were: the
// window cells the first micro-batch freed come back, and the same decode
// then succeeds with the logits of a session that never failed. The second
// micro-batch allocates because its global layers attend to 512 cells where
// the ones before attended to 256: models with a global layer only.
class SwaCacheRollback : public SwaCache {};

TEST_P(SwaCacheRollback, AFailedDecodeLeavesTheWindowCacheAsItWas) {
  auto m = load();
  const SessionOptions o{.n_ctx = 1024, .n_ubatch = 8, .compute_buffers = ComputeBuffers::Grow};
  Session ref(*m, o), s(*m, o);
  const auto prompt = tokens(264);
  // 248 cached tokens; then 16 more (248..263), the logits of the last 8 wanted.
  ref.decode(std::span(prompt).first(248));
  s.decode(std::span(prompt).first(248));
  Batch b;
  for (int32_t i = 248; i < 264; ++i) b.add(prompt[i], i, 0, i >= 256);
  const auto want = ref.decode(b);
  fault::arm(fault::Site::BufferAlloc, 1);
  EXPECT_THROW(s.decode(b), Error);
  const uint64_t allocations = fault::visits(fault::Site::BufferAlloc);
  fault::disarm();
  ASSERT_GE(allocations, 1u) << "the second micro-batch allocated nothing: the test no longer fails it";
  EXPECT_EQ(s.n_past(), 248);
  EXPECT_TRUE(s.can_continue(0, 248));
  const auto got = s.decode(b);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(relative_error(got, want), kTolerance);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.arch + "_" + std::to_string(info.param.n_layer) + "_layers" +
         (info.param.placing == Placing::Cpu ? "_Cpu" : "_OpenCLLayers");
}

INSTANTIATE_TEST_SUITE_P(Families, SwaCache,
                         ::testing::Values(Case{"gemma2", 2, Placing::Cpu}, Case{"gemma3", 6, Placing::Cpu},
                                           Case{"gemma3", 4, Placing::Cpu}, Case{"gemma3", 6, Placing::OpenCLLayers}),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Families, SwaCacheRollback,
                         ::testing::Values(Case{"gemma2", 2, Placing::Cpu}, Case{"gemma3", 6, Placing::Cpu},
                                           Case{"gemma3", 6, Placing::OpenCLLayers}),
                         case_name);

}  // namespace
}  // namespace loom
