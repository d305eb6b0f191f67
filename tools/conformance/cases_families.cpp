// Cases for the ops the model families beyond llama need: tanh (soft-capping),
// sigmoid, clamp, argsort (top-k expert selection) and mul_mat_id (mixture
// of experts, every weight type, with the experts chosen by a real top-k).
#include <fmt/format.h>

#include <limits>

#include "conformance/cases.h"
#include "loom/ops.h"

namespace loom::conformance::detail {
namespace {

using L = Layout;

struct UnaryShape {
  Shape ne;
  Layout layout = L::Contiguous;
  Fill fill = {};
};

// Normal values, plus integers up to +-1000 where exp and tanh saturate.
const UnaryShape kActivationShapes[] = {
    {{1, 1, 1, 1}},
    {{17, 3, 2, 1}},
    {{33, 7, 3, 2}},
    {{256, 2, 1, 1}},
    {{17, 3, 2, 1}, L::Transposed},
    {{33, 7, 3, 2}, L::Permuted},
    {{33, 7, 3, 2}, L::Strided},
    {{5, 9, 4, 1}, L::Shuffled},
    {{64, 3, 1, 1}, L::Contiguous, {Fill::Kind::Ints}},
};

std::string fill_suffix(const Fill& fill) { return fill.kind == Fill::Kind::Ints ? ",ints" : ""; }

void add_activations(std::vector<Case>& cases) {
  for (const UnaryShape& s : kActivationShapes) {
    for (Op op : {Op::Tanh, Op::Sigmoid}) {
      cases.push_back(make_case(fmt::format("{}(a={}{})", op_name(op), shape_name(s.ne, s.layout), fill_suffix(s.fill)),
                                op, DType::F32, [s, op](CaseGraph& g) {
                                  Tensor* a = operand(g, DType::F32, s.ne, s.layout, s.fill);
                                  return op == Op::Tanh ? loom::tanh(g.ctx, a) : sigmoid(g.ctx, a);
                                }));
    }
    // Both bounds, one infinite bound (the MoE weight sum's clamp), a point.
    const float inf = std::numeric_limits<float>::infinity();
    for (const auto& b : {std::pair{-0.5f, 0.75f}, std::pair{6.103515625e-5f, inf}, std::pair{0.25f, 0.25f}}) {
      const float lo = b.first, hi = b.second;
      cases.push_back(make_case(fmt::format("clamp(a={}{},min={},max={})", shape_name(s.ne, s.layout),
                                            fill_suffix(s.fill), lo, hi),
                                Op::Clamp, DType::F32, [s, lo, hi](CaseGraph& g) {
                                  return clamp(g.ctx, operand(g, DType::F32, s.ne, s.layout, s.fill), lo, hi);
                                }));
    }
  }
}

void add_argsort(std::vector<Case>& cases) {
  const UnaryShape shapes[] = {
      {{1, 1, 1, 1}},
      {{8, 5, 1, 1}},                                    // mixtral's 8 experts
      {{128, 7, 1, 1}},                                  // qwen3moe's 128 experts
      {{33, 4, 3, 2}},
      {{300, 3, 1, 1}, L::Contiguous, {Fill::Kind::Ints}},  // many equal values: stable order
      {{17, 5, 1, 1}, L::Transposed},
      {{33, 4, 3, 1}, L::Permuted},
      {{33, 4, 2, 1}, L::Strided},
  };
  for (SortOrder order : {SortOrder::Ascending, SortOrder::Descending}) {
    for (const UnaryShape& s : shapes) {
      cases.push_back(make_case(fmt::format("argsort(a={}{},order={})", shape_name(s.ne, s.layout), fill_suffix(s.fill),
                                            order == SortOrder::Descending ? "desc" : "asc"),
                                Op::Argsort, DType::F32, [s, order](CaseGraph& g) {
                                  return argsort(g.ctx, operand(g, DType::F32, s.ne, s.layout, s.fill), order);
                                }));
    }
  }
}

struct MoeShape {
  int64_t K, M, n_expert, n_used, n_tokens;
  bool b_per_slot;  // b [K, n_used, n_tokens] (the down projection) or [K, 1, n_tokens]
  Layout b_layout = L::Contiguous;
  Layout ids_layout = L::Contiguous;
  bool top_k = false;  // ids = top_k(router logits) instead of an input
};

std::vector<MoeShape> moe_shapes(DType t) {
  const bool quantized = traits(t).is_quantized;
  const int64_t bs = traits(t).block_size;
  const int64_t K1 = quantized ? bs : 33, K2 = quantized ? 2 * bs : 64;
  return {
      {K1, 5, 4, 2, 3, false},
      {K2, 17, 8, 2, 9, true},
      {K2, 16, 4, 4, 40, false},   // every expert gets 40 columns: mul_mat's gemm path
      {K1, 7, 3, 1, 5, true},
      {K1, 9, 6, 3, 7, false, L::Contiguous, L::Strided},  // ids a view with longer rows (as top_k's)
      {K1, 6, 4, 2, 5, true, L::Permuted},
      {K2, 8, 8, 2, 6, false, L::Contiguous, L::Contiguous, true},
  };
}

void add_mul_mat_id(std::vector<Case>& cases) {
  std::vector<DType> types = {DType::F32, DType::F16, DType::BF16};
  types.insert(types.end(), std::begin(kQuantizedTypes), std::end(kQuantizedTypes));
  for (DType t : types) {
    for (const MoeShape& s : moe_shapes(t)) {
      const Shape as{s.K, s.M, s.n_expert, 1};
      const Shape b{s.K, s.b_per_slot ? s.n_used : 1, s.n_tokens, 1};
      const Shape ids{s.n_used, s.n_tokens, 1, 1};
      const std::string ids_name = s.top_k ? fmt::format("top_k({})", s.n_used) : shape_name(ids, s.ids_layout);
      cases.push_back(make_case(
          fmt::format("mul_mat_id(type={},as={},b={},ids={})", type_str(t), shape_name(as), shape_name(b, s.b_layout),
                      ids_name),
          Op::MulMatId, t, [s, t, as, b, ids](CaseGraph& g) {
            Tensor* w = g.input(t, as);
            Tensor* x = operand(g, DType::F32, b, s.b_layout);
            Tensor* sel = s.top_k ? top_k(g.ctx, g.input(DType::F32, {s.n_expert, s.n_tokens, 1, 1}), s.n_used)
                                  : operand(g, DType::I32, ids, s.ids_layout,
                                            {Fill::Kind::UniqueIndices, s.n_expert});
            return mul_mat_id(g.ctx, w, x, sel);
          }));
    }
  }
}

// The MoE router as llama.cpp's families build it: softmax of the logits,
// top-k, the chosen probabilities by get_rows on a 3-D view with strided
// indices, renormalised by their clamped sum (sum_rows, clamp, div).
void add_moe_router(std::vector<Case>& cases) {
  struct Router {
    int64_t n_expert, n_used, n_tokens;
  };
  for (const Router r : {Router{8, 2, 5}, Router{128, 8, 7}}) {
    cases.push_back(make_case(fmt::format("moe_router(n_expert={},n_used={},tokens={})", r.n_expert, r.n_used,
                                          r.n_tokens),
                              Op::Div, DType::F32, [r](CaseGraph& g) {
                                Context& c = g.ctx;
                                Tensor* probs = soft_max(c, g.input(DType::F32, {r.n_expert, r.n_tokens, 1, 1}));
                                Tensor* selected = top_k(c, probs, r.n_used);
                                Tensor* w = get_rows(c, reshape(c, probs, {1, r.n_expert, r.n_tokens, 1}), selected);
                                w = reshape(c, w, {r.n_used, r.n_tokens, 1, 1});
                                Tensor* sum = clamp(c, sum_rows(c, w), 6.103515625e-5f,
                                                    std::numeric_limits<float>::infinity());
                                return div(c, w, sum);
                              }));
  }
}

}  // namespace

void add_family_cases(std::vector<Case>& cases) {
  add_activations(cases);
  add_argsort(cases);
  add_mul_mat_id(cases);
  add_moe_router(cases);
}

}  // namespace loom::conformance::detail
