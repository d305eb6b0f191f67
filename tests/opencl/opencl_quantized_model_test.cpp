// Models whose matrices are of each quantized type, split across the CPU,
// OpenCL0 and OpenCL1: every offloaded matrix lands on its OpenCL device (no
// fallback to the CPU), and the logits are close to the CPU-only run's. The
// OpenCL kernels multiply f32 activations; the CPU's quantize them to 8 bits
// for q8_0 and q4_0 (about 1% of the logit range on random weights), so the
// bound, 3e-2 of the range, leaves room for that on every type. A wrong bit
// in a block layout costs far more. Without two OpenCL devices every test
// skips with a message (PoCL: POCL_DEVICES="pthread pthread").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "test_devices.h"

namespace loom {
namespace {

using test::opencl;

// Rows of 256 elements: whole blocks of every type, so no matrix takes a
// fallback type.
ModelSpec spec() {
  ModelSpec s;
  s.n_vocab = 260;
  s.n_embd = 256;
  s.n_layer = 3;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 256;
  s.n_ctx = 64;
  return s;
}

// Logits of every prompt token (one batch: mat-mat products), then of one
// more token (mat-vec).
std::vector<float> run(Model& m) {
  Session s(m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
  const std::vector<int32_t> prompt = {1, 17, 120, 3, 99, 42};
  std::vector<float> logits = s.decode(prompt, true);
  const int32_t next = 7;
  const std::vector<float> last = s.decode(std::span<const int32_t>(&next, 1));
  logits.insert(logits.end(), last.begin(), last.end());
  return logits;
}

// Largest difference over the logit range.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
  double err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - want[i])));
  return err / (*hi - *lo);
}

class QuantizedModelOnOpenCL : public ::testing::TestWithParam<DType> {};

TEST_P(QuantizedModelOnOpenCL, SplitAcrossCpuAndTwoDevicesMatchesTheCpu) {
  REQUIRE_OPENCL(2);
  const DType type = GetParam();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("loom_opencl_quant_" + std::to_string(::getpid()) + "_" + std::string(type_name(type)) + ".gguf"))
                               .string();
  write_random_model(spec(), type, 5, path);
  Device& cpu = Registry::get().cpu();
  const std::vector<Device*> devices = {&cpu, opencl(0), opencl(1)};
  const std::vector<float> want = run(*Model::load(path, {&cpu}));

  struct Variant {
    const char* what;
    PlacementOptions placement;
  };
  const Variant variants[] = {
      // Layer 0 on the CPU, layer 1 on OpenCL0, layer 2 on OpenCL1.
      {"-ngl 2 -ts 1,1", {.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}}},
      // Every layer and the output matrix on OpenCL0.
      {"-ngl 4 -sm none", {.n_gpu_layers = 4, .split_mode = SplitMode::None}},
  };
  for (const Variant& v : variants) {
    auto m = Model::load(path, devices, {.placement = v.placement});
    size_t on_opencl = 0;
    for (const WeightPlacement& p : m->placements()) {
      EXPECT_EQ(p.fallback, "") << v.what << ": " << p.name;
      on_opencl += p.buffer_type.starts_with("OpenCL");
    }
    // 7 matrices per offloaded layer (norms stay f32 and go along), and the output.
    EXPECT_GE(on_opencl, v.placement.n_gpu_layers == 2 ? 2u * 7 : 3u * 7 + 1) << v.what;
    for (const WeightPlacement& p : m->placements())
      if (p.name.starts_with("blk.1.") || p.name.starts_with("blk.2."))
        EXPECT_TRUE(p.buffer_type.starts_with("OpenCL")) << v.what << ": " << p.name << " is on " << p.buffer_type;
    EXPECT_EQ(m->layers()[1].wq->type, type);
    const std::vector<float> got = run(*m);
    ASSERT_EQ(got.size(), want.size());
    const double err = relative_error(got, want);
    EXPECT_LT(err, 3e-2) << type_name(type) << " " << v.what;
    std::printf("[ %s %s ] max |logit difference| / range %.2g\n", type_name(type).data(), v.what, err);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedModelOnOpenCL, ::testing::ValuesIn(kQuantizedTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace loom
