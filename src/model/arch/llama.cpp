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
    declare_attention(w, h, il, L);
    L.rope_freqs = w.optional("rope_freqs.weight", {h.n_rot / 2}, il, Op::Rope);
    declare_gated_ffn(w, h, il, L);
  }

  Tensor* build_layer(LayerGraph& g, const Layer& L, Tensor* x) const override { return pre_norm_layer(g, L, x); }
};

}  // namespace

const Arch& llama_arch() {
  static const LlamaArch arch;
  return arch;
}

}  // namespace loom
