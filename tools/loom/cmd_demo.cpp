// loom demo: builds a small transformer-style graph (mul_mat in every weight
// type, rms_norm, rope, soft_max, silu), runs it on every device and checks
// each device's output against the CPU's.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include <fmt/format.h>

#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom::cli {
namespace {

constexpr int64_t kDim = 512;
constexpr int64_t kTokens = 32;

struct DemoGraph {
  Context ctx;
  Tensor* x = nullptr;
  Tensor* pos = nullptr;
  std::vector<Tensor*> weights;
  Tensor* out = nullptr;
};

void build(DemoGraph& g) {
  Context& ctx = g.ctx;
  g.x = ctx.new_tensor(DType::F32, {kDim, kTokens});
  g.x->name = "x";
  g.pos = ctx.new_tensor(DType::I32, {kTokens});
  g.pos->name = "positions";
  Tensor* h = rms_norm(ctx, g.x, 1e-5f);
  Tensor* sum = nullptr;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    Tensor* w = ctx.new_tensor(t, {kDim, kDim});
    w->name = fmt::format("w_{}", type_name(t));
    w->flags |= kFlagWeight;
    g.weights.push_back(w);
    Tensor* y = mul_mat(ctx, w, h);
    sum = sum ? add(ctx, sum, y) : y;
  }
  Tensor* heads = reshape(ctx, sum, {64, kDim / 64, kTokens, 1});
  heads = rope(ctx, heads, g.pos, {.mode = RopeMode::NeoX});
  Tensor* flat = reshape(ctx, cont(ctx, heads), {kDim, kTokens, 1, 1});
  Tensor* probs = soft_max(ctx, flat, nullptr, 0.125f);
  g.out = mul(ctx, silu(ctx, flat), probs);
  g.out->name = "out";
}

void fill(DemoGraph& g) {
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto random = [&](int64_t n, float s) {
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng) * s;
    return v;
  };
  tensor_from_floats(*g.x, random(g.x->nelements(), 1.0f));
  std::vector<float> pos(kTokens);
  for (int i = 0; i < kTokens; ++i) pos[i] = static_cast<float>(i);
  tensor_from_floats(*g.pos, pos);
  for (Tensor* w : g.weights) tensor_from_floats(*w, random(w->nelements(), 0.05f));
}

}  // namespace

int cmd_demo(int argc, char** argv) {
  Args args("demo", "Run a small demo graph on every device and compare each with the CPU.",
            {{{"-t", "--threads"}, "N", "CPU threads (default: all cores)"},
             {{"-r", "--repeat"}, "N", "timed runs per device (default 10)"}});
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  const int threads = args.get_int("--threads", 0);
  const int repeat = std::max(1, args.get_int("--repeat", 10));
  Registry& reg = Registry::get();
  std::printf("devices:\n");
  for (Device* d : reg.devices())
    std::printf("  %-10s %-5s %s\n", std::string(d->name()).c_str(), std::string(device_type_name(d->type())).c_str(),
                d->description().c_str());
  std::printf("\ngraph: rms_norm -> mul_mat x5 (f32 f16 bf16 q8_0 q4_0, %lldx%lld weights, %lld tokens) -> rope -> "
              "soft_max -> silu\n\n",
              static_cast<long long>(kDim), static_cast<long long>(kDim), static_cast<long long>(kTokens));
  std::vector<float> reference;
  int failures = 0;
  for (Device* d : reg.devices()) {
    DemoGraph g;
    build(g);
    Graph graph = Graph::build(g.out);
    bool supported = true;
    for (Tensor* n : graph.nodes()) supported = supported && (op_is_view(n->op) || d->supports_op(*n));
    if (!supported) {
      std::printf("  %-10s skipped: does not support every op of the graph\n", std::string(d->name()).c_str());
      continue;
    }
    TensorAllocation mem = allocate_tensors(g.ctx, d->default_buffer_type());
    fill(g);
    auto backend = d->create_backend({.n_threads = threads});
    backend->compute(graph);  // warm-up (kernel compilation, caches)
    backend->synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeat; ++i) backend->compute(graph);
    backend->synchronize();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / repeat;
    std::vector<float> result = tensor_to_floats(*g.out);
    std::string check = "reference";
    if (reference.empty()) {
      reference = result;
    } else {
      double err = 0.0, norm = 0.0;
      for (size_t i = 0; i < result.size(); ++i) {
        err += (result[i] - reference[i]) * (result[i] - reference[i]);
        norm += reference[i] * reference[i];
      }
      const double nmse = err / std::max(norm, 1e-30);
      const bool ok = nmse < 1e-4;
      failures += !ok;
      check = fmt::format("{} (nmse {:.2e} vs CPU)", ok ? "ok" : "MISMATCH", nmse);
    }
    std::printf("  %-10s %8.3f ms/graph  %s  [%zu MiB in %s]\n", std::string(d->name()).c_str(), ms, check.c_str(),
                mem.total_bytes >> 20, std::string(d->default_buffer_type().name()).c_str());
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace loom::cli
