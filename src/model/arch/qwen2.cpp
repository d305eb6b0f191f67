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
    const std::string p = "blk." + std::to_string(il) + ".";
    L.attn_norm = w(p + "attn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.wq = w(p + "attn_q.weight", {h.n_embd, h.n_embd_q()}, il, Op::MulMat);
    L.wk = w(p + "attn_k.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
    L.wv = w(p + "attn_v.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
    L.bq = w(p + "attn_q.bias", {h.n_embd_q()}, il, Op::Add);
    L.bk = w(p + "attn_k.bias", {h.n_embd_kv()}, il, Op::Add);
    L.bv = w(p + "attn_v.bias", {h.n_embd_kv()}, il, Op::Add);
    L.wo = w(p + "attn_output.weight", {h.n_embd_q(), h.n_embd}, il, Op::MulMat);
    L.ffn_norm = w(p + "ffn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.ffn_gate = w(p + "ffn_gate.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
    L.ffn_up = w(p + "ffn_up.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
    L.ffn_down = w(p + "ffn_down.weight", {h.n_ff, h.n_embd}, il, Op::MulMat);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& qwen2_arch() {
  static const Qwen2Arch arch;
  return arch;
}

}  // namespace loom
