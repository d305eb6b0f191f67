// Fitting a model to the machine's memory.
//
// predict_memory is a dry run (DryRun, backend.h): it loads the model and
// creates a session with nothing allocated, running the real placement, the
// real KV cache layout and the scheduler's planning of the worst-case graph,
// and reports the bytes each device would hold. A real load with the same
// options allocates exactly these bytes (tests/model/fit_test.cpp checks it).
//
// fit_model chooses the placement (how many layers to offload, the tensor
// split over the offload devices, which layers' expert weights stay on the
// host) and, when asked, the context size, from dry runs, so that every
// device keeps a margin free.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "loom/model.h"

namespace loom {

// What one device would hold.
struct DeviceBytes {
  Device* device = nullptr;
  size_t weights = 0;   // weight buffers allocated (not the file mapping)
  size_t kv_cache = 0;
  size_t compute = 0;   // the scheduler's compute buffers (graph outputs, the logits, included)
  size_t mapped = 0;    // host: weights used in place from the mapped file (page cache, reclaimable)
  std::vector<std::pair<std::string, size_t>> by_buffer_type;  // allocated bytes per buffer type
  size_t total() const { return weights + kv_cache + compute; }  // allocated; mapped not included
};

struct MemoryPrediction {
  std::vector<DeviceBytes> devices;  // one per device given, in that order
  int64_t n_ctx = 0;                 // the session's context
  int64_t n_layer = 0;
  int64_t n_ctx_train = 0;
  int64_t n_expert = 0;
  const DeviceBytes& of(const Device& d) const;  // throws for a device not given
};

// The dry run. Errors are those of Model::load and Session (bad file,
// placement options that do not fit the devices); never out of memory.
MemoryPrediction predict_memory(const std::string& path, const std::vector<Device*>& devices, const LoadOptions& load,
                                const SessionOptions& session);

struct FitOptions {
  // The devices fit may offload to (a subset of the offload devices given to
  // fit_model); empty: offload nothing.
  std::vector<Device*> offload;
  // Bytes to leave free on each device, by device (default: none).
  std::vector<std::pair<Device*, size_t>> margin;
  // Choose the context (SessionOptions::n_ctx == 0): the training context,
  // halved while it does not fit, down to min_ctx (or the training context
  // when smaller).
  bool choose_ctx = false;
  int64_t min_ctx = 4096;
};

struct FitResult {
  PlacementOptions placement;  // n_gpu_layers, tensor_split, overrides
  int64_t n_ctx = 0;
  MemoryPrediction prediction;  // of the chosen placement
  bool fits = false;            // false: even nothing offloaded does not fit the host
  std::string reason;           // one line: what was chosen and why
};

// Chooses the placement as above, starting from `load` (split mode, main
// device) and `session`. Offloads as many layers as fit, whole layers first;
// for a model with experts that does not fit whole, all layers with the
// expert weights of the first layers on the host. Host memory is the CPU's
// free memory; mapped weights do not count against it.
FitResult fit_model(const std::string& path, const std::vector<Device*>& devices, const LoadOptions& load,
                    const SessionOptions& session, const FitOptions& options);

}  // namespace loom
