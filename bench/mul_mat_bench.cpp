// mul_mat on the CPU backend, 1 and 2 threads:
//   mul_mat/<type>       every type but I32: 2048 x 2048 weights times b with 1 column (mat-vec)
//                        or 512 columns (mat-mat, bound by arithmetic). The
//                        weights (at most 16 MiB) stay in the 32 MiB L3.
//   mul_mat_dram/<type>  16384 x 4096 weights (38-268 MB) times 1 column:
//                        mat-vec reading the weights from memory.
// Counters: GFLOP/s (2*M*N*K per run) and GB/s (weight bytes read per run).
// The time includes packing (and quantizing) b.
// LOOM_CPU_ISA=scalar|avx2|avx512 picks a lower kernel level for comparison.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "cpu/kernels/vec.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

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
  backend->compute(graph);  // warm up: scratch, caches

  for (auto _ : state) {
    backend->compute(graph);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * rows * depth * static_cast<double>(n);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(a->nbytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(cpu::isa_name(cpu::mul_mat_isa())));
}

void register_all() {
  for (DType type : kAllTypes) {
    if (type == DType::I32) continue;
    const std::string name = "mul_mat/" + std::string(type_name(type));
    benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat, type, 2048, 2048)
        ->ArgNames({"n", "threads"})
        ->ArgsProduct({{1, 512}, {1, 2}})
        ->MinTime(0.3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (DType type : kAllTypes) {
    if (type == DType::I32) continue;
    const std::string name = "mul_mat_dram/" + std::string(type_name(type));
    benchmark::RegisterBenchmark(name.c_str(), bench_mul_mat, type, 16384, 4096)
        ->ArgNames({"n", "threads"})
        ->ArgsProduct({{1}, {1, 2}})
        ->MinTime(0.3)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace
}  // namespace loom

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  loom::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
