// The backend scheduler on the CPU and two other devices: every multi-device
// case runs on two fake devices with memory of their own (tests/support,
// on every machine) and again on two OpenCL devices on PoCL when present
// (the test environment sets POCL_DEVICES="pthread pthread"; without them
// the OpenCL instances skip with a message). Results of split graphs are
// compared with the CPU alone; split counts with the minimum for hand-built
// cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "alloc/test_graphs.h"
#include "loom/error.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/scheduler.h"
#include "loom/tensor_alloc.h"
#include "support/fake_device.h"
#include "test_devices.h"

namespace loom {
namespace {

using test::opencl;
using Kind = test::DeviceKind;

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

uint32_t seed_of(const std::string& name) { return static_cast<uint32_t>(std::hash<std::string>{}(name)); }

// Normalized mean squared error of `got` against `want`.
double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * double(got[i] - want[i]);
    ref += want[i] * double(want[i]);
  }
  return ref > 0 ? err / ref : err;
}

// Owns backends for the CPU and the two devices of one kind, in priority order.
struct Devices {
  std::vector<std::unique_ptr<Backend>> owned;
  Backend* cpu = nullptr;
  Backend* dev0 = nullptr;
  Backend* dev1 = nullptr;
  explicit Devices(Kind kind) {
    owned.push_back(Registry::get().cpu().create_backend());
    cpu = owned.back().get();
    for (int i = 0; i < 2; ++i)
      if (Device* d = test::device_of(kind, i)) {
        owned.push_back(d->create_backend());
        (i == 0 ? dev0 : dev1) = owned.back().get();
      }
  }
};

// The multi-device cases, once per kind of device (see the instantiations at the end).
class SchedulerOn : public ::testing::TestWithParam<Kind> {
 protected:
  Kind kind() const { return GetParam(); }
  Device* dev(int i) const { return test::device_of(kind(), i); }
  BufferType* mem(int i) const { return &dev(i)->default_buffer_type(); }
  std::string name(int i) const { return std::string(dev(i)->name()); }
};

#define REQUIRE_DEVICES(n) REQUIRE_DEVICES_OF(kind(), n)

// A chain of mat-muls against weights placed in `homes` (one per layer,
// cycling), with an unconstrained silu and a residual add after each.
struct Chain {
  Context ctx;
  Tensor* x = nullptr;
  std::vector<Tensor*> weights;
  std::vector<std::shared_ptr<Buffer>> buffers;
  Tensor* out = nullptr;
  Graph graph;

  Chain(int n_layers, int64_t width, int64_t batch, const std::vector<BufferType*>& homes) {
    x = ctx.new_tensor(DType::F32, {width, batch});
    x->name = "x";
    x->flags |= kFlagInput;
    Tensor* cur = x;
    for (int l = 0; l < n_layers; ++l) {
      Tensor* w = ctx.new_tensor(DType::F32, {width, width});
      w->name = fmt::format("w{}", l);
      w->flags |= kFlagWeight;
      weights.push_back(w);
      Tensor* y = mul_mat(ctx, w, cur);
      y->name = fmt::format("mm{}", l);
      Tensor* s = silu(ctx, y);
      s->name = fmt::format("silu{}", l);
      cur = add(ctx, s, cur);
      cur->name = fmt::format("res{}", l);
    }
    out = cur;
    graph = Graph::build(out);
    for (size_t l = 0; l < weights.size(); ++l) {
      Tensor* w = weights[l];
      auto a = allocate_tensors(std::span<Tensor* const>(&w, 1), *homes[l % homes.size()], BufferUsage::Weights);
      buffers.insert(buffers.end(), a.buffers.begin(), a.buffers.end());
      tensor_from_floats(*w, random_floats(w->nelements(), seed_of(w->name), 0.1f));
    }
  }
  void set_input() { tensor_from_floats(*x, random_floats(x->nelements(), 7)); }
};

std::vector<float> run_chain_on_cpu(int n_layers, int64_t width, int64_t batch) {
  Chain c(n_layers, width, batch, {&Registry::get().cpu().default_buffer_type()});
  auto cpu = Registry::get().cpu().create_backend();
  Scheduler sched({cpu.get()});
  sched.allocate(c.graph);
  c.set_input();
  sched.compute(c.graph);
  EXPECT_EQ(sched.report().n_splits(), 1u);
  return tensor_to_floats(*c.out);
}

TEST(Scheduler, CpuAloneIsOneSplitWithoutCopies) {
  Chain c(3, 32, 4, {&Registry::get().cpu().default_buffer_type()});
  Scheduler sched({});  // the CPU fallback is added
  ASSERT_EQ(sched.backends().size(), 1u);
  sched.allocate(c.graph);
  c.set_input();
  sched.compute(c.graph);
  const SchedReport& r = sched.report();
  EXPECT_EQ(r.n_splits(), 1u);
  EXPECT_EQ(r.copy_bytes, 0u);
  EXPECT_EQ(r.splits[0].n_nodes, 9u);
  EXPECT_EQ(sched.placement_of(c.weights[0]), Placement::Weight);
}

TEST_P(SchedulerOn, WeightsAlternatingBetweenTwoDevicesGiveOneSplitPerLayer) {
  REQUIRE_DEVICES(2);
  Devices d(kind());
  const int n_layers = 40;  // 40 splits: no fixed limit on splits
  Chain c(n_layers, 32, 4, {mem(0), mem(1)});
  Scheduler sched({d.dev0, d.dev1, d.cpu});
  sched.allocate(c.graph);
  c.set_input();
  auto* fake0 = dynamic_cast<test::FakeDevice*>(&d.dev0->device());
  auto* fake1 = dynamic_cast<test::FakeDevice*>(&d.dev1->device());
  const int hints0 = fake0 ? fake0->idle_hints() : 0, hints1 = fake1 ? fake1->idle_hints() : 0;
  sched.compute(c.graph);
  if (fake0 && fake1) {
    // Every split but the last is followed by the other device's: its
    // backend is told it may idle (Backend::idle).
    EXPECT_EQ(fake0->idle_hints() - hints0, n_layers / 2);
    EXPECT_EQ(fake1->idle_hints() - hints1, n_layers / 2 - 1);
  }
  const SchedReport& r = sched.report();
  ASSERT_EQ(r.n_splits(), static_cast<size_t>(n_layers));
  size_t n_nodes = 0;
  for (int l = 0; l < n_layers; ++l) {
    EXPECT_EQ(r.splits[l].backend, name(l % 2)) << "split " << l;
    EXPECT_EQ(sched.backend_of(c.weights[l]), l % 2 ? d.dev1 : d.dev0);
    n_nodes += r.splits[l].n_nodes;
  }
  EXPECT_EQ(n_nodes, 3u * n_layers);  // mul_mat, silu, add per layer
  // The input goes to device 0 once; each later split reads one 32x4 f32
  // tensor from the other device (where the silu and add run does not
  // change that).
  EXPECT_EQ(r.splits[0].inputs.size(), 1u);
  EXPECT_EQ(r.splits[0].inputs[0].tensor, "x");
  EXPECT_EQ(r.splits[1].inputs.size(), 1u) << r.to_string();
  EXPECT_EQ(r.copy_bytes, size_t{n_layers} * 32 * 4 * 4);
  EXPECT_EQ(sched.placement_of(c.graph.nodes()[0]), Placement::Weight);
  EXPECT_EQ(sched.placement_of(c.out), Placement::Neighbour);
  EXPECT_LT(nmse(tensor_to_floats(*c.out), run_chain_on_cpu(n_layers, 32, 4)), 1e-10);
}

TEST_P(SchedulerOn, ThreeBackendsMatchCpuAndCopiesAreReusedPerBackend) {
  REQUIRE_DEVICES(2);
  Devices d(kind());
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  // Layers: device 0, device 1, CPU, device 0, device 1, CPU.
  Chain c(6, 48, 5, {mem(0), mem(1), cpu});
  Scheduler sched({d.dev0, d.dev1, d.cpu});
  sched.allocate(c.graph);
  c.set_input();
  sched.compute(c.graph);
  EXPECT_EQ(sched.report().n_splits(), 6u);
  EXPECT_EQ(sched.backend_of(c.graph.nodes().back()), d.cpu);
  EXPECT_LT(nmse(tensor_to_floats(*c.out), run_chain_on_cpu(6, 48, 5)), 1e-10);
  // Compute buffers exist for every backend's memory.
  for (const auto& b : sched.report().buffers) EXPECT_GT(b.bytes, 0u) << b.buffer_type;
}

TEST_P(SchedulerOn, AnOperandReadTwiceOnOneBackendIsCopiedOnce) {
  REQUIRE_DEVICES(1);
  Devices d(kind());
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {16, 4});
  x->name = "x";
  x->flags |= kFlagInput;
  Tensor* w = ctx.new_tensor(DType::F32, {16, 16});
  w->name = "w";
  w->flags |= kFlagWeight;
  auto wa = allocate_tensors(std::span<Tensor* const>(&w, 1), *mem(0), BufferUsage::Weights);
  tensor_from_floats(*w, random_floats(256, 3));
  Tensor* y = mul_mat(ctx, w, x);
  Tensor* z = add(ctx, y, x);  // x read again by the same split
  Tensor* o = mul(ctx, z, x);
  Graph g = Graph::build(o);
  Scheduler sched({d.dev0, d.cpu});
  sched.allocate(g);
  tensor_from_floats(*x, random_floats(64, 9));
  sched.compute(g);
  const SchedReport& r = sched.report();
  ASSERT_EQ(r.n_splits(), 1u);
  EXPECT_EQ(r.splits[0].backend, name(0));
  EXPECT_EQ(r.n_copies, 1u);
  EXPECT_EQ(r.copy_bytes, 64u * 4);
  // The graph's own tensors are untouched: operands point at x again.
  EXPECT_EQ(z->src[1], x);
  EXPECT_EQ(y->src[1], x);
}

TEST_P(SchedulerOn, UserAssignmentWins) {
  REQUIRE_DEVICES(2);
  Devices d(kind());
  Chain c(2, 16, 2, {&Registry::get().cpu().default_buffer_type()});
  Scheduler sched({d.dev0, d.dev1, d.cpu});
  Tensor* silu0 = c.graph.nodes()[1];
  ASSERT_EQ(silu0->op, Op::Silu);
  sched.set_backend(silu0, d.dev1);
  sched.allocate(c.graph);
  c.set_input();
  sched.compute(c.graph);
  EXPECT_EQ(sched.backend_of(silu0), d.dev1);
  EXPECT_EQ(sched.placement_of(silu0), Placement::User);
  EXPECT_EQ(sched.report().n_splits(), 3u);  // CPU, device 1 (silu), CPU
  EXPECT_LT(nmse(tensor_to_floats(*c.out), run_chain_on_cpu(2, 16, 2)), 1e-10);
}

TEST_P(SchedulerOn, OffloadHappensAboveTheThresholdAndNotBelow) {
  REQUIRE_DEVICES(1);
  Devices d(kind());
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  for (int64_t batch : {4, 8, 16}) {
    Chain c(1, 32, batch, {cpu});
    SchedulerOptions o;
    o.offload_min_batch = 8;
    Scheduler sched({d.dev0, d.cpu}, o);
    sched.allocate(c.graph);
    c.set_input();
    sched.compute(c.graph);
    Tensor* mm = c.graph.nodes()[0];
    const bool offloaded = batch >= 8;
    EXPECT_EQ(sched.backend_of(mm), offloaded ? d.dev0 : d.cpu) << "batch " << batch;
    EXPECT_EQ(sched.placement_of(mm), offloaded ? Placement::Offload : Placement::Weight) << "batch " << batch;
    EXPECT_EQ(sched.report().n_offloaded, offloaded ? 1u : 0u);
    if (offloaded) {  // the weight is copied over
      bool weight_copied = false;
      for (const auto& in : sched.report().splits[0].inputs) weight_copied = weight_copied || in.tensor == "w0";
      EXPECT_TRUE(weight_copied);
    }
    EXPECT_LT(nmse(tensor_to_floats(*c.out), run_chain_on_cpu(1, 32, batch)), 1e-10);
  }
}

TEST_P(SchedulerOn, OffloadThresholdFromEnvironmentAndPerDevice) {
  REQUIRE_DEVICES(1);
  Devices d(kind());
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  Chain c(1, 16, 6, {cpu});
  Tensor* mm = c.graph.nodes()[0];
  setenv("LOOM_OFFLOAD_MIN_BATCH", "4", 1);
  {
    Scheduler sched({d.dev0, d.cpu});
    sched.allocate(c.graph);
    EXPECT_EQ(sched.placement_of(mm), Placement::Offload);
  }
  unsetenv("LOOM_OFFLOAD_MIN_BATCH");
  {
    Scheduler sched({d.dev0, d.cpu});  // PoCL and fake devices do not ask for offload themselves
    sched.allocate(c.graph);
    EXPECT_EQ(sched.placement_of(mm), Placement::Weight);
  }
  {
    SchedulerOptions o;
    o.offload_min_batch = 4;
    o.offload_min_batch_per_device[name(0)] = 0;  // never, for this device
    Scheduler sched({d.dev0, d.cpu}, o);
    sched.allocate(c.graph);
    EXPECT_EQ(sched.placement_of(mm), Placement::Weight);
  }
}

TEST(Scheduler, NodeNoBackendCanRunIsAClearError) {
  testing::FakeBufferType nowhere("Nowhere");
  Context ctx;
  Tensor* dst = ctx.new_tensor(DType::F32, {8, 4});
  dst->name = "cache";
  auto a = allocate_tensors(std::span<Tensor* const>(&dst, 1), nowhere);
  Tensor* src = ctx.new_tensor(DType::F32, {8, 2});
  src->flags |= kFlagInput;
  Tensor* rows = ctx.new_tensor(DType::I32, {2});
  rows->flags |= kFlagInput;
  Tensor* stored = set_rows(ctx, dst, src, rows);
  stored->name = "store";
  Graph g = Graph::build(stored);
  Scheduler sched({});
  try {
    sched.allocate(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("set_rows"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'store'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Nowhere"), std::string::npos) << e.what();
  }
}

// A small llama-shaped graph (tests/alloc/test_graphs.h) with random weights.
struct TinyLlama {
  Context ctx;
  testing::LlamaGraph g;
  std::vector<std::shared_ptr<Buffer>> buffers;
  explicit TinyLlama(const std::function<BufferType*(int layer)>& home, int n_tokens = 4) {
    testing::LlamaShape s;
    s.n_layer = 4;
    s.n_embd = 64;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.head_dim = 16;
    s.n_ff = 96;
    s.n_tokens = n_tokens;
    s.n_ctx = 8;
    s.n_vocab = 50;
    g = testing::build_llama_graph(ctx, s);
    auto layer_of = [](const std::string& name) {
      int l = -1;
      if (name.rfind("blk.", 0) == 0) l = std::atoi(name.c_str() + 4);
      if (name.rfind("cache_", 0) == 0) l = std::atoi(name.c_str() + 8);
      return l;
    };
    auto place = [&](Tensor* t) {
      auto a = allocate_tensors(std::span<Tensor* const>(&t, 1), *home(layer_of(t->name)), BufferUsage::Weights);
      buffers.insert(buffers.end(), a.buffers.begin(), a.buffers.end());
    };
    for (Tensor* w : g.weights) {
      place(w);
      tensor_from_floats(*w, random_floats(w->nelements(), seed_of(w->name), 0.2f));
    }
    for (Tensor* c : g.cache) {
      place(c);
      tensor_memset(*c, 0, 0, c->nbytes());
    }
  }
  void set_inputs(int first_token = 0) {
    const int64_t T = g.inputs[0]->ne[0], C = g.inputs[2]->ne[0];
    std::vector<int32_t> tokens(T), pos(T), out_ids{static_cast<int32_t>(T - 1)};
    std::vector<float> mask(C * T);
    for (int64_t i = 0; i < T; ++i) {
      tokens[i] = static_cast<int32_t>((first_token + 7 * i) % 50);
      pos[i] = static_cast<int32_t>(i);
      for (int64_t j = 0; j < C; ++j) mask[i * C + j] = j <= i ? 0.0f : -INFINITY;
    }
    tensor_set(*g.inputs[0], tokens.data(), 0, T * 4);
    tensor_set(*g.inputs[1], pos.data(), 0, T * 4);
    tensor_set(*g.inputs[2], mask.data(), 0, mask.size() * 4);
    tensor_set(*g.inputs[3], pos.data(), 0, T * 4);  // kv slots = positions
    tensor_set(*g.inputs[4], out_ids.data(), 0, 4);
  }
};

std::vector<float> tiny_llama_on_cpu(int first_token = 0) {
  TinyLlama m([](int) { return &Registry::get().cpu().default_buffer_type(); });
  Scheduler sched({});
  sched.allocate(m.g.graph);
  m.set_inputs(first_token);
  sched.compute(m.g.graph);
  return tensor_to_floats(*m.g.logits);
}

TEST_P(SchedulerOn, LlamaSplitAcrossCpuAndTwoDevicesMatchesCpu) {
  REQUIRE_DEVICES(2);
  Devices d(kind());
  // Layer 0 (weights and KV cache) on device 0, layer 1 on device 1, the rest on the CPU.
  TinyLlama m([this](int l) {
    return l == 0 ? mem(0)
           : l == 1 ? mem(1)
                    : &Registry::get().cpu().default_buffer_type();
  });
  Scheduler sched({d.dev0, d.dev1, d.cpu});
  sched.allocate(m.g.graph);
  m.set_inputs();
  sched.compute(m.g.graph);
  const SchedReport& r = sched.report();
  ASSERT_EQ(r.n_splits(), 4u) << r.to_string();
  EXPECT_EQ(r.splits[0].backend, "CPU");  // token embeddings
  EXPECT_EQ(r.splits[1].backend, name(0));
  EXPECT_EQ(r.splits[2].backend, name(1));
  EXPECT_EQ(r.splits[3].backend, "CPU");
  const double e = nmse(tensor_to_floats(*m.g.logits), tiny_llama_on_cpu());
  EXPECT_LT(e, 1e-7) << r.to_string();
}

TEST_P(SchedulerOn, SameStructureReusesThePlan) {
  REQUIRE_DEVICES(1);
  Devices d(kind());
  auto home = [this](int l) {
    return l % 2 == 0 ? mem(0) : &Registry::get().cpu().default_buffer_type();
  };
  TinyLlama first(home), second(home);
  Scheduler sched({d.dev0, d.cpu});
  sched.allocate(first.g.graph);
  first.set_inputs();
  sched.compute(first.g.graph);
  const std::vector<size_t> sizes = [&] {
    std::vector<size_t> v;
    for (const auto& b : sched.report().buffers) v.push_back(b.bytes);
    return v;
  }();
  EXPECT_EQ(sched.report().n_plan_builds, 1u);
  // The second graph has its own tensors (and weights of the same placement):
  // it differs in weight identity only, which does not change the plan.
  sched.allocate(second.g.graph);
  second.set_inputs(3);
  sched.compute(second.g.graph);
  EXPECT_EQ(sched.report().n_plan_builds, 1u);
  EXPECT_EQ(sched.report().n_plan_reuses, 1u);
  for (size_t k = 0; k < sizes.size(); ++k) EXPECT_EQ(sched.report().buffers[k].bytes, sizes[k]);
  EXPECT_LT(nmse(tensor_to_floats(*second.g.logits), tiny_llama_on_cpu(3)), 1e-7);
  // Computing the same graph again reuses too (inputs are set again: their
  // memory is reused by intermediates once read).
  sched.allocate(second.g.graph);
  second.set_inputs(3);
  sched.compute(second.g.graph);
  EXPECT_EQ(sched.report().n_plan_builds, 1u);
  EXPECT_EQ(sched.report().n_plan_reuses, 2u);
  EXPECT_LT(nmse(tensor_to_floats(*second.g.logits), tiny_llama_on_cpu(3)), 1e-7);
  // A different structure (8 tokens) is re-planned, and says why.
  TinyLlama longer(home, 8);
  sched.allocate(longer.g.graph);
  EXPECT_EQ(sched.report().n_plan_builds, 2u);
  EXPECT_FALSE(sched.report().last_rebuild_reason.empty());
}

TEST_P(SchedulerOn, ReuseOffPlansEveryGraph) {
  REQUIRE_DEVICES(1);
  Devices d(kind());
  SchedulerOptions o;
  o.reuse = false;
  Chain a(2, 16, 2, {mem(0)}), b(2, 16, 2, {mem(0)});
  Scheduler sched({d.dev0, d.cpu}, o);
  sched.compute(a.graph);
  sched.compute(b.graph);
  EXPECT_EQ(sched.report().n_plan_builds, 2u);
  EXPECT_EQ(sched.report().n_plan_reuses, 0u);
}

TEST_P(SchedulerOn, PipelinedMicroBatchesGiveIdenticalResults) {
  REQUIRE_DEVICES(2);
  Devices d(kind());
  auto home = [this](int l) {
    return l < 2 ? mem(0) : mem(1);
  };
  const int n = 4;
  std::vector<std::vector<float>> serial(n), pipelined(n);
  {
    Scheduler sched({d.dev0, d.dev1, d.cpu});
    for (int i = 0; i < n; ++i) {
      TinyLlama m(home);
      sched.allocate(m.g.graph);
      m.set_inputs(i);
      sched.compute(m.g.graph);
      serial[i] = tensor_to_floats(*m.g.logits);
    }
  }
  {
    SchedulerOptions o;
    o.n_copies = 2;
    Scheduler sched({d.dev0, d.dev1, d.cpu}, o);
    std::vector<std::unique_ptr<TinyLlama>> batches;
    for (int i = 0; i < n; ++i) {
      batches.push_back(std::make_unique<TinyLlama>(home));
      TinyLlama& m = *batches.back();
      sched.allocate(m.g.graph);
      m.set_inputs(i);
      sched.compute_async(m.g.graph);
      pipelined[i].resize(m.g.logits->nelements());
      sched.get_tensor_async(*m.g.logits, pipelined[i].data(), 0, m.g.logits->nbytes());
    }
    sched.synchronize();
    EXPECT_EQ(sched.report().n_plan_reuses, static_cast<size_t>(n - 1));
  }
  for (int i = 0; i < n; ++i) EXPECT_EQ(pipelined[i], serial[i]) << "micro-batch " << i;
}

TEST_P(SchedulerOn, DebugOutputAndDotFile) {
  REQUIRE_DEVICES(1);
  Devices d(kind());
  Chain c(2, 16, 2, {mem(0), &Registry::get().cpu().default_buffer_type()});
  SchedulerOptions o;
  o.debug = 2;
  Scheduler sched({d.dev0, d.cpu}, o);
  ::testing::internal::CaptureStderr();
  sched.allocate(c.graph);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("## SPLIT #0: " + name(0) + " # "), std::string::npos) << log;
  EXPECT_NE(log.find(" nodes, 1 inputs: [x 128 B]"), std::string::npos) << log;
  EXPECT_NE(log.find("## SPLIT #1: CPU"), std::string::npos) << log;
  EXPECT_NE(log.find("(weight w0 in " + name(0) + ")"), std::string::npos) << log;
  EXPECT_NE(log.find("(neighbour)"), std::string::npos) << log;
  const std::string path = ::testing::TempDir() + "sched_test.dot";
  sched.write_dot(path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_NE(ss.str().find("digraph"), std::string::npos);
  EXPECT_NE(ss.str().find("cluster_1"), std::string::npos);
  EXPECT_NE(ss.str().find("style=dashed"), std::string::npos);
  const std::string json = sched.report().to_json();
  EXPECT_NE(json.find("\"n_splits\": 2"), std::string::npos) << json;
}

INSTANTIATE_TEST_SUITE_P(Fake, SchedulerOn, ::testing::Values(Kind::Fake));
INSTANTIATE_TEST_SUITE_P(OpenCL, SchedulerOn, ::testing::Values(Kind::OpenCL));

}  // namespace
}  // namespace loom
