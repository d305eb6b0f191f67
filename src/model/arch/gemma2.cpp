// gemma2: Gemma 2. Token embeddings scaled by sqrt(n_embd); every sub-block
// normed before and after (attn_post_norm, ffn_post_norm); GeGLU FFN;
// attention and output logits soft-capped (attn_logit_softcapping, 50, and
// final_logit_softcapping, 30, when absent); sliding-window attention
// (attention.sliding_window, 4096 when absent) on even layers, full
// attention on odd ones (attention.sliding_window_pattern, 2 when absent);
// NeoX rope. The output matrix is token_embd.
#include <cmath>

#include "arch.h"
#include "blocks.h"

namespace loom {

namespace {

class Gemma2Arch final : public Arch {
 public:
  std::string_view name() const override { return "gemma2"; }
  RopeMode rope_mode() const override { return RopeMode::NeoX; }
  bool reads_output_weight() const override { return false; }

  void read_hparams(ArchKeys& k, HParams& h) const override {
    h.n_swa = static_cast<int64_t>(k.get_uint_or("attention.sliding_window").value_or(4096));
    read_swa_pattern(k, h, 2);
    h.rope_freq_base_swa = k.get_f32_or("rope.freq_base_swa").value_or(h.rope_freq_base);
    h.rope_freq_scale_swa = h.rope_freq_scale;
    h.attn_softcap = k.get_f32_or("attn_logit_softcapping").value_or(50.0f);
    h.final_softcap = k.get_f32_or("final_logit_softcapping").value_or(30.0f);
    h.embd_scale = std::sqrt(static_cast<float>(h.n_embd));
    h.attn_scale = gemma_attn_scale(h, 46);
  }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    declare_attention(w, h, il, L);
    const std::string p = layer_prefix(il);
    L.attn_post_norm = w(p + "post_attention_norm.weight", {h.n_embd}, il, Op::Mul);
    declare_gated_ffn(w, h, il, L);
    L.ffn_post_norm = w(p + "post_ffw_norm.weight", {h.n_embd}, il, Op::Mul);
    L.swa = h.is_swa(il);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override {
    return sandwich_norm_layer(g, L, x);
  }
};

}  // namespace

const Arch& gemma2_arch() {
  static const Gemma2Arch arch;
  return arch;
}

}  // namespace loom
