// Fuzz target: the CLI's argument parsing (tools/loom): the model, session
// and placement options of run/eval, and bench's number lists and ranges.
// The input is argv, one argument per NUL-terminated piece.
#include <string>
#include <vector>

#include "args.h"
#include "bench_params.h"
#include "loom/error.h"
#include "model_args.h"
#include "placement_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> pieces{"fuzz"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      pieces.push_back(current);
      current.clear();
    } else {
      current.push_back(static_cast<char>(data[i]));
    }
  }
  pieces.push_back(current);
  std::vector<char*> argv;
  for (auto& p : pieces) argv.push_back(p.data());
  argv.push_back(nullptr);

  try {
    loom::cli::Args args("fuzz", "fuzzed options", loom::cli::model_option_specs());
    args.parse(static_cast<int>(pieces.size()) - 1, argv.data() + 1);
    (void)loom::cli::load_options(args);
    (void)loom::cli::session_options(args);
    (void)args.help();
  } catch (const loom::Error&) {
  }
  for (size_t i = 1; i < pieces.size(); ++i) {
    try {
      (void)loom::cli::parse_int_list("-p", pieces[i]);
    } catch (const loom::Error&) {
    }
    try {
      (void)loom::cli::parse_tensor_split(pieces[i]);
    } catch (const loom::Error&) {
    }
    try {
      (void)loom::cli::parse_split_mode(pieces[i]);
    } catch (const loom::Error&) {
    }
    try {
      (void)loom::cli::parse_override(pieces[i]);
    } catch (const loom::Error&) {
    }
    (void)loom::cli::split_list(pieces[i], ',', i % 2 == 0);
  }
  return 0;
}
