// phi3: Phi-3 and Phi-3.5 mini (dense). Fused q/k/v (attn_qkv) and fused
// gate/up (ffn_up, [n_embd, 2 n_ff], gate rows first) projections, NeoX rope
// over rope.dimension_count dims (partial rotary when fewer than head_dim).
// The long-context files (LongRoPE: rope_factors_long/short) are refused as
// unknown tensors.
#include "arch.h"
#include "blocks.h"

namespace loom {
namespace {

class Phi3Arch final : public Arch {
 public:
  std::string_view name() const override { return "phi3"; }
  RopeMode rope_mode() const override { return RopeMode::NeoX; }

  void read_hparams(ArchKeys& k, HParams&) const override {
    // llama.cpp reads the sliding window of Phi-3 files and runs them with
    // full causal attention (it disables Phi SWA, llama.cpp PR 13676); so
    // does Loom, to give the same result.
    k.ignore("attention.sliding_window");
  }

  void declare_layer(ModelWeights& w, const HParams& h, int64_t il, Layer& L) const override {
    const std::string p = layer_prefix(il);
    L.attn_norm = w(p + "attn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.wqkv = w(p + "attn_qkv.weight", {h.n_embd, h.n_embd_q() + 2 * h.n_embd_kv()}, il, Op::MulMat);
    L.wo = w(p + "attn_output.weight", {h.n_embd_q(), h.n_embd}, il, Op::MulMat);
    L.ffn_norm = w(p + "ffn_norm.weight", {h.n_embd}, il, Op::Mul);
    L.ffn_up = w(p + "ffn_up.weight", {h.n_embd, 2 * h.n_ff}, il, Op::MulMat);
    L.ffn_down = w(p + "ffn_down.weight", {h.n_ff, h.n_embd}, il, Op::MulMat);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& phi3_arch() {
  static const Phi3Arch arch;
  return arch;
}

}  // namespace loom
