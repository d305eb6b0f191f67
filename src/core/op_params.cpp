#include "loom/op_params.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#include "loom/error.h"

namespace loom {
namespace {

void check_kind(const Tensor& node, OpParamsKind kind, std::string_view what) {
  if (static_cast<size_t>(node.op) >= kOpCount || op_info(node.op).params != kind)
    fail("{}: tensor '{}' has op {}, which does not carry these parameters", what, node.name, op_name(node.op));
}

// The struct's bytes are the first words of op_params, in member order.
template <class P>
P load(const Tensor& node, OpParamsKind kind, std::string_view what) {
  static_assert(std::is_trivially_copyable_v<P> && sizeof(P) <= sizeof(node.op_params) && sizeof(P) % 4 == 0);
  check_kind(node, kind, what);
  P p;
  std::memcpy(static_cast<void*>(&p), node.op_params.data(), sizeof p);
  return p;
}

template <class P>
void store(Tensor& node, const P& p, OpParamsKind kind, std::string_view what) {
  check_kind(node, kind, what);
  std::memcpy(node.op_params.data(), &p, sizeof p);
}

}  // namespace

using K = OpParamsKind;

ScaleParams scale_params(const Tensor& n) { return load<ScaleParams>(n, K::Scale, "scale_params"); }
void set_scale_params(Tensor& n, const ScaleParams& p) { store(n, p, K::Scale, "set_scale_params"); }
NormParams norm_params(const Tensor& n) { return load<NormParams>(n, K::Norm, "norm_params"); }
void set_norm_params(Tensor& n, const NormParams& p) { store(n, p, K::Norm, "set_norm_params"); }
RopeParams rope_params(const Tensor& n) { return load<RopeParams>(n, K::Rope, "rope_params"); }
void set_rope_params(Tensor& n, const RopeParams& p) { store(n, p, K::Rope, "set_rope_params"); }
SoftMaxParams soft_max_params(const Tensor& n) { return load<SoftMaxParams>(n, K::SoftMax, "soft_max_params"); }
void set_soft_max_params(Tensor& n, const SoftMaxParams& p) { store(n, p, K::SoftMax, "set_soft_max_params"); }
ConcatParams concat_params(const Tensor& n) { return load<ConcatParams>(n, K::Concat, "concat_params"); }
void set_concat_params(Tensor& n, const ConcatParams& p) { store(n, p, K::Concat, "set_concat_params"); }
PermuteParams permute_params(const Tensor& n) { return load<PermuteParams>(n, K::Permute, "permute_params"); }
void set_permute_params(Tensor& n, const PermuteParams& p) { store(n, p, K::Permute, "set_permute_params"); }
ClampParams clamp_params(const Tensor& n) { return load<ClampParams>(n, K::Clamp, "clamp_params"); }
void set_clamp_params(Tensor& n, const ClampParams& p) { store(n, p, K::Clamp, "set_clamp_params"); }
ArgsortParams argsort_params(const Tensor& n) { return load<ArgsortParams>(n, K::Argsort, "argsort_params"); }
void set_argsort_params(Tensor& n, const ArgsortParams& p) { store(n, p, K::Argsort, "set_argsort_params"); }
FlashAttnParams flash_attn_params(const Tensor& n) { return load<FlashAttnParams>(n, K::FlashAttn, "flash_attn_params"); }
void set_flash_attn_params(Tensor& n, const FlashAttnParams& p) { store(n, p, K::FlashAttn, "set_flash_attn_params"); }

float alibi_slope(float max_bias, int64_t h, int64_t n_head) {
  if (max_bias <= 0.0f) return 1.0f;
  int64_t n2 = 1;
  while (n2 * 2 <= n_head) n2 *= 2;
  const float m0 = std::pow(2.0f, -max_bias / static_cast<float>(n2));
  const float m1 = std::pow(2.0f, -(max_bias / 2.0f) / static_cast<float>(n2));
  return h < n2 ? std::pow(m0, static_cast<float>(h + 1)) : std::pow(m1, static_cast<float>(2 * (h - n2) + 1));
}

}  // namespace loom
