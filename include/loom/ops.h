// Graph-building functions. Each checks its operands' types and shapes and
// throws loom::Error naming the op, the tensors and their shapes on mismatch.
// Nothing is computed here: the result is a new node in the context.
//
// Broadcasting (add/sub/mul/div, mul_mat dims 2-3): b's size in each dim must
// divide a's, and b repeats along that dim.
#pragma once

#include <array>
#include <cstdint>

#include "loom/context.h"
#include "loom/op_params.h"

namespace loom {

// Rows of `a` picked by the I32 indices `rows` [n, a.ne2, a.ne3] (or [n]);
// result F32 [a.ne0, n, rows.ne1, rows.ne2].
Tensor* get_rows(Context& ctx, Tensor* a, Tensor* rows);
// Writes the rows of F32 `src` [dst.ne0, n, ...] into `dst` at I32 indices
// `rows` [n, ...], converting to dst's type. Result is a view of dst.
Tensor* set_rows(Context& ctx, Tensor* dst, Tensor* src, Tensor* rows);
// Copies a into b (same element count), converting types. Result views b.
Tensor* cpy(Context& ctx, Tensor* a, Tensor* b);
// A contiguous copy of a (same type).
Tensor* cont(Context& ctx, Tensor* a);

Tensor* add(Context& ctx, Tensor* a, Tensor* b);
Tensor* sub(Context& ctx, Tensor* a, Tensor* b);
Tensor* mul(Context& ctx, Tensor* a, Tensor* b);
Tensor* div(Context& ctx, Tensor* a, Tensor* b);
// a * s + bias
Tensor* scale(Context& ctx, Tensor* a, float s, float bias = 0.0f);
Tensor* sqr(Context& ctx, Tensor* a);
Tensor* sqrt(Context& ctx, Tensor* a);
Tensor* silu(Context& ctx, Tensor* a);
Tensor* gelu(Context& ctx, Tensor* a);  // tanh approximation
Tensor* relu(Context& ctx, Tensor* a);
Tensor* tanh(Context& ctx, Tensor* a);
Tensor* sigmoid(Context& ctx, Tensor* a);  // 1 / (1 + exp(-a))
// min(max(a, lo), hi); lo <= hi (either may be infinite).
Tensor* clamp(Context& ctx, Tensor* a, float lo, float hi);
// Sums along dim 0: [1, ne1, ne2, ne3].
Tensor* sum_rows(Context& ctx, Tensor* a);

// a [K, M, A2, A3] (a float or quantized type), b [K, N, B2, B3] F32 with
// B2 % A2 == 0 and B3 % A3 == 0; result F32 [M, N, B2, B3] = a^T b per matrix.
Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b);

// Mixture of experts: per token, products with the experts `ids` selects.
// as [K, M, n_expert] holds one weight matrix per expert (a float or
// quantized type); ids I32 [n_used, n_tokens] (any strides, values in
// [0, n_expert)); b F32 [K, n_used or 1, n_tokens]. Result F32
// [M, n_used, n_tokens]: column (s, t) = as[:, :, ids[s, t]]^T b[:, s % b.ne1, t].
Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids);

Tensor* rms_norm(Context& ctx, Tensor* a, float eps);
Tensor* norm(Context& ctx, Tensor* a, float eps);

// a [head_dim, n_head, n_tokens, 1], positions I32 [n_tokens] (RopeParams: op_params.h).
// freq_factors (optional, F32 [>= n_dims / 2]): pair k turns at
// freq_scale * position * base^(-2k / n_dims) / freq_factors[k] (Llama-3
// rope scaling, the file's rope_freqs.weight).
Tensor* rope(Context& ctx, Tensor* a, Tensor* positions, const RopeParams& params, Tensor* freq_factors = nullptr);

// softmax(a * scale + mask) along dim 0. mask (optional, F32 or F16) is
// [a.ne0, >= a.ne1, m2, m3] with a.ne2 % m2 == 0 and a.ne3 % m3 == 0.
// sinks (optional, F32 [a.ne2]: attention sinks, one per head) add one more
// logit sinks[i2] to every row of a: it takes part in the max and the sum
// but has no output (gpt-oss).
Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask = nullptr, float scale = 1.0f, Tensor* sinks = nullptr);

// Fused attention (llama.cpp's flash_attn_ext): for each query row, head
// and batch, softmax(softcap(scale * K^T q) + slope * mask) V without the
// logits ever stored.
//   q    F32 [hd, n_q, n_head, ne3] (any strides)
//   k    [hd, n_kv, n_head_kv, k3], v [hd_v, n_kv, n_head_kv, k3]: f32, f16,
//        bf16 or a block-quantized type, rows contiguous (whole blocks),
//        n_head % n_head_kv == 0 and ne3 % k3 == 0: query head h reads KV
//        head h / (n_head / n_head_kv) (grouped-query attention)
//   mask (optional) F32 or F16 [n_kv, >= n_q, m2, m3], n_head % m2 == 0,
//        ne3 % m3 == 0, contiguous rows (0 or -inf for causal masking)
// softcap > 0 caps the scaled logits to (-softcap, softcap) before the mask;
// max_bias > 0 scales head h's mask by its ALiBi slope (alibi_slope). A row
// masked entirely gives zeros. Result F32 [hd_v, n_head, n_q, ne3]: heads
// next to each other, so [hd_v * n_head, n_q] is a reshape away.
Tensor* flash_attn_ext(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                       float max_bias = 0.0f, float softcap = 0.0f);

// Index of the largest element of each row of a 2-D F32 tensor: I32 [ne1].
Tensor* argmax(Context& ctx, Tensor* a);

// The indices that sort each row of F32 `a` (dim 0): I32, a's shape. Equal
// values keep their index order (a stable sort), in either order; NaNs last.
Tensor* argsort(Context& ctx, Tensor* a, SortOrder order);
// The indices of each row's k largest values, largest first: a view of the
// first k columns of argsort(a, Descending), I32 [k, ne1, ne2, ne3].
Tensor* top_k(Context& ctx, Tensor* a, int64_t k);

// a and b joined along `dim`; all other dims equal, same type.
Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim);

// Views reinterpret a's memory: no data moves.
Tensor* view(Context& ctx, Tensor* a, std::array<int64_t, 4> ne, std::array<size_t, 3> nb_upper,
             size_t offset);
Tensor* view_1d(Context& ctx, Tensor* a, int64_t ne0, size_t offset);
Tensor* view_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
Tensor* reshape(Context& ctx, Tensor* a, std::array<int64_t, 4> ne);  // a contiguous
// Result dim axis[i] is a's dim i (as ggml_permute).
Tensor* permute(Context& ctx, Tensor* a, std::array<int, 4> axis);
Tensor* transpose(Context& ctx, Tensor* a);

}  // namespace loom
