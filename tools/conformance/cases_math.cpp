// Cases for mul_mat (every weight type, odd sizes, broadcasting over dims
// 2-3, non-contiguous operands) and the row ops rms_norm, norm, rope and
// soft_max. mul_mat sizes stay modest (K <= 256, M, N <= 64) so the suite
// is quick even on a scalar CPU kernel.
#include <fmt/format.h>

#include "conformance/cases.h"
#include "loom/ops.h"

namespace loom::conformance::detail {
namespace {

using L = Layout;

struct MulMatShapes {
  Shape a, b;
  Layout la = L::Contiguous, lb = L::Contiguous;
};

std::vector<MulMatShapes> mul_mat_shapes(DType t) {
  std::vector<MulMatShapes> list;
  const bool quantized = traits(t).is_quantized;
  const int64_t b = traits(t).block_size;  // 32 or 256 for quantized types
  // {K, M, N}: odd sizes for plain types, whole blocks of K for quantized
  // (1, 2, 3 and 8 blocks of 32; 1, 2, 3 and 4 blocks of 256); N = 33 takes
  // the gemm path on every SIMD level (panels of 8 or 16 columns).
  const std::vector<std::array<int64_t, 3>> sizes =
      quantized ? std::vector<std::array<int64_t, 3>>{{b, 3, 1}, {2 * b, 17, 9}, {3 * b, 33, 3},
                                                      {b == 32 ? 256 : 4 * b, 16, 8}, {b, 19, 33}}
                : std::vector<std::array<int64_t, 3>>{{3, 5, 1}, {17, 3, 9}, {33, 17, 9}, {64, 64, 33}, {256, 16, 8}};
  for (auto [K, M, N] : sizes) list.push_back({{K, M, 1, 1}, {K, N, 1, 1}});
  const int64_t K = quantized ? 2 * b : 33;
  // Broadcasting: a repeats over b's dims 2-3.
  list.push_back({{K, 5, 2, 1}, {K, 9, 6, 1}});
  list.push_back({{K, 5, 1, 2}, {K, 3, 2, 4}});
  list.push_back({{K, 4, 1, 1}, {K, 3, 3, 2}});
  // Non-contiguous operands (a keeps contiguous rows, as mul_mat requires).
  list.push_back({{K, 16, 1, 1}, {K, 7, 1, 1}, L::Contiguous, L::Transposed});
  list.push_back({{K, 5, 3, 2}, {K, 4, 3, 2}, L::Contiguous, L::Permuted});
  list.push_back({{K, 3, 3, 1}, {K, 5, 3, 2}, L::Contiguous, L::Shuffled});
  list.push_back({{K, 6, 3, 2}, {K, 5, 3, 2}, L::Permuted, L::Contiguous});
  list.push_back({{K, 7, 2, 1}, {K, 4, 2, 1}, L::Strided, L::Strided});
  list.push_back({{K, 5, 2, 1}, {K, 3, 2, 2}, L::Reshaped, L::Reshaped});
  return list;
}

void add_mul_mat(std::vector<Case>& cases) {
  std::vector<DType> types = {DType::F32, DType::F16, DType::BF16};
  types.insert(types.end(), std::begin(kQuantizedTypes), std::end(kQuantizedTypes));
  for (DType t : types) {
    for (const MulMatShapes& s : mul_mat_shapes(t)) {
      cases.push_back(make_case(fmt::format("mul_mat(type={},a={},b={})", type_str(t), shape_name(s.a, s.la),
                                   shape_name(s.b, s.lb)),
                       Op::MulMat, t, [s, t](CaseGraph& g) {
                         return mul_mat(g.ctx, operand(g, t, s.a, s.la), operand(g, DType::F32, s.b, s.lb));
                       }));
    }
  }
}

void add_norms(std::vector<Case>& cases) {
  struct Shapes {
    Shape ne;
    Layout layout = L::Contiguous;
    float eps = 1e-5f;
  };
  const Shapes list[] = {{{1, 3, 1, 1}},          {{17, 3, 2, 1}},
                         {{64, 4, 1, 1}, L::Contiguous, 1e-6f},
                         {{129, 2, 2, 1}},        {{17, 5, 1, 1}, L::Transposed},
                         {{64, 3, 4, 1}, L::Permuted}, {{33, 4, 2, 1}, L::Strided}};
  for (Op op : {Op::RmsNorm, Op::Norm}) {
    for (const Shapes& s : list) {
      cases.push_back(make_case(fmt::format("{}(a={},eps={})", op_name(op), shape_name(s.ne, s.layout), s.eps), op, DType::F32,
                       [s, op](CaseGraph& g) {
                         Tensor* a = operand(g, DType::F32, s.ne, s.layout);
                         return op == Op::RmsNorm ? rms_norm(g.ctx, a, s.eps) : norm(g.ctx, a, s.eps);
                       }));
    }
  }
}

void add_rope(std::vector<Case>& cases) {
  struct Shapes {
    Shape ne;  // [head_dim, n_head, n_tokens, 1]
    int n_dims = 0;
    float freq_base = 10000.0f, freq_scale = 1.0f;
    Layout layout = L::Contiguous;
    int64_t freq_factors = 0;  // > 0: a freq-factors operand of this many elements
    float attn_factor = 1.0f;
  };
  const Shapes list[] = {
      {{64, 4, 5, 1}},
      {{32, 2, 3, 1}},
      {{128, 2, 3, 1}},
      {{34, 3, 4, 1}},
      {{64, 4, 5, 1}, 32},
      {{17, 3, 4, 1}, 8},
      {{64, 2, 3, 1}, 0, 1e6f, 0.25f},
      {{64, 4, 5, 1}, 0, 10000.0f, 1.0f, L::Permuted},
      {{64, 3, 4, 1}, 16, 10000.0f, 1.0f, L::Strided},
      {{34, 3, 4, 1}, 0, 10000.0f, 1.0f, L::Shuffled},
      {{64, 4, 5, 1}, 0, 500000.0f, 1.0f, L::Contiguous, 32},
      {{64, 3, 4, 1}, 32, 10000.0f, 0.5f, L::Contiguous, 16},
      {{64, 3, 4, 1}, 16, 10000.0f, 1.0f, L::Strided, 20},
      {{64, 4, 5, 1}, 0, 10000.0f, 1.0f, L::Contiguous, 32, 1.19f},  // LongRoPE: factors and attention factor
      {{64, 3, 4, 1}, 48, 10000.0f, 1.0f, L::Contiguous, 24, 1.19f},  // partial rotary: the rest is not scaled
  };
  for (RopeMode mode : {RopeMode::Normal, RopeMode::NeoX}) {
    for (const Shapes& s : list) {
      const RopeParams params{s.n_dims, mode, s.freq_base, s.freq_scale, s.attn_factor};
      cases.push_back(make_case(fmt::format("rope(mode={},a={},n_dims={},base={},scale={}{}{})",
                                   mode == RopeMode::NeoX ? "neox" : "normal", shape_name(s.ne, s.layout), s.n_dims,
                                   s.freq_base, s.freq_scale,
                                   s.freq_factors ? fmt::format(",freq_factors=[{}]", s.freq_factors) : "",
                                   s.attn_factor != 1.0f ? fmt::format(",attn_factor={}", s.attn_factor) : ""),
                       Op::Rope, DType::F32, [s, params](CaseGraph& g) {
                         Tensor* a = operand(g, DType::F32, s.ne, s.layout);
                         Tensor* pos = g.input(DType::I32, {s.ne[2], 1, 1, 1}, {Fill::Kind::Positions, 512});
                         Tensor* factors = s.freq_factors ? g.input(DType::F32, {s.freq_factors, 1, 1, 1},
                                                                    {Fill::Kind::Positive}) : nullptr;
                         return rope(g.ctx, a, pos, params, factors);
                       }));
    }
  }
}

void add_soft_max(std::vector<Case>& cases) {
  struct Shapes {
    Shape a;
    Layout layout = L::Contiguous;
    float scale = 1.0f;
    Shape mask{0, 0, 0, 0};  // ne0 == 0: no mask
  };
  const Shapes unmasked[] = {
      {{1, 1, 1, 1}},          {{7, 3, 1, 1}, L::Contiguous, 0.125f}, {{33, 5, 2, 1}},
      {{100, 4, 3, 2}, L::Contiguous, 0.125f}, {{17, 5, 1, 1}, L::Transposed}, {{33, 4, 3, 1}, L::Permuted, 0.5f},
  };
  const Shapes masked[] = {
      {{33, 5, 2, 1}, L::Contiguous, 0.125f, {33, 5, 1, 1}},   // broadcast over dim 2
      {{7, 3, 1, 1}, L::Contiguous, 1.0f, {7, 8, 1, 1}},       // more mask rows than a has
      {{100, 4, 3, 2}, L::Contiguous, 0.125f, {100, 4, 3, 1}}, // broadcast over dim 3
      {{100, 4, 3, 2}, L::Contiguous, 1.0f, {100, 4, 1, 2}},
      {{33, 4, 3, 1}, L::Permuted, 0.5f, {33, 4, 1, 1}},
  };
  auto add_one = [&cases](const Shapes& s, std::optional<DType> mask_type) {
    const std::string mask_desc =
        mask_type ? fmt::format(",mask={}{}", type_str(*mask_type), shape_name(s.mask)) : std::string();
    cases.push_back(make_case(fmt::format("soft_max(a={}{},scale={})", shape_name(s.a, s.layout), mask_desc, s.scale),
                     Op::SoftMax, mask_type.value_or(DType::F32), [s, mask_type](CaseGraph& g) {
                       Tensor* a = operand(g, DType::F32, s.a, s.layout);
                       Tensor* mask = mask_type ? g.input(*mask_type, s.mask, {Fill::Kind::CausalMask}) : nullptr;
                       return soft_max(g.ctx, a, mask, s.scale);
                     }));
  };
  for (const Shapes& s : unmasked) add_one(s, std::nullopt);
  for (DType mt : {DType::F32, DType::F16})
    for (const Shapes& s : masked) add_one(s, mt);
  // Attention sinks (gpt-oss): one more logit per head (dim 2), no output.
  const std::pair<Shapes, std::optional<DType>> with_sinks[] = {
      {{{7, 3, 2, 1}}, std::nullopt},
      {{{33, 4, 3, 1}, L::Permuted, 0.5f}, std::nullopt},
      {{{33, 5, 4, 1}, L::Contiguous, 0.125f, {33, 5, 1, 1}}, DType::F32},
      {{{100, 4, 3, 2}, L::Contiguous, 0.125f, {100, 4, 3, 1}}, DType::F16},
  };
  for (const auto& [shapes, mask_type_] : with_sinks) {
    const Shapes s = shapes;  // copies: clang 14 cannot capture structured bindings
    const std::optional<DType> mask_type = mask_type_;
    const std::string mask_desc =
        mask_type ? fmt::format(",mask={}{}", type_str(*mask_type), shape_name(s.mask)) : std::string();
    cases.push_back(make_case(fmt::format("soft_max(a={}{},scale={},sinks)", shape_name(s.a, s.layout), mask_desc, s.scale),
                              Op::SoftMax, mask_type.value_or(DType::F32), [s, mask_type](CaseGraph& g) {
                                Tensor* a = operand(g, DType::F32, s.a, s.layout);
                                Tensor* mask =
                                    mask_type ? g.input(*mask_type, s.mask, {Fill::Kind::CausalMask}) : nullptr;
                                Tensor* sinks = g.input(DType::F32, {s.a[2], 1, 1, 1});
                                return soft_max(g.ctx, a, mask, s.scale, sinks);
                              }));
  }
}

}  // namespace

void add_matmul_cases(std::vector<Case>& cases) { add_mul_mat(cases); }

void add_row_cases(std::vector<Case>& cases) {
  add_norms(cases);
  add_rope(cases);
  add_soft_max(cases);
}

}  // namespace loom::conformance::detail
