// One layer's attention on the CPU backend, shaped like TinyLlama's (head
// size 64, 32 query heads over 4 KV heads), over an f16 (or quantized) cache
// of n_kv cells with a causal mask: flash_attn_ext against the unfused chain
// the model builds with -fa off (mul_mat K^T q, soft_max with mask and scale,
// a contiguous transposed V, mul_mat, a contiguous permute). Cases: one
// generated token (n_q 1) after 512 and 4096 cached tokens, and a
// micro-batch of 512 after 512 (n_kv padded to 256 as the session pads),
// 1 and 2 threads.
// Counter: attention calls per second (each is one layer's attention).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

constexpr int64_t kHead = 64, kHeads = 32, kKvHeads = 4;

void bench_attention(benchmark::State& state, bool fused, DType cache_type) {
  const int64_t n_q = state.range(0), depth = state.range(1), threads = state.range(2);
  const int64_t n_kv = (depth + n_q + 255) / 256 * 256;
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::F32, {kHead, kHeads, n_q, 1});
  Tensor* kc = ctx.new_tensor(cache_type, {kHead * kKvHeads, n_kv});
  Tensor* vc = ctx.new_tensor(cache_type, {kHead * kKvHeads, n_kv});
  Tensor* mask = ctx.new_tensor(DType::F32, {n_kv, n_q});
  const auto heads = [&](Tensor* c) {
    const size_t head = row_size(c->type, kHead);
    return permute(ctx, view(ctx, c, {kHead, kKvHeads, n_kv, 1}, {head, c->nb[1], c->nb[1] * n_kv}, 0), {0, 2, 1, 3});
  };
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHead));
  Tensor* qh = permute(ctx, q, {0, 2, 1, 3});
  Tensor* out;
  if (fused) {
    out = flash_attn_ext(ctx, qh, heads(kc), heads(vc), mask, scale);
  } else {
    Tensor* kq = soft_max(ctx, mul_mat(ctx, heads(kc), qh), mask, scale);
    const size_t vs = traits(vc->type).type_size;
    Tensor* vt = cont(ctx, permute(ctx, view(ctx, vc, {kHead, kKvHeads, n_kv, 1}, {kHead * vs, vc->nb[1], vc->nb[1] * n_kv}, 0),
                                   {1, 2, 0, 3}));
    out = cont(ctx, permute(ctx, mul_mat(ctx, vt, kq), {0, 2, 1, 3}));
  }
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (Tensor* t : {q, kc, vc}) {
    std::vector<float> v(t->nelements());
    for (float& x : v) x = normal(rng);
    tensor_from_floats(*t, v);
  }
  // Cells [0, depth + i] are visible to query i; the padding is masked.
  std::vector<float> m(mask->nelements());
  for (int64_t i = 0; i < n_q; ++i)
    for (int64_t j = 0; j < n_kv; ++j) m[i * n_kv + j] = j <= depth + i ? 0.0f : -INFINITY;
  tensor_from_floats(*mask, m);
  auto backend = Registry::get().cpu().create_backend({.n_threads = static_cast<int>(threads)});
  Graph graph = Graph::build(out);
  backend->compute(graph);  // warm up
  for (auto _ : state) {
    backend->compute(graph);
    benchmark::ClobberMemory();
  }
  state.counters["calls/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void args(benchmark::internal::Benchmark* b) {
  for (const auto& [n_q, depth] : {std::pair<int64_t, int64_t>{1, 512}, {1, 4096}, {512, 512}})
    for (int64_t t : {1, 2}) b->Args({n_q, depth, t});
  b->ArgNames({"n_q", "depth", "threads"})->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(bench_attention, unfused_f16, false, DType::F16)->Apply(args);
BENCHMARK_CAPTURE(bench_attention, fused_f16, true, DType::F16)->Apply(args);
BENCHMARK_CAPTURE(bench_attention, fused_q8_0, true, DType::Q8_0)->Apply(args);
BENCHMARK_CAPTURE(bench_attention, fused_q4_0, true, DType::Q4_0)->Apply(args);

}  // namespace
}  // namespace loom

BENCHMARK_MAIN();
