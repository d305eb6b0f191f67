#include "loom/placement.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "loom/error.h"
#include "loom/registry.h"

namespace loom {

SplitMode parse_split_mode(const std::string& s) {
  if (s == "none") return SplitMode::None;
  if (s == "layer") return SplitMode::Layer;
  if (s == "row") return SplitMode::Row;
  fail("-sm: unknown split mode '{}' (none, layer, row)", s);
}

std::vector<float> parse_tensor_split(const std::string& s) {
  std::vector<float> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const float v = std::stof(item, &used);
      if (used != item.size() || v < 0) throw std::invalid_argument(item);
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

std::vector<Device*> offload_devices() {
  std::vector<Device*> out;
  for (Device* d : Registry::get().devices())
    if (d->type() != DeviceType::CPU) out.push_back(d);
  return out;
}

LayerPlan plan_layers(int64_t n_layer, const PlacementOptions& o) {
  Device& cpu = Registry::get().cpu();
  LayerPlan plan;
  plan.layer_device.assign(n_layer, &cpu);
  plan.output_device = &cpu;
  const std::vector<Device*> devices = offload_devices();
  if (o.n_gpu_layers < 0) fail("-ngl must not be negative, got {}", o.n_gpu_layers);
  if (o.n_gpu_layers == 0) return plan;
  if (devices.empty()) fail("-ngl {}: there is no device to offload to (only the CPU is registered)", o.n_gpu_layers);
  if (o.main_gpu < 0 || o.main_gpu >= static_cast<int>(devices.size()))
    fail("-mg {}: there are {} offload devices (0..{})", o.main_gpu, devices.size(), devices.size() - 1);
  std::vector<float> split = o.tensor_split;
  if (split.empty()) {
    for (Device* d : devices) split.push_back(static_cast<float>(d->memory().free));
    if (std::accumulate(split.begin(), split.end(), 0.0f) <= 0.0f) split.assign(devices.size(), 1.0f);
  }
  if (split.size() > devices.size())
    fail("-ts gives {} proportions but there are {} offload devices", split.size(), devices.size());
  split.resize(devices.size(), 0.0f);
  const float total = std::accumulate(split.begin(), split.end(), 0.0f);

  const int64_t n_offload = std::min<int64_t>(o.n_gpu_layers, n_layer);
  const int64_t first = n_layer - n_offload;
  Device* main = devices[o.main_gpu];
  if (o.split_mode == SplitMode::Row) {
    for (size_t i = 0; i < devices.size(); ++i)
      if (split[i] > 0) {
        plan.row_devices.push_back(devices[i]);
        plan.row_fractions.push_back(split[i] / total);
      }
  }
  // Layer mode: device i takes the layers whose position in the offloaded
  // range falls in its share of the cumulative proportions.
  for (int64_t l = first; l < n_layer; ++l) {
    if (o.split_mode != SplitMode::Layer) {
      plan.layer_device[l] = main;
      continue;
    }
    const float at = static_cast<float>(l - first) / static_cast<float>(n_offload);
    float cum = 0.0f;
    size_t pick = devices.size() - 1;
    for (size_t i = 0; i < devices.size(); ++i) {
      cum += split[i] / total;
      if (at < cum - 1e-6f) {
        pick = i;
        break;
      }
    }
    plan.layer_device[l] = devices[pick];
  }
  if (o.n_gpu_layers > n_layer)
    plan.output_device = o.split_mode == SplitMode::Layer ? plan.layer_device.back() : main;
  return plan;
}

}  // namespace loom
