// --fit, --fit-target and --fit-ctx, shared by run, eval, bench and serve:
// whether and how Loom chooses -ngl, the tensor split, the expert overrides
// and the context itself (loom::fit_model) before a model is loaded.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "loom/fit.h"

namespace loom::cli {

std::vector<OptionSpec> fit_option_specs();

// The fit options of `args` (with placement flags given or not), and whether fit is on:
// --fit on|off; by default on when none of -ngl, -ts, -ot (or --cpu-moe,
// --n-cpu-moe) is given. On by default, fit offloads to GPU-type devices
// only (GPU, IGPU) and does nothing when there are none; --fit on offloads to
// every offload device. --fit-target MiB is left free on every device used
// (default 1024 on GPUs, 0 elsewhere); the context is chosen when no -c is
// given, no lower than --fit-ctx (default 4096).
struct FitChoice {
  bool on = false;
  bool explicit_on = false;
  FitOptions options;
};
FitChoice fit_choice(const Args& args, const std::vector<Device*>& devices);

// Applies fit to `load` and `session` when it is on, printing the choice and
// its reason to stderr. Refuses (loom::Error) when nothing fits. Returns
// whether it chose the context (session.n_ctx).
bool apply_fit(const Args& args, const std::string& path, LoadOptions& load, SessionOptions& session);

}  // namespace loom::cli
