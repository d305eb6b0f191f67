// Where a model's layers and weights go, from llama.cpp's flags:
//   -ngl N   the last N layers go to the offload devices (every non-CPU
//            device); N > n_layer also moves the output layer
//   -sm      none: every offloaded layer on the main device (-mg);
//            layer: layers spread over the devices by -ts proportions;
//            row: each offloaded matrix's rows split over the devices by -ts
//   -ts 3,1  proportions per offload device (default: by free memory)
//   -mg I    main device index among the offload devices
//   -ot RE=BUFTYPE  weights whose name matches RE go to that buffer type
// The token embedding stays on the CPU, as in llama.cpp (get_rows there).
#pragma once

#include <string>
#include <vector>

#include "loom/backend.h"

namespace loom {

enum class SplitMode { None, Layer, Row };

struct TensorOverride {
  std::string pattern;      // ECMAScript regex, searched in the tensor name
  std::string buffer_type;  // a buffer type name: CPU, OpenCL0, ...
};

struct PlacementOptions {
  int n_gpu_layers = 0;
  SplitMode split_mode = SplitMode::Layer;
  std::vector<float> tensor_split;  // empty: proportional to free memory
  int main_gpu = 0;
  std::vector<TensorOverride> overrides;
};

SplitMode parse_split_mode(const std::string& s);       // none | layer | row
std::vector<float> parse_tensor_split(const std::string& s);  // "3,1"
TensorOverride parse_override(const std::string& s);    // "blk\\.1\\.=CPU"

// Every registered non-CPU device, in registry order.
std::vector<Device*> offload_devices();

struct LayerPlan {
  std::vector<Device*> layer_device;  // per layer; the CPU device when not offloaded
  Device* output_device = nullptr;
  // Row mode: the devices sharing each offloaded matrix and their fractions.
  std::vector<Device*> row_devices;
  std::vector<float> row_fractions;
};

// Throws loom::Error for a -mg or -ts that does not fit the devices present.
LayerPlan plan_layers(int64_t n_layer, const PlacementOptions& options);

}  // namespace loom
