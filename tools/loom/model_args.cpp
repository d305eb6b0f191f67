#include "model_args.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "loom/backend.h"
#include "loom/error.h"
#include "model_gen/model_gen.h"
#include "fit_args.h"
#include "placement_args.h"

namespace loom::cli {
namespace {

constexpr const char* kDefaultPreset = "tiny";
constexpr DType kDefaultType = DType::Q8_0;
constexpr uint64_t kDefaultSeed = 1;

DType parse_type(const Args& args, const std::string& flag, DType fallback) {
  auto v = args.get(flag);
  if (!v) return fallback;
  auto t = type_from_name(*v);
  if (!t) fail("{}: unknown type '{}' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1)", flag, *v);
  return *t;
}

}  // namespace

FlashAttn parse_flash_attn(const std::string& flag, const std::string& value) {
  if (value == "1") return FlashAttn::On;  // llama-bench's spelling
  if (value == "0") return FlashAttn::Off;
  auto fa = flash_attn_from_name(value);
  if (!fa) fail("{}: '{}' should be on, off or auto", flag, value);
  return *fa;
}

std::vector<OptionSpec> model_option_specs() {
  std::vector<OptionSpec> specs = {
      {{"-m", "--model"}, "FILE", "GGUF model (default: a built-in random tiny model, generated on first use)"},
      {{"-t", "--threads"}, "N", "CPU threads, at most 512 (default and 0: one per physical core)"},
      {{"--poll"}, "0-100", "how long idle CPU threads poll for work before sleeping (default 50; 0: sleep at once)"},
      {{"-c", "--ctx-size"}, "N", "context size (default: the model's, at most 4096)"},
      {{"-b", "--batch-size"}, "N", "logical batch size (default 2048)"},
      {{"-ub", "--ubatch-size"}, "N", "micro-batch size: tokens per graph (default 512)"},
      {{"-ctk", "--cache-type-k"}, "TYPE", "K cache type: f16 (default), f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1"},
      {{"-ctv", "--cache-type-v"}, "TYPE", "V cache type: f16 (default), f32, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 (quantized: needs -fa on)"},
      {{"-fa", "--flash-attn"}, "on|off|auto", "fused attention (flash_attn_ext); auto (default): on where every device holding layers runs it"},
      {{"--swa-full"}, "", "sliding-window layers keep a full-context cache (default: the window's, n_swa * sequences + -ub cells)"},
      {{"--compute-buffers"}, "worst|grow", "worst (default): size compute buffers once for a full context; grow: as the context and batches grow"},
      {{"--logits-per-graph"}, "N", "rows of logits one graph computes; a micro-batch wanting more (eval --all-logits) runs the output matrix over its hidden states N rows at a time, so compute buffers hold N rows of logits, not -ub (default 0: max(32, sequences))"},
      {{"--no-mmap"}, "", "read weights into memory instead of mapping the file"},
      {{"-ngl", "--n-gpu-layers"}, "N", "layers to offload to the non-CPU devices (n_layer + 1: the output layer too)"},
      {{"-sm", "--split-mode"}, "MODE", "none, layer (default) or row: how offloaded layers spread over devices"},
      {{"-ts", "--tensor-split"}, "P,..", "proportions per offload device, e.g. 3,1 (default: free memory)"},
      {{"-mg", "--main-gpu"}, "I", "main offload device (index) for -sm none and row (default 0)"},
      {{"-ot", "--override-tensor"}, "RE=TYPE", "put weights matching RE in buffer type TYPE (repeatable)"},
      {{"-cmoe", "--cpu-moe"}, "", "keep the expert weights of every layer in CPU memory (after -ot)"},
      {{"-ncmoe", "--n-cpu-moe"}, "N", "keep the expert weights of the first N layers in CPU memory (after -ot)"},
  };
  for (auto& s : fit_option_specs()) specs.push_back(std::move(s));
  return specs;
}

std::string default_model_path() {
  std::filesystem::path dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    dir = std::filesystem::path(xdg) / "loom";
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::filesystem::path(home) / ".cache" / "loom";
  else
    dir = std::filesystem::temp_directory_path() / "loom";
  const auto path = dir / fmt::format("default-{}-{}-seed{}.gguf", kDefaultPreset, type_name(kDefaultType), kDefaultSeed);
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(dir);
    std::fprintf(stderr, "generating the built-in default model (%s, %s) at %s\n", kDefaultPreset,
                 std::string(type_name(kDefaultType)).c_str(), path.c_str());
    write_random_model(model_preset(kDefaultPreset), kDefaultType, kDefaultSeed, path.string());
  }
  return path.string();
}

std::string model_path(const Args& args) {
  if (auto m = args.get("--model")) return *m;
  return default_model_path();
}

LoadOptions load_options(const Args& args) {
  LoadOptions o;
  o.use_mmap = !args.has("--no-mmap");
  PlacementOptions& p = o.placement;
  p.n_gpu_layers = args.get_int("--n-gpu-layers", 0);
  if (auto sm = args.get("--split-mode")) p.split_mode = parse_split_mode(*sm);
  if (auto ts = args.get("--tensor-split")) p.tensor_split = parse_tensor_split(*ts);
  p.main_gpu = args.get_int("--main-gpu", 0);
  // "a=CPU,b=OpenCL0": two overrides, as llama.cpp accepts.
  for (const auto& ot : args.get_all("--override-tensor"))
    for (const auto& one : split_list(ot)) p.overrides.push_back(parse_override(one));
  // After -ot, as llama-bench orders them: the first matching pattern wins.
  if (args.has("--cpu-moe")) for (auto& ov : cpu_moe_overrides()) p.overrides.push_back(std::move(ov));
  for (auto& ov : n_cpu_moe_overrides(args.get_int("--n-cpu-moe", 0))) p.overrides.push_back(std::move(ov));
  return o;
}

SessionOptions session_options(const Args& args) {
  SessionOptions o;
  // llama.cpp reads -t <= 0 as "all cores"; here 0 means that and a negative
  // count is refused, as is more than kMaxThreads.
  o.n_threads = args.get_int("--threads", 0, 0, kMaxThreads);
  o.poll = args.get_int("--poll", kDefaultPoll, 0, kMaxPoll);
  o.n_ctx = args.get_int("--ctx-size", 0, 0, std::numeric_limits<int>::max());
  o.n_batch = args.get_int("--batch-size", 2048, 1, std::numeric_limits<int>::max());
  o.n_ubatch = args.get_int("--ubatch-size", 512, 1, std::numeric_limits<int>::max());
  o.type_k = parse_type(args, "--cache-type-k", DType::F16);
  o.type_v = parse_type(args, "--cache-type-v", DType::F16);
  if (auto fa = args.get("--flash-attn")) o.flash_attn = parse_flash_attn("-fa", *fa);
  o.swa_full = args.has("--swa-full");
  if (auto c = args.get("--compute-buffers")) {
    auto cb = compute_buffers_from_name(*c);
    if (!cb) fail("--compute-buffers: '{}' should be worst or grow", *c);
    o.compute_buffers = *cb;
  }
  o.logits_per_graph = args.get_int("--logits-per-graph", 0, 0, std::numeric_limits<int>::max());
  return o;
}

}  // namespace loom::cli
