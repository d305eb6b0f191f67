// Fused attention in the model (-fa): logits with flash_attn_ext follow those
// of mul_mat + soft_max + mul_mat (f16 cache) on the CPU and with the layers
// on OpenCL0 + OpenCL1; a quantized V cache with -fa on follows the f16
// cache; -fa auto resolves from the devices' supports_op; a quantized V
// without fused attention is refused, saying to turn it on.
#include <gtest/gtest.h>


#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/temp_model.h"
#include "support/fake_device.h"
#include "test_devices.h"

namespace loom {
namespace {

class FlashAttnModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ModelSpec s;
    s.n_vocab = 300;
    s.n_embd = 256;
    s.n_layer = 2;
    s.n_head = 4;  // head size 64
    s.n_head_kv = 1;  // grouped-query ratio 4
    s.n_ff = 192;
    s.n_ctx = 512;
    // f32 weights: the attention path and the cache are all that differ.
    model_ = new test::TempModel("flash_attn", s, DType::F32, 11);
  }
  static void TearDownTestSuite() {
    delete model_;
  }

  // A prompt's logits, then those of fixed next tokens, after `depth`
  // cached tokens (so that the cells attended pass a padding boundary).
  static std::vector<float> logits(const Model& m, FlashAttn fa, DType type_v = DType::F16, int depth = 0) {
    Session s(m, {.n_ctx = 512, .n_ubatch = 64, .type_v = type_v, .flash_attn = fa});
    EXPECT_EQ(s.flash_attn(), fa == FlashAttn::On);
    if (depth > 0) {
      std::vector<int32_t> past(depth);
      for (int i = 0; i < depth; ++i) past[i] = (i * 37 + 5) % 300;
      s.decode(past);
    }
    std::vector<float> all = s.decode(std::vector<int32_t>{3, 14, 15, 92, 65, 35, 89, 79}, true);
    for (int32_t t : {23, 84, 62, 64, 33, 83}) {
      const std::vector<float> next = s.decode(std::vector<int32_t>{t});
      all.insert(all.end(), next.begin(), next.end());
    }
    return all;
  }

  // max |got - want| / (max want - min want)
  static double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
    EXPECT_EQ(got.size(), want.size());
    const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
    double err = 0;
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
    return err / (*hi - *lo);
  }

  static std::unique_ptr<Model> on_two_opencl_devices() {
    // Layer 0 on OpenCL0, layer 1 on OpenCL1: each runs its own flash_attn_ext.
    return Model::load(model_->path(), test::cpu_and_devices_of(test::DeviceKind::OpenCL),
                       {.placement = {.n_gpu_layers = 3, .tensor_split = {1.0f, 1.0f}}});
  }

  static test::TempModel* model_;
};
test::TempModel* FlashAttnModel::model_ = nullptr;

// The f16 cache either way: the paths differ only in f32 rounding and sum
// order (measured max |diff| / range on AVX-512: CPU 2.1e-6 / 2.8e-6,
// OpenCL 4e-6 / 5.1e-6 at depth 0 / 300); room for a level whose unfused
// mul_mat rounds q to f16 (about 2^-11 relative).
constexpr double kOnVsOff = 1e-4;

TEST_F(FlashAttnModel, OnFollowsOffOnCpu) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  for (int depth : {0, 300}) {
    const double err = relative_error(logits(*m, FlashAttn::On, DType::F16, depth), logits(*m, FlashAttn::Off, DType::F16, depth));
    std::printf("[ -fa on vs off ] CPU, depth %d: max |logit difference| / range %.2g\n", depth, err);
    EXPECT_LT(err, kOnVsOff);
  }
}

TEST_F(FlashAttnModel, OnFollowsOffOnTwoOpenClDevices) {
  REQUIRE_OPENCL(2);
  auto cpu = Model::load(model_->path(), {&Registry::get().cpu()});
  auto split = on_two_opencl_devices();
  for (int depth : {0, 300}) {
    const std::vector<float> want = logits(*cpu, FlashAttn::Off, DType::F16, depth);
    const double err_on = relative_error(logits(*split, FlashAttn::On, DType::F16, depth), want);
    const double err_off = relative_error(logits(*split, FlashAttn::Off, DType::F16, depth), want);
    std::printf("[ -fa on vs off ] OpenCL0+OpenCL1, depth %d: on %.2g, off %.2g against off on the CPU\n", depth,
                err_on, err_off);
    EXPECT_LT(err_on, kOnVsOff);
    EXPECT_LT(err_off, kOnVsOff);
  }
}

struct VCase {
  DType type;
  // Max |logit difference| / range against an f16 V cache: about twice what
  // this random model shows.
  double tolerance;
};

class QuantizedVCache : public FlashAttnModel, public ::testing::WithParamInterface<VCase> {};

TEST_P(QuantizedVCache, FollowsTheF16CacheOnCpuAndOpenCl) {
  const VCase c = GetParam();
  const std::string name(type_name(c.type));
  auto cpu = Model::load(model_->path(), {&Registry::get().cpu()});
  const std::vector<float> want = logits(*cpu, FlashAttn::On);
  const double err = relative_error(logits(*cpu, FlashAttn::On, c.type), want);
  std::printf("[ %s V cache, -fa on ] CPU: max |logit difference| / range against f16 %.2g\n", name.c_str(), err);
  EXPECT_LT(err, c.tolerance);
  EXPECT_GT(err, 0.0);  // the values really went through the type's rounding

  REQUIRE_OPENCL(2);
  auto split = on_two_opencl_devices();
  const double err_cl = relative_error(logits(*split, FlashAttn::On, c.type), want);
  std::printf("[ %s V cache, -fa on ] OpenCL0+OpenCL1: against f16 on the CPU %.2g\n", name.c_str(), err_cl);
  EXPECT_LT(err_cl, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedVCache,
                         ::testing::Values(VCase{DType::Q8_0, 6e-3}, VCase{DType::Q5_0, 4e-2},
                                           VCase{DType::Q5_1, 4e-2}, VCase{DType::Q4_0, 8e-2},
                                           VCase{DType::Q4_1, 8e-2}),
                         [](const auto& info) { return std::string(type_name(info.param.type)); });

std::string session_error(const Model& m, SessionOptions o) {
  try {
    Session s(m, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_F(FlashAttnModel, AutoIsOnWhereEveryLayerDeviceRunsIt) {
  auto cpu = Model::load(model_->path(), {&Registry::get().cpu()});
  EXPECT_TRUE(Session(*cpu, {.n_ctx = 64}).flash_attn());  // the default is auto
  EXPECT_FALSE(Session(*cpu, {.n_ctx = 64, .flash_attn = FlashAttn::Off}).flash_attn());

  // A device without flash_attn_ext holding a layer turns auto off; the
  // quantized V that then has no fused attention is refused, naming it.
  test::FakeDevice plain({.name = "FakeNoFA", .ops = std::set<Op>{Op::GetRows, Op::SetRows, Op::Cpy, Op::Cont, Op::Add,
                                                                  Op::Mul, Op::Scale, Op::MulMat, Op::RmsNorm, Op::Rope,
                                                                  Op::SoftMax, Op::Silu}});
  auto mixed = Model::load(model_->path(), {&Registry::get().cpu(), &plain}, {.placement = {.n_gpu_layers = 1}});
  EXPECT_FALSE(Session(*mixed, {.n_ctx = 64}).flash_attn());
  EXPECT_TRUE(Session(*mixed, {.n_ctx = 64, .flash_attn = FlashAttn::On}).flash_attn());  // on stays on
  const std::string msg = session_error(*mixed, {.n_ctx = 64, .type_v = DType::Q8_0});
  EXPECT_NE(msg.find("-fa auto turned it off: FakeNoFA cannot run flash_attn_ext"), std::string::npos) << msg;
}

TEST_F(FlashAttnModel, QuantizedVWithoutFusedAttentionIsRefusedSayingFaOn) {
  auto m = Model::load(model_->path(), {&Registry::get().cpu()});
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1}) {
    const std::string msg = session_error(*m, {.n_ctx = 64, .type_v = t, .flash_attn = FlashAttn::Off});
    EXPECT_NE(msg.find("V cache type " + std::string(type_name(t)) + " needs fused attention (-fa on"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("it is off (-fa off)"), std::string::npos) << msg;
    EXPECT_EQ(session_error(*m, {.n_ctx = 64, .type_v = t, .flash_attn = FlashAttn::On}), "");
  }
  EXPECT_NE(session_error(*m, {.n_ctx = 64, .type_v = DType::Q4_K, .flash_attn = FlashAttn::On})
                .find("V cache type q4_K is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace loom
