#include "loom/ops.h"

#include <cmath>

#include "loom/error.h"

namespace loom {
namespace {

void require(bool ok, Op op, std::string_view what, const Tensor* a, const Tensor* b = nullptr) {
  if (ok) return;
  constexpr TensorLabel kStyle = TensorLabel::QuotedWithShape;
  if (b)
    fail("{}: {} (a = {}, b = {})", op_name(op), what, tensor_label(*a, kStyle), tensor_label(*b, kStyle));
  else
    fail("{}: {} (a = {})", op_name(op), what, tensor_label(*a, kStyle));
}

void require_nonnull(Op op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (!t) fail("{}: an operand is null", op_name(op));
}

bool can_repeat(const Tensor* b, const Tensor* a) {  // b broadcasts to a
  for (int i = 0; i < kMaxDims; ++i)
    if (b->ne[i] == 0 || a->ne[i] % b->ne[i] != 0) return false;
  return true;
}

Tensor* new_result(Context& ctx, Op op, DType type, std::array<int64_t, 4> ne,
                   std::initializer_list<Tensor*> srcs) {
  Tensor* r = ctx.new_tensor(type, std::span<const int64_t>(ne.data(), 4));
  r->op = op;
  int i = 0;
  for (Tensor* s : srcs) r->src[i++] = s;
  return r;
}

// A result that aliases `target`'s memory (views and in-place writers).
Tensor* new_view_of(Context& ctx, Op op, Tensor* target, std::initializer_list<Tensor*> srcs) {
  Tensor* r = ctx.new_node();
  r->type = target->type;
  r->ne = target->ne;
  r->nb = target->nb;
  r->op = op;
  r->view_src = target->view_src ? target->view_src : target;
  r->view_offs = target->view_offs;
  int i = 0;
  for (Tensor* s : srcs) r->src[i++] = s;
  return r;
}

Tensor* binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  require_nonnull(op, {a, b});
  require(a->type == DType::F32 && b->type == DType::F32, op, "operands must be f32", a, b);
  require(can_repeat(b, a), op, "b cannot broadcast to a", a, b);
  return new_result(ctx, op, DType::F32, a->ne, {a, b});
}

Tensor* unary(Context& ctx, Op op, Tensor* a) {
  require_nonnull(op, {a});
  require(a->type == DType::F32, op, "operand must be f32", a);
  return new_result(ctx, op, DType::F32, a->ne, {a});
}

bool is_float_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

}  // namespace

Tensor* get_rows(Context& ctx, Tensor* a, Tensor* rows) {
  const Op op = Op::GetRows;
  require_nonnull(op, {a, rows});
  require(rows->type == DType::I32, op, "row indices must be i32", a, rows);
  require(a->type != DType::I32, op, "source must be a float or quantized type", a, rows);
  require(rows->ne[3] == 1 && rows->ne[1] == a->ne[2] && rows->ne[2] == a->ne[3], op,
          "indices must be [n, a.ne2, a.ne3]", a, rows);
  return new_result(ctx, op, DType::F32, {a->ne[0], rows->ne[0], rows->ne[1], rows->ne[2]}, {a, rows});
}

Tensor* set_rows(Context& ctx, Tensor* dst, Tensor* src, Tensor* rows) {
  const Op op = Op::SetRows;
  require_nonnull(op, {dst, src, rows});
  require(rows->type == DType::I32, op, "row indices must be i32", dst, rows);
  require(src->type == DType::F32, op, "source rows must be f32", dst, src);
  require(dst->type != DType::I32, op, "destination must be a float or quantized type", dst, src);
  require(src->ne[0] == dst->ne[0], op, "row lengths differ", dst, src);
  require(rows->ne[0] == src->ne[1] && rows->ne[1] == src->ne[2] && rows->ne[2] == src->ne[3] &&
              rows->ne[3] == 1,
          op, "indices must be [src.ne1, src.ne2, src.ne3]", src, rows);
  require(src->ne[2] == dst->ne[2] && src->ne[3] == dst->ne[3], op, "dims 2 and 3 must match", dst, src);
  return new_view_of(ctx, op, dst, {src, rows, dst});
}

Tensor* cpy(Context& ctx, Tensor* a, Tensor* b) {
  const Op op = Op::Cpy;
  require_nonnull(op, {a, b});
  require(a->nelements() == b->nelements(), op, "element counts differ", a, b);
  require(a->type == b->type || ((is_float_type(a->type) || traits(a->type).is_quantized) &&
                                   (is_float_type(b->type) || traits(b->type).is_quantized)),
          op, "cannot convert between these types", a, b);
  require(!traits(a->type).is_quantized || a->type == b->type || a->has_contiguous_rows(), op,
          "quantized source rows must be contiguous", a, b);
  require(b->ne[0] % traits(b->type).block_size == 0 && a->ne[0] % traits(a->type).block_size == 0,
          op, "rows must be whole blocks", a, b);
  require(!((traits(a->type).is_quantized || traits(b->type).is_quantized) && a->ne[0] != b->ne[0]), op,
          "copies to or from quantized types need the same row length", a, b);
  return new_view_of(ctx, op, b, {a, b});
}

Tensor* cont(Context& ctx, Tensor* a) {
  require_nonnull(Op::Cont, {a});
  return new_result(ctx, Op::Cont, a->type, a->ne, {a});
}

Tensor* add(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Add, a, b); }
Tensor* sub(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Sub, a, b); }
Tensor* mul(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Mul, a, b); }
Tensor* div(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::Div, a, b); }

Tensor* scale(Context& ctx, Tensor* a, float s, float bias) {
  Tensor* r = unary(ctx, Op::Scale, a);
  set_scale_params(*r, {s, bias});
  return r;
}

Tensor* sqr(Context& ctx, Tensor* a) { return unary(ctx, Op::Sqr, a); }
Tensor* sqrt(Context& ctx, Tensor* a) { return unary(ctx, Op::Sqrt, a); }
Tensor* silu(Context& ctx, Tensor* a) { return unary(ctx, Op::Silu, a); }
Tensor* gelu(Context& ctx, Tensor* a) { return unary(ctx, Op::Gelu, a); }
Tensor* relu(Context& ctx, Tensor* a) { return unary(ctx, Op::Relu, a); }
Tensor* tanh(Context& ctx, Tensor* a) { return unary(ctx, Op::Tanh, a); }
Tensor* sigmoid(Context& ctx, Tensor* a) { return unary(ctx, Op::Sigmoid, a); }

Tensor* clamp(Context& ctx, Tensor* a, float lo, float hi) {
  Tensor* r = unary(ctx, Op::Clamp, a);
  require(lo <= hi, Op::Clamp, fmt::format("min {} must not exceed max {}", lo, hi), a);
  set_clamp_params(*r, {lo, hi});
  return r;
}

Tensor* sum_rows(Context& ctx, Tensor* a) {
  require_nonnull(Op::SumRows, {a});
  require(a->type == DType::F32, Op::SumRows, "operand must be f32", a);
  return new_result(ctx, Op::SumRows, DType::F32, {1, a->ne[1], a->ne[2], a->ne[3]}, {a});
}

Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b) {
  const Op op = Op::MulMat;
  require_nonnull(op, {a, b});
  require(a->type != DType::I32, op, "weights must be a float or quantized type", a, b);
  require(b->type == DType::F32, op, "b must be f32", a, b);
  require(a->ne[0] == b->ne[0], op, "inner dims (ne0) differ", a, b);
  require(a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0, op,
          "b's dims 2-3 must be multiples of a's", a, b);
  require(a->has_contiguous_rows(), op, "a's rows must be contiguous", a, b);
  return new_result(ctx, op, DType::F32, {a->ne[1], b->ne[1], b->ne[2], b->ne[3]}, {a, b});
}

Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids) {
  const Op op = Op::MulMatId;
  require_nonnull(op, {as, b, ids});
  require(as->type != DType::I32, op, "expert weights must be a float or quantized type", as, b);
  require(b->type == DType::F32, op, "b must be f32", as, b);
  require(ids->type == DType::I32, op, "expert ids must be i32", as, ids);
  require(as->ne[3] == 1 && as->ne[2] > 0, op, "expert weights must be [K, M, n_expert]", as);
  require(as->ne[0] == b->ne[0], op, "inner dims (ne0) differ", as, b);
  require(as->has_contiguous_rows(), op, "expert weights' rows must be contiguous", as, b);
  require(ids->ne[2] == 1 && ids->ne[3] == 1, op, "expert ids must be [n_used, n_tokens]", as, ids);
  require(b->ne[3] == 1 && b->ne[2] == ids->ne[1], op, "b must be [K, n_used or 1, n_tokens] (ids.ne1 tokens)",
          b, ids);
  require(b->ne[1] == 1 || b->ne[1] == ids->ne[0], op, "b.ne1 must be 1 or ids.ne0 (experts per token)", b, ids);
  return new_result(ctx, op, DType::F32, {as->ne[1], ids->ne[0], ids->ne[1], 1}, {as, b, ids});
}

Tensor* rms_norm(Context& ctx, Tensor* a, float eps) {
  Tensor* r = unary(ctx, Op::RmsNorm, a);
  set_norm_params(*r, {eps});
  return r;
}

Tensor* norm(Context& ctx, Tensor* a, float eps) {
  Tensor* r = unary(ctx, Op::Norm, a);
  set_norm_params(*r, {eps});
  return r;
}

Tensor* rope(Context& ctx, Tensor* a, Tensor* positions, const RopeParams& p, Tensor* freq_factors) {
  const Op op = Op::Rope;
  require_nonnull(op, {a, positions});
  require(a->type == DType::F32, op, "operand must be f32", a);
  require(positions->type == DType::I32 && positions->n_dims() == 1 && positions->ne[0] == a->ne[2],
          op, "positions must be i32 [a.ne2]", a, positions);
  const int n_dims = p.n_dims == 0 ? static_cast<int>(a->ne[0]) : p.n_dims;
  require(n_dims % 2 == 0 && n_dims > 0 && n_dims <= a->ne[0], op,
          "rotated dims must be even and at most ne0", a);
  require(p.mode == RopeMode::Normal || p.mode == RopeMode::NeoX, op, "unknown rope mode", a);
  if (freq_factors)
    require(freq_factors->type == DType::F32 && freq_factors->n_dims() == 1 && freq_factors->ne[0] >= n_dims / 2 &&
                freq_factors->nb[0] == sizeof(float),
            op, "freq factors must be contiguous f32 [>= rotated dims / 2]", a, freq_factors);
  Tensor* r = new_result(ctx, op, DType::F32, a->ne, {a, positions, freq_factors});
  RopeParams stored = p;
  stored.n_dims = n_dims;  // resolved: kernels never see 0
  set_rope_params(*r, stored);
  return r;
}

Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask, float scale, Tensor* sinks) {
  const Op op = Op::SoftMax;
  require_nonnull(op, {a});
  require(a->type == DType::F32, op, "operand must be f32", a);
  if (mask) {
    require(mask->type == DType::F32 || mask->type == DType::F16, op, "mask must be f32 or f16", a, mask);
    require(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0,
            op, "mask must be [a.ne0, >= a.ne1, divisor of a.ne2, divisor of a.ne3]", a, mask);
    require(mask->has_contiguous_rows(), op, "mask rows must be contiguous", a, mask);
  }
  if (sinks)
    require(sinks->type == DType::F32 && sinks->n_dims() == 1 && sinks->ne[0] == a->ne[2], op,
            "sinks must be f32 [a.ne2]", a, sinks);
  Tensor* r = new_result(ctx, op, DType::F32, a->ne, {a, mask, sinks});
  set_soft_max_params(*r, {scale});
  return r;
}

Tensor* flash_attn_ext(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale, float max_bias,
                       float softcap) {
  const Op op = Op::FlashAttnExt;
  require_nonnull(op, {q, k, v});
  const auto kv_type_ok = [](DType t) { return t != DType::I32; };
  require(q->type == DType::F32, op, "q must be f32", q);
  require(kv_type_ok(k->type) && kv_type_ok(v->type), op, "k and v must be a float or quantized type", k, v);
  require(k->ne[0] == q->ne[0], op, "q and k must have the same head size (ne0)", q, k);
  require(k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2] && k->ne[3] == v->ne[3], op,
          "k and v must have the same [n_kv, n_head_kv, ne3]", k, v);
  require(k->ne[1] > 0 && k->ne[2] > 0 && k->ne[3] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] % k->ne[3] == 0,
          op, "q's heads (ne2) and ne3 must be multiples of k's", q, k);
  require(k->has_contiguous_rows() && v->has_contiguous_rows(), op, "k and v rows must be contiguous", k, v);
  if (mask) {
    require(mask->type == DType::F32 || mask->type == DType::F16, op, "mask must be f32 or f16", q, mask);
    require(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
                q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0,
            op, "mask must be [n_kv, >= n_q, divisor of n_head, divisor of ne3]", q, mask);
    require(mask->has_contiguous_rows(), op, "mask rows must be contiguous", q, mask);
  }
  require(std::isfinite(scale) && std::isfinite(max_bias) && std::isfinite(softcap) && max_bias >= 0.0f &&
              softcap >= 0.0f,
          op, fmt::format("scale {} must be finite, max_bias {} and softcap {} finite and >= 0", scale, max_bias,
                          softcap),
          q);
  Tensor* r = new_result(ctx, op, DType::F32, {v->ne[0], q->ne[2], q->ne[1], q->ne[3]}, {q, k, v, mask});
  set_flash_attn_params(*r, {scale, max_bias, softcap});
  return r;
}

Tensor* argmax(Context& ctx, Tensor* a) {
  require_nonnull(Op::Argmax, {a});
  require(a->type == DType::F32 && a->ne[2] == 1 && a->ne[3] == 1, Op::Argmax,
          "operand must be 2-D f32", a);
  return new_result(ctx, Op::Argmax, DType::I32, {a->ne[1], 1, 1, 1}, {a});
}

Tensor* argsort(Context& ctx, Tensor* a, SortOrder order) {
  const Op op = Op::Argsort;
  require_nonnull(op, {a});
  require(a->type == DType::F32, op, "operand must be f32", a);
  require(order == SortOrder::Ascending || order == SortOrder::Descending, op, "unknown sort order", a);
  require(a->ne[0] <= INT32_MAX, op, "rows longer than 2^31 - 1 elements", a);
  Tensor* r = new_result(ctx, op, DType::I32, a->ne, {a});
  set_argsort_params(*r, {order});
  return r;
}

Tensor* top_k(Context& ctx, Tensor* a, int64_t k) {
  require_nonnull(Op::Argsort, {a});
  require(k >= 1 && k <= a->ne[0], Op::Argsort, fmt::format("top_k: k = {} must be in [1, ne0]", k), a);
  Tensor* sorted = argsort(ctx, a, SortOrder::Descending);
  return view(ctx, sorted, {k, a->ne[1], a->ne[2], a->ne[3]}, {sorted->nb[1], sorted->nb[2], sorted->nb[3]}, 0);
}

Tensor* concat(Context& ctx, Tensor* a, Tensor* b, int dim) {
  const Op op = Op::Concat;
  require_nonnull(op, {a, b});
  require(dim >= 0 && dim < kMaxDims, op, "dim out of range", a, b);
  require(a->type == b->type && !traits(a->type).is_quantized, op,
          "operands must have the same, non-quantized type", a, b);
  std::array<int64_t, 4> ne = a->ne;
  for (int i = 0; i < kMaxDims; ++i)
    if (i != dim) require(a->ne[i] == b->ne[i], op, "dims other than the joined one differ", a, b);
  ne[dim] += b->ne[dim];
  Tensor* r = new_result(ctx, op, a->type, ne, {a, b});
  set_concat_params(*r, {dim});
  return r;
}

Tensor* view(Context& ctx, Tensor* a, std::array<int64_t, 4> ne, std::array<size_t, 3> nb_upper,
             size_t offset) {
  const Op op = Op::View;
  require_nonnull(op, {a});
  Tensor* r = new_view_of(ctx, op, a, {a});
  r->ne = ne;
  r->nb = {traits(a->type).type_size, nb_upper[0], nb_upper[1], nb_upper[2]};
  r->view_offs = a->view_offs + offset;
  require(ne[0] % traits(a->type).block_size == 0, op, "view rows must be whole blocks", a);
  const Tensor* root = r->view_src;
  require(r->view_offs + r->nbytes() <= root->nbytes(), op,
          fmt::format("view of {} bytes at offset {} exceeds the source's {} bytes", r->nbytes(),
                      r->view_offs, root->nbytes()),
          a);
  return r;
}

Tensor* view_1d(Context& ctx, Tensor* a, int64_t ne0, size_t offset) {
  const size_t rs = row_size(a->type, ne0);
  return view(ctx, a, {ne0, 1, 1, 1}, {rs, rs, rs}, offset);
}

Tensor* view_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
  return view(ctx, a, {ne0, ne1, 1, 1}, {nb1, nb1 * ne1, nb1 * ne1}, offset);
}

Tensor* reshape(Context& ctx, Tensor* a, std::array<int64_t, 4> ne) {
  const Op op = Op::Reshape;
  require_nonnull(op, {a});
  require(a->is_contiguous(), op, "operand must be contiguous", a);
  require(ne[0] * ne[1] * ne[2] * ne[3] == a->nelements(), op, "element count changes", a);
  Tensor* r = new_view_of(ctx, op, a, {a});
  r->ne = ne;
  set_contiguous_strides(*r);
  return r;
}

Tensor* permute(Context& ctx, Tensor* a, std::array<int, 4> axis) {
  const Op op = Op::Permute;
  require_nonnull(op, {a});
  bool seen[4] = {};
  for (int x : axis) {
    require(x >= 0 && x < 4 && !seen[x], op, "axes must be a permutation of 0..3", a);
    seen[x] = true;
  }
  Tensor* r = new_view_of(ctx, op, a, {a});
  for (int i = 0; i < 4; ++i) {
    r->ne[axis[i]] = a->ne[i];
    r->nb[axis[i]] = a->nb[i];
  }
  set_permute_params(*r, {{axis[0], axis[1], axis[2], axis[3]}});
  return r;
}

Tensor* transpose(Context& ctx, Tensor* a) {
  Tensor* r = permute(ctx, a, {1, 0, 2, 3});
  r->op = Op::Transpose;  // the same parameters (PermuteParams)
  return r;
}

}  // namespace loom
