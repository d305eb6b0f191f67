// mul_mat_id on the CPU backend: a mixture-of-experts projection shaped like
// a small qwen3moe layer's up projection, 64 experts of 768 x 2048, 8 used
// per token, ids drawn at random (distinct per token), for batches of 1 to
// 256 tokens and 1 or 2 threads. The kernel groups the tokens of each expert,
// so a batch reads each used expert's weights once: per token, a batch of 64
// should cost far less than one token alone.
// Counters: tokens/s, and GB/s of the distinct experts' weight bytes a run reads.
// Registered into loom-bench-mul-mat (mul_mat_bench.cpp has main).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "mul_mat_bench.h"

namespace loom {
namespace {

constexpr int64_t kEmbd = 2048, kFf = 768, kExperts = 64, kUsed = 8;

void bench_mul_mat_id(benchmark::State& state, DType type) {
  const int64_t n_tokens = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  Context ctx;
  Tensor* experts = ctx.new_tensor(type, {kEmbd, kFf, kExperts});
  Tensor* x = ctx.new_tensor(DType::F32, {kEmbd, 1, n_tokens});
  Tensor* ids = ctx.new_tensor(DType::I32, {kUsed, n_tokens});
  Tensor* out = mul_mat_id(ctx, experts, x, ids);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> w(experts->nelements()), xv(x->nelements()), iv;
  for (float& v : w) v = uniform(rng);
  for (float& v : xv) v = uniform(rng);
  std::set<int> used;
  std::vector<int> all(kExperts);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    for (int64_t s = 0; s < kUsed; ++s) {
      iv.push_back(static_cast<float>(all[s]));
      used.insert(all[s]);
    }
  }
  tensor_from_floats(*experts, w);
  tensor_from_floats(*x, xv);
  tensor_from_floats(*ids, iv);
  auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
  Graph graph = Graph::build(out);
  backend->compute(graph);  // warm up: scratch, caches
  for (auto _ : state) {
    backend->compute(graph);
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(used.size()) * static_cast<double>(experts->nb[2]);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["experts"] = static_cast<double>(used.size());
}

}  // namespace

void register_mul_mat_id_benchmarks() {
  for (DType type : {DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::MXFP4}) {
    const std::string name = "mul_mat_id/" + std::string(type_name(type));
    benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat_id, type)
        ->ArgNames({"tokens", "threads"})
        ->ArgsProduct({{1, 16, 64, 256}, {1, 2}})
        ->MinTime(0.3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace loom
