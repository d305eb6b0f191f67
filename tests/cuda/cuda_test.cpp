// The CUDA backend on real GPUs. Uses only the public interfaces (and the
// CUDA runtime for the driver's answer when there is no device), so it runs
// the same whether the backend is built in or loaded as a plugin. Without a
// CUDA device every test skips, by name, with the driver's reason.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/scheduler.h"
#include "loom/tensor_alloc.h"
#include "test_devices.h"

namespace loom {
namespace {

Device* cuda(int i) { return Registry::get().find("CUDA" + std::to_string(i)); }

// Why CUDA<i> is missing, in the driver's words.
std::string no_cuda_reason(int i) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ") from cudaGetDeviceCount";
  }
  if (count <= i) return "the driver reports " + std::to_string(count) + " CUDA device(s)";
  return "CUDA" + std::to_string(i) + " exists but is not registered (LOOM_DEVICES filter?)";
}

#define REQUIRE_CUDA(n)                                                                       \
  do {                                                                                        \
    for (int i_ = 0; i_ < (n); ++i_)                                                          \
      if (!cuda(i_)) GTEST_SKIP() << "no CUDA device: CUDA" << i_ << ": " << no_cuda_reason(i_); \
  } while (0)

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> read_all(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  tensor_get(t, out.data(), 0, out.size());
  return out;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    err += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    ref += double(want[i]) * want[i];
  }
  return ref > 0 ? err / ref : err;
}

TEST(CUDA, DevicesAreListedWithTheirMemory) {
  REQUIRE_CUDA(1);
  for (int i = 0; cuda(i); ++i) {
    Device& d = *cuda(i);
    EXPECT_EQ(d.type(), DeviceType::GPU);
    EXPECT_FALSE(d.description().empty());
    EXPECT_EQ(d.default_buffer_type().name(), d.name());
    EXPECT_EQ(d.default_buffer_type().device(), &d);
    EXPECT_FALSE(d.default_buffer_type().is_host());
    EXPECT_EQ(d.default_buffer_type().alignment(), 256u);
    EXPECT_TRUE(d.caps().async && d.caps().events && d.caps().host_buffer);
    const MemoryInfo m = d.memory();
    EXPECT_GT(m.total, 0u) << d.name();
    EXPECT_GT(m.free, 0u) << d.name();
    EXPECT_LE(m.free, m.total) << d.name();
    ASSERT_NE(d.host_buffer_type(), nullptr);
    EXPECT_EQ(d.host_buffer_type()->name(), "CUDA_Host");
    EXPECT_EQ(d.host_buffer_type(), cuda(0)->host_buffer_type()) << "one host type for the family";
    EXPECT_TRUE(d.host_buffer_type()->is_host());
    EXPECT_TRUE(d.supports_buffer_type(d.default_buffer_type()));
    EXPECT_FALSE(d.supports_buffer_type(*d.host_buffer_type()));
    EXPECT_FALSE(d.supports_buffer_type(Registry::get().cpu().default_buffer_type()));
    // The CPU reads pinned host memory.
    EXPECT_TRUE(Registry::get().cpu().supports_buffer_type(*d.host_buffer_type()));
  }
  // Allocations are counted on the device.
  Device& d = *cuda(0);
  const size_t before = d.allocated_bytes();
  {
    auto b = d.default_buffer_type().alloc(3 << 20);
    EXPECT_EQ(d.allocated_bytes(), before + (3 << 20));
  }
  EXPECT_EQ(d.allocated_bytes(), before);
}

TEST(CUDA, SetGetAtOddOffsetsAndMemset) {
  REQUIRE_CUDA(1);
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F16, {1237});  // 2474 bytes; offsets and sizes below are odd
  auto mem = allocate_tensors(std::span<Tensor* const>(&t, 1), cuda(0)->default_buffer_type());
  const size_t n = t->nbytes();
  const auto bytes = random_bytes(n, 1);
  tensor_set(*t, bytes.data(), 0, n);
  EXPECT_EQ(read_all(*t), bytes);
  const auto patch = random_bytes(101, 2);
  tensor_set(*t, patch.data(), 333, patch.size());
  auto want = bytes;
  std::memcpy(want.data() + 333, patch.data(), patch.size());
  EXPECT_EQ(read_all(*t), want);
  std::vector<uint8_t> part(7);
  tensor_get(*t, part.data(), n - 7, 7);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), want.begin() + (n - 7)));
  tensor_memset(*t, 0xA5, 17, 999);
  std::fill(want.begin() + 17, want.begin() + 17 + 999, 0xA5);
  EXPECT_EQ(read_all(*t), want);
  t->buffer->clear(0);
  EXPECT_EQ(read_all(*t), std::vector<uint8_t>(n, 0));
  EXPECT_THROW(tensor_set(*t, bytes.data(), n - 10, 11), Error);
}

TEST(CUDA, CopiesCpuToCuda0ToCuda0ToHostBuffer) {
  REQUIRE_CUDA(1);
  Context ctx;
  std::vector<Tensor*> hops;
  for (int i = 0; i < 4; ++i) hops.push_back(ctx.new_tensor(DType::Q4_0, {256, 33}));
  BufferType* types[4] = {&Registry::get().cpu().default_buffer_type(), &cuda(0)->default_buffer_type(),
                          &cuda(0)->default_buffer_type(), cuda(0)->host_buffer_type()};
  std::vector<TensorAllocation> memory;
  for (int i = 0; i < 4; ++i) memory.push_back(allocate_tensors(std::span<Tensor* const>(&hops[i], 1), *types[i]));
  const auto bytes = random_bytes(hops[0]->nbytes(), 7);
  tensor_set(*hops[0], bytes.data(), 0, bytes.size());
  for (int i = 0; i < 3; ++i) tensor_copy(*hops[i], *hops[i + 1]);
  EXPECT_EQ(read_all(*hops[1]), bytes);
  EXPECT_EQ(read_all(*hops[2]), bytes);
  EXPECT_EQ(std::memcmp(hops[3]->data, bytes.data(), bytes.size()), 0);  // the CPU reads pinned memory directly
}

TEST(CUDA, PeerCopyBetweenTwoDevices) {
  REQUIRE_CUDA(2);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F16, {4099});
  Tensor* b = ctx.new_tensor(DType::F16, {4099});
  auto m0 = allocate_tensors(std::span<Tensor* const>(&a, 1), cuda(0)->default_buffer_type());
  auto m1 = allocate_tensors(std::span<Tensor* const>(&b, 1), cuda(1)->default_buffer_type());
  const auto bytes = random_bytes(a->nbytes(), 9);
  tensor_set(*a, bytes.data(), 0, bytes.size());
  tensor_copy(*a, *b);
  EXPECT_EQ(read_all(*b), bytes);
}

TEST(CUDA, AsyncSetGetOrderedByEvents) {
  REQUIRE_CUDA(1);
  Device* second = cuda(1) ? cuda(1) : cuda(0);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {100003});
  Tensor* b = ctx.new_tensor(DType::F32, {100003});
  auto m0 = allocate_tensors(std::span<Tensor* const>(&a, 1), cuda(0)->default_buffer_type());
  auto m1 = allocate_tensors(std::span<Tensor* const>(&b, 1), second->default_buffer_type());
  auto be0 = cuda(0)->create_backend();
  auto be1 = second->create_backend();
  const auto bytes = random_bytes(a->nbytes(), 3);
  be0->set_tensor_async(*a, bytes.data(), 0, bytes.size());
  auto event = be0->create_event();
  ASSERT_NE(event, nullptr);
  event->record(*be0);
  event->wait(*be1);
  ASSERT_TRUE(be1->copy_tensor_async(*a, *b));
  std::vector<uint8_t> back(bytes.size());
  be1->get_tensor_async(*b, back.data(), 0, back.size());
  be1->synchronize();
  event->synchronize();
  EXPECT_EQ(back, bytes);
  // An event recorded on the CPU backend means "done" after it synchronizes.
  auto cpu = Registry::get().cpu().create_backend();
  event->record(*cpu);
  event->wait(*be0);
  event->synchronize();
}

TEST(CUDA, OutOfMemoryNamesTheDeviceAndTheSizes) {
  REQUIRE_CUDA(1);
  Device& d = *cuda(0);
  const size_t ask = d.memory().total + (size_t{1} << 30);
  try {
    d.default_buffer_type().alloc(ask);
    FAIL() << "allocating more than the device has succeeded";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("CUDA0"), std::string::npos) << m;
    EXPECT_NE(m.find(std::to_string(ask)), std::string::npos) << m;
    EXPECT_NE(m.find("cudaErrorMemoryAllocation"), std::string::npos) << m;
    EXPECT_NE(m.find("free of"), std::string::npos) << m;
  }
  // The device is still usable afterwards.
  auto b = d.default_buffer_type().alloc(1 << 20);
  b->clear(1);
}

// add + mul_mat in F32 on CUDA0 against the CPU.
struct SmallGraph {
  Context ctx;
  Tensor* a;
  Tensor* b;
  Tensor* c;
  Tensor* out;
  Graph graph;
  TensorAllocation memory;
  SmallGraph(BufferType& type) {
    a = ctx.new_tensor(DType::F32, {64, 48});
    b = ctx.new_tensor(DType::F32, {64, 5});
    c = ctx.new_tensor(DType::F32, {48, 5});
    out = add(ctx, mul_mat(ctx, a, b), c);
    graph = Graph::build(out);
    memory = allocate_tensors(ctx, type);
  }
  void set_inputs(uint32_t seed) {
    tensor_from_floats(*a, random_floats(a->nelements(), seed));
    tensor_from_floats(*b, random_floats(b->nelements(), seed + 1));
    tensor_from_floats(*c, random_floats(c->nelements(), seed + 2));
  }
};

std::vector<float> small_graph_on_cpu(uint32_t seed) {
  SmallGraph g(Registry::get().cpu().default_buffer_type());
  g.set_inputs(seed);
  auto be = Registry::get().cpu().create_backend();
  be->compute(g.graph);
  be->synchronize();
  return tensor_to_floats(*g.out);
}

TEST(CUDA, AddAndMulMatMatchTheCpu) {
  REQUIRE_CUDA(1);
  SmallGraph g(cuda(0)->default_buffer_type());
  for (Tensor* node : g.graph.nodes())
    if (!cuda(0)->supports_op(*node)) GTEST_SKIP() << "CUDA0 has no kernel for " << op_name(node->op) << " yet";
  g.set_inputs(5);
  auto be = cuda(0)->create_backend();
  be->compute(g.graph);
  be->synchronize();
  EXPECT_LT(nmse(tensor_to_floats(*g.out), small_graph_on_cpu(5)), 1e-9);
  // Profiled: same result, one time per node, in order.
  std::vector<NodeTime> times;
  EXPECT_TRUE(be->compute_timed(g.graph, times));
  EXPECT_EQ(times.size(), g.graph.nodes().size());
  for (const NodeTime& t : times) EXPECT_LE(t.start_ns, t.end_ns);
  EXPECT_LT(nmse(tensor_to_floats(*g.out), small_graph_on_cpu(5)), 1e-9);
}

TEST(CUDA, SameGraphComputedThreeTimesWithNewInputs) {
  REQUIRE_CUDA(1);
  SmallGraph g(cuda(0)->default_buffer_type());
  for (Tensor* node : g.graph.nodes())
    if (!cuda(0)->supports_op(*node)) GTEST_SKIP() << "CUDA0 has no kernel for " << op_name(node->op) << " yet";
  auto be = cuda(0)->create_backend();
  // Plain, captured into a CUDA graph, replayed; inputs change each time
  // (async writes on the stream, as the scheduler does).
  for (uint32_t round = 0; round < 4; ++round) {
    const uint32_t seed = 100 + round;
    const auto a = random_floats(g.a->nelements(), seed);
    const auto b = random_floats(g.b->nelements(), seed + 1);
    const auto c = random_floats(g.c->nelements(), seed + 2);
    be->set_tensor_async(*g.a, a.data(), 0, g.a->nbytes());
    be->set_tensor_async(*g.b, b.data(), 0, g.b->nbytes());
    be->set_tensor_async(*g.c, c.data(), 0, g.c->nbytes());
    be->compute(g.graph);
    std::vector<float> got(g.out->nelements());
    be->get_tensor_async(*g.out, got.data(), 0, g.out->nbytes());
    be->synchronize();
    EXPECT_LT(nmse(got, small_graph_on_cpu(seed)), 1e-9) << "round " << round;
  }
}

// The chain of the scheduler tests: mat-muls against weights in `home`,
// silu and a residual add per layer.
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
      w->name = "w" + std::to_string(l);
      w->flags |= kFlagWeight;
      weights.push_back(w);
      Tensor* y = mul_mat(ctx, w, cur);
      Tensor* s = silu(ctx, y);
      cur = add(ctx, s, cur);
    }
    out = cur;
    graph = Graph::build(out);
    for (size_t l = 0; l < weights.size(); ++l) {
      Tensor* w = weights[l];
      auto a = allocate_tensors(std::span<Tensor* const>(&w, 1), *homes[l % homes.size()], BufferUsage::Weights);
      buffers.insert(buffers.end(), a.buffers.begin(), a.buffers.end());
      tensor_from_floats(*w, random_floats(w->nelements(), 1000 + static_cast<uint32_t>(l), 0.1f));
    }
  }
  void set_input() { tensor_from_floats(*x, random_floats(x->nelements(), 7)); }
};

std::vector<float> chain_on_cpu(int n_layers, int64_t width, int64_t batch) {
  Chain c(n_layers, width, batch, {&Registry::get().cpu().default_buffer_type()});
  auto cpu = Registry::get().cpu().create_backend();
  Scheduler sched({cpu.get()});
  sched.allocate(c.graph);
  c.set_input();
  sched.compute(c.graph);
  return tensor_to_floats(*c.out);
}

bool chain_supported(Device& d) {
  Chain probe(1, 32, 4, {&Registry::get().cpu().default_buffer_type()});
  for (Tensor* node : probe.graph.nodes())
    if (!d.supports_op(*node)) return false;
  return true;
}

TEST(CUDA, SchedulerSplitsBetweenCpuAndCuda0) {
  REQUIRE_CUDA(1);
  if (!chain_supported(*cuda(0))) GTEST_SKIP() << "CUDA0 has no kernel for mul_mat, silu or add yet";
  auto cpu = Registry::get().cpu().create_backend();
  auto gpu = cuda(0)->create_backend();
  BufferType* cpu_mem = &Registry::get().cpu().default_buffer_type();
  Chain c(6, 48, 5, {&cuda(0)->default_buffer_type(), cpu_mem});
  Scheduler sched({gpu.get(), cpu.get()});
  sched.allocate(c.graph);
  for (int round = 0; round < 2; ++round) {  // the second run reuses the plan (and may replay a CUDA graph)
    c.set_input();
    sched.compute(c.graph);
    EXPECT_GE(sched.report().n_splits(), 2u) << sched.report().to_string();
    EXPECT_EQ(sched.backend_of(c.weights[0]), gpu.get());
    EXPECT_LT(nmse(tensor_to_floats(*c.out), chain_on_cpu(6, 48, 5)), 1e-9) << "round " << round;
  }
}

TEST(CUDA, SchedulerSplitsBetweenCuda0AndOpenCL0) {
  REQUIRE_CUDA(1);
  Device* ocl = test::opencl(0);
  if (!ocl) GTEST_SKIP() << "OpenCL0 is not registered";
  if (!chain_supported(*cuda(0))) GTEST_SKIP() << "CUDA0 has no kernel for mul_mat, silu or add yet";
  auto cpu = Registry::get().cpu().create_backend();
  auto gpu = cuda(0)->create_backend();
  auto cl = ocl->create_backend();
  Chain c(4, 32, 4, {&cuda(0)->default_buffer_type(), &ocl->default_buffer_type()});
  Scheduler sched({gpu.get(), cl.get(), cpu.get()});
  sched.allocate(c.graph);
  c.set_input();
  sched.compute(c.graph);
  EXPECT_GE(sched.report().n_splits(), 2u) << sched.report().to_string();
  EXPECT_LT(nmse(tensor_to_floats(*c.out), chain_on_cpu(4, 32, 4)), 1e-9);
}

}  // namespace
}  // namespace loom
