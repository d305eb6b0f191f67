// loom eval: logits for given tokens as JSON, for debugging and comparisons.
#include <algorithm>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "rpc_args.h"
#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "loom/tokenizer.h"
#include "model_args.h"
#include "fit_args.h"
#include "placement_args.h"
#include "profile_args.h"

namespace loom::cli {

int cmd_eval(int argc, char** argv) {
  auto specs = model_option_specs();
  specs.insert(specs.end(), {
                                {{"--tokens"}, "IDS", "comma-separated token ids to evaluate"},
                                {{"-p", "--prompt"}, "TEXT", "text to tokenize and evaluate (instead of --tokens)"},
                                {{"--all-logits"}, "", "print the logits of every token, not only the last"},
                                {{"--generate"}, "N", "then generate N tokens greedily and list them (\"generated\")"},
                            });
  for (auto& s : profile_option_specs()) specs.push_back(std::move(s));
  Args args("eval", "Evaluate tokens and print their logits as JSON.", with_rpc_options(specs));
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  connect_rpc(args);
  LoadOptions lo = load_options(args);
  SessionOptions session_opts = session_options(args);
  ProfileOutput profile(args);
  session_opts.profiler = profile.profiler();
  apply_fit(args, model_path(args), lo, session_opts);
  auto model = load_model(model_path(args), lo);
  std::vector<int32_t> tokens;
  if (auto list = args.get("--tokens")) {
    for (const std::string& item : split_list(*list, ',', true)) {
      try {
        size_t used = 0;
        tokens.push_back(std::stoi(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } catch (const std::exception&) {
        fail("--tokens: '{}' is not a token id", item);
      }
    }
  } else if (auto prompt = args.get("--prompt")) {
    tokens = model->tokenizer().encode(*prompt, true, false);
  } else {
    fail("give --tokens IDS or --prompt TEXT");
  }
  Session session(*model, session_opts);
  const bool all = args.has("--all-logits");
  const std::vector<float> logits = session.decode(tokens, all);
  const int64_t n_vocab = model->hparams().n_vocab;
  nlohmann::json out;
  out["model"] = model->file().path();
  out["tokens"] = tokens;
  out["n_vocab"] = n_vocab;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t r = 0; r * n_vocab < logits.size(); ++r)
    rows.push_back(std::vector<float>(logits.begin() + r * n_vocab, logits.begin() + (r + 1) * n_vocab));
  out["logits"] = rows;
  const int n_generate = args.get_int("--generate", 0, 0, std::numeric_limits<int>::max());
  if (n_generate > 0) {
    std::vector<int32_t> generated;
    std::vector<float> last(logits.end() - n_vocab, logits.end());
    for (int i = 0; i < n_generate; ++i) {
      const int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      generated.push_back(next);
      if (i + 1 < n_generate) last = session.decode(std::span<const int32_t>(&next, 1));
    }
    out["generated"] = generated;
  }
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  std::fflush(stdout);
  profile.finish();
  return 0;
}

}  // namespace loom::cli
