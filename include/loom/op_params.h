// Typed op parameters. A node keeps its parameters as raw words
// (Tensor::op_params); these accessors are the only code that encodes or
// decodes them. Each struct belongs to the ops whose kOpTable row names its
// kind, and an accessor used on another op throws (a programmer error).
#pragma once

#include <array>

#include "loom/op.h"
#include "loom/tensor.h"

namespace loom {

// scale: a * scale + bias
struct ScaleParams {
  float scale = 1.0f;
  float bias = 0.0f;
};

// rms_norm and norm
struct NormParams {
  float eps = 0.0f;
};

struct RopeParams {
  int32_t n_dims = 0;  // leading elements of each row that rotate (even); 0 means ne0
  RopeMode mode = RopeMode::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float attn_factor = 1.0f;  // scales cos and sin (LongRoPE's attention factor); dims past n_dims are not scaled
};

// soft_max: softmax(a * scale + mask)
struct SoftMaxParams {
  float scale = 1.0f;
};

struct ConcatParams {
  int32_t dim = 0;  // the joined dim
};

// permute and transpose: result dim axis[i] is a's dim i
struct PermuteParams {
  std::array<int32_t, 4> axis{0, 1, 2, 3};
};

// clamp: min(max(a, min), max)
struct ClampParams {
  float min = 0.0f;
  float max = 0.0f;
};

// argsort: the order of each row's indices
struct ArgsortParams {
  SortOrder order = SortOrder::Ascending;
};

// flash_attn_ext: softmax(softcap(scale * K^T q) + slope * mask) V, fused
struct FlashAttnParams {
  float scale = 1.0f;
  float max_bias = 0.0f;  // ALiBi: > 0 gives head h the mask slope of llama.cpp's ALiBi (else 1)
  float softcap = 0.0f;   // > 0: logits become softcap * tanh(logit / softcap) before the mask
};

ScaleParams scale_params(const Tensor& node);
void set_scale_params(Tensor& node, const ScaleParams& p);
NormParams norm_params(const Tensor& node);
void set_norm_params(Tensor& node, const NormParams& p);
RopeParams rope_params(const Tensor& node);
void set_rope_params(Tensor& node, const RopeParams& p);
SoftMaxParams soft_max_params(const Tensor& node);
void set_soft_max_params(Tensor& node, const SoftMaxParams& p);
ConcatParams concat_params(const Tensor& node);
void set_concat_params(Tensor& node, const ConcatParams& p);
PermuteParams permute_params(const Tensor& node);
void set_permute_params(Tensor& node, const PermuteParams& p);
ClampParams clamp_params(const Tensor& node);
void set_clamp_params(Tensor& node, const ClampParams& p);
ArgsortParams argsort_params(const Tensor& node);
void set_argsort_params(Tensor& node, const ArgsortParams& p);
FlashAttnParams flash_attn_params(const Tensor& node);
void set_flash_attn_params(Tensor& node, const FlashAttnParams& p);

// The ALiBi slope of head h of n_head with max_bias (1 when max_bias is 0),
// as llama.cpp computes it: heads below the largest power of two n2 <= n_head
// take m0^(h+1), the others m1^(2(h-n2)+1), m0 = 2^(-max_bias/n2),
// m1 = 2^(-max_bias/(2 n2)).
float alibi_slope(float max_bias, int64_t h, int64_t n_head);

}  // namespace loom
