#include "placement_args.h"

#include <cmath>
#include <numeric>
#include <stdexcept>

#include "args.h"
#include "loom/error.h"
#include "loom/registry.h"

namespace loom::cli {

SplitMode parse_split_mode(const std::string& s) {
  if (s == "none") return SplitMode::None;
  if (s == "layer") return SplitMode::Layer;
  if (s == "row") return SplitMode::Row;
  fail("-sm: unknown split mode '{}' (none, layer, row)", s);
}

std::vector<float> parse_tensor_split(const std::string& s) {
  std::vector<float> out;
  for (const std::string& item : split_list(s, ',', true)) {
    try {
      size_t used = 0;
      const float v = std::stof(item, &used);
      if (used != item.size() || !std::isfinite(v) || v < 0) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      fail("-ts: '{}' is not a non-negative number (in '{}')", item, s);
    }
  }
  if (out.empty() || std::accumulate(out.begin(), out.end(), 0.0f) <= 0.0f)
    fail("-ts: '{}' needs at least one positive proportion", s);
  return out;
}

TensorOverride parse_override(const std::string& s) {
  const auto eq = s.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    fail("-ot: '{}' is not PATTERN=BUFFER_TYPE", s);
  return {s.substr(0, eq), s.substr(eq + 1)};
}

std::vector<TensorOverride> cpu_moe_overrides() { return {{kExpertTensorsPattern, "CPU"}}; }

std::vector<TensorOverride> n_cpu_moe_overrides(int n_first_layers) {
  if (n_first_layers < 0) fail("--n-cpu-moe: {} layers: the count must not be negative", n_first_layers);
  std::vector<TensorOverride> out;
  for (int i = 0; i < n_first_layers; ++i) out.push_back({fmt::format("blk\\.{}{}", i, kExpertTensorsPattern), "CPU"});
  return out;
}

std::string_view placement_flag(PlacementField field) {
  switch (field) {
    case PlacementField::NGpuLayers: return "-ngl";
    case PlacementField::TensorSplit: return "-ts";
    case PlacementField::MainGpu: return "-mg";
    case PlacementField::Overrides: return "-ot";
  }
  return "?";
}

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  try {
    return Model::load(path, Registry::get().devices(), options);
  } catch (const PlacementError& e) {
    fail("{}: {}", placement_flag(e.field()), e.what());
  }
}

}  // namespace loom::cli
