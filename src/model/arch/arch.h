// The architecture layer: one Arch per model family (general.architecture),
// each in its own file in this folder and listed once in registry.cpp.
// A family states the "<arch>." keys it reads beyond the common ones
// (hparams.cpp), the tensors of a layer (shapes, required or optional), and
// how a layer computes, from the shared blocks of blocks.h. The model-wide
// tensors (token_embd, output_norm, output) and the graph around the layers
// are the same for every family today (session.cpp).
//
// Adding a family: a file here with a class deriving from Arch, and one line
// in registry.cpp. A sliding-window family (gemma2/3) sets HParams::n_swa
// and marks its window layers (Layer::swa): the Session then fills a second
// mask, LayerGraph::mask_swa, and attention picks it for those layers. The
// embedding scale and the soft-capping of attention and output logits are
// HParams too. MoE families (qwen3moe; mixtral, which is llama with experts)
// use ffn_moe beside ffn_silu_gated (blocks.h): router, top-k, 3-D expert
// weights through mul_mat_id.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "loom/gguf.h"
#include "loom/model.h"

namespace loom {

// Reads "<arch>.KEY" metadata and remembers every key asked for, so that
// the loader can refuse a file with keys nobody read (they may change the
// math). Errors name the file and the full key.
class ArchKeys {
 public:
  ArchKeys(const gguf::File& file, std::string arch) : file_(file), prefix_(std::move(arch) + ".") {}

  std::string key(std::string_view suffix) const { return prefix_ + std::string(suffix); }
  uint64_t get_uint(std::string_view suffix);
  std::optional<uint64_t> get_uint_or(std::string_view suffix);
  std::optional<float> get_f32_or(std::string_view suffix);
  std::optional<std::string> get_string_or(std::string_view suffix);
  // A per-layer array (integers or booleans as 0/1), when the key holds
  // one; it must have n_layer values. A scalar or no key: nothing (and a
  // scalar is not marked read).
  std::optional<std::vector<uint64_t>> get_layer_array_or(std::string_view suffix, int64_t n_layer);
  // Marks a key as read without using it: for keys that do not change the
  // math (the reason is the caller's comment).
  void ignore(std::string_view suffix) { read_.insert(key(suffix)); }
  // Fails naming the file and every "<arch>." key that was not read.
  void refuse_unread() const;
  const gguf::File& file() const { return file_; }

 private:
  const gguf::File& file_;
  std::string prefix_;
  std::set<std::string> read_;
};

// What a family declares its weights through (Model's loader): a weight
// of `layer` with shape `ne`, read by op `use`. Placement (-ngl, -ts, -sm,
// -ot) decides where it goes from these alone.
class ModelWeights {
 public:
  explicit ModelWeights(Model& model) : model_(model) {}
  Tensor* operator()(const std::string& name, std::vector<int64_t> ne, int64_t layer, Op use, bool required = true) {
    return model_.weight(name, ne, layer, use, required);
  }
  Tensor* optional(const std::string& name, std::vector<int64_t> ne, int64_t layer, Op use) {
    return model_.weight(name, ne, layer, use, false);
  }
  // Whether the file has a tensor of that name (declares nothing).
  bool has(const std::string& name) const { return model_.file().find_tensor(name) != nullptr; }
  const gguf::File& file() const { return model_.file(); }

 private:
  Model& model_;
};

// One micro-batch's graph under construction: what a family's layer and the
// shared blocks build on.
struct LayerGraph {
  Context& ctx;
  const Model& model;
  const HParams& h;
  int64_t n = 0;     // tokens in the micro-batch
  // This layer's cache cells attended to (the first n_kv), the micro-batch's
  // included. n_kv and kv_cells are set per layer: a sliding-window layer
  // may have a smaller cache of its own (SessionOptions::swa_full).
  int64_t n_kv = 0;
  Tensor* positions = nullptr;  // I32 [n]: each token's position in its sequence (rope)
  Tensor* kv_cells = nullptr;   // I32 [n]: each token's cell in this layer's cache (where its k and v rows go)
  Tensor* mask = nullptr;       // F32 [n_kv, n]: 0 or -inf (causal per sequence; a sliding-window family gets its own)
  Tensor* mask_swa = nullptr;   // the same over the sliding-window layers' cells, also -inf outside the window
  Tensor* k_cache = nullptr;    // this layer's cache rows [n_embd_kv, n_ctx]
  Tensor* v_cache = nullptr;    // the same layout (a cell's row), for either attention path
  bool flash_attn = false;      // attention through flash_attn_ext (SessionOptions::flash_attn)
};

class Arch {
 public:
  virtual ~Arch() = default;
  virtual std::string_view name() const = 0;
  virtual RopeMode rope_mode() const = 0;
  // Whether an output.weight is used (else token_embd is the output matrix,
  // and a file's output.weight is refused as llama.cpp refuses it: gemma2).
  virtual bool reads_output_weight() const { return true; }
  // Reads the family's own keys into h (after the common ones).
  virtual void read_hparams(ArchKeys&, HParams&) const {}
  // Whether the family has mixture-of-experts layers; a file with experts
  // (expert_count > 0) of a family without them is refused.
  virtual bool has_experts() const { return false; }
  // Declares layer il's weights into L.
  virtual void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const = 0;
  // Layer il on x [n_embd, n]; returns the layer's output (the residual
  // stream for the next layer).
  virtual Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const = 0;
};

// The family named `arch`, or null.
const Arch* find_arch(std::string_view arch);

}  // namespace loom
