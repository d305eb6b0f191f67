// gemma3: Gemma 3 (text). Gemma 2's layer (embedding scale sqrt(n_embd),
// post-norms, GeGLU) with an RMS norm on every q and k head before rope and
// no attention soft-capping. With attention.sliding_window set, five of
// every six layers (attention.sliding_window_pattern) attend to the window
// and rope with base 10000 (rope.freq_base_swa) and no scaling; the others
// use rope.freq_base and the file's rope scaling. The output logits are
// soft-capped only when final_logit_softcapping is set. NeoX rope.
#include <cmath>

#include "arch.h"
#include "blocks.h"

namespace loom {
namespace {

class Gemma3Arch final : public Arch {
 public:
  std::string_view name() const override { return "gemma3"; }
  RopeMode rope_mode() const override { return RopeMode::NeoX; }

  void read_hparams(ArchKeys& k, HParams& h) const override {
    // Without a window (or with 0) every layer is global and the window
    // layers' keys have no effect, as in llama.cpp.
    const auto window = k.get_uint_or("attention.sliding_window");
    const auto base_swa = k.get_f32_or("rope.freq_base_swa");
    if (window && *window > 0) {
      h.n_swa = static_cast<int64_t>(*window);
      read_swa_pattern(k, h, 6);
      h.rope_freq_base_swa = base_swa.value_or(10000.0f);
      h.rope_freq_scale_swa = 1.0f;
    } else {
      k.ignore("attention.sliding_window_pattern");
    }
    h.final_softcap = k.get_f32_or("final_logit_softcapping").value_or(0.0f);
    h.embd_scale = std::sqrt(static_cast<float>(h.n_embd));
    h.attn_scale = gemma_attn_scale(h, 62);
  }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    declare_attention(w, h, il, L);
    const std::string p = layer_prefix(il);
    L.attn_q_norm = w(p + "attn_q_norm.weight", {h.head_dim()}, il, Op::Mul);
    L.attn_k_norm = w(p + "attn_k_norm.weight", {h.head_dim()}, il, Op::Mul);
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

const Arch& gemma3_arch() {
  static const Gemma3Arch arch;
  return arch;
}

}  // namespace loom
