// Where a model's layers and weights go (the options of llama.cpp's -ngl,
// -sm, -ts, -mg and -ot; the CLI parses those flags, see tools/loom):
//   n_gpu_layers  the last N layers go to the offload devices (every non-CPU
//                 device given); N > n_layer also moves the output layer
//   split_mode    none: every offloaded layer on the main device;
//                 layer: layers spread over the devices by the proportions;
//                 row: each offloaded matrix's rows split over the devices
//   tensor_split  proportions per offload device (empty: by free memory)
//   main_gpu      main device index among the offload devices
//   overrides     weights whose name matches a pattern go to a buffer type
// The token embedding stays on the CPU, as in llama.cpp (get_rows there).
//
// Placement works on the devices its caller gives, in priority order; the
// first device of type CPU among them is the host (embedding, layers not
// offloaded, fallback), and every other non-CPU device is an offload device.
#pragma once

#include <string>
#include <vector>

#include "loom/backend.h"
#include "loom/error.h"

namespace loom {

enum class SplitMode { None, Layer, Row };

struct TensorOverride {
  std::string pattern;      // Perl-compatible regex (PCRE2), searched in the tensor name; at most 256 bytes
  std::string buffer_type;  // a buffer type name: CPU, OpenCL0, ...
};

struct PlacementOptions {
  int n_gpu_layers = 0;
  SplitMode split_mode = SplitMode::Layer;
  std::vector<float> tensor_split;  // empty: proportional to free memory
  int main_gpu = 0;
  std::vector<TensorOverride> overrides;
};

// The PlacementOptions member a PlacementError is about, so that a front end
// can name its own flag for it.
enum class PlacementField { NGpuLayers, TensorSplit, MainGpu, Overrides };

// A placement option that does not fit the model or the devices given.
class PlacementError : public Error {
 public:
  PlacementError(PlacementField field, const std::string& what) : Error(what), field_(field) {}
  PlacementField field() const { return field_; }

 private:
  PlacementField field_;
};

// The host device among `devices`: the first of type CPU. Throws loom::Error
// naming the devices given when there is none.
Device& host_device(const std::vector<Device*>& devices);
// Every non-CPU device of `devices`, in their order.
std::vector<Device*> offload_devices(const std::vector<Device*>& devices);

struct LayerPlan {
  std::vector<Device*> layer_device;  // per layer; the host device when not offloaded
  Device* output_device = nullptr;
  // Row mode: the devices sharing each offloaded matrix and their fractions.
  std::vector<Device*> row_devices;
  std::vector<float> row_fractions;
};

// Throws PlacementError for a main device index or tensor split proportions
// that do not fit the offload devices among `devices`.
LayerPlan plan_layers(int64_t n_layer, const std::vector<Device*>& devices, const PlacementOptions& options);

}  // namespace loom
