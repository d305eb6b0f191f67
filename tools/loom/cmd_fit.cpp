// loom fit: what each device and the host would hold for a model, from a dry
// run (loom::predict_memory), beside each device's free memory; with the
// placement flags given, or as --fit would choose them.
#include <cstdio>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "fit_args.h"
#include "loom/fit.h"
#include "loom/registry.h"
#include "model_args.h"
#include "placement_args.h"
#include "rpc_args.h"

namespace loom::cli {
namespace {

std::string mib(size_t bytes) { return fmt::format("{:.1f}", bytes / 1048576.0); }

}  // namespace

int cmd_fit(int argc, char** argv) {
  auto specs = model_option_specs();
  specs.push_back({{"--json"}, "", "print the table as JSON"});
  specs.push_back({{"--actual"}, "", "then load the model and create the session for real, and show the bytes "
                                     "each device then holds beside the prediction"});
  Args args("fit",
            "Predict the memory a model takes on each device (weights, KV cache, compute buffers) without "
            "allocating it, with the placement flags given or as --fit chooses (MiB).",
            with_rpc_options(specs));
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  connect_rpc(args);
  const std::string path = model_path(args);
  LoadOptions lo = load_options(args);
  SessionOptions so = session_options(args);
  apply_fit(args, path, lo, so);
  const std::vector<Device*>& devices = Registry::get().devices();
  std::vector<MemoryInfo> before;
  for (Device* d : devices) before.push_back(d->memory());
  const MemoryPrediction p = predict_memory(path, devices, lo, so);
  std::vector<size_t> actual(devices.size(), 0);
  const bool measure = args.has("--actual");
  if (measure) {
    std::vector<size_t> base;
    for (Device* d : devices) base.push_back(d->allocated_bytes());
    auto model = load_model(path, lo);
    Session session(*model, so);
    for (size_t i = 0; i < devices.size(); ++i) actual[i] = devices[i]->allocated_bytes() - base[i];
  }
  if (args.has("--json")) {
    nlohmann::json out;
    out["model"] = path;
    out["n_ctx"] = p.n_ctx;
    out["n_gpu_layers"] = lo.placement.n_gpu_layers;
    out["tensor_split"] = lo.placement.tensor_split;
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < devices.size(); ++i) {
      const DeviceBytes& b = p.of(*devices[i]);
      nlohmann::json r{{"device", std::string(devices[i]->name())},
                       {"type", std::string(device_type_name(devices[i]->type()))},
                       {"free", before[i].free},             {"total", before[i].total},
                       {"weights", b.weights},               {"kv_cache", b.kv_cache},
                       {"compute", b.compute},               {"mapped", b.mapped},
                       {"predicted", b.total()}};
      nlohmann::json types = nlohmann::json::object();
      for (const auto& [name, bytes] : b.by_buffer_type) types[name] = bytes;
      r["buffer_types"] = types;
      if (measure) r["actual"] = actual[i];
      rows.push_back(r);
    }
    out["devices"] = rows;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("model %s, context %lld, -ngl %d%s (MiB)\n", path.c_str(), static_cast<long long>(p.n_ctx),
              lo.placement.n_gpu_layers,
              lo.placement.tensor_split.empty() ? ""
                                                 : fmt::format(" -ts {:.1f}", fmt::join(lo.placement.tensor_split, ","))
                                                       .c_str());
  std::printf("%-10s %-6s %10s %10s %10s %10s %10s %10s%s\n", "device", "type", "free MiB", "weights", "KV cache",
              "compute", "predicted", "mapped", measure ? "     actual" : "");
  for (size_t i = 0; i < devices.size(); ++i) {
    const DeviceBytes& b = p.of(*devices[i]);
    std::printf("%-10s %-6s %10s %10s %10s %10s %10s %10s%s\n", std::string(devices[i]->name()).c_str(),
                std::string(device_type_name(devices[i]->type())).c_str(), mib(before[i].free).c_str(),
                mib(b.weights).c_str(), mib(b.kv_cache).c_str(), mib(b.compute).c_str(), mib(b.total()).c_str(),
                mib(b.mapped).c_str(), measure ? fmt::format(" {:>10}", mib(actual[i])).c_str() : "");
  }
  return 0;
}

}  // namespace loom::cli
