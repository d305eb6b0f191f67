// Layer and weight placement (-ngl, -sm, -ts, -mg, -ot) and the same results
// on the CPU, on OpenCL and split across CPU + two OpenCL devices.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "loom/error.h"
#include "loom/llama.h"
#include "loom/placement.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"

namespace loom {
namespace {

bool two_offload_devices() { return offload_devices().size() >= 2; }

TEST(PlanLayers, NglCountsLayersFromTheEndAndThenTheOutput) {
  if (offload_devices().empty()) GTEST_SKIP() << "no offload device (OpenCL) registered";
  Device& cpu = Registry::get().cpu();
  LayerPlan none = plan_layers(4, {});
  for (Device* d : none.layer_device) EXPECT_EQ(d, &cpu);
  LayerPlan two = plan_layers(4, {.n_gpu_layers = 2, .tensor_split = {1.0f}});
  EXPECT_EQ(two.layer_device[1], &cpu);
  EXPECT_NE(two.layer_device[2], &cpu);
  EXPECT_NE(two.layer_device[3], &cpu);
  EXPECT_EQ(two.output_device, &cpu);
  LayerPlan all = plan_layers(4, {.n_gpu_layers = 5, .tensor_split = {1.0f}});
  EXPECT_NE(all.output_device, &cpu);
}

TEST(PlanLayers, TensorSplitAndMainDevice) {
  if (!two_offload_devices()) GTEST_SKIP() << "needs two offload devices (POCL_DEVICES=\"pthread pthread\")";
  const auto devs = offload_devices();
  LayerPlan half = plan_layers(4, {.n_gpu_layers = 4, .tensor_split = {1.0f, 1.0f}});
  EXPECT_EQ(half.layer_device[0], devs[0]);
  EXPECT_EQ(half.layer_device[1], devs[0]);
  EXPECT_EQ(half.layer_device[2], devs[1]);
  EXPECT_EQ(half.layer_device[3], devs[1]);
  LayerPlan skewed = plan_layers(4, {.n_gpu_layers = 4, .tensor_split = {1.0f, 3.0f}});
  EXPECT_EQ(skewed.layer_device[0], devs[0]);
  EXPECT_EQ(skewed.layer_device[1], devs[1]);
  LayerPlan none = plan_layers(4, {.n_gpu_layers = 4, .split_mode = SplitMode::None, .main_gpu = 1});
  for (Device* d : none.layer_device) EXPECT_EQ(d, devs[1]);
  LayerPlan row = plan_layers(4, {.n_gpu_layers = 4, .split_mode = SplitMode::Row, .tensor_split = {3.0f, 1.0f}});
  ASSERT_EQ(row.row_devices.size(), 2u);
  EXPECT_FLOAT_EQ(row.row_fractions[0], 0.75f);
  EXPECT_THROW(plan_layers(4, {.n_gpu_layers = 1, .main_gpu = 7}), Error);
  EXPECT_THROW(plan_layers(4, {.n_gpu_layers = 1, .tensor_split = {1, 1, 1, 1, 1, 1, 1, 1, 1}}), Error);
  EXPECT_THROW(plan_layers(4, {.n_gpu_layers = -1}), Error);
}

TEST(PlacementFlags, ParseErrorsNameTheFlag) {
  EXPECT_EQ(parse_split_mode("row"), SplitMode::Row);
  EXPECT_THROW(parse_split_mode("rows"), Error);
  EXPECT_EQ(parse_tensor_split("3,1"), (std::vector<float>{3.0f, 1.0f}));
  EXPECT_THROW(parse_tensor_split("3,x"), Error);
  EXPECT_THROW(parse_tensor_split("0,0"), Error);
  const TensorOverride o = parse_override("blk\\.1\\.ffn=CPU");
  EXPECT_EQ(o.pattern, "blk\\.1\\.ffn");
  EXPECT_EQ(o.buffer_type, "CPU");
  EXPECT_THROW(parse_override("noequals"), Error);
}

class MultiDeviceModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(
        (std::filesystem::temp_directory_path() / ("loom_placement_" + std::to_string(::getpid()) + ".gguf")).string());
    ModelSpec s;
    s.n_vocab = 300;
    s.n_embd = 64;
    s.n_layer = 4;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 96;
    s.n_ctx = 96;
    s.tied_output = true;
    write_random_model(s, DType::F32, 5, *path_);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(*path_);
    delete path_;
  }
  void SetUp() override {
    if (!two_offload_devices()) GTEST_SKIP() << "needs two offload devices (POCL_DEVICES=\"pthread pthread\")";
  }

  // Logits after a prompt and 32 greedy tokens.
  static std::pair<std::vector<float>, std::vector<int32_t>> run(const PlacementOptions& p) {
    auto m = LlamaModel::load(*path_, {.placement = p});
    Session s(*m, {.n_ctx = 64});
    const std::vector<int32_t> prompt = {1, 40, 41, 42, 7, 99};
    std::vector<float> first = s.decode(prompt);
    std::vector<float> logits = first;
    std::vector<int32_t> generated;
    for (int i = 0; i < 32; ++i) {
      const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      generated.push_back(next);
      logits = s.decode(std::span<const int32_t>(&next, 1));
    }
    return {first, generated};
  }

  static std::string* path_;
};
std::string* MultiDeviceModel::path_ = nullptr;

TEST_F(MultiDeviceModel, SameResultsOnCpuOpenClAndSplit) {
  const auto cpu = run({});
  const std::vector<PlacementOptions> variants = {
      {.n_gpu_layers = 5, .split_mode = SplitMode::None},           // all on OpenCL0
      {.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}},             // CPU + OpenCL0 + OpenCL1
      {.n_gpu_layers = 5, .split_mode = SplitMode::Row, .tensor_split = {1.0f, 1.0f}},  // rows split
  };
  for (const auto& v : variants) {
    const auto got = run(v);
    double err = 0.0, lo = cpu.first[0], hi = cpu.first[0];
    for (size_t i = 0; i < cpu.first.size(); ++i) {
      err = std::max(err, static_cast<double>(std::fabs(got.first[i] - cpu.first[i])));
      lo = std::min<double>(lo, cpu.first[i]);
      hi = std::max<double>(hi, cpu.first[i]);
    }
    EXPECT_LT(err / (hi - lo), 1e-3) << "ngl " << v.n_gpu_layers;
    EXPECT_EQ(got.second, cpu.second) << "ngl " << v.n_gpu_layers;
  }
}

TEST_F(MultiDeviceModel, WeightsKvCacheAndTiedOutputGoWhereAsked) {
  const auto devs = offload_devices();
  auto m = LlamaModel::load(*path_, {.placement = {.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}}});
  EXPECT_EQ(&m->layer_device(0), &Registry::get().cpu());
  EXPECT_EQ(&m->layer_device(2), devs[0]);
  EXPECT_EQ(&m->layer_device(3), devs[1]);
  auto type_of = [&m](const std::string& name) {
    for (const auto& p : m->placements())
      if (p.name == name) return p.buffer_type;
    return std::string("(absent)");
  };
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), "CPU_Mapped");
  EXPECT_EQ(type_of("blk.2.attn_q.weight"), devs[0]->default_buffer_type().name());
  EXPECT_EQ(type_of("blk.3.ffn_down.weight"), devs[1]->default_buffer_type().name());
  // Output layer on the CPU, as the embedding: the tied matrix is loaded once.
  EXPECT_EQ(type_of("output.weight (tied to token_embd.weight)"), "(absent)");
  Session s(*m, {.n_ctx = 16});
  const auto kv = s.kv_cache_bytes_by_buffer_type();
  EXPECT_EQ(kv.size(), 3u);  // CPU, OpenCL0, OpenCL1

  // With the output layer offloaded, the tied matrix needs a copy there.
  auto all = LlamaModel::load(*path_, {.placement = {.n_gpu_layers = 5, .split_mode = SplitMode::None}});
  bool copied = false;
  for (const auto& p : all->placements()) copied |= p.name == "output.weight (tied to token_embd.weight)";
  EXPECT_TRUE(copied);
}

TEST_F(MultiDeviceModel, OverridesPickTheBufferType) {
  auto m = LlamaModel::load(*path_, {.placement = {.n_gpu_layers = 5,
                                                   .split_mode = SplitMode::None,
                                                   .overrides = {{"ffn_(up|gate)", "CPU"}}}});
  for (const auto& p : m->placements()) {
    if (p.name.find("ffn_up") != std::string::npos || p.name.find("ffn_gate") != std::string::npos)
      EXPECT_EQ(p.buffer_type, "CPU") << p.name;
    else if (p.name.find("blk.") == 0)
      EXPECT_NE(p.buffer_type, "CPU") << p.name;
  }
  EXPECT_THROW(LlamaModel::load(*path_, {.placement = {.overrides = {{"ffn", "NoSuchType"}}}}), Error);
  EXPECT_THROW(LlamaModel::load(*path_, {.placement = {.overrides = {{"(", "CPU"}}}}), Error);
}

}  // namespace
}  // namespace loom
