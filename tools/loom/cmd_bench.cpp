// loom bench: prompt-processing and generation speed in the manner of
// llama-bench. Every option takes comma lists (numbers also ranges), the
// runs are their cartesian product, and each run's record (build, hardware,
// model, parameters, average and spread of tokens/s, samples) is printed as
// it finishes in the chosen format (-o md|csv|json|jsonl|sql).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "rpc_args.h"
#include "args.h"
#include "bench_format.h"
#include "bench_params.h"
#include "bench_run.h"
#include "profile_args.h"
#include "commands.h"
#include "loom/cpu_cores.h"
#include "loom/error.h"
#include "fit_args.h"
#include "model_args.h"
#include "loom/registry.h"
#include "placement_args.h"

namespace loom::cli {
namespace {

std::vector<OptionSpec> with_profile_options(std::vector<OptionSpec> specs) {
  for (auto& s : profile_option_specs()) specs.push_back(std::move(s));
  return specs;
}

// What the CPU backend uses when no thread count is given: one per physical core.
int default_thread_count() { return physical_cores(); }

std::vector<OptionSpec> bench_option_specs() {
  std::vector<OptionSpec> specs = {
      {{"-m", "--model"}, "FILES", "GGUF models (comma list; the flag may repeat)"},
      {{"-p", "--n-prompt"}, "N", "prompt-processing tests of N tokens (default 512; 0: none)"},
      {{"-n", "--n-gen"}, "N", "generation tests of N tokens (default 128; 0: none)"},
      {{"-pg"}, "PP,TG", "prompt then generation in one test (repeat the flag for more)"},
      {{"-d", "--n-depth"}, "N", "tokens already in the cache before each test (default 0)"},
      {{"-b", "--batch-size"}, "N", "logical batch size (default 2048)"},
      {{"-ub", "--ubatch-size"}, "N", "micro-batch size (default 512)"},
      {{"-t", "--threads"}, "N", "CPU threads (default: one per physical core)"},
      {{"--poll"}, "0-100", "how long idle CPU threads poll for work before sleeping (default 50, as llama.cpp)"},
      {{"--graph-reuse"}, "0|1", "run the last graph again when the next micro-batch has its shape (default 1)"},
      {{"-ctk", "--cache-type-k"}, "TYPES", "K cache type (default f16)"},
      {{"-ctv", "--cache-type-v"}, "TYPES", "V cache type (default f16; quantized types need -fa on)"},
      {{"-fa", "--flash-attn"}, "on|off|auto", "fused attention (default auto: on where every device holding layers runs it)"},
      {{"-ngl", "--n-gpu-layers"}, "N", "layers to offload to the non-CPU devices (default 0)"},
      {{"-sm", "--split-mode"}, "MODE", "none, layer (default) or row"},
      {{"-mg", "--main-gpu"}, "I", "main offload device index for -sm none and row (default 0)"},
      {{"-ts", "--tensor-split"}, "A/B/..", "proportions per offload device, '/' between devices (default: free memory)"},
      {{"-ot", "--override-tensor"}, "RE=BUFT", "weights matching RE go to buffer type BUFT (',' within a set, ';' between sets; an empty set: no override)"},
      {{"-ncmoe", "--n-cpu-moe"}, "N", "expert weights of the first N layers in CPU memory, after -ot (default 0)"},
      {{"-cmoe", "--cpu-moe"}, "", "expert weights of every layer in CPU memory, after -ot"},
      {{"-mmp", "--mmap"}, "0|1", "map the model file (default 1)"},
      {{"--no-mmap"}, "", "read weights into memory (same as -mmp 0)"},
      {{"-r", "--repetitions"}, "N", "timed runs per test (default 5)"},
      {{"--no-warmup"}, "", "skip the untimed warm-up run"},
      {{"-o", "--output"}, "FORMAT", "md (default), csv, json, jsonl or sql"},
      {{"--seed"}, "N", "seed of the random token ids (default 1)"},
      {{"-v", "--verbose"}, "", "print progress to stderr"},
  };
  for (auto& spec : fit_option_specs())
    if (spec.names.front() != "--fit-ctx") specs.push_back(std::move(spec));  // each test sets the context
  return specs;
}

// The session a load's runs need at most: --fit sizes the placement for it.
SessionOptions largest_session(const std::vector<BenchInstance>& runs, const BenchLoadKey& load) {
  SessionOptions so;
  so.n_ctx = 1;
  so.n_batch = so.n_ubatch = 1;
  for (const BenchInstance& r : runs)
    if (r.load == load) {
      so.n_ctx = std::max<int64_t>(so.n_ctx, r.n_depth + r.n_prompt + r.n_gen);
      so.n_batch = std::max<int64_t>(so.n_batch, r.n_batch);
      so.n_ubatch = std::max<int64_t>(so.n_ubatch, r.n_ubatch);
    }
  return so;
}

std::vector<std::string> all_items(const Args& args, const std::string& flag) {
  std::vector<std::string> out;
  for (const auto& v : args.get_all(flag))
    for (auto& item : split_list(v, ',')) out.push_back(item);
  return out;
}

// The -ot sets, ';' between them. An empty set (";x=CPU", "x=CPU;" or "")
// runs without overrides, to compare against.
std::vector<std::string> override_sets(const Args& args) {
  std::vector<std::string> out;
  for (const auto& v : args.get_all("--override-tensor")) {
    for (auto& set : split_list(v, ';', true)) out.push_back(std::move(set));
    if (v.empty() || v.back() == ';') out.emplace_back();
  }
  return out;
}

std::vector<int> all_ints(const Args& args, const std::string& flag, const std::string& label,
                          std::vector<int> fallback) {
  std::vector<int> out;
  for (const auto& v : args.get_all(flag))
    for (int n : parse_int_list(label, v)) out.push_back(n);
  return out.empty() ? fallback : out;
}

std::vector<DType> all_types(const Args& args, const std::string& flag, const std::string& label) {
  std::vector<DType> out;
  for (const auto& name : all_items(args, flag)) {
    auto t = type_from_name(name);
    if (!t) fail("{}: unknown cache type '{}' (f16, f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1)", label, name);
    out.push_back(*t);
  }
  return out.empty() ? std::vector<DType>{DType::F16} : out;
}

BenchParams parse_params(const Args& args) {
  BenchParams p;
  p.models = all_items(args, "--model");
  p.n_prompt = all_ints(args, "--n-prompt", "-p", {512});
  p.n_gen = all_ints(args, "--n-gen", "-n", {128});
  for (const auto& v : args.get_all("-pg")) {
    const auto parts = split_list(v, ',');
    if (parts.size() != 2) fail("-pg: '{}' should be PP,TG (two numbers)", v);
    p.prompt_gen.emplace_back(parse_int_list("-pg", parts[0]).at(0), parse_int_list("-pg", parts[1]).at(0));
  }
  p.n_depth = all_ints(args, "--n-depth", "-d", {0});
  p.n_batch = all_ints(args, "--batch-size", "-b", {2048});
  p.n_ubatch = all_ints(args, "--ubatch-size", "-ub", {512});
  p.n_threads = all_ints(args, "--threads", "-t", {});
  p.poll = all_ints(args, "--poll", "--poll", {kDefaultPoll});
  p.graph_reuse = all_ints(args, "--graph-reuse", "--graph-reuse", {1});
  p.type_k = all_types(args, "--cache-type-k", "-ctk");
  p.type_v = all_types(args, "--cache-type-v", "-ctv");
  if (auto fa = all_items(args, "--flash-attn"); !fa.empty()) {
    p.flash_attn.clear();
    for (const auto& v : fa) p.flash_attn.push_back(parse_flash_attn("-fa", v));
  }
  p.n_gpu_layers = all_ints(args, "--n-gpu-layers", "-ngl", {0});
  if (auto sm = all_items(args, "--split-mode"); !sm.empty()) p.split_mode = sm;
  p.main_gpu = all_ints(args, "--main-gpu", "-mg", {0});
  if (auto ts = all_items(args, "--tensor-split"); !ts.empty()) p.tensor_split = ts;
  if (auto ot = override_sets(args); !ot.empty()) p.override_tensors = ot;
  p.n_cpu_moe = all_ints(args, "--n-cpu-moe", "-ncmoe", {0});
  p.cpu_moe = args.has("--cpu-moe");
  if (args.has("--no-mmap")) {
    p.use_mmap = {false};
  } else if (args.has("--mmap")) {
    p.use_mmap.clear();
    for (int v : all_ints(args, "--mmap", "-mmp", {1})) {
      if (v > 1) fail("-mmp: '{}' should be 0 or 1", v);
      p.use_mmap.push_back(v == 1);
    }
  }
  p.repetitions = args.get_int("--repetitions", 5);
  p.warmup = !args.has("--no-warmup");
  p.validate();
  return p;
}

// The Markdown table shows the model columns, then each parameter that
// varies or differs from its default.
std::vector<std::string> markdown_columns(const std::vector<BenchInstance>& runs) {
  std::vector<std::string> cols = {"model_type", "model_size", "model_n_params", "devices", "n_threads"};
  const BenchInstance defaults;
  auto shown = [&](auto get) {
    std::set<std::string> values;
    bool non_default = false;
    for (const auto& r : runs) {
      values.insert(fmt::format("{}", get(r)));
      non_default |= get(r) != get(defaults);
    }
    return values.size() > 1 || non_default;
  };
  if (shown([](const BenchInstance& r) { return r.poll; })) cols.push_back("poll");
  if (shown([](const BenchInstance& r) { return r.graph_reuse ? 1 : 0; })) cols.push_back("graph_reuse");
  if (shown([](const BenchInstance& r) { return r.n_batch; })) cols.push_back("n_batch");
  if (shown([](const BenchInstance& r) { return r.n_ubatch; })) cols.push_back("n_ubatch");
  if (shown([](const BenchInstance& r) { return std::string(type_name(r.type_k)); })) cols.push_back("type_k");
  if (shown([](const BenchInstance& r) { return std::string(type_name(r.type_v)); })) cols.push_back("type_v");
  if (shown([](const BenchInstance& r) { return std::string(flash_attn_name(r.flash_attn)); })) cols.push_back("flash_attn");
  if (shown([](const BenchInstance& r) { return r.load.use_mmap ? 1 : 0; })) cols.push_back("use_mmap");
  if (shown([](const BenchInstance& r) { return r.load.n_gpu_layers; })) cols.push_back("n_gpu_layers");
  if (shown([](const BenchInstance& r) { return r.load.n_cpu_moe; })) cols.push_back("n_cpu_moe");
  if (shown([](const BenchInstance& r) { return r.load.cpu_moe ? 1 : 0; })) cols.push_back("cpu_moe");
  if (shown([](const BenchInstance& r) { return r.load.split_mode; })) cols.push_back("split_mode");
  if (shown([](const BenchInstance& r) { return r.load.main_gpu; })) cols.push_back("main_gpu");
  if (shown([](const BenchInstance& r) { return r.load.tensor_split; })) cols.push_back("tensor_split");
  if (shown([](const BenchInstance& r) { return r.load.override_tensors; })) cols.push_back("override_tensors");
  return cols;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void emit(const std::string& text) {
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  Args args("bench", "Measure prompt processing (pp) and generation (tg) speed, like llama-bench.",
            with_rpc_options(with_profile_options(bench_option_specs())));
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    std::fputs("\nLists: -p 128,512  ranges: -t 1-4, -p 64-512*2, -d 0-1024+512; the runs are every combination.\n",
               stdout);
    return 0;
  }
  connect_rpc(args);
  if (!args.positional().empty()) fail("bench: unexpected argument '{}'", args.positional().front());
  const std::string format_name = args.get_or("--output", "md");
  const auto format = bench_format_from_name(format_name);
  if (!format) fail("-o: unknown format '{}' (md, csv, json, jsonl, sql)", format_name);
  const BenchParams params = parse_params(args);
  const std::vector<BenchInstance> runs = params.instances(default_thread_count());
  const bool verbose = args.has("--verbose");
  std::mt19937 rng(static_cast<uint32_t>(args.get_int("--seed", 1)));

  ProfileOutput profile(args);
  const BenchSystem system = bench_system();
  auto printer = make_bench_printer(*format, markdown_columns(runs));
  emit(printer->begin());
  std::unique_ptr<Model> model;
  BenchModelInfo info;
  BenchLoadKey loaded;
  BenchLoadKey placed;  // what the records say: `loaded`, with --fit's choice of -ngl and -ts
  for (size_t i = 0; i < runs.size(); ++i) {
    const BenchInstance& run = runs[i];
    if (!model || !(run.load == loaded)) {
      model.reset();
      LoadOptions lo;
      lo.use_mmap = run.load.use_mmap;
      lo.placement = placement_options(run.load);
      placed = run.load;
      if (const FitChoice fit = fit_choice(args, Registry::get().devices()); fit.on) {
        FitOptions fo = fit.options;
        fo.choose_ctx = false;
        const FitResult r = fit_model(run.load.model, Registry::get().devices(), lo,
                                      largest_session(runs, run.load), fo);
        if (!r.fits) fail("--fit: {}", r.reason);
        lo.placement = r.placement;
        placed.n_gpu_layers = r.placement.n_gpu_layers;
        placed.tensor_split = fmt::format("{}", fmt::join(r.placement.tensor_split, "/"));
        std::fprintf(stderr, "loom bench: fit: -ngl %d: %s\n", r.placement.n_gpu_layers, r.reason.c_str());
      }
      if (verbose) std::fprintf(stderr, "loom bench: loading %s\n", run.load.model.c_str());
      model = load_model(run.load.model, lo);
      info = describe_model(*model);
      loaded = run.load;
    }
    if (verbose)
      std::fprintf(stderr, "loom bench: %zu/%zu %s, %d threads\n", i + 1, runs.size(),
                   bench_test_name(run.n_prompt, run.n_gen, run.n_depth).c_str(), run.n_threads);
    const std::string test_time = utc_now();
    const auto samples = run_bench_instance(*model, run, params.repetitions, params.warmup, rng, profile.profiler());
    if (verbose && samples.stats.n_graphs() > 0)
      std::fprintf(stderr, "loom bench: %lld graphs built, %lld reused; host time %.1f us per graph\n",
                   static_cast<long long>(samples.stats.graphs_built), static_cast<long long>(samples.stats.graphs_reused),
                   static_cast<double>(samples.stats.host_ns) / 1e3 / static_cast<double>(samples.stats.n_graphs()));
    BenchInstance recorded = run;
    recorded.load = placed;
    emit(printer->record(make_bench_record(system, info, recorded, test_time, samples)));
  }
  emit(printer->end());
  if (*format == BenchFormat::Markdown) emit(fmt::format("\nbuild: {}\n", system.build_commit));
  profile.finish();
  return 0;
}

}  // namespace loom::cli
