// Layer and weight placement (n_gpu_layers, split mode, tensor split, main
// device, overrides) on the devices a test gives the loader, and the same
// results on the CPU, on one other device and split across the CPU and two.
// Every multi-device case runs beside the CPU on two fake devices with memory
// of their own (tests/support, on every machine) and again on OpenCL0 and
// OpenCL1 on PoCL when present (without them the OpenCL instances skip with
// a message). The CLI's flags for these options are tested in tests/tools.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "loom/error.h"
#include "loom/model.h"
#include "loom/placement.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/fake_device.h"
#include "test_devices.h"

namespace loom {
namespace {

using test::DeviceKind;

// What a case parameterized over the kind of the two devices beside the CPU
// knows (see the instantiations at the end).
class WithDevices : public ::testing::WithParamInterface<DeviceKind> {
 protected:
  static DeviceKind kind() { return GetParam(); }
  static Device* dev(int i) { return test::device_of(kind(), i); }
  static std::string name(int i) { return std::string(dev(i)->name()); }
  // The CPU and the devices of the kind: what the test gives the loader.
  static std::vector<Device*> devices() { return test::cpu_and_devices_of(kind()); }
};

// Skips the calling test unless n devices of the test's kind exist.
#define REQUIRE_DEVICES(n) REQUIRE_DEVICES_OF(kind(), n)

// Runs `f`, which must throw a PlacementError about `field` whose message contains `words`.
template <class F>
void expect_placement_error(F f, PlacementField field, const std::string& words) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << words << "'";
  } catch (const PlacementError& e) {
    EXPECT_EQ(e.field(), field) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

class PlanLayersOn : public ::testing::Test, public WithDevices {};

TEST_P(PlanLayersOn, NglCountsLayersFromTheEndAndThenTheOutput) {
  REQUIRE_DEVICES(1);
  Device& cpu = Registry::get().cpu();
  LayerPlan none = plan_layers(4, devices(), {});
  for (Device* d : none.layer_device) EXPECT_EQ(d, &cpu);
  LayerPlan two = plan_layers(4, devices(), {.n_gpu_layers = 2, .tensor_split = {1.0f}});
  EXPECT_EQ(two.layer_device[1], &cpu);
  EXPECT_NE(two.layer_device[2], &cpu);
  EXPECT_NE(two.layer_device[3], &cpu);
  EXPECT_EQ(two.output_device, &cpu);
  LayerPlan all = plan_layers(4, devices(), {.n_gpu_layers = 5, .tensor_split = {1.0f}});
  EXPECT_NE(all.output_device, &cpu);
}

TEST_P(PlanLayersOn, TensorSplitAndMainDevice) {
  REQUIRE_DEVICES(2);
  const std::vector<Device*> devs = {dev(0), dev(1)};
  LayerPlan half = plan_layers(4, devices(), {.n_gpu_layers = 4, .tensor_split = {1.0f, 1.0f}});
  EXPECT_EQ(half.layer_device[0], devs[0]);
  EXPECT_EQ(half.layer_device[1], devs[0]);
  EXPECT_EQ(half.layer_device[2], devs[1]);
  EXPECT_EQ(half.layer_device[3], devs[1]);
  LayerPlan skewed = plan_layers(4, devices(), {.n_gpu_layers = 4, .tensor_split = {1.0f, 3.0f}});
  EXPECT_EQ(skewed.layer_device[0], devs[0]);
  EXPECT_EQ(skewed.layer_device[1], devs[1]);
  LayerPlan none = plan_layers(4, devices(), {.n_gpu_layers = 4, .split_mode = SplitMode::None, .main_gpu = 1});
  for (Device* d : none.layer_device) EXPECT_EQ(d, devs[1]);
  LayerPlan row =
      plan_layers(4, devices(), {.n_gpu_layers = 4, .split_mode = SplitMode::Row, .tensor_split = {3.0f, 1.0f}});
  ASSERT_EQ(row.row_devices.size(), 2u);
  EXPECT_FLOAT_EQ(row.row_fractions[0], 0.75f);
  const auto all = devices();
  expect_placement_error([&] { plan_layers(4, all, {.n_gpu_layers = 1, .main_gpu = 7}); }, PlacementField::MainGpu,
                         "main device index 7");
  expect_placement_error([&] { plan_layers(4, all, {.n_gpu_layers = 1, .tensor_split = {1, 1, 1, 1, 1, 1, 1, 1, 1}}); },
                         PlacementField::TensorSplit, "tensor split gives 9 proportions");
  expect_placement_error([&] { plan_layers(4, all, {.n_gpu_layers = 1, .tensor_split = {1, -1}}); },
                         PlacementField::TensorSplit, "tensor split proportions");
  expect_placement_error([&] { plan_layers(4, all, {.n_gpu_layers = -1}); }, PlacementField::NGpuLayers,
                         "offloaded layers must not be negative");
}

// Without a tensor split the layers follow the devices' free memory, not
// their total. Devices of its own, with chosen memory: the shared fake
// devices hold whatever other tests have allocated.
TEST(PlanLayers, WithoutATensorSplitFreeMemoryDecides) {
  constexpr size_t kMiB = size_t{1} << 20;
  Device& cpu = Registry::get().cpu();
  test::FakeDevice small({.name = "FakeSmall", .memory = 1 * kMiB});
  test::FakeDevice large({.name = "FakeLarge", .memory = 3 * kMiB});
  const std::vector<Device*> devices = {&cpu, &small, &large};
  // 1 : 3 free: one layer of four on the first, three on the second.
  LayerPlan by_memory = plan_layers(4, devices, {.n_gpu_layers = 4});
  EXPECT_EQ(by_memory.layer_device[0], &small);
  for (int l = 1; l < 4; ++l) EXPECT_EQ(by_memory.layer_device[l], &large) << "layer " << l;
  LayerPlan rows = plan_layers(4, devices, {.n_gpu_layers = 4, .split_mode = SplitMode::Row});
  ASSERT_EQ(rows.row_fractions.size(), 2u);
  EXPECT_FLOAT_EQ(rows.row_fractions[0], 0.25f);
  EXPECT_FLOAT_EQ(rows.row_fractions[1], 0.75f);
  // 2 MiB in use on the second: 1 : 1 free, two layers each.
  auto held = large.default_buffer_type().alloc(2 * kMiB);
  LayerPlan by_free = plan_layers(4, devices, {.n_gpu_layers = 4});
  EXPECT_EQ(by_free.layer_device[0], &small);
  EXPECT_EQ(by_free.layer_device[1], &small);
  EXPECT_EQ(by_free.layer_device[2], &large);
  EXPECT_EQ(by_free.layer_device[3], &large);
  // The first full: every layer on the second.
  auto filled = small.default_buffer_type().alloc(1 * kMiB);
  LayerPlan one_free = plan_layers(4, devices, {.n_gpu_layers = 4});
  for (Device* d : one_free.layer_device) EXPECT_EQ(d, &large);
}

TEST(PlanLayers, WorksOnTheDevicesGivenAndNeedsACpu) {
  Device& cpu = Registry::get().cpu();
  LayerPlan plan = plan_layers(4, {&cpu}, {});
  for (Device* d : plan.layer_device) EXPECT_EQ(d, &cpu);
  EXPECT_EQ(plan.output_device, &cpu);
  // Other devices may be registered, but only the CPU is given: nothing to offload to.
  expect_placement_error([&] { plan_layers(4, {&cpu}, {.n_gpu_layers = 2}); }, PlacementField::NGpuLayers,
                         "no device to offload to");
  EXPECT_THROW(plan_layers(4, {}, {}), Error);
}

TEST_P(PlanLayersOn, NeedsACpuAndFindsItAnywhereInTheList) {
  REQUIRE_DEVICES(1);
  Device& cpu = Registry::get().cpu();
  Device* d0 = dev(0);
  try {
    plan_layers(4, {d0}, {});
    ADD_FAILURE() << "planned without a CPU device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(name(0)), std::string::npos) << e.what();
  }
  // The host is the CPU wherever it is in the list; the rest are offload devices.
  LayerPlan offloaded = plan_layers(4, {d0, &cpu}, {.n_gpu_layers = 2});
  EXPECT_EQ(offloaded.layer_device[1], &cpu);
  EXPECT_EQ(offloaded.layer_device[3], d0);
}

// A tiny model written once per suite.
class PlacementModel : public ::testing::Test {
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
  static std::string* path_;
};
std::string* PlacementModel::path_ = nullptr;

// The CPU device under another name and without the capability of wrapping
// host memory: the loader must not map weights for it.
class CpuWithoutMapping final : public Device {
 public:
  explicit CpuWithoutMapping(Device& cpu) : cpu_(cpu) {}
  std::string_view name() const override { return "CPU-without-mapping"; }
  std::string description() const override { return cpu_.description(); }
  DeviceType type() const override { return DeviceType::CPU; }
  MemoryInfo memory_impl() const override { return cpu_.memory(); }
  DeviceCaps caps() const override { return {}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override {
    return cpu_.create_backend(options);
  }
  BufferType& default_buffer_type() override { return cpu_.default_buffer_type(); }
  bool supports_op(const Tensor& node) const override { return cpu_.supports_op(node); }
  bool supports_buffer_type(const BufferType& type) const override { return cpu_.supports_buffer_type(type); }

 private:
  Device& cpu_;
};

using GivenDevices = PlacementModel;
class GivenDevicesOn : public PlacementModel, public WithDevices {};

TEST_F(GivenDevices, CpuOnlyKeepsEveryWeightOnTheCpuAndMapsThroughTheCapability) {
  Device& cpu = Registry::get().cpu();
  auto m = Model::load(*path_, {&cpu});
  EXPECT_EQ(m->devices(), std::vector<Device*>{&cpu});
  for (int64_t l = 0; l < m->hparams().n_layer; ++l) EXPECT_EQ(&m->layer_device(l), &cpu);
  // Mapped file, F32 weights: every one in the CPU's host-pointer buffer type.
  ASSERT_NE(cpu.host_ptr_buffer_type(), nullptr);
  for (const auto& p : m->placements()) EXPECT_EQ(p.buffer_type, cpu.host_ptr_buffer_type()->name()) << p.name;
  expect_placement_error([&] { Model::load(*path_, {&cpu}, {.placement = {.n_gpu_layers = 1}}); },
                         PlacementField::NGpuLayers, "no device to offload to");
}

TEST_F(GivenDevices, ADeviceThatCannotWrapHostMemoryGetsItsDefaultType) {
  CpuWithoutMapping cpu(Registry::get().cpu());
  auto m = Model::load(*path_, {&cpu});
  for (const auto& p : m->placements()) EXPECT_EQ(p.buffer_type, cpu.default_buffer_type().name()) << p.name;
}

TEST_F(GivenDevices, TheCpuMustBeAmongThem) {
  try {
    Model::load(*path_, {});
    ADD_FAILURE() << "loaded without a CPU device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU device"), std::string::npos) << e.what();
  }
}

TEST_P(GivenDevicesOn, TheCpuMustBeAmongThem) {
  REQUIRE_DEVICES(1);
  EXPECT_THROW(Model::load(*path_, {dev(0)}), Error);
}

TEST_P(GivenDevicesOn, OnlyTheGivenOffloadDeviceIsUsed) {
  REQUIRE_DEVICES(2);
  Device& cpu = Registry::get().cpu();
  Device* d1 = dev(1);
  // Device 1 alone is offload device 0: -ngl 5 -sm none puts everything there.
  auto m = Model::load(*path_, {d1, &cpu}, {.placement = {.n_gpu_layers = 5, .split_mode = SplitMode::None}});
  EXPECT_EQ(m->devices(), (std::vector<Device*>{d1, &cpu}));
  for (int64_t l = 0; l < m->hparams().n_layer; ++l) EXPECT_EQ(&m->layer_device(l), d1);
  Session s(*m, {.n_ctx = 16});
  const auto kv = s.kv_cache_bytes_by_buffer_type();
  ASSERT_EQ(kv.size(), 1u);
  EXPECT_EQ(kv[0].first, d1->default_buffer_type().name());
  const std::vector<int32_t> prompt = {1, 40, 41};
  EXPECT_EQ(s.decode(prompt).size(), static_cast<size_t>(m->hparams().n_vocab));
}

// Regression (issue 18): a tied output whose layer lands on another buffer
// type is appended to the weight list; the loader used to keep a reference to
// the embedding's entry across that push_back and read it after the vector
// reallocated. 14 layers make 2 + 14 * 9 = 128 weights, a full vector, so the
// push_back reallocates. The copy must carry the embedding's size, and the
// model must give the CPU's results.
TEST(TiedOutput, CopiedToAnotherBufferTypeWhenTheWeightListReallocates) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("loom_tied14_" + std::to_string(::getpid()) + ".gguf")).string();
  ModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 32;
  s.n_layer = 14;
  s.n_head = 2;
  s.n_head_kv = 2;
  s.n_ff = 64;
  s.n_ctx = 32;
  s.tied_output = true;
  write_random_model(s, DType::F32, 7, path);
  Device& cpu = Registry::get().cpu();
  Device& fake = test::fake_device(0);
  auto m = Model::load(path, {&fake, &cpu}, {.placement = {.n_gpu_layers = 15, .split_mode = SplitMode::None}});
  size_t embd_bytes = 0, copy_bytes = 0;
  std::string copy_type;
  for (const auto& p : m->placements()) {
    if (p.name == "token_embd.weight") embd_bytes = p.bytes;
    if (p.name == "output.weight (tied to token_embd.weight)") copy_bytes = p.bytes, copy_type = p.buffer_type;
  }
  EXPECT_EQ(embd_bytes, size_t{300} * 32 * sizeof(float));
  EXPECT_EQ(copy_bytes, embd_bytes);
  EXPECT_EQ(copy_type, fake.default_buffer_type().name());
  auto on_cpu = Model::load(path, {&cpu});
  const std::vector<int32_t> prompt = {1, 5, 9};
  Session a(*m, {.n_ctx = 16}), b(*on_cpu, {.n_ctx = 16});
  const std::vector<float> la = a.decode(prompt), lb = b.decode(prompt);
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], 1e-3f) << i;
  std::filesystem::remove(path);
}

class MultiDeviceModel : public PlacementModel, public WithDevices {
 protected:
  void SetUp() override { REQUIRE_DEVICES(2); }

  // Logits after a prompt and 32 greedy tokens.
  static std::pair<std::vector<float>, std::vector<int32_t>> run(const PlacementOptions& p) {
    auto m = Model::load(*path_, devices(), {.placement = p});
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
};

TEST_P(MultiDeviceModel, SameResultsOnTheCpuOnOneDeviceAndSplit) {
  const auto cpu = run({});
  const std::vector<PlacementOptions> variants = {
      {.n_gpu_layers = 5, .split_mode = SplitMode::None},           // all on device 0
      {.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}},             // CPU + device 0 + device 1
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

TEST_P(MultiDeviceModel, WeightsKvCacheAndTiedOutputGoWhereAsked) {
  auto m = Model::load(*path_, devices(), {.placement = {.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}}});
  EXPECT_EQ(&m->layer_device(0), &Registry::get().cpu());
  EXPECT_EQ(&m->layer_device(2), dev(0));
  EXPECT_EQ(&m->layer_device(3), dev(1));
  auto type_of = [&m](const std::string& name) {
    for (const auto& p : m->placements())
      if (p.name == name) return p.buffer_type;
    return std::string("(absent)");
  };
  EXPECT_EQ(type_of("blk.0.attn_q.weight"), "CPU_Mapped");
  EXPECT_EQ(type_of("blk.2.attn_q.weight"), dev(0)->default_buffer_type().name());
  EXPECT_EQ(type_of("blk.3.ffn_down.weight"), dev(1)->default_buffer_type().name());
  // Output layer on the CPU, as the embedding: the tied matrix is loaded once.
  EXPECT_EQ(type_of("output.weight (tied to token_embd.weight)"), "(absent)");
  Session s(*m, {.n_ctx = 16});
  const auto kv = s.kv_cache_bytes_by_buffer_type();
  EXPECT_EQ(kv.size(), 3u);  // CPU, device 0, device 1

  // With the output layer offloaded, the tied matrix needs a copy there.
  auto all = Model::load(*path_, devices(), {.placement = {.n_gpu_layers = 5, .split_mode = SplitMode::None}});
  bool copied = false;
  for (const auto& p : all->placements()) copied |= p.name == "output.weight (tied to token_embd.weight)";
  EXPECT_TRUE(copied);
}

TEST_P(MultiDeviceModel, OverridesPickTheBufferType) {
  auto m = Model::load(*path_, devices(),
                            {.placement = {.n_gpu_layers = 5,
                                           .split_mode = SplitMode::None,
                                           .overrides = {{"ffn_(up|gate)", "CPU"}}}});
  for (const auto& p : m->placements()) {
    if (p.name.find("ffn_up") != std::string::npos || p.name.find("ffn_gate") != std::string::npos)
      EXPECT_EQ(p.buffer_type, "CPU") << p.name;
    else if (p.name.find("blk.") == 0)
      EXPECT_NE(p.buffer_type, "CPU") << p.name;
  }
  expect_placement_error(
      [] { Model::load(*path_, devices(), {.placement = {.overrides = {{"ffn", "NoSuchType"}}}}); },
      PlacementField::Overrides, "tensor override 'ffn=NoSuchType': no buffer type named 'NoSuchType'");
  expect_placement_error([] { Model::load(*path_, devices(), {.placement = {.overrides = {{"(", "CPU"}}}}); },
                         PlacementField::Overrides, "not a valid regular expression");
  // A pattern's cost is bounded: its length, and the steps of each search
  // ((.|.)* tries 2^n ways to cover a name of n characters).
  expect_placement_error(
      [] { Model::load(*path_, devices(), {.placement = {.overrides = {{std::string(257, 'a'), "CPU"}}}}); },
      PlacementField::Overrides, "257 bytes long; the limit for a tensor override pattern is 256 bytes");
  expect_placement_error(
      [] { Model::load(*path_, devices(), {.placement = {.overrides = {{"^(.|.)*\\d$", "CPU"}}}}); },
      PlacementField::Overrides, "steps to search");
}

INSTANTIATE_TEST_SUITE_P(Fake, PlanLayersOn, ::testing::Values(DeviceKind::Fake));
INSTANTIATE_TEST_SUITE_P(OpenCL, PlanLayersOn, ::testing::Values(DeviceKind::OpenCL));
INSTANTIATE_TEST_SUITE_P(Fake, GivenDevicesOn, ::testing::Values(DeviceKind::Fake));
INSTANTIATE_TEST_SUITE_P(OpenCL, GivenDevicesOn, ::testing::Values(DeviceKind::OpenCL));
INSTANTIATE_TEST_SUITE_P(Fake, MultiDeviceModel, ::testing::Values(DeviceKind::Fake));
INSTANTIATE_TEST_SUITE_P(OpenCL, MultiDeviceModel, ::testing::Values(DeviceKind::OpenCL));

}  // namespace
}  // namespace loom
