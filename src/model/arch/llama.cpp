// llama: Llama 2, 3, 3.1, 3.2 and Mistral files. Normal (pairwise) rope;
// Llama 3 rope scaling comes as rope_freqs.weight, one frequency divisor per
// rotated pair, shared by every layer (loaded once per layer device).
#include "arch.h"
#include "blocks.h"

namespace loom {
namespace {

class LlamaArch final : public Arch {
 public:
  std::string_view name() const override { return "llama"; }
  RopeMode rope_mode() const override { return RopeMode::Normal; }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    const std::string p = "blk." + std::to_string(il) + ".";
    L.attn_norm = w(p + "attn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.wq = w(p + "attn_q.weight", {h.n_embd, h.n_embd_q()}, il, Op::MulMat);
    L.wk = w(p + "attn_k.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
    L.wv = w(p + "attn_v.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
    L.wo = w(p + "attn_output.weight", {h.n_embd_q(), h.n_embd}, il, Op::MulMat);
    L.rope_freqs = w.optional("rope_freqs.weight", {h.n_rot / 2}, il, Op::Rope);
    L.ffn_norm = w(p + "ffn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.ffn_gate = w(p + "ffn_gate.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
    L.ffn_up = w(p + "ffn_up.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
    L.ffn_down = w(p + "ffn_down.weight", {h.n_ff, h.n_embd}, il, Op::MulMat);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& llama_arch() {
  static const LlamaArch arch;
  return arch;
}

}  // namespace loom
