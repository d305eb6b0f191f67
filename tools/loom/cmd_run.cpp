// loom run: generate text from a prompt, printing it as it comes, then the
// timings and memory.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include <fmt/format.h>

#include "rpc_args.h"
#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "loom/sampler.h"
#include "loom/tokenizer.h"
#include "model_args.h"
#include "fit_args.h"
#include "placement_args.h"
#include "profile_args.h"
#include "run_chat.h"

namespace loom::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string format_bytes(size_t b) {
  if (b >= (1u << 20)) return fmt::format("{:.1f} MiB", b / 1048576.0);
  if (b >= 1024) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", b);
}

// One row per buffer type: weights, KV cache and compute bytes.
void print_memory(const Model& model, const Session& session, const SchedReport& report) {
  struct Row {
    size_t weights = 0, kv = 0, compute = 0;
  };
  std::vector<std::pair<std::string, Row>> rows;
  auto row = [&rows](const std::string& name) -> Row& {
    for (auto& [n, r] : rows)
      if (n == name) return r;
    return rows.emplace_back(name, Row{}).second;
  };
  for (const auto& [name, bytes] : model.weight_bytes_by_buffer_type()) row(name).weights += bytes;
  for (const auto& [name, bytes] : session.kv_cache_bytes_by_buffer_type()) row(name).kv += bytes;
  for (const auto& b : report.buffers) row(b.buffer_type).compute += b.bytes;
  std::printf("memory:     %-14s %12s %12s %12s\n", "buffer type", "weights", "KV cache", "compute");
  for (const auto& [name, r] : rows)
    std::printf("            %-14s %12s %12s %12s\n", name.c_str(), format_bytes(r.weights).c_str(),
                format_bytes(r.kv).c_str(), format_bytes(r.compute).c_str());
}

}  // namespace

int cmd_run(int argc, char** argv) {
  auto specs = model_option_specs();
  specs.insert(specs.end(), {
                                {{"-p", "--prompt"}, "TEXT", "prompt (default \"Once upon a time\")"},
                                {{"-n", "--n-predict"}, "N", "tokens to generate; -1: until the end or a full context (default 32)"},
                                {{"-s", "--seed"}, "N", "sampling seed (default 0)"},
                                {{"--temp"}, "T", "temperature; 0 is greedy (default 0.8)"},
                                {{"--top-k"}, "N", "top-k, 0 off (default 40)"},
                                {{"--top-p"}, "P", "top-p, 1 off (default 0.95)"},
                                {{"--min-p"}, "P", "min-p, 0 off (default 0.05)"},
                                {{"--ignore-eos"}, "", "keep generating after an end-of-generation token"},
                                {{"--dot"}, "FILE", "write the generation graph's splits as Graphviz"},
                                {{"-cnv", "--conversation"}, "", "chat: read user lines from stdin, answer each with the chat template (-n: tokens per answer)"},
                                {{"--chat-template"}, "FILE", "with -cnv: a Jinja chat template instead of the file's tokenizer.chat_template"},
                                {{"-sys", "--system-prompt"}, "TEXT", "with -cnv: a system message first"},
                            });
  for (auto& s : profile_option_specs()) specs.push_back(std::move(s));
  Args args("run", "Generate text with a llama-family GGUF model.", with_rpc_options(specs));
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  connect_rpc(args);
  constexpr int kIntMax = std::numeric_limits<int>::max();
  SamplerOptions so;
  so.temperature = static_cast<float>(args.get_number("--temp", 0.8, 0.0, HUGE_VAL));
  so.top_k = args.get_int("--top-k", 40, 0, kIntMax);
  so.top_p = static_cast<float>(args.get_number("--top-p", 0.95, 0.0, 1.0));
  so.min_p = static_cast<float>(args.get_number("--min-p", 0.05, 0.0, 1.0));
  so.seed = static_cast<uint64_t>(args.get_int("--seed", 0));
  // -1: until an end-of-generation token or a full context, as in llama.cpp.
  const int n_predict_arg = args.get_int("--n-predict", 32, -1, kIntMax);
  const int n_predict = n_predict_arg < 0 ? kIntMax : n_predict_arg;
  const std::string prompt = args.get_or("--prompt", "Once upon a time");

  LoadOptions lo = load_options(args);
  lo.progress = true;
  SessionOptions session_opts = session_options(args);
  ProfileOutput profile(args);
  session_opts.profiler = profile.profiler();
  apply_fit(args, model_path(args), lo, session_opts);
  auto model = load_model(model_path(args), lo);
  const Tokenizer& tok = model->tokenizer();
  Session session(*model, session_opts);
  Sampler sampler(so);
  if (args.has("--conversation")) {
    const int status = run_chat(args, *model, session, sampler, n_predict);
    profile.finish();
    return status;
  }

  std::vector<int32_t> tokens = tok.encode(prompt, true, false);
  std::printf("%s", prompt.c_str());
  std::fflush(stdout);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = session.decode(tokens);
  const double prompt_s = seconds_since(t0);
  const SchedReport prompt_report = session.last_report();
  SchedReport gen_report = prompt_report;
  const size_t n_prompt = tokens.size();
  int generated = 0;
  t0 = std::chrono::steady_clock::now();
  for (; generated < n_predict; ++generated) {
    const int32_t next = sampler.sample(logits);
    if (tok.is_eog(next) && !args.has("--ignore-eos")) break;
    std::printf("%s", tok.token_to_piece(next).c_str());
    std::fflush(stdout);
    if (generated + 1 == n_predict || session.n_past() >= session.n_ctx()) {
      ++generated;
      break;
    }
    const int32_t one[] = {next};
    logits = session.decode(one);
    if (generated == 0) {
      gen_report = session.last_report();
      if (auto dot = args.get("--dot")) session.write_dot(*dot);
    }
  }
  const double gen_s = seconds_since(t0);
  const HParams& h = model->hparams();
  std::printf("\n\n");
  std::printf("model:      %s (%lld layers, embd %lld, vocab %lld)\n", model->file().path().c_str(),
              static_cast<long long>(h.n_layer), static_cast<long long>(h.n_embd), static_cast<long long>(h.n_vocab));
  std::printf("load:       %.3f s\n", model->load_seconds());
  std::printf("prompt:     %zu tokens in %.3f s, %.2f tokens/s\n", n_prompt, prompt_s, n_prompt / prompt_s);
  std::printf("generation: %d tokens in %.3f s, %.2f tokens/s\n", generated, gen_s,
              gen_s > 0 ? generated / gen_s : 0.0);
  std::printf("attention:  %s\n", session.flash_attn() ? "fused, flash_attn_ext (-fa on)" : "mul_mat, soft_max, mul_mat (-fa off)");
  print_memory(*model, session, gen_report);
  std::printf("splits:     prompt graph %zu (%s copied), generation graph %zu (%s copied)\n",
              prompt_report.n_splits(), format_bytes(prompt_report.copy_bytes).c_str(), gen_report.n_splits(),
              format_bytes(gen_report.copy_bytes).c_str());
  std::fflush(stdout);
  profile.finish();
  return 0;
}

}  // namespace loom::cli
