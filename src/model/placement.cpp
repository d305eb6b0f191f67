#include "loom/placement.h"

#include <algorithm>
#include <numeric>

#include <fmt/ranges.h>

namespace loom {
namespace {

// Throws a PlacementError about `field` with a fmt-style message.
template <class... Args>
[[noreturn]] void refuse(PlacementField field, fmt::format_string<Args...> format, Args&&... args) {
  throw PlacementError(field, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace

Device& host_device(const std::vector<Device*>& devices) {
  std::string names;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i]) fail("device {} of the {} given is null", i, devices.size());
    if (devices[i]->type() == DeviceType::CPU) return *devices[i];
    names += fmt::format("{}{}", names.empty() ? "" : ", ", devices[i]->name());
  }
  fail("placement needs a CPU device among the devices given (given: {})", names.empty() ? "none" : names);
}

std::vector<Device*> offload_devices(const std::vector<Device*>& devices) {
  std::vector<Device*> out;
  for (Device* d : devices)
    if (d && d->type() != DeviceType::CPU) out.push_back(d);
  return out;
}

LayerPlan plan_layers(int64_t n_layer, const std::vector<Device*>& given, const PlacementOptions& o) {
  Device& cpu = host_device(given);
  LayerPlan plan;
  plan.layer_device.assign(n_layer, &cpu);
  plan.output_device = &cpu;
  const std::vector<Device*> devices = offload_devices(given);
  if (o.n_gpu_layers < 0)
    refuse(PlacementField::NGpuLayers, "the number of offloaded layers must not be negative, got {}", o.n_gpu_layers);
  if (o.n_gpu_layers == 0) return plan;
  if (devices.empty())
    refuse(PlacementField::NGpuLayers, "{} layers to offload, but no device to offload to is given (only the CPU)",
           o.n_gpu_layers);
  if (o.main_gpu < 0 || o.main_gpu >= static_cast<int>(devices.size()))
    refuse(PlacementField::MainGpu, "main device index {}: there are {} offload devices (0..{})", o.main_gpu,
           devices.size(), devices.size() - 1);
  if (!o.tensor_split.empty() &&
      (std::any_of(o.tensor_split.begin(), o.tensor_split.end(), [](float p) { return !(p >= 0.0f); }) ||
       std::accumulate(o.tensor_split.begin(), o.tensor_split.end(), 0.0f) <= 0.0f))
    refuse(PlacementField::TensorSplit, "tensor split proportions {} must be non-negative, at least one positive",
           fmt::join(o.tensor_split, ","));
  std::vector<float> split = o.tensor_split;
  if (split.empty()) {
    for (Device* d : devices) split.push_back(static_cast<float>(d->memory().free));
    if (std::accumulate(split.begin(), split.end(), 0.0f) <= 0.0f) split.assign(devices.size(), 1.0f);
  }
  if (split.size() > devices.size())
    refuse(PlacementField::TensorSplit, "tensor split gives {} proportions but there are {} offload devices",
           split.size(), devices.size());
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
