// The machine's DRAM read bandwidth, the ceiling of token generation (each
// token reads every weight once): threads sum disjoint slices of a buffer
// far larger than the caches, with the widest loads the CPU has.
//   dram_read/mib:M/threads:T   bytes_per_second: M MiB read by T threads
// bench/vs-llamacpp runs it and states each engine's tg rate (model bytes x
// tokens/s) as a share of the figure at its thread count.
// usage: loom-bench-bandwidth [--benchmark_filter=threads:2] [--benchmark_format=json]
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr int64_t kBufferMiB = 1024;  // far above any L3 of these machines

// The buffer, allocated and written once (so that every page is mapped).
const uint8_t* buffer() {
  static const uint8_t* b = [] {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, kBufferMiB * kMiB));
    if (!p) std::abort();
    for (size_t i = 0; i < kBufferMiB * kMiB; i += 4096) std::memset(p + i, static_cast<int>(i >> 12), 4096);
    return p;
  }();
  return b;
}

__attribute__((target("avx2"))) uint64_t sum_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t sum_scalar(const uint8_t* p, size_t n) {
  uint64_t a[4] = {0, 0, 0, 0};
  for (size_t i = 0; i + 32 <= n; i += 32)
    for (int j = 0; j < 4; ++j) {
      uint64_t v;
      std::memcpy(&v, p + i + 8 * j, 8);
      a[j] += v;
    }
  return a[0] + a[1] + a[2] + a[3];
}

void dram_read(benchmark::State& state) {
  const size_t total = static_cast<size_t>(state.range(0)) * kMiB;
  const size_t slice = total / static_cast<size_t>(state.threads()) / 128 * 128;
  const uint8_t* p = buffer() + slice * static_cast<size_t>(state.thread_index());
  const bool avx2 = __builtin_cpu_supports("avx2");
  for (auto _ : state) benchmark::DoNotOptimize(avx2 ? sum_avx2(p, slice) : sum_scalar(p, slice));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(slice));
}

}  // namespace

int main(int argc, char** argv) {
  buffer();
  auto* b = benchmark::RegisterBenchmark("dram_read", dram_read)->ArgName("mib")->Arg(kBufferMiB);
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  for (int t = 1; t <= cores; t = t < 2 ? 2 : t * 2) b->Threads(t);
  if (cores > 2 && (cores & (cores - 1)) != 0) b->Threads(cores);
  b->UseRealTime()->MinTime(1.0)->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
