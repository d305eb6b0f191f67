// Memory prediction (predict_memory), out-of-memory paths and fit_model, on
// the CPU and two OpenCL devices (PoCL, POCL_DEVICES="pthread pthread") with
// memory caps (Device::set_memory_cap, as LOOM_DEVICE_MEMORY sets them).
//
//  - Predicted equals allocated: the bytes a dry run records per device are
//    what a real load and session creation then allocate (each device's
//    allocated_bytes), over placements, split modes, types and contexts.
//  - Out of memory during loading, KV cache creation or compute buffer
//    sizing is an OutOfMemory naming the device, the buffer type, the bytes
//    asked for and free, with what the memory was for; afterwards every
//    device holds what it held before (nothing half-loaded).
//  - fit_model over a grid of caps: what it chooses loads without running out
//    of memory, and one more layer (brute force, real loads) does not.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "loom/fit.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "model_gen/model_gen.h"
#include "test_devices.h"

namespace loom {
namespace {

// The models this process wrote, removed when it exits.
struct TempModels {
  std::vector<std::filesystem::path> paths;
  ~TempModels() {
    std::error_code ignored;
    for (const auto& p : paths) std::filesystem::remove(p, ignored);
  }
};

std::string model_file(const std::string& tag, DType type, int64_t n_expert = 0) {
  static TempModels written;
  const auto path = std::filesystem::temp_directory_path() /
                    ("loom_fit_test_" + tag + "_" + std::to_string(::getpid()) + ".gguf");
  if (!std::filesystem::exists(path)) {
    written.paths.push_back(path);
    ModelSpec s;
    s.n_vocab = 512;
    s.n_embd = 128;
    s.n_layer = 6;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 384;
    s.n_ctx = 1024;
    s.n_expert = n_expert;
    s.n_expert_used = n_expert ? 2 : 0;
    write_random_model(s, type, 3, path.string());
  }
  return path.string();
}

class Fit : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_OPENCL(2);
    devices_ = {&Registry::get().cpu(), test::opencl(0), test::opencl(1)};
  }
  void TearDown() override {
    for (Device* d : devices_) d->set_memory_cap(0);
  }
  std::vector<size_t> allocated() const {
    std::vector<size_t> out;
    for (Device* d : devices_) out.push_back(d->allocated_bytes());
    return out;
  }
  static SessionOptions session(int64_t n_ctx) {
    SessionOptions o;
    o.n_ctx = n_ctx;
    o.n_ubatch = 64;
    o.n_threads = 1;
    return o;
  }
  std::vector<Device*> devices_;
};

TEST_F(Fit, PredictedEqualsAllocated) {
  struct Case {
    const char* name;
    int ngl;
    SplitMode mode;
    std::vector<float> split;
  };
  const Case cases[] = {{"cpu", 0, SplitMode::Layer, {}},
                        {"layer-split", 7, SplitMode::Layer, {3, 1}},
                        {"partial", 4, SplitMode::Layer, {1, 1}},
                        {"one-device", 7, SplitMode::None, {}},
                        {"row", 7, SplitMode::Row, {1, 1}}};
  for (DType type : {DType::Q8_0, DType::F16})
    for (int64_t n_ctx : {64, 512})
      for (const Case& c : cases) {
        SCOPED_TRACE(fmt::format("{} {} context {}", c.name, type_name(type), n_ctx));
        const std::string path = model_file(std::string(type_name(type)), type);
        LoadOptions lo;
        lo.placement.n_gpu_layers = c.ngl;
        lo.placement.split_mode = c.mode;
        lo.placement.tensor_split = c.split;
        const std::vector<size_t> before = allocated();
        const MemoryPrediction p = predict_memory(path, devices_, lo, session(n_ctx));
        EXPECT_EQ(allocated(), before) << "the dry run allocated memory";
        EXPECT_EQ(p.n_ctx, n_ctx);
        auto model = Model::load(path, devices_, lo);
        Session s(*model, session(n_ctx));
        const std::vector<size_t> after = allocated();
        size_t offloaded = 0;
        for (size_t i = 0; i < devices_.size(); ++i) {
          const DeviceBytes& b = p.of(*devices_[i]);
          const size_t actual = after[i] - before[i];
          const size_t tolerance = std::max<size_t>(size_t{1} << 20, actual / 100);
          EXPECT_LE(b.total(), actual + tolerance) << devices_[i]->name();
          EXPECT_GE(b.total() + tolerance, actual) << devices_[i]->name();
          EXPECT_EQ(b.total(), actual) << devices_[i]->name() << ": exact, since the dry run runs the same code";
          if (i > 0) offloaded += b.weights;
        }
        EXPECT_EQ(offloaded > 0, c.ngl > 0);
        EXPECT_GT(p.of(*devices_[0]).kv_cache + p.of(*devices_[1]).kv_cache, 0u);
        EXPECT_GT(p.of(*devices_[0]).compute, 0u);
      }
}

// Caps device `d` at what it already holds plus `bytes`.
void cap_at(Device& d, size_t bytes) { d.set_memory_cap(d.allocated_bytes() + bytes); }

TEST_F(Fit, OutOfMemoryNamesTheDeviceAndSizesAndLeavesNothingAllocated) {
  const std::string path = model_file("Q8_0", DType::Q8_0);
  LoadOptions lo;
  lo.placement.n_gpu_layers = 7;
  lo.placement.split_mode = SplitMode::None;  // everything on OpenCL0
  const SessionOptions so = session(512);
  const MemoryPrediction p = predict_memory(path, devices_, lo, so);
  const DeviceBytes& need = p.of(*devices_[1]);
  ASSERT_GT(need.weights, 0u);
  ASSERT_GT(need.kv_cache, 0u);
  ASSERT_GT(need.compute, 0u);
  struct Stage {
    const char* name;
    size_t cap;
    MemoryUse use;
  };
  const Stage stages[] = {{"weights", need.weights / 2, MemoryUse::Weights},
                          {"KV cache", need.weights + need.kv_cache / 2, MemoryUse::KvCache},
                          {"compute", need.weights + need.kv_cache + need.compute / 2, MemoryUse::Compute}};
  for (const Stage& st : stages) {
    SCOPED_TRACE(st.name);
    const std::vector<size_t> before = allocated();
    cap_at(*devices_[1], st.cap);
    try {
      auto model = Model::load(path, devices_, lo);
      const std::vector<size_t> loaded = allocated();
      try {
        Session s(*model, so);
        ADD_FAILURE() << "the session was created past the cap";
      } catch (const OutOfMemory&) {
        EXPECT_EQ(allocated(), loaded) << "a failed session left memory allocated";
        throw;
      }
    } catch (const OutOfMemory& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.use(), st.use) << msg;
      EXPECT_EQ(e.device(), "OpenCL0") << msg;
      EXPECT_EQ(e.buffer_type(), "OpenCL0") << msg;
      EXPECT_GT(e.requested(), e.free()) << msg;
      EXPECT_NE(msg.find(fmt::format("{} bytes", e.requested())), std::string::npos) << msg;
      EXPECT_NE(msg.find(fmt::format("{} bytes, {:.1f} MiB, free", e.free(), e.free() / 1048576.0)),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("on device OpenCL0"), std::string::npos) << msg;
    }
    EXPECT_EQ(allocated(), before) << "memory left allocated after the failure";
    devices_[1]->set_memory_cap(0);
  }
}

// Every -ngl above fit's choice runs out of memory for real.
TEST_F(Fit, ChoosesTheMostLayersThatFitOverAGridOfCaps) {
  const std::string path = model_file("Q8_0", DType::Q8_0);
  LoadOptions lo;
  const SessionOptions so = session(256);
  // What everything offloaded to one device needs, to scale the caps by.
  LoadOptions all = lo;
  all.placement.n_gpu_layers = 7;
  all.placement.split_mode = SplitMode::None;
  const size_t full = predict_memory(path, devices_, all, so).of(*devices_[1]).total();
  FitOptions fo;
  fo.offload = {devices_[1], devices_[2]};
  const double fractions[][2] = {{0.05, 0.05}, {0.3, 0.1}, {0.5, 0.5}, {0.7, 0.2}, {1.2, 0.0}, {0.6, 0.6}};
  int n_checked = 0;
  for (const auto& f : fractions) {
    SCOPED_TRACE(fmt::format("caps {:.2f} and {:.2f} of {} bytes", f[0], f[1], full));
    cap_at(*devices_[1], static_cast<size_t>(f[0] * full) + 1);
    cap_at(*devices_[2], static_cast<size_t>(f[1] * full) + 1);
    const FitResult r = fit_model(path, devices_, lo, so, fo);
    ASSERT_TRUE(r.fits) << r.reason;
    std::printf("caps %.2f/%.2f: %s\n", f[0], f[1], r.reason.c_str());
    // Fit's choice loads, and allocates what it predicted.
    {
      LoadOptions chosen = lo;
      chosen.placement = r.placement;
      const std::vector<size_t> before = allocated();
      auto model = Model::load(path, devices_, chosen);
      Session s(*model, so);
      for (size_t i = 0; i < devices_.size(); ++i)
        EXPECT_EQ(devices_[i]->allocated_bytes() - before[i], r.prediction.of(*devices_[i]).total());
      const std::vector<int32_t> tokens = {1, 2, 3};
      EXPECT_EQ(s.decode(tokens).size(), 512u);
    }
    // Brute force: every larger -ngl runs out of memory, with fit's split
    // and with every way of dealing its layers to the two devices.
    for (int ngl = r.placement.n_gpu_layers + 1; ngl <= 7; ++ngl) {
      std::vector<std::vector<float>> splits = {r.placement.tensor_split};
      for (int a = 0; a <= ngl; ++a) splits.push_back({static_cast<float>(a), static_cast<float>(ngl - a)});
      for (const auto& split : splits) {
        LoadOptions more = lo;
        more.placement = r.placement;
        more.placement.n_gpu_layers = ngl;
        more.placement.tensor_split = split;
        bool oom = false;
        try {
          auto model = Model::load(path, devices_, more);
          Session s(*model, so);
        } catch (const OutOfMemory&) {
          oom = true;
        }
        EXPECT_TRUE(oom) << "-ngl " << ngl << " -ts " << fmt::format("{}", fmt::join(split, ",")) << " fits, fit chose "
                         << r.placement.n_gpu_layers << " -ts "
                         << fmt::format("{}", fmt::join(r.placement.tensor_split, ","));
        ++n_checked;
      }
    }
  }
  EXPECT_GT(n_checked, 0);
}

TEST_F(Fit, ChoosesTheLargestContextThatFits) {
  const std::string path = model_file("Q8_0", DType::Q8_0);
  LoadOptions lo;
  LoadOptions all = lo;
  all.placement.n_gpu_layers = 7;
  all.placement.split_mode = SplitMode::None;
  const size_t at_256 = predict_memory(path, devices_, all, session(256)).of(*devices_[1]).total();
  const size_t at_512 = predict_memory(path, devices_, all, session(512)).of(*devices_[1]).total();
  ASSERT_LT(at_256, at_512);
  cap_at(*devices_[1], (at_256 + at_512) / 2);
  FitOptions fo;
  fo.offload = {devices_[1]};
  fo.choose_ctx = true;
  fo.min_ctx = 128;
  const FitResult r = fit_model(path, devices_, lo, session(0), fo);
  ASSERT_TRUE(r.fits) << r.reason;
  EXPECT_EQ(r.placement.n_gpu_layers, 7) << r.reason;
  EXPECT_EQ(r.n_ctx, 256) << r.reason;  // 1024 (the training context) and 512 do not fit
  // With a floor above what fits, fit keeps the floor and offloads fewer layers.
  fo.min_ctx = 512;
  const FitResult floor = fit_model(path, devices_, lo, session(0), fo);
  EXPECT_EQ(floor.n_ctx, 512) << floor.reason;
  EXPECT_LT(floor.placement.n_gpu_layers, 7) << floor.reason;
}

TEST_F(Fit, MarginIsLeftFree) {
  const std::string path = model_file("Q8_0", DType::Q8_0);
  LoadOptions lo;
  const SessionOptions so = session(256);
  cap_at(*devices_[1], size_t{64} << 20);
  FitOptions fo;
  fo.offload = {devices_[1]};
  EXPECT_EQ(fit_model(path, devices_, lo, so, fo).placement.n_gpu_layers, 7);
  fo.margin = {{devices_[1], (size_t{64} << 20) - 1}};
  const FitResult r = fit_model(path, devices_, lo, so, fo);
  EXPECT_EQ(r.placement.n_gpu_layers, 0) << r.reason;
}

TEST_F(Fit, ExpertsGoToTheHostFirst) {
  const std::string path = model_file("moe", DType::Q8_0, 4);
  LoadOptions lo;
  const SessionOptions so = session(256);
  LoadOptions all = lo;
  all.placement.n_gpu_layers = 7;
  all.placement.split_mode = SplitMode::None;
  const size_t full = predict_memory(path, devices_, all, so).of(*devices_[1]).total();
  cap_at(*devices_[1], full * 3 / 4);
  FitOptions fo;
  fo.offload = {devices_[1]};
  const FitResult r = fit_model(path, devices_, lo, so, fo);
  ASSERT_TRUE(r.fits) << r.reason;
  EXPECT_EQ(r.placement.n_gpu_layers, 7) << r.reason;
  ASSERT_EQ(r.placement.overrides.size(), 1u) << r.reason;
  EXPECT_NE(r.placement.overrides[0].pattern.find("exps"), std::string::npos);
  EXPECT_GT(r.prediction.of(*devices_[0]).total(), 0u);
  LoadOptions chosen = lo;
  chosen.placement = r.placement;
  auto model = Model::load(path, devices_, chosen);
  Session s(*model, so);  // fits
}

}  // namespace
}  // namespace loom
