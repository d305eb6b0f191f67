#include "fit_args.h"

#include <cstdio>
#include <limits>

#include <fmt/ranges.h>

#include "loom/error.h"
#include "loom/registry.h"

namespace loom::cli {

std::vector<OptionSpec> fit_option_specs() {
  return {
      {{"--fit"}, "on|off",
       "choose -ngl, -ts, expert overrides and the context to fit the devices' free memory (default: on when none of "
       "-ngl/-ts/-ot is given, offloading to GPUs only; 'on' uses every device)"},
      {{"--fit-target"}, "MiB", "memory fit leaves free on each device (default 1024 on GPUs, 0 elsewhere)"},
      {{"--fit-ctx"}, "N", "the smallest context fit may choose when no -c is given (default 4096)"},
  };
}

FitChoice fit_choice(const Args& args, const std::vector<Device*>& devices) {
  FitChoice c;
  const bool placed = args.has("--n-gpu-layers") || args.has("--tensor-split") || args.has("--override-tensor") ||
                      args.has("--cpu-moe") || args.has("--n-cpu-moe");
  const std::string mode = args.get_or("--fit", "");
  if (!mode.empty() && mode != "on" && mode != "off") fail("--fit: '{}' is neither on nor off", mode);
  c.explicit_on = mode == "on";
  c.on = c.explicit_on || (mode.empty() && !placed);
  const auto is_gpu = [](const Device* d) { return d->type() == DeviceType::GPU || d->type() == DeviceType::IGPU; };
  for (Device* d : offload_devices(devices))
    if (c.explicit_on || is_gpu(d)) c.options.offload.push_back(d);
  if (c.on && !c.explicit_on && c.options.offload.empty()) c.on = false;  // nothing to decide
  const auto target = args.get("--fit-target");
  const int target_mib = args.get_int("--fit-target", 0, 0, std::numeric_limits<int>::max());
  for (Device* d : devices) {
    const size_t mib = target ? static_cast<size_t>(target_mib) : is_gpu(d) ? 1024 : 0;
    if (mib) c.options.margin.emplace_back(d, mib << 20);
  }
  c.options.choose_ctx = !args.has("--ctx-size");
  c.options.min_ctx = args.get_int("--fit-ctx", 4096, 1, std::numeric_limits<int>::max());
  return c;
}

bool apply_fit(const Args& args, const std::string& path, LoadOptions& load, SessionOptions& session) {
  const std::vector<Device*>& devices = Registry::get().devices();
  const FitChoice c = fit_choice(args, devices);
  if (!c.on) return false;
  const FitResult r = fit_model(path, devices, load, session, c.options);
  if (!r.fits) fail("--fit: {}", r.reason);
  const bool experts = r.placement.overrides.size() > load.placement.overrides.size();
  load.placement = r.placement;
  if (c.options.choose_ctx) session.n_ctx = r.n_ctx;
  std::string names;
  for (const Device* d : c.options.offload) names += (names.empty() ? "" : ",") + std::string(d->name());
  std::fprintf(stderr, "fit: -ngl %d%s%s%s -c %lld over %s: %s\n", r.placement.n_gpu_layers,
               r.placement.tensor_split.empty() ? "" : " -ts ",
               r.placement.tensor_split.empty() ? "" : fmt::format("{:.1f}", fmt::join(r.placement.tensor_split, ",")).c_str(),
               experts ? " (+ expert overrides)" : "",
               static_cast<long long>(r.prediction.n_ctx), names.empty() ? "the CPU" : names.c_str(), r.reason.c_str());
  return c.options.choose_ctx;
}

}  // namespace loom::cli
