// loom-bench-opencl: mul_mat (matrix x one column, the decode case) of every
// weight type on the first OpenCL device against the CPU backend, as GB/s of
// weights read.
// Usage: loom-bench-opencl [K=2048] [M=2048] [iterations=20]
// (set POCL_DEVICES="pthread pthread" for PoCL; LOOM_DEVICES filters as usual)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace {

using namespace loom;

// Seconds per mul_mat of a [K, M] `type` matrix with a [K, 1] f32 column.
double time_mul_mat(Device& device, DType type, int64_t K, int64_t M, int iterations, size_t* weight_bytes) {
  Context ctx;
  Tensor* a = ctx.new_tensor(type, {K, M});
  Tensor* b = ctx.new_tensor(DType::F32, {K, 1});
  Tensor* out = mul_mat(ctx, a, b);
  Graph graph = Graph::build(out);
  auto memory = allocate_tensors(ctx, device.default_buffer_type());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(K * M));
  for (float& v : values) v = dist(rng);
  tensor_from_floats(*a, values);
  values.resize(K);
  tensor_from_floats(*b, values);
  *weight_bytes = a->nbytes();
  auto backend = device.create_backend();
  for (int i = 0; i < 3; ++i) backend->compute(graph);  // warm-up: kernel compilation, caches
  backend->synchronize();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    backend->compute(graph);
    backend->synchronize();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t K = argc > 1 ? std::atoll(argv[1]) : 2048;
    const int64_t M = argc > 2 ? std::atoll(argv[2]) : 2048;
    const int iterations = argc > 3 ? std::atoi(argv[3]) : 20;
    Registry& reg = Registry::get();
    Device* cl = nullptr;
    for (Device* d : reg.devices())
      if (d->name().starts_with("OpenCL")) {
        cl = d;
        break;
      }
    if (!cl) {
      std::printf("no OpenCL device registered (with PoCL, set POCL_DEVICES)\n");
      return 0;
    }
    std::printf("mul_mat [%lld x %lld] x [%lld x 1], %d iterations\n", static_cast<long long>(K),
                static_cast<long long>(M), static_cast<long long>(K), iterations);
    std::printf("%-6s %-10s %10s %10s\n", "type", "device", "us", "GB/s");
    std::vector<DType> types = {DType::F32, DType::F16, DType::BF16};
    types.insert(types.end(), std::begin(kQuantizedTypes), std::end(kQuantizedTypes));
    for (DType type : types) {
      for (Device* d : {cl, &reg.cpu()}) {
        size_t bytes = 0;
        const double s = time_mul_mat(*d, type, K, M, iterations, &bytes);
        std::printf("%-6s %-10s %10.1f %10.2f\n", std::string(type_name(type)).c_str(), std::string(d->name()).c_str(),
                    s * 1e6, bytes / s / 1e9);
      }
    }
    return 0;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom-bench-opencl: %s\n", e.what());
    return 1;
  }
}
