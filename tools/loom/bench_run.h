// loom bench measurements, as llama-bench makes them: pp = one decode of N
// prompt tokens, tg = N single-token decodes, pp+tg = both in one timing;
// depth d = d tokens decoded into the cache first, not timed. Tokens are
// random ids. Each repetition starts from an empty cache.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "bench_format.h"
#include "bench_params.h"
#include "loom/model.h"

namespace loom::cli {

// What the records say about the machine and the build.
struct BenchSystem {
  std::string build_commit;
  std::string cpu_info;
  std::string gpu_info;  // the non-CPU devices, "" when none
};
BenchSystem bench_system();

struct BenchModelInfo {
  std::string filename;
  std::string type;  // "llama 1.1B Q4_0": architecture, size, type of most weights
  int64_t size = 0;  // weight bytes
  int64_t n_params = 0;
  std::string devices;  // the devices holding its weights, "CPU,OpenCL0"
};
BenchModelInfo describe_model(const Model& model);

struct BenchSamples {
  std::vector<int64_t> ns;  // wall time of each repetition
  SessionStats stats;       // host time and graph reuse over the timed repetitions
};

// Runs one instance `repetitions` times (after a warm-up run when `warmup`).
// A profiler, if given, records the timed prompt and generation only (not
// the warm-up, nor the context filled for -d).
BenchSamples run_bench_instance(const Model& model, const BenchInstance& inst, int repetitions, bool warmup,
                                std::mt19937& rng, Profiler* profiler = nullptr);

BenchRecord make_bench_record(const BenchSystem& system, const BenchModelInfo& model, const BenchInstance& inst,
                              const std::string& test_time, const BenchSamples& samples);

}  // namespace loom::cli
