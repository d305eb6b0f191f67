// Shared blocks that every family's layer is built from (arch.h). Shapes:
// activations are [features, n tokens]; heads are [head_dim, heads, n].
#pragma once

#include "arch.h"

namespace loom {

// "blk.<il>.": the prefix of layer il's tensor names.
std::string layer_prefix(int64_t il);
// Layer il's attn_norm and separate attn_q, attn_k, attn_v and attn_output.
void declare_attention(ModelWeights& w, const HParams& h, int64_t il, Layer& L);
// Layer il's ffn_norm and separate ffn_gate, ffn_up and ffn_down.
void declare_gated_ffn(ModelWeights& w, const HParams& h, int64_t il, Layer& L);

// Layer il's ffn_norm, router ffn_gate_inp and the experts' 3-D
// ffn_gate_exps, ffn_up_exps and ffn_down_exps (h.n_expert of h.n_ff_exp).
void declare_moe_ffn(ModelWeights& w, const HParams& h, int64_t il, Layer& L);

// rms_norm(x) * w (w broadcast over rows: [ne0] or matching heads).
Tensor* rms_norm_mul(LayerGraph& g, Tensor* x, Tensor* w);

// w x (+ b): a row-split matrix (-sm row) is multiplied part by part and the
// parts joined.
Tensor* linear(LayerGraph& g, Tensor* w, Tensor* x, Tensor* b = nullptr);

struct Qkv {
  Tensor* q;  // [head_dim, n_head, n]
  Tensor* k;  // [head_dim, n_head_kv, n]
  Tensor* v;  // [head_dim * n_head_kv, n]
};
// The q, k, v projections of x: separate (wq, wk, wv) or fused (wqkv, rows
// q then k then v), each with its optional bias.
Qkv project_qkv(LayerGraph& g, const Layer& L, Tensor* x);

// Rotary position embedding of q or k heads with the model's rope (mode,
// rotated dims, base, linear scale; a sliding-window layer's own base and
// scale) and the layer's freq factors if any.
Tensor* rope_heads(LayerGraph& g, const Layer& L, Tensor* heads);

// c * tanh(x / c): soft-capping of logits to (-c, c).
Tensor* soft_cap(LayerGraph& g, Tensor* x, float c);

// The first n_kv cells of a cache [n_embd_kv, n_ctx] (rows are cells) as
// heads [head_dim, n_kv, n_head_kv]: a view, stepping by the bytes of one
// head's row (whole blocks for a quantized cache).
Tensor* cache_heads(Context& ctx, Tensor* cache, int64_t head_dim, int64_t n_head_kv, int64_t n_kv);

// Causal grouped-query attention of one layer: k and v rows go into the
// layer's cache at their cells, then softmax(K^T q * kq_scale + mask) V
// over the cached tokens; returns the heads joined [n_head * head_dim, n]
// (before the output projection). mask: g.mask when null. softcap > 0
// soft-caps the scaled logits before the mask. With g.flash_attn this is one
// flash_attn_ext node reading both caches in place; without, mul_mat,
// soft_max and mul_mat with V made contiguous and transposed per layer.
Tensor* attention(LayerGraph& g, Tensor* q, Tensor* k, Tensor* v, float kq_scale, Tensor* mask = nullptr,
                  float softcap = 0.0f);

// The usual attention sub-block: qkv, optional per-head q/k RMS norms, rope,
// attention scaled by h.attn_scale (1/sqrt(head_dim) when 0) and soft-capped
// by h.attn_softcap, over the sliding window for a Layer::swa layer, output
// projection (+ bias).
Tensor* self_attention(LayerGraph& g, const Layer& L, Tensor* x);

// Gated FFN: down (silu(gate x) * up x). With no gate matrix, `up` holds gate
// and up fused ([n_embd, 2 n_ff], gate rows first).
Tensor* ffn_silu_gated(LayerGraph& g, const Layer& L, Tensor* x);

// GeGLU FFN: down (gelu(gate x) * up x), gelu with the tanh approximation.
Tensor* ffn_gelu_gated(LayerGraph& g, const Layer& L, Tensor* x);

// Mixture of experts (qwen3moe, mixtral): per token, p = softmax(router x)
// over the experts; the n_expert_used largest p pick the experts, whose
// weights are those p divided by their sum; the result is the weighted sum
// of the picked experts' gated FFNs, down_e (silu(gate_e x) * up_e x).
Tensor* ffn_moe(LayerGraph& g, const Layer& L, Tensor* x);

// The pre-norm layer of llama and its kin:
//   x += attention(rms_norm(x) * attn_norm);  x += ffn(rms_norm(x) * ffn_norm)
// with ffn_moe for a layer with experts (a router), else ffn_silu_gated.
Tensor* pre_norm_layer(LayerGraph& g, const Layer& L, Tensor* x);

// attention.sliding_window_pattern: a period (every period-th layer global;
// `period` when absent) or a per-layer array (true: windowed). llama.cpp
// reads only the period for gemma2/gemma3 (an array leaves its default);
// converters write arrays only for other families.
void read_swa_pattern(ArchKeys& k, HParams& h, int64_t period);

// The attention scale of Gemma 2 and 3: 1/sqrt(head_dim), but 1/sqrt(n_embd
// / n_head) (the query_pre_attn_scalar of the 27B models) at the 27B
// models' layer count, as llama.cpp decides it.
float gemma_attn_scale(const HParams& h, int64_t n_layer_27b);

// Gemma's layer, normed before and after each sub-block:
//   x += rms_norm(attention(rms_norm(x) * attn_norm)) * attn_post_norm
//   x += rms_norm(ffn_gelu_gated(rms_norm(x) * ffn_norm)) * ffn_post_norm
Tensor* sandwich_norm_layer(LayerGraph& g, const Layer& L, Tensor* x);

}  // namespace loom
