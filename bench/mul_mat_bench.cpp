// mul_mat on the CPU backend, 1 and 2 threads:
//   mul_mat/<type>       every type but I32: 2048 x 2048 weights times b with 1 column (mat-vec),
//                        16 to 64 columns (where quantized types switch path) or 512
//                        columns (mat-mat, bound by arithmetic). The weights (at
//                        most 16 MiB) stay in the 32 MiB L3.
//   mul_mat_dram/<type>  16384 x 4096 weights (38-268 MB) times 1 column:
//                        mat-vec reading the weights from memory.
//   mul_mat_repack/<type>/<K>x<M>  Q8_0 / Q4_0 / Q4_K / Q6_K weights at TinyLlama's FFN
//                        shapes (K x M = 2048 x 5632 and 5632 x 2048) times 1 to
//                        512 columns: the same weights in CPU_Repack
//                        (interleaved, gemm16 kernels) and in plain CPU memory
//                        (the kernels CPU_Mapped weights get), timed alternately
//                        in every iteration. Counters plain_ms, repack_ms and
//                        plain/repack (above 1 the interleaved layout is faster);
//                        the benchmark's own time is repack_ms.
//   mul_mat_repack_dram/<type>  the same, 16384 x 4096 weights times 1 or 4
//                        columns: both layouts read from memory (a token's
//                        mat-vecs, a few sequences').
// Counters of the first two: GFLOP/s (2*M*N*K per run) and GB/s (weight bytes read per run).
// The time includes packing (and quantizing) b. The time and these counters
// are for the path mul_mat picks (QuantPath::Auto). For quantized weights every
// iteration also runs the two forced paths (vec.h), side by side:
//   int_ms  b quantized, integer dots (or Q8_0/Q4_0's integer gemm)
//   deq_ms  a rows dequantized to f32, f32 dot / gemm
//   deq/int deq_ms / int_ms: above 1 the integer path is faster
// LOOM_CPU_ISA=scalar|avx2|avx512 picks a lower kernel level for comparison.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cpu/kernels/vec.h"
#include "cpu/repack.h"
#include "loom/types.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "mul_mat_bench.h"

namespace loom {
namespace {

// Uniform in [-1, 1): fast enough to fill 67M weights.
void fill_random(std::vector<float>& v, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    f = static_cast<float>(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
  }
}

void bench_mul_mat(benchmark::State& state, DType type, int64_t rows, int64_t depth) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  Context ctx;
  Tensor* a = ctx.new_tensor(type, {depth, rows});
  Tensor* b = ctx.new_tensor(DType::F32, {depth, n});
  Tensor* out = mul_mat(ctx, a, b);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::vector<float> av(a->nelements()), bv(b->nelements());
  fill_random(av, 1);
  fill_random(bv, 2);
  tensor_from_floats(*a, av);
  tensor_from_floats(*b, bv);
  auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
  Graph graph = Graph::build(out);
  const bool quantized = traits(type).is_quantized;
  auto timed = [&](cpu::QuantPath path) {
    cpu::set_mul_mat_quant_path(path);
    const auto t0 = std::chrono::steady_clock::now();
    backend->compute(graph);
    const auto t1 = std::chrono::steady_clock::now();
    cpu::set_mul_mat_quant_path(cpu::QuantPath::Auto);
    return std::chrono::duration<double>(t1 - t0).count();
  };
  backend->compute(graph);  // warm up: scratch, caches
  if (quantized) timed(cpu::QuantPath::IntDot), timed(cpu::QuantPath::Dequant);

  double int_s = 0.0, deq_s = 0.0;
  for (auto _ : state) {
    state.SetIterationTime(timed(cpu::QuantPath::Auto));
    if (quantized) int_s += timed(cpu::QuantPath::IntDot), deq_s += timed(cpu::QuantPath::Dequant);
    benchmark::ClobberMemory();
  }
  if (quantized) {
    const double iters = static_cast<double>(state.iterations());
    state.counters["int_ms"] = int_s * 1e3 / iters;
    state.counters["deq_ms"] = deq_s * 1e3 / iters;
    state.counters["deq/int"] = deq_s / int_s;
  }
  const double flops = 2.0 * rows * depth * static_cast<double>(n);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(a->nbytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpu::isa_name(cpu::mul_mat_isa())));
}

// The same weights in CPU_Repack and in plain CPU memory, timed alternately.
void bench_mul_mat_repack(benchmark::State& state, DType type, int64_t depth, int64_t rows) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  BufferType* repack = Registry::get().find_buffer_type("CPU_Repack");
  if (!repack) {
    state.SkipWithError("no CPU_Repack buffer type");
    return;
  }
  Context wctx, ctx;
  Tensor* wr = wctx.new_tensor(type, {depth, rows});
  auto walloc = allocate_tensors(wctx, *repack, BufferUsage::Weights);
  Tensor* wp = ctx.new_tensor(type, {depth, rows});
  Tensor* b = ctx.new_tensor(DType::F32, {depth, n});
  Tensor* out_r = mul_mat(ctx, wr, b);
  Tensor* out_p = mul_mat(ctx, wp, b);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::vector<float> av(wp->nelements()), bv(b->nelements());
  fill_random(av, 1);
  fill_random(bv, 2);
  tensor_from_floats(*wp, av);
  tensor_from_floats(*b, bv);
  tensor_copy(*wp, *wr);
  auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
  Graph graph_r = Graph::build(out_r), graph_p = Graph::build(out_p);
  auto timed = [&](Graph& g) {
    const auto t0 = std::chrono::steady_clock::now();
    backend->compute(g);
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(t1 - t0).count();
  };
  timed(graph_p), timed(graph_r);  // warm up: scratch, caches
  double plain_s = 0.0, repack_s = 0.0;
  for (auto _ : state) {
    plain_s += timed(graph_p);
    const double r = timed(graph_r);
    repack_s += r;
    state.SetIterationTime(r);
    benchmark::ClobberMemory();
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["plain_ms"] = plain_s * 1e3 / iters;
  state.counters["repack_ms"] = repack_s * 1e3 / iters;
  state.counters["plain/repack"] = plain_s / repack_s;
  state.SetLabel(std::string(cpu::isa_name(cpu::mul_mat_isa())) + (cpu::is_repacked(*wr) ? "" : " (not repacked)"));
}

void register_all() {
  for (DType type : kAllTypes) {
    if (type == DType::I32) continue;
    const std::string name = "mul_mat/" + std::string(type_name(type));
    benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat, type, 2048, 2048)
        ->ArgNames({"n", "threads"})
        ->ArgsProduct({{1, 16, 32, 64, 512}, {1, 2}})
        ->MinTime(0.3)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (DType type : kAllTypes) {
    if (type == DType::I32) continue;
    const std::string name = "mul_mat_dram/" + std::string(type_name(type));
    benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat, type, 16384, 4096)
        ->ArgNames({"n", "threads"})
        ->ArgsProduct({{1}, {1, 2}})
        ->MinTime(0.3)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K})
    for (auto [depth, rows] : {std::pair<int64_t, int64_t>{2048, 5632}, {5632, 2048}}) {
      const std::string name = "mul_mat_repack/" + std::string(type_name(type)) + "/" + std::to_string(depth) +
                               "x" + std::to_string(rows);
      benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat_repack, type, depth, rows)
          ->ArgNames({"n", "threads"})
          ->ArgsProduct({{1, 4, 8, 16, 32, 64, 128, 256, 512}, {1, 2}})
          ->MinTime(0.3)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  for (DType type : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const std::string name = "mul_mat_repack_dram/" + std::string(type_name(type));
    benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat_repack, type, 4096, 16384)
        ->ArgNames({"n", "threads"})
        ->ArgsProduct({{1, 4}, {1, 2}})
        ->MinTime(0.3)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  loom::register_all();
  loom::register_mul_mat_id_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
