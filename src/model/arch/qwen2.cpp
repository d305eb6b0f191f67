// qwen2: Qwen 2 and 2.5 (dense). Llama's layer with biases on the q, k and v
// projections, and NeoX rope (rotated pairs are (i, i + n_rot / 2)).
#include "arch.h"
#include "blocks.h"

namespace loom {
namespace {

class Qwen2Arch final : public Arch {
 public:
  std::string_view name() const override { return "qwen2"; }
  RopeMode rope_mode() const override { return RopeMode::NeoX; }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    declare_attention(w, h, il, L);
    const std::string p = layer_prefix(il);
    L.bq = w(p + "attn_q.bias", {h.n_embd_q()}, il, Op::Add);
    L.bk = w(p + "attn_k.bias", {h.n_embd_kv()}, il, Op::Add);
    L.bv = w(p + "attn_v.bias", {h.n_embd_kv()}, il, Op::Add);
    declare_gated_ffn(w, h, il, L);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& qwen2_arch() {
  static const Qwen2Arch arch;
  return arch;
}

}  // namespace loom
