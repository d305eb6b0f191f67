// phi3: Phi-3 and Phi-3.5 mini (dense). Fused q/k/v (attn_qkv) and fused
// gate/up (ffn_up, [n_embd, 2 n_ff], gate rows first) projections, NeoX rope
// over rope.dimension_count dims (partial rotary when fewer than head_dim).
// The long-context files (LongRoPE, Phi-3-128k, Phi-3.5, Phi-4-mini) carry
// rope_factors_short/long.weight, per-pair frequency divisors: as in
// llama.cpp, the long ones are used when the session's context is longer
// than rope.scaling.original_context_length, and rope.scaling.attn_factor
// scales the rotated dims (read for every family in hparams.cpp).
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
    L.rope_freqs = w.optional("rope_factors_short.weight", {h.n_rot / 2}, il, Op::Rope);
    L.rope_freqs_long = w.optional("rope_factors_long.weight", {h.n_rot / 2}, il, Op::Rope);
    if (!L.rope_freqs != !L.rope_freqs_long)
      fail("{}: tensor 'rope_factors_{}.weight' is missing: LongRoPE needs both the short and the long factors",
           w.file().path(), L.rope_freqs ? "long" : "short");
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override {
    if (!L.rope_freqs_long || g.k_cache->ne[1] <= g.h.n_ctx_orig) return pre_norm_layer(g, L, x);
    Layer long_context = L;
    long_context.rope_freqs = L.rope_freqs_long;
    return pre_norm_layer(g, long_context, x);
  }
};

}  // namespace

const Arch& phi3_arch() {
  static const Phi3Arch arch;
  return arch;
}

}  // namespace loom
