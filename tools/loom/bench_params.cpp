#include "bench_params.h"

#include <algorithm>

#include <fmt/format.h>

#include "args.h"
#include "loom/backend.h"
#include "loom/error.h"
#include "placement_args.h"

namespace loom::cli {
namespace {

int parse_int(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0 && v <= 1'000'000'000) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  fail("{}: '{}' is not a non-negative integer", flag, text);
}

}  // namespace

std::vector<int> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : split_list(text, ',')) {
    if (out.size() >= kMaxListValues)
      fail("{}: '{}' has too many values; a list may have at most {}", flag, text, kMaxListValues);
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(parse_int(flag, item));
      continue;
    }
    const int first = parse_int(flag, item.substr(0, dash));
    std::string rest = item.substr(dash + 1);
    char op = '+';
    int step = 1;
    if (const size_t s = rest.find_first_of("+*"); s != std::string::npos) {
      op = rest[s];
      step = parse_int(flag, rest.substr(s + 1));
      rest = rest.substr(0, s);
    }
    const int last = parse_int(flag, rest);
    if (last < first) fail("{}: range '{}' ends before it starts", flag, item);
    if (op == '+' && step < 1) fail("{}: range '{}' needs a step of at least 1", flag, item);
    if (op == '*' && (step < 2 || first < 1))
      fail("{}: range '{}' needs a start of at least 1 and a factor of at least 2", flag, item);
    if (op == '+' && (last - first) / step + 1 > static_cast<long long>(kMaxListValues - out.size()))
      fail("{}: range '{}' has {} values; a list may have at most {}", flag, item, (last - first) / step + 1,
           kMaxListValues);
    for (long long v = first; v <= last; v = op == '+' ? v + step : v * step) out.push_back(static_cast<int>(v));
  }

  if (out.empty()) fail("{}: no values in '{}'", flag, text);
  return out;
}

void BenchParams::validate() const {
  if (models.empty()) fail("give a model with -m FILE");
  // Parse every placement value now, so a typo fails before the first run.
  for (const auto& sm : split_mode)
    for (const auto& ts : tensor_split)
      for (const auto& ot : override_tensors) placement_options({"", true, 0, sm, 0, ts, ot});
  for (int t : n_threads)
    if (t < 1 || t > kMaxThreads) fail("-t {}: needs between 1 and {} threads", t, kMaxThreads);
  for (int v : poll)
    if (v < 0 || v > kMaxPoll) fail("--poll {}: needs a level between 0 and {}", v, kMaxPoll);
  for (int v : graph_reuse)
    if (v != 0 && v != 1) fail("--graph-reuse {}: should be 0 or 1", v);
  for (int b : n_batch)
    if (b < 1) fail("-b {}: the batch needs at least one token", b);
  for (int b : n_ubatch)
    if (b < 1) fail("-ub {}: the micro-batch needs at least one token", b);
  if (repetitions < 1) fail("-r {}: needs at least one repetition", repetitions);
  bool any_test = !prompt_gen.empty();
  for (int p : n_prompt) any_test |= p > 0;
  for (int n : n_gen) any_test |= n > 0;
  if (!any_test) fail("no test to run: -p, -n and -pg are all empty or zero");
}

PlacementOptions placement_options(const BenchLoadKey& key) {
  PlacementOptions p;
  p.n_gpu_layers = key.n_gpu_layers;
  p.split_mode = parse_split_mode(key.split_mode);
  p.main_gpu = key.main_gpu;
  if (!key.tensor_split.empty()) {
    std::string commas = key.tensor_split;
    std::replace(commas.begin(), commas.end(), '/', ',');
    p.tensor_split = parse_tensor_split(commas);
  }
  for (const auto& one : split_list(key.override_tensors, ',')) p.overrides.push_back(parse_override(one));
  if (key.cpu_moe) for (auto& ov : cpu_moe_overrides()) p.overrides.push_back(std::move(ov));
  for (auto& ov : n_cpu_moe_overrides(key.n_cpu_moe)) p.overrides.push_back(std::move(ov));
  return p;
}

std::vector<BenchInstance> BenchParams::instances(int default_threads) const {
  const std::vector<int> threads = n_threads.empty() ? std::vector<int>{default_threads} : n_threads;
  // Tests of one context configuration: pp, then tg, then pp+tg, at each depth.
  std::vector<std::tuple<int, int, int>> tests;  // prompt, gen, depth
  for (int d : n_depth) {
    for (int p : n_prompt)
      if (p > 0) tests.emplace_back(p, 0, d);
    for (int n : n_gen)
      if (n > 0) tests.emplace_back(0, n, d);
    for (auto [p, n] : prompt_gen) tests.emplace_back(p, n, d);
  }
  std::vector<BenchInstance> out;
  // Load-key parameters outermost, so a model stays loaded across its runs.
  for (const auto& m : models)
    for (bool mmap : use_mmap)
      for (int ngl : n_gpu_layers)
        for (const auto& sm : split_mode)
          for (int mg : main_gpu)
            for (const auto& ts : tensor_split)
              for (const auto& ot : override_tensors)
                for (int ncmoe : n_cpu_moe)
                  for (int b : n_batch)
                    for (int ub : n_ubatch)
                      for (DType tk : type_k)
                        for (DType tv : type_v)
                        for (FlashAttn fa : flash_attn)
                          for (int t : threads)
                            for (int pl : poll)
                            for (int gr : graph_reuse)
                            for (auto [p, n, d] : tests) {
                              BenchInstance inst;
                              inst.load = {m, mmap, ngl, sm, mg, ts, ot, ncmoe, cpu_moe};
                              inst.n_batch = b;
                              inst.n_ubatch = ub;
                              inst.type_k = tk;
                              inst.type_v = tv;
                              inst.flash_attn = fa;
                              inst.n_threads = t;
                              inst.poll = pl;
                              inst.graph_reuse = gr == 1;
                              inst.n_prompt = p;
                              inst.n_gen = n;
                              inst.n_depth = d;
                              out.push_back(inst);
                            }
  return out;
}

}  // namespace loom::cli
