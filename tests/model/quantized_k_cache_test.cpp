// A quantized K cache (-ctk q8_0, q4_0, ...): logits follow those of an f16
// cache within the type's rounding, on the CPU and with the layers on two
// OpenCL devices; a K or V type whose blocks do not divide the head size is
// refused, saying why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/temp_model.h"
#include "test_devices.h"

namespace loom {
namespace {

struct KCase {
  DType type;
  // Max |logit difference| / logit range against the f16 cache: about twice
  // what this random model shows (q8_0 0.0025, q5 0.017, q4 0.03-0.04).
  double tolerance;
};

class QuantizedKCache : public ::testing::TestWithParam<KCase> {
 protected:
  static void SetUpTestSuite() {
    ModelSpec s;
    s.n_vocab = 300;
    s.n_embd = 128;
    s.n_layer = 2;
    s.n_head = 4;  // head size 32: one block of every quantized K type per head
    s.n_head_kv = 2;
    s.n_ff = 192;
    s.n_ctx = 128;
    // f32 weights: the cache is the only rounding that differs between runs.
    model_ = new test::TempModel("quantized_k", s, DType::F32, 9);
  }
  static void TearDownTestSuite() {
    delete model_;
  }

  // A prompt's logits, then those of fixed next tokens (the same inputs
  // whatever the cache type, so the comparison never follows a divergence).
  static std::vector<float> logits(const Model& m, DType type_k) {
    Session s(m, {.n_ctx = 64, .type_k = type_k, .type_v = DType::F16});
    std::vector<float> all = s.decode(std::vector<int32_t>{3, 14, 15, 92, 65, 35, 89, 79}, true);
    for (int32_t t : {23, 84, 62, 64, 33, 83}) {
      const std::vector<float> next = s.decode(std::vector<int32_t>{t});
      all.insert(all.end(), next.begin(), next.end());
    }
    return all;
  }

  static double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    EXPECT_EQ(got.size(), want.size());
    const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
    double err = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      err = std::max(err, double(std::fabs(got[i] - want[i])));
    return err / (*hi - *lo);
  }

  static test::TempModel* model_;
};
test::TempModel* QuantizedKCache::model_ = nullptr;

TEST_P(QuantizedKCache, FollowsTheF16CacheOnCpuAndOpenCl) {
  const KCase c = GetParam();
  auto cpu = Model::load(model_->path(), {&Registry::get().cpu()});
  const std::vector<float> want = logits(*cpu, DType::F16);
  const std::vector<float> got = logits(*cpu, c.type);
  const double err = relative_error(got, want);
  std::printf("[ %s K cache ] CPU: max |logit difference| / range against f16 %.2g\n", std::string(type_name(c.type)).c_str(), err);
  EXPECT_LT(err, c.tolerance);
  EXPECT_GT(err, 0.0);  // the keys really went through the type's rounding

  REQUIRE_OPENCL(2);
  // Layer 0 on OpenCL0, layer 1 on OpenCL1: both devices write and read the quantized cache.
  auto split = Model::load(model_->path(), test::cpu_and_devices_of(test::DeviceKind::OpenCL),
                           {.placement = {.n_gpu_layers = 3, .tensor_split = {1.0f, 1.0f}}});
  const std::vector<float> on_opencl = logits(*split, c.type);
  const double err_opencl = relative_error(on_opencl, want);
  std::printf("[ %s K cache ] OpenCL0+OpenCL1: against the f16 cache on the CPU %.2g\n", std::string(type_name(c.type)).c_str(),
              err_opencl);
  EXPECT_LT(err_opencl, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedKCache,
                         ::testing::Values(KCase{DType::Q8_0, 6e-3}, KCase{DType::Q5_0, 4e-2},
                                           KCase{DType::Q5_1, 4e-2}, KCase{DType::Q4_0, 8e-2},
                                           KCase{DType::Q4_1, 8e-2}),
                         [](const auto& info) { return std::string(type_name(info.param.type)); });

TEST(QuantizedKCacheRefusals, IndivisibleHeadsAreRefusedSayingWhy) {
  ModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 64;
  s.n_layer = 1;
  s.n_head = 4;  // head size 16: half a block
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = 64;
  const test::TempModel model("quantized_k_refusal", s, DType::F32, 3);
  auto m = Model::load(model.path(), {&Registry::get().cpu()});
  const auto message = [&m](SessionOptions o) -> std::string {
    try {
      Session session(*m, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({.type_k = DType::Q8_0}).find("do not divide the head size 16"), std::string::npos)
      << message({.type_k = DType::Q8_0});
  // (A quantized V without fused attention: tests/model/flash_attn_test.cpp.)
  EXPECT_NE(message({.type_v = DType::Q8_0, .flash_attn = FlashAttn::On}).find("V cache type q8_0 stores blocks of 32"),
            std::string::npos)
      << message({.type_v = DType::Q8_0, .flash_attn = FlashAttn::On});
  for (DType t : {DType::Q4_K, DType::IQ4_NL})
    EXPECT_NE(message({.type_k = t}).find("K cache type " + std::string(type_name(t)) + " is not supported"),
              std::string::npos)
        << message({.type_k = t});
  EXPECT_EQ(message({.type_k = DType::BF16}), "");
}

}  // namespace
}  // namespace loom
