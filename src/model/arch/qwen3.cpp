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
    const std::string p = "blk." + std::to_string(il) + ".";
    L.attn_norm = w(p + "attn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.wq = w(p + "attn_q.weight", {h.n_embd, h.n_embd_q()}, il, Op::MulMat);
    L.wk = w(p + "attn_k.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
    L.wv = w(p + "attn_v.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
    L.attn_q_norm = w(p + "attn_q_norm.weight", {h.head_dim()}, il, Op::Mul);
    L.attn_k_norm = w(p + "attn_k_norm.weight", {h.head_dim()}, il, Op::Mul);
    L.wo = w(p + "attn_output.weight", {h.n_embd_q(), h.n_embd}, il, Op::MulMat);
    L.ffn_norm = w(p + "ffn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.ffn_gate = w(p + "ffn_gate.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
    L.ffn_up = w(p + "ffn_up.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
    L.ffn_down = w(p + "ffn_down.weight", {h.n_ff, h.n_embd}, il, Op::MulMat);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& qwen3_arch() {
  static const Qwen3Arch arch;
  return arch;
}

}  // namespace loom
