#include "blocks.h"

#include <cmath>
#include <limits>

#include "loom/error.h"
#include "loom/ops.h"

namespace loom {

std::string layer_prefix(int64_t il) { return "blk." + std::to_string(il) + "."; }

void declare_attention(ModelWeights& w, const HParams& h, int64_t il, Layer& L) {
  const std::string p = layer_prefix(il);
  L.attn_norm = w(p + "attn_norm.weight", {h.n_embd}, il, Op::Mul);
  L.wq = w(p + "attn_q.weight", {h.n_embd, h.n_embd_q()}, il, Op::MulMat);
  L.wk = w(p + "attn_k.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
  L.wv = w(p + "attn_v.weight", {h.n_embd, h.n_embd_kv()}, il, Op::MulMat);
  L.wo = w(p + "attn_output.weight", {h.n_embd_q(), h.n_embd}, il, Op::MulMat);
}

void declare_gated_ffn(ModelWeights& w, const HParams& h, int64_t il, Layer& L) {
  const std::string p = layer_prefix(il);
  L.ffn_norm = w(p + "ffn_norm.weight", {h.n_embd}, il, Op::Mul);
  L.ffn_gate = w(p + "ffn_gate.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
  L.ffn_up = w(p + "ffn_up.weight", {h.n_embd, h.n_ff}, il, Op::MulMat);
  L.ffn_down = w(p + "ffn_down.weight", {h.n_ff, h.n_embd}, il, Op::MulMat);
}

void declare_moe_ffn(ModelWeights& w, const HParams& h, int64_t il, Layer& L) {
  const std::string p = layer_prefix(il);
  const int64_t ne = h.n_expert, ff = h.n_ff_exp;
  L.ffn_norm = w(p + "ffn_norm.weight", {h.n_embd}, il, Op::Mul);
  L.ffn_gate_inp = w(p + "ffn_gate_inp.weight", {h.n_embd, ne}, il, Op::MulMat);
  L.ffn_gate_exps = w(p + "ffn_gate_exps.weight", {h.n_embd, ff, ne}, il, Op::MulMatId);
  L.ffn_up_exps = w(p + "ffn_up_exps.weight", {h.n_embd, ff, ne}, il, Op::MulMatId);
  L.ffn_down_exps = w(p + "ffn_down_exps.weight", {ff, h.n_embd, ne}, il, Op::MulMatId);
  L.n_expert_used = h.expert_used(il);
}

Tensor* rms_norm_mul(LayerGraph& g, Tensor* x, Tensor* w) { return mul(g.ctx, rms_norm(g.ctx, x, g.h.rms_eps), w); }

Tensor* linear(LayerGraph& g, Tensor* w, Tensor* x, Tensor* b) {
  const std::vector<Tensor*>& parts = g.model.row_parts(w);
  Tensor* out = mul_mat(g.ctx, parts.empty() ? w : parts[0], x);
  for (size_t i = 1; i < parts.size(); ++i) out = concat(g.ctx, out, mul_mat(g.ctx, parts[i], x), 0);
  return b ? add(g.ctx, out, b) : out;
}

namespace {

// Rows [first, first + count) of a [rows, n] activation, as a contiguous tensor.
Tensor* rows_of(LayerGraph& g, Tensor* a, int64_t first, int64_t count) {
  return cont(g.ctx, view_2d(g.ctx, a, count, a->ne[1], a->nb[1], static_cast<size_t>(first) * a->nb[0]));
}

}  // namespace

Qkv project_qkv(LayerGraph& g, const Layer& L, Tensor* x) {
  const HParams& h = g.h;
  Tensor *q, *k, *v;
  if (L.wqkv) {
    Tensor* qkv = linear(g, L.wqkv, x, L.bqkv);
    q = rows_of(g, qkv, 0, h.n_embd_q());
    k = rows_of(g, qkv, h.n_embd_q(), h.n_embd_kv());
    v = rows_of(g, qkv, h.n_embd_q() + h.n_embd_kv(), h.n_embd_kv());
  } else {
    q = linear(g, L.wq, x, L.bq);
    k = linear(g, L.wk, x, L.bk);
    v = linear(g, L.wv, x, L.bv);
  }
  const int64_t hd = h.head_dim();
  return {reshape(g.ctx, q, {hd, h.n_head, g.n, 1}), reshape(g.ctx, k, {hd, h.n_head_kv, g.n, 1}), v};
}

Tensor* rope_heads(LayerGraph& g, const Layer& L, Tensor* heads) {
  const HParams& h = g.h;
  const RopeParams params{static_cast<int>(h.n_rot), h.rope_mode, L.swa ? h.rope_freq_base_swa : h.rope_freq_base,
                          L.swa ? h.rope_freq_scale_swa : h.rope_freq_scale, h.rope_attn_factor};
  return rope(g.ctx, heads, g.positions, params, L.rope_freqs);
}

Tensor* soft_cap(LayerGraph& g, Tensor* x, float c) { return scale(g.ctx, tanh(g.ctx, scale(g.ctx, x, 1.0f / c)), c); }

Tensor* cache_heads(Context& ctx, Tensor* cache, int64_t head_dim, int64_t n_head_kv, int64_t n_kv) {
  const size_t head = row_size(cache->type, head_dim), cell = cache->nb[1];
  return permute(ctx, view(ctx, cache, {head_dim, n_head_kv, n_kv, 1}, {head, cell, cell * n_kv}, 0), {0, 2, 1, 3});
}

Tensor* attention(LayerGraph& g, Tensor* q, Tensor* k, Tensor* v, float kq_scale, Tensor* mask, float softcap) {
  Context& ctx = g.ctx;
  const HParams& h = g.h;
  const int64_t hd = h.head_dim(), n = g.n, n_kv = g.n_kv;
  Tensor* k_all = set_rows(ctx, g.k_cache, reshape(ctx, k, {h.n_embd_kv(), n, 1, 1}), g.kv_cells);
  Tensor* v_all = set_rows(ctx, g.v_cache, v, g.kv_cells);
  if (!mask) mask = g.mask;
  // Cache rows are cells (the mask says which belong to each token's
  // sequence); view the first n_kv as [head_dim, n_kv, n_head_kv].
  Tensor* kh = cache_heads(ctx, k_all, hd, h.n_head_kv, n_kv);
  Tensor* qh = permute(ctx, q, {0, 2, 1, 3});  // [hd, n, n_head]
  if (g.flash_attn) {
    Tensor* vh = cache_heads(ctx, v_all, hd, h.n_head_kv, n_kv);
    Tensor* out = flash_attn_ext(ctx, qh, kh, vh, mask, kq_scale, 0.0f, softcap);  // [hd, n_head, n]
    return reshape(ctx, out, {h.n_embd_q(), n, 1, 1});
  }
  Tensor* kq = mul_mat(ctx, kh, qh);  // [n_kv, n, n_head]
  if (softcap > 0.0f) {
    kq = scale(ctx, tanh(ctx, scale(ctx, kq, kq_scale / softcap)), softcap);  // soft_cap of the scaled logits
    kq_scale = 1.0f;
  }
  kq = soft_max(ctx, kq, mask, kq_scale);
  const size_t vs = traits(v_all->type).type_size;
  Tensor* vt = cont(
      ctx, permute(ctx, view(ctx, v_all, {hd, h.n_head_kv, n_kv, 1}, {hd * vs, v_all->nb[1], v_all->nb[1] * n_kv}, 0),
                   {1, 2, 0, 3}));  // [n_kv, hd, n_head_kv]
  Tensor* kqv = mul_mat(ctx, vt, kq);  // [hd, n, n_head]
  return reshape(ctx, cont(ctx, permute(ctx, kqv, {0, 2, 1, 3})), {h.n_embd_q(), n, 1, 1});
}

Tensor* self_attention(LayerGraph& g, const Layer& L, Tensor* x) {
  auto [q, k, v] = project_qkv(g, L, x);
  if (L.attn_q_norm) q = rms_norm_mul(g, q, L.attn_q_norm);
  if (L.attn_k_norm) k = rms_norm_mul(g, k, L.attn_k_norm);
  q = rope_heads(g, L, q);
  k = rope_heads(g, L, k);
  const HParams& h = g.h;
  const float kq_scale = h.attn_scale > 0.0f ? h.attn_scale : 1.0f / std::sqrt(static_cast<float>(h.head_dim()));
  if (L.swa && !g.mask_swa) fail("sliding-window layer without a sliding-window mask (n_swa = {})", h.n_swa);
  Tensor* mask = L.swa ? g.mask_swa : g.mask;
  return linear(g, L.wo, attention(g, q, k, v, kq_scale, mask, h.attn_softcap), L.bo);
}

namespace {

// down (act(gate x) * up x); with no gate matrix, `up` holds gate and up
// fused ([n_embd, 2 n_ff], gate rows first).
Tensor* ffn_gated(LayerGraph& g, const Layer& L, Tensor* x, Tensor* (*act)(Context&, Tensor*)) {
  Tensor *gate, *up;
  if (L.ffn_gate) {
    gate = linear(g, L.ffn_gate, x);
    up = linear(g, L.ffn_up, x);
  } else {
    Tensor* both = linear(g, L.ffn_up, x);
    gate = rows_of(g, both, 0, g.h.n_ff);
    up = rows_of(g, both, g.h.n_ff, g.h.n_ff);
  }
  return linear(g, L.ffn_down, mul(g.ctx, act(g.ctx, gate), up));
}

}  // namespace

Tensor* ffn_moe(LayerGraph& g, const Layer& L, Tensor* x) {
  Context& ctx = g.ctx;
  const int64_t n = g.n, n_used = L.n_expert_used, n_embd = x->ne[0];
  Tensor* probs = soft_max(ctx, linear(g, L.ffn_gate_inp, x));  // [n_expert, n]
  Tensor* ids = top_k(ctx, probs, n_used);                       // [n_used, n]
  Tensor* w = get_rows(ctx, reshape(ctx, probs, {1, g.h.n_expert, n, 1}), ids);  // [1, n_used, n]
  // Normalised over the picked experts; the sum is kept above the smallest
  // normal f16 (6.1e-5), as llama.cpp does.
  w = reshape(ctx, w, {n_used, n, 1, 1});
  w = div(ctx, w, clamp(ctx, sum_rows(ctx, w), 6.103515625e-5f, std::numeric_limits<float>::infinity()));
  w = reshape(ctx, w, {1, n_used, n, 1});
  Tensor* xe = reshape(ctx, x, {n_embd, 1, n, 1});
  Tensor* gate = mul_mat_id(ctx, L.ffn_gate_exps, xe, ids);  // [n_ff_exp, n_used, n]
  Tensor* up = mul_mat_id(ctx, L.ffn_up_exps, xe, ids);
  Tensor* experts = mul_mat_id(ctx, L.ffn_down_exps, mul(ctx, silu(ctx, gate), up), ids);  // [n_embd, n_used, n]
  experts = mul(ctx, experts, w);
  // Sum over the picked experts: the [n_embd, n] slices s = 0 .. n_used-1.
  auto slice = [&](int64_t s) { return view_2d(ctx, experts, n_embd, n, experts->nb[2], s * experts->nb[1]); };
  Tensor* out = n_used == 1 ? cont(ctx, slice(0)) : slice(0);
  for (int64_t s = 1; s < n_used; ++s) out = add(ctx, out, slice(s));
  return out;
}

Tensor* ffn_silu_gated(LayerGraph& g, const Layer& L, Tensor* x) { return ffn_gated(g, L, x, silu); }

Tensor* ffn_gelu_gated(LayerGraph& g, const Layer& L, Tensor* x) { return ffn_gated(g, L, x, gelu); }

Tensor* pre_norm_layer(LayerGraph& g, const Layer& L, Tensor* x) {
  x = add(g.ctx, x, self_attention(g, L, rms_norm_mul(g, x, L.attn_norm)));
  Tensor* h = rms_norm_mul(g, x, L.ffn_norm);
  return add(g.ctx, x, L.ffn_gate_inp ? ffn_moe(g, L, h) : ffn_silu_gated(g, L, h));
}

void read_swa_pattern(ArchKeys& k, HParams& h, int64_t period) {
  if (auto layers = k.get_layer_array_or("attention.sliding_window_pattern", h.n_layer)) {
    h.swa_layers.assign(layers->begin(), layers->end());
    return;
  }
  h.swa_period = static_cast<int64_t>(k.get_uint_or("attention.sliding_window_pattern").value_or(period));
}

float gemma_attn_scale(const HParams& h, int64_t n_layer_27b) {
  const int64_t d = h.n_layer == n_layer_27b ? h.n_embd / h.n_head : h.head_dim();
  return 1.0f / std::sqrt(static_cast<float>(d));
}

Tensor* sandwich_norm_layer(LayerGraph& g, const Layer& L, Tensor* x) {
  Tensor* attn = self_attention(g, L, rms_norm_mul(g, x, L.attn_norm));
  x = add(g.ctx, x, rms_norm_mul(g, attn, L.attn_post_norm));
  Tensor* ffn = ffn_gelu_gated(g, L, rms_norm_mul(g, x, L.ffn_norm));
  return add(g.ctx, x, rms_norm_mul(g, ffn, L.ffn_post_norm));
}

}  // namespace loom
