// qwen3moe: Qwen 3 MoE (Qwen3-30B-A3B, Qwen3-235B-A22B). Qwen 3's attention
// (per-head q/k RMS norms, NeoX rope, attention.key_length heads) with a
// mixture of experts in every layer (ffn_moe): expert_count experts of
// expert_feed_forward_length (else feed_forward_length / expert_used_count,
// as llama.cpp reads it), expert_used_count per token. The picked experts'
// weights are always normalised to sum 1 (the model's norm_topk_prob), as
// llama.cpp runs it; no shared expert.
#include "arch.h"
#include "blocks.h"
#include "loom/error.h"

namespace loom {
namespace {

class Qwen3MoeArch final : public Arch {
 public:
  std::string_view name() const override { return "qwen3moe"; }
  RopeMode rope_mode() const override { return RopeMode::NeoX; }
  bool has_experts() const override { return true; }

  void read_hparams(ArchKeys& k, HParams& h) const override {
    if (h.n_expert == 0)
      fail("{}: {} is {}: a qwen3moe model needs experts", k.file().path(), k.key("expert_count"),
           k.file().find(k.key("expert_count")) ? "0" : "missing");
    h.n_ff_exp = static_cast<int64_t>(k.get_uint_or("expert_feed_forward_length").value_or(h.n_ff / h.n_expert_used));
    if (h.n_ff_exp <= 0) fail("{}: the expert feed-forward size is 0", k.file().path());
  }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    declare_attention(w, h, il, L);
    const std::string p = layer_prefix(il);
    L.attn_q_norm = w(p + "attn_q_norm.weight", {h.head_dim()}, il, Op::Mul);
    L.attn_k_norm = w(p + "attn_k_norm.weight", {h.head_dim()}, il, Op::Mul);
    declare_moe_ffn(w, h, il, L);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& qwen3moe_arch() {
  static const Qwen3MoeArch arch;
  return arch;
}

}  // namespace loom
