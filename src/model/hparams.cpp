// Hyper-parameters: the keys every family shares, under the
// general.architecture prefix, then the family's own (arch/*.cpp). A key of
// that prefix that nobody read is refused: it may change the math.
#include <algorithm>
#include <cmath>

#include "arch/arch.h"
#include "loom/error.h"

namespace loom {

uint64_t ArchKeys::get_uint(std::string_view suffix) {
  const std::string k = key(suffix);
  read_.insert(k);
  if (!file_.find(k)) fail("{}: key '{}' is missing", file_.path(), k);
  return file_.get_uint(k);
}

std::optional<uint64_t> ArchKeys::get_uint_or(std::string_view suffix) {
  const std::string k = key(suffix);
  read_.insert(k);
  return file_.get_uint_or(k);
}

std::optional<float> ArchKeys::get_f32_or(std::string_view suffix) {
  const std::string k = key(suffix);
  read_.insert(k);
  return file_.get_f32_or(k);
}

std::optional<std::string> ArchKeys::get_string_or(std::string_view suffix) {
  const std::string k = key(suffix);
  read_.insert(k);
  if (!file_.find(k)) return std::nullopt;
  return file_.get_string(k);
}

std::optional<std::vector<uint64_t>> ArchKeys::get_layer_array_or(std::string_view suffix, int64_t n_layer) {
  const std::string k = key(suffix);
  const gguf::Value* v = file_.find(k);
  if (!v || v->type != gguf::ValueType::Array) return std::nullopt;
  read_.insert(k);
  const gguf::Array& a = v->as_array();
  if (static_cast<int64_t>(a.size()) != n_layer)
    fail("{}: {} has {} values but the model has {} layers (block_count)", file_.path(), k, a.size(), n_layer);
  std::vector<uint64_t> out;
  out.reserve(a.size());
  try {
    for (size_t i = 0; i < a.size(); ++i) {
      const gguf::Value e = a[i];
      out.push_back(e.type == gguf::ValueType::Bool ? uint64_t{e.as_bool()} : e.as_uint());
    }
  } catch (const Error& e) {
    fail("{}: {}: {}", file_.path(), k, e.what());
  }
  return out;
}

void ArchKeys::refuse_unread() const {
  std::string unread;
  for (const gguf::KeyValue& kv : file_.metadata())
    if (kv.key.starts_with(prefix_) && !read_.contains(kv.key))
      unread += fmt::format("{}{} = {}", unread.empty() ? "" : ", ", kv.key, kv.value.to_string(4));
  if (!unread.empty())
    fail("{}: keys that Loom's '{}' family does not use and that may change the result: {}; refusing to run the "
         "file rather than ignore them",
         file_.path(), prefix_.substr(0, prefix_.size() - 1), unread);
}

namespace {

// Keys that must hold a given value to keep the math of these families.
void require_absent_or(ArchKeys& k, std::string_view suffix, uint64_t allowed, std::string_view what) {
  if (auto v = k.get_uint_or(suffix); v && *v != allowed)
    fail("{}: {} = {}: {} is not supported", k.file().path(), k.key(suffix), *v, what);
}

// expert_count and expert_used_count, which every family may have (0 or
// absent: dense layers). expert_used_count may be a per-layer array; each
// layer then uses its own count (llama.cpp's qwen3moe and llama read layer
// 0's for every layer; files of those families never hold an array). The
// families with experts route by softmax over the experts' logits, as
// llama.cpp runs them; a file asking for another gating function is refused.
void read_experts(ArchKeys& k, const Arch& arch, HParams& h) {
  const std::string& path = k.file().path();
  h.n_expert = static_cast<int64_t>(k.get_uint_or("expert_count").value_or(0));
  if (auto per_layer = k.get_layer_array_or("expert_used_count", h.n_layer)) {
    const auto [lo, hi] = std::minmax_element(per_layer->begin(), per_layer->end());
    if (!per_layer->empty() && (*lo == 0 ? *hi != 0 : *hi > static_cast<uint64_t>(h.n_expert)))
      fail("{}: {} = {}: every layer must use between 1 and {} = {} experts{}", path, k.key("expert_used_count"),
           k.file().get(k.key("expert_used_count")).to_string(8), k.key("expert_count"), h.n_expert,
           h.n_expert == 0 ? " (or all 0 without experts)" : "");
    h.n_expert_used = per_layer->empty() ? 0 : static_cast<int64_t>(per_layer->front());
    if (*lo != *hi) h.n_expert_used_layers.assign(per_layer->begin(), per_layer->end());
  } else {
    h.n_expert_used = static_cast<int64_t>(k.get_uint_or("expert_used_count").value_or(0));
  }
  if (h.n_expert == 0) {
    if (h.n_expert_used != 0)
      fail("{}: {} = {} but {} is {}: a model without experts uses none", path, k.key("expert_used_count"),
           h.n_expert_used, k.key("expert_count"), k.file().find(k.key("expert_count")) ? "0" : "missing");
    return;
  }
  if (!arch.has_experts())
    fail("{}: {} = {}: a mixture of experts is not supported by Loom's '{}' family", path, k.key("expert_count"),
         h.n_expert, h.arch);
  if (h.n_expert_used == 0)
    fail("{}: {} = {} but {} is {}: a mixture of experts needs the number of experts each token uses", path,
         k.key("expert_count"), h.n_expert, k.key("expert_used_count"),
         k.file().find(k.key("expert_used_count")) ? "0" : "missing");
  if (h.n_expert_used > h.n_expert)
    fail("{}: {} = {} is more than {} = {}: a token cannot use more experts than a layer has", path,
         k.key("expert_used_count"), h.n_expert_used, k.key("expert_count"), h.n_expert);
  if (auto gating = k.get_uint_or("expert_gating_func"); gating && *gating != 1)
    fail("{}: {} = {}: only softmax gating (1) is supported for '{}'", path, k.key("expert_gating_func"), *gating,
         h.arch);
}

}  // namespace

HParams HParams::from_gguf(const gguf::File& f) {
  HParams h;
  h.arch = f.get_string("general.architecture");
  const Arch* arch = find_arch(h.arch);
  if (!arch) {
    std::string names;
    for (const std::string& n : supported_architectures()) names += (names.empty() ? "" : ", ") + n;
    fail("{}: architecture '{}' is not supported (supported: {})", f.path(), h.arch, names);
  }
  ArchKeys k(f, h.arch);
  h.n_embd = static_cast<int64_t>(k.get_uint("embedding_length"));
  h.n_layer = static_cast<int64_t>(k.get_uint("block_count"));
  h.n_head = static_cast<int64_t>(k.get_uint("attention.head_count"));
  h.n_head_kv = static_cast<int64_t>(k.get_uint_or("attention.head_count_kv").value_or(h.n_head));
  h.n_ff = static_cast<int64_t>(k.get_uint("feed_forward_length"));
  h.n_ctx_train = static_cast<int64_t>(k.get_uint("context_length"));
  h.rms_eps = k.get_f32_or("attention.layer_norm_rms_epsilon").value_or(1e-5f);
  h.rope_mode = arch->rope_mode();
  h.rope_freq_base = k.get_f32_or("rope.freq_base").value_or(10000.0f);
  const std::string scaling = k.get_string_or("rope.scaling.type").value_or("linear");
  if (scaling != "linear" && scaling != "none")
    fail("{}: {} = '{}': only 'none' and 'linear' rope scaling are supported", f.path(), k.key("rope.scaling.type"),
         scaling);
  auto factor = k.get_f32_or("rope.scaling.factor");
  if (!factor) factor = k.get_f32_or("rope.scale_linear");
  else k.ignore("rope.scale_linear");  // the older name, superseded as in llama.cpp
  if (factor && *factor != 0.0f) h.rope_freq_scale = 1.0f / *factor;
  h.rope_attn_factor = k.get_f32_or("rope.scaling.attn_factor").value_or(1.0f);
  if (!(h.rope_attn_factor > 0.0f) || !std::isfinite(h.rope_attn_factor))
    fail("{}: {} = {} must be a positive number", f.path(), k.key("rope.scaling.attn_factor"), h.rope_attn_factor);
  h.n_ctx_orig = static_cast<int64_t>(k.get_uint_or("rope.scaling.original_context_length").value_or(h.n_ctx_train));
  k.ignore("rope.scaling.finetuned");  // shown by llama.cpp, never used in the math
  k.ignore("vocab_size");  // the vocabulary is token_embd.weight's rows, checked against the tokenizer
  read_experts(k, *arch, h);
  require_absent_or(k, "attention.causal", 1, "non-causal attention");
  if (h.n_head <= 0) fail("{}: {} = {} must be positive", f.path(), k.key("attention.head_count"), h.n_head);
  const auto key_length = k.get_uint_or("attention.key_length");
  const auto value_length = k.get_uint_or("attention.value_length");
  if (!key_length && h.n_embd % h.n_head != 0)
    fail("{}: {} = {} does not divide {} = {}", f.path(), k.key("attention.head_count"), h.n_head,
         k.key("embedding_length"), h.n_embd);
  h.n_embd_head = static_cast<int64_t>(key_length.value_or(h.n_embd / h.n_head));
  if (value_length.value_or(h.n_embd_head) != static_cast<uint64_t>(h.n_embd_head))
    fail("{}: {} = {} differs from the key length {}: not supported", f.path(), k.key("attention.value_length"),
         *value_length, h.n_embd_head);
  if (h.n_head_kv <= 0 || h.n_head % h.n_head_kv != 0)
    fail("{}: {} = {} does not divide {} = {}", f.path(), k.key("attention.head_count_kv"), h.n_head_kv,
         k.key("attention.head_count"), h.n_head);
  h.n_rot = static_cast<int64_t>(k.get_uint_or("rope.dimension_count").value_or(h.head_dim()));
  if (h.n_rot <= 0 || h.n_rot > h.head_dim() || h.n_rot % 2)
    fail("{}: {} = {} must be even and at most the head size {}", f.path(), k.key("rope.dimension_count"), h.n_rot,
         h.head_dim());
  if (h.n_layer <= 0 || h.n_ff <= 0 || h.n_ctx_train <= 0 || h.n_embd <= 0 || h.n_embd_head <= 0)
    fail("{}: {} ({}), {} ({}), {} ({}), {} ({}) and the head size ({}) must be positive", f.path(),
         k.key("embedding_length"), h.n_embd, k.key("block_count"), h.n_layer, k.key("feed_forward_length"), h.n_ff,
         k.key("context_length"), h.n_ctx_train, h.n_embd_head);
  // Every layer has tensors of its own, so a block count above the file's
  // tensor count is corrupt; it must not size the layer table.
  if (static_cast<uint64_t>(h.n_layer) > f.tensors().size())
    fail("{}: {} = {} is more than the {} tensors the file has (the limit on the layer count)", f.path(),
         k.key("block_count"), h.n_layer, f.tensors().size());
  arch->read_hparams(k, h);
  k.refuse_unread();
  return h;
}

}  // namespace loom
