// llama: Llama 2, 3, 3.1, 3.2, Mistral and Mixtral files. Normal (pairwise)
// rope; Llama 3 rope scaling comes as rope_freqs.weight, one frequency
// divisor per rotated pair, shared by every layer (loaded once per layer
// device). Mixtral is llama with experts (expert_count > 0): every layer's
// FFN is a mixture of experts of feed_forward_length each (ffn_moe), in the
// 3-D ffn_*_exps tensors; the older per-expert 2-D tensors are refused.
#include "arch.h"
#include "blocks.h"
#include "loom/error.h"

namespace loom {
namespace {

class LlamaArch final : public Arch {
 public:
  std::string_view name() const override { return "llama"; }
  RopeMode rope_mode() const override { return RopeMode::Normal; }
  bool has_experts() const override { return true; }

  void read_hparams(ArchKeys&, HParams& h) const override {
    if (h.n_expert > 0) h.n_ff_exp = h.n_ff;
  }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    declare_attention(w, h, il, L);
    L.rope_freqs = w.optional("rope_freqs.weight", {h.n_rot / 2}, il, Op::Rope);
    if (h.n_expert == 0) return declare_gated_ffn(w, h, il, L);
    const std::string p = layer_prefix(il);
    if (!w.has(p + "ffn_gate_exps.weight") && w.has(p + "ffn_gate.0.weight"))
      fail("{}: tensor '{}ffn_gate.0.weight': experts stored one 2-D tensor per expert (an older Mixtral conversion) "
           "are not supported; convert the model again to get the 3-D '{}ffn_gate_exps.weight'",
           w.file().path(), p, p);
    declare_moe_ffn(w, h, il, L);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& llama_arch() {
  static const LlamaArch arch;
  return arch;
}

}  // namespace loom
