// qwen3: Qwen 3 (dense). Llama's layer with an RMS norm on every q and k head
// before rope, NeoX rope, and a head size of its own (attention.key_length,
// so q is n_head * head_dim wide, not n_embd).
#include "arch.h"
#include "blocks.h"

namespace loom {
namespace {

class Qwen3Arch final : public Arch {
 public:
  std::string_view name() const override { return "qwen3"; }
  RopeMode rope_mode() const override { return RopeMode::NeoX; }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    declare_attention(w, h, il, L);
    const std::string p = layer_prefix(il);
    L.attn_q_norm = w(p + "attn_q_norm.weight", {h.head_dim()}, il, Op::Mul);
    L.attn_k_norm = w(p + "attn_k_norm.weight", {h.head_dim()}, il, Op::Mul);
    declare_gated_ffn(w, h, il, L);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& qwen3_arch() {
  static const Qwen3Arch arch;
  return arch;
}

}  // namespace loom
