// The placement flags of loom run, eval and bench, as llama.cpp spells them
// (-ngl, -sm, -ts, -mg, -ot, --cpu-moe, --n-cpu-moe), turned into the
// library's PlacementOptions;
// and the one call that loads a model for the CLI, on the registry's devices,
// with the library's placement errors told in terms of those flags.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/model.h"
#include "loom/placement.h"

namespace loom::cli {

// Each throws loom::Error naming its flag.
SplitMode parse_split_mode(const std::string& s);             // -sm: none | layer | row
std::vector<float> parse_tensor_split(const std::string& s);  // -ts: "3,1"
TensorOverride parse_override(const std::string& s);          // -ot: "blk\\.1\\.=CPU"

// --cpu-moe and --n-cpu-moe N as llama.cpp defines them: shorthands for -ot
// overrides that put expert tensors (ffn_up/down/gate/gate_up_exps, and the
// _chexps kind) in the CPU buffer type: of every layer, or of blk.0 ..
// blk.N-1. N must not be negative (the error names --n-cpu-moe).
inline constexpr const char* kExpertTensorsPattern = "\\.ffn_(up|down|gate|gate_up)_(ch|)exps";
std::vector<TensorOverride> cpu_moe_overrides();
std::vector<TensorOverride> n_cpu_moe_overrides(int n_first_layers);

// The flag that sets a PlacementOptions member: -ngl, -ts, -mg or -ot.
std::string_view placement_flag(PlacementField field);

// Model::load on Registry::get().devices(). A PlacementError comes back
// as a loom::Error that starts with its flag ("-mg: main device index 7: ...").
std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options);

}  // namespace loom::cli
