// The CPU thread pool and the hand-offs between a graph's nodes: every
// thread runs every run() once whatever the poll level; small ops run as
// chains on one thread; threads wait only where a node touches memory that
// earlier, unfinished nodes write or read. Results do not depend on the
// thread count or the poll level.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/spin_wait.h"
#include "cpu/thread_pool.h"
#include "loom/error.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/scheduler.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

TEST(ThreadPool, EveryThreadRunsEachRunOnce) {
  for (int poll : {0, 1, 50, 100})
    for (int threads : {1, 2, 3}) {
      SCOPED_TRACE(fmt::format("poll {} threads {}", poll, threads));
      cpu::ThreadPool pool(threads, poll);
      EXPECT_EQ(pool.poll(), poll);
      std::vector<std::atomic<int>> calls(threads);
      constexpr int kRuns = 100;
      for (int r = 0; r < kRuns; ++r) pool.run([&](int ith) { calls[ith].fetch_add(1, std::memory_order_relaxed); });
      for (int t = 0; t < threads; ++t) EXPECT_EQ(calls[t].load(), kRuns) << "thread " << t;
    }
}

// A waiter told to give up polling (ThreadPool::park, Backend::idle) sleeps
// at once even at the highest poll level; without it, it polls first.
TEST(SpinWait, GivingUpSkipsThePolling) {
  for (bool give_up : {false, true}) {
    int checks_before_sleep = 0;
    bool slept = false;
    cpu::spin_then_sleep(
        kMaxPoll, [&] { return slept || (++checks_before_sleep, false); }, [&] { return give_up; },
        [&] { slept = true; });
    EXPECT_TRUE(slept);
    if (give_up)
      EXPECT_LE(checks_before_sleep, 2) << "a waiter that gave up polled";
    else
      EXPECT_GT(checks_before_sleep, 1000) << "the waiter did not poll";
  }
}

// A parked pool still runs every thread on the next run.
TEST(ThreadPool, ParkedWorkersRunTheNextRun) {
  cpu::ThreadPool pool(3, kMaxPoll);
  std::atomic<int> calls{0};
  for (int r = 0; r < 20; ++r) {
    pool.run([&](int) { calls.fetch_add(1, std::memory_order_relaxed); });
    pool.park();
  }
  EXPECT_EQ(calls.load(), 60);
}

// Runs separated by pauses long enough for pollers to fall asleep still
// reach every thread (the sleep / wake-up path).
TEST(ThreadPool, WakesSleepingWorkers) {
  cpu::ThreadPool pool(3, 0);
  std::atomic<int> calls{0};
  for (int r = 0; r < 20; ++r) {
    pool.run([&](int) { calls.fetch_add(1); });
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ(calls.load(), 60);
}

TEST(ThreadPool, PollOutsideTheRangeIsRefused) {
  Device& cpu = Registry::get().cpu();
  EXPECT_THROW(cpu.create_backend({.n_threads = 2, .poll = 101}), Error);
  EXPECT_THROW(cpu.create_backend({.n_threads = 2, .poll = -1}), Error);
}

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Layers of a small network with independent branches (two products of the
// same input), chains of small row ops, and element-wise ops big enough to
// be split into tasks; planned by the scheduler's allocator, which reuses
// memory of dead tensors (in place where it can), so a node that starts
// before an earlier one ends would corrupt the result.
struct Net {
  static constexpr int64_t kEmbd = 64, kTokens = 3, kWide = 40000;
  Context weights_ctx, ctx;
  std::vector<Tensor*> weights;
  Tensor* x = nullptr;
  Tensor* wide_in = nullptr;
  Tensor* out = nullptr;
  Tensor* wide_out = nullptr;
  TensorAllocation weight_memory;
  Graph graph;

  Net() {
    x = ctx.new_tensor(DType::F32, {kEmbd, kTokens});
    wide_in = ctx.new_tensor(DType::F32, {kWide});
    x->flags |= kFlagInput;
    wide_in->flags |= kFlagInput;
    Tensor* h = x;
    Tensor* wide = wide_in;
    for (int l = 0; l < 4; ++l) {
      Tensor* wa = weights_ctx.new_tensor(DType::F32, {kEmbd, kEmbd});
      Tensor* wb = weights_ctx.new_tensor(DType::F32, {kEmbd, kEmbd});
      weights.push_back(wa);
      weights.push_back(wb);
      Tensor* a = mul_mat(ctx, wa, h);
      Tensor* b = mul_mat(ctx, wb, h);
      Tensor* g = mul(ctx, silu(ctx, a), b);
      h = add(ctx, scale(ctx, rms_norm(ctx, g, 1e-5f), 0.5f), h);
      wide = add(ctx, silu(ctx, wide), scale(ctx, wide, 0.25f));
    }
    out = h;
    wide_out = wide;
    out->flags |= kFlagOutput;
    wide_out->flags |= kFlagOutput;
    graph = Graph::build(out);
    graph.expand(wide_out);
    weight_memory = allocate_tensors(weights, Registry::get().cpu().default_buffer_type(), BufferUsage::Weights);
    for (size_t i = 0; i < weights.size(); ++i)
      tensor_from_floats(*weights[i], random_floats(weights[i]->nelements(), 100 + static_cast<uint32_t>(i)));
  }
};

struct Result {
  std::vector<float> h, wide;
  size_t groups = 0, waits = 0;
};

Result run_net(int threads, int poll) {
  Net net;
  auto backend = std::make_unique<cpu::CpuBackend>(static_cast<cpu::CpuDevice&>(Registry::get().cpu()), threads, poll);
  Scheduler sched({backend.get()});
  Result r;
  for (int round = 0; round < 3; ++round) {
    sched.allocate(net.graph);
    tensor_from_floats(*net.x, random_floats(net.x->nelements(), 7 + round));
    tensor_from_floats(*net.wide_in, random_floats(net.wide_in->nelements(), 9 + round));
    sched.compute(net.graph);
  }
  r.h = tensor_to_floats(*net.out);
  r.wide = tensor_to_floats(*net.wide_out);
  r.groups = backend->last_groups();
  r.waits = backend->last_waits();
  return r;
}

TEST(CpuBackendSync, ResultsDoNotDependOnThreadsOrPoll) {
  const Result want = run_net(1, 0);
  for (int threads : {2, 3, 4})
    for (int poll : {0, 50, 100}) {
      SCOPED_TRACE(fmt::format("threads {} poll {}", threads, poll));
      const Result got = run_net(threads, poll);
      EXPECT_EQ(got.h, want.h);
      EXPECT_EQ(got.wide, want.wide);
      // Independent nodes (the two products, the wide branch) share a wait.
      EXPECT_LT(got.waits, got.groups);
    }
}

// A chain of row ops on one token is one hand-off: one thread runs it all.
TEST(CpuBackendSync, SmallOpsRunAsOneChain) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {256});
  Tensor* y = scale(ctx, silu(ctx, rms_norm(ctx, x, 1e-5f)), 2.0f);
  Tensor* z = add(ctx, y, x);
  auto memory = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  const std::vector<float> in = random_floats(256, 3);
  tensor_from_floats(*x, in);
  cpu::CpuBackend backend(static_cast<cpu::CpuDevice&>(Registry::get().cpu()), 2, 50);
  Graph g = Graph::build(z);
  backend.compute(g);
  EXPECT_EQ(backend.last_groups(), 1u);
  EXPECT_EQ(backend.last_waits(), 0u);
  cpu::CpuBackend one(static_cast<cpu::CpuDevice&>(Registry::get().cpu()), 1, 0);
  const std::vector<float> two_threads = tensor_to_floats(*z);
  tensor_from_floats(*x, in);
  one.compute(g);
  EXPECT_EQ(tensor_to_floats(*z), two_threads);
}

}  // namespace
}  // namespace loom
