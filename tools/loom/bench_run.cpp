#include "bench_run.h"

#include <chrono>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "bench_commit.h"
#include "loom/profiler.h"
#include "loom/registry.h"

namespace loom::cli {
namespace {

std::vector<int32_t> random_tokens(int n, int64_t n_vocab, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& t : out) t = dist(rng);
  return out;
}

void generate(Session& session, int n, int64_t n_vocab, std::mt19937& rng) {
  for (int i = 0; i < n; ++i) {
    const int32_t t = random_tokens(1, n_vocab, rng)[0];
    session.decode(std::span<const int32_t>(&t, 1));
  }
}

std::string size_label(int64_t n_params) {
  const double x = static_cast<double>(n_params);
  if (x >= 1e9) return fmt::format("{:.1f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.0f}M", x / 1e6);
  return fmt::format("{:.0f}K", x / 1e3);
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? std::nan("") : s / static_cast<double>(v.size());
}

// Sample standard deviation (n - 1), 0 for a single sample.
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace

BenchSystem bench_system() {
  BenchSystem s;
  s.build_commit = LOOM_BUILD_COMMIT;
  const Registry& reg = Registry::get();
  s.cpu_info = reg.cpu().description();
  for (const Device* d : reg.devices()) {
    if (d->type() == DeviceType::CPU) continue;
    s.gpu_info += fmt::format("{}{}: {}", s.gpu_info.empty() ? "" : "; ", d->name(), d->description());
  }
  return s;
}

BenchModelInfo describe_model(const Model& model) {
  BenchModelInfo info;
  info.filename = model.file().path();
  info.size = static_cast<int64_t>(model.weight_bytes());
  for (const Device* d : model.devices()) info.devices += (info.devices.empty() ? "" : ",") + std::string(d->name());
  std::map<uint32_t, int64_t> params_by_type;
  for (const auto& t : model.file().tensors()) {
    const int64_t n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
    info.n_params += n;
    if (t.n_dims >= 2) params_by_type[t.type] += n;
  }
  uint32_t main_type = 0;
  int64_t most = -1;
  for (auto [type, n] : params_by_type)
    if (n > most) most = n, main_type = type;
  const std::string type_text =
      is_known_type(main_type) ? std::string(type_name(static_cast<DType>(main_type))) : fmt::format("type{}", main_type);
  info.type = fmt::format("{} {} {}", model.file().get_string("general.architecture"), size_label(info.n_params),
                          type_text);
  return info;
}

BenchSamples run_bench_instance(const Model& model, const BenchInstance& inst, int repetitions, bool warmup,
                                std::mt19937& rng, Profiler* profiler) {
  SessionOptions so;
  so.n_ctx = inst.n_depth + inst.n_prompt + inst.n_gen;
  so.n_batch = inst.n_batch;
  so.n_ubatch = inst.n_ubatch;
  so.n_threads = inst.n_threads;
  so.poll = inst.poll;
  so.reuse_graph = inst.graph_reuse;
  so.type_k = inst.type_k;
  so.type_v = inst.type_v;
  so.flash_attn = inst.flash_attn;
  so.profiler = profiler;
  if (profiler) profiler->pause();
  Session session(model, so);
  const int64_t n_vocab = model.hparams().n_vocab;
  if (warmup) {
    if (inst.n_prompt > 0) session.decode(random_tokens(inst.n_prompt, n_vocab, rng));
    if (inst.n_gen > 0) generate(session, 1, n_vocab, rng);
  }
  BenchSamples out;
  for (int r = 0; r < repetitions; ++r) {
    session.reset();
    if (inst.n_depth > 0) session.decode(random_tokens(inst.n_depth, n_vocab, rng));
    const std::vector<int32_t> prompt = random_tokens(inst.n_prompt, n_vocab, rng);
    const SessionStats before = session.stats();
    if (profiler) profiler->resume();
    const auto t0 = std::chrono::steady_clock::now();
    if (inst.n_prompt > 0) session.decode(prompt);
    generate(session, inst.n_gen, n_vocab, rng);
    if (profiler) profiler->pause();
    out.ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    const SessionStats& after = session.stats();
    out.stats.graphs_built += after.graphs_built - before.graphs_built;
    out.stats.graphs_reused += after.graphs_reused - before.graphs_reused;
    out.stats.host_ns += after.host_ns - before.host_ns;
    out.stats.compute_ns += after.compute_ns - before.compute_ns;
  }
  if (profiler) profiler->resume();
  return out;
}

BenchRecord make_bench_record(const BenchSystem& system, const BenchModelInfo& model, const BenchInstance& inst,
                              const std::string& test_time, const BenchSamples& samples) {
  const std::vector<int64_t>& samples_ns = samples.ns;
  const SessionStats& st = samples.stats;
  const double n_tokens = inst.n_prompt + inst.n_gen;
  std::vector<double> ns, ts;
  for (int64_t s : samples_ns) {
    ns.push_back(static_cast<double>(s));
    ts.push_back(n_tokens * 1e9 / static_cast<double>(s));
  }
  const auto i64 = [](auto v) { return BenchValue(static_cast<int64_t>(v)); };
  return {
      {"build_commit", system.build_commit},
      {"cpu_info", system.cpu_info},
      {"gpu_info", system.gpu_info},
      {"devices", model.devices},
      {"model_filename", model.filename},
      {"model_type", model.type},
      {"model_size", i64(model.size)},
      {"model_n_params", i64(model.n_params)},
      {"n_batch", i64(inst.n_batch)},
      {"n_ubatch", i64(inst.n_ubatch)},
      {"n_threads", i64(inst.n_threads)},
      {"poll", i64(inst.poll)},
      {"graph_reuse", i64(inst.graph_reuse ? 1 : 0)},
      {"type_k", std::string(type_name(inst.type_k))},
      {"type_v", std::string(type_name(inst.type_v))},
      {"flash_attn", std::string(flash_attn_name(inst.flash_attn))},
      {"n_gpu_layers", i64(inst.load.n_gpu_layers)},
      {"n_cpu_moe", i64(inst.load.n_cpu_moe)},
      {"cpu_moe", i64(inst.load.cpu_moe ? 1 : 0)},
      {"split_mode", inst.load.split_mode},
      {"main_gpu", i64(inst.load.main_gpu)},
      {"tensor_split", inst.load.tensor_split},
      {"override_tensors", inst.load.override_tensors},
      {"use_mmap", i64(inst.load.use_mmap ? 1 : 0)},
      {"n_prompt", i64(inst.n_prompt)},
      {"n_gen", i64(inst.n_gen)},
      {"n_depth", i64(inst.n_depth)},
      {"test_time", test_time},
      {"repetitions", i64(samples_ns.size())},
      {"avg_ns", mean(ns)},
      {"stddev_ns", stddev(ns)},
      {"avg_ts", mean(ts)},
      {"stddev_ts", stddev(ts)},
      {"samples_ns", samples_ns},
      {"samples_ts", ts},
      {"graphs_built", i64(st.graphs_built)},
      {"graphs_reused", i64(st.graphs_reused)},
      {"host_ns_per_graph", st.n_graphs() ? static_cast<double>(st.host_ns) / static_cast<double>(st.n_graphs()) : 0.0},
  };
}

}  // namespace loom::cli
