// Cases for the element-wise ops (add, sub, mul, div with broadcasting;
// scale, sqr, sqrt, silu, gelu, relu), sum_rows and argmax.
#include <fmt/format.h>

#include "conformance/cases.h"
#include "loom/ops.h"

namespace loom::conformance::detail {
namespace {

using L = Layout;

struct BinaryShape {
  Shape a, b;
  Layout la = L::Contiguous, lb = L::Contiguous;
};

// Same shapes, b broadcast along each dim in turn, partial repeats (b's size
// a proper divisor), scalars, and non-contiguous operands on either side.
const BinaryShape kBinaryShapes[] = {
    {{1, 1, 1, 1}, {1, 1, 1, 1}},
    {{3, 5, 1, 1}, {3, 5, 1, 1}},
    {{17, 3, 2, 1}, {17, 3, 2, 1}},
    {{33, 7, 3, 2}, {33, 7, 3, 2}},
    {{17, 3, 2, 1}, {1, 3, 2, 1}},
    {{17, 3, 2, 1}, {17, 1, 2, 1}},
    {{17, 3, 2, 1}, {17, 3, 1, 1}},
    {{33, 7, 3, 2}, {33, 7, 3, 1}},
    {{33, 7, 3, 2}, {11, 7, 1, 2}},
    {{33, 7, 3, 2}, {1, 1, 1, 1}},
    {{64, 4, 2, 2}, {64, 1, 1, 1}},
    {{17, 3, 2, 1}, {17, 3, 2, 1}, L::Transposed, L::Contiguous},
    {{17, 3, 2, 1}, {17, 3, 2, 1}, L::Contiguous, L::Transposed},
    {{33, 7, 3, 2}, {33, 7, 3, 2}, L::Permuted, L::Strided},
    {{33, 7, 3, 2}, {33, 1, 3, 1}, L::Strided, L::Permuted},
    {{5, 9, 4, 1}, {5, 9, 1, 1}, L::Shuffled, L::Transposed},
    {{17, 3, 2, 2}, {17, 3, 1, 2}, L::Reshaped, L::Reshaped},
};

void add_binary(std::vector<Case>& cases, Op op, Tensor* (*fn)(Context&, Tensor*, Tensor*)) {
  // Divisors stay away from zero so the relative error means something.
  const Fill b_fill{op == Op::Div ? Fill::Kind::AwayFromZero : Fill::Kind::Normal};
  for (const BinaryShape& s : kBinaryShapes) {
    cases.push_back(make_case(fmt::format("{}(a={},b={})", op_name(op), shape_name(s.a, s.la), shape_name(s.b, s.lb)), op,
                     DType::F32, [s, fn, b_fill](CaseGraph& g) {
                       Tensor* a = operand(g, DType::F32, s.a, s.la);
                       Tensor* b = operand(g, DType::F32, s.b, s.lb, b_fill);
                       return fn(g.ctx, a, b);
                     }));
  }
}

struct UnaryShape {
  Shape ne;
  Layout layout = L::Contiguous;
};

const UnaryShape kUnaryShapes[] = {
    {{1, 1, 1, 1}},          {{3, 5, 1, 1}},           {{17, 3, 2, 1}},           {{33, 7, 3, 2}},
    {{256, 2, 1, 1}},        {{17, 3, 2, 1}, L::Transposed}, {{33, 7, 3, 2}, L::Permuted},
    {{33, 7, 3, 2}, L::Strided}, {{5, 9, 4, 1}, L::Shuffled}, {{17, 3, 2, 1}, L::Reshaped},
};

void add_unary(std::vector<Case>& cases, Op op, Tensor* (*fn)(Context&, Tensor*), Fill fill = {}) {
  for (const UnaryShape& s : kUnaryShapes) {
    cases.push_back(make_case(fmt::format("{}(a={})", op_name(op), shape_name(s.ne, s.layout)), op, DType::F32,
                     [s, fn, fill](CaseGraph& g) { return fn(g.ctx, operand(g, DType::F32, s.ne, s.layout, fill)); }));
  }
}

void add_scale(std::vector<Case>& cases) {
  for (const UnaryShape& s : kUnaryShapes) {
    for (const auto& p : {std::pair{0.75f, 0.0f}, std::pair{-1.5f, 0.25f}}) {
      const float sc = p.first, bias = p.second;  // copies: clang 14 cannot capture structured bindings
      cases.push_back(make_case(fmt::format("scale(a={},s={},bias={})", shape_name(s.ne, s.layout), sc, bias), Op::Scale,
                       DType::F32, [s, sc, bias](CaseGraph& g) {
                         return scale(g.ctx, operand(g, DType::F32, s.ne, s.layout), sc, bias);
                       }));
    }
  }
}

void add_argmax(std::vector<Case>& cases) {
  const UnaryShape shapes[] = {{{1, 1, 1, 1}},    {{5, 7, 1, 1}},  {{33, 3, 1, 1}}, {{1000, 2, 1, 1}},
                               {{17, 5, 1, 1}, L::Transposed}, {{33, 4, 1, 1}, L::Strided}};
  for (const UnaryShape& s : shapes) {
    cases.push_back(make_case(fmt::format("argmax(a={})", shape_name(s.ne, s.layout)), Op::Argmax, DType::F32,
                     [s](CaseGraph& g) { return argmax(g.ctx, operand(g, DType::F32, s.ne, s.layout)); }));
  }
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& cases) {
  add_binary(cases, Op::Add, &loom::add);
  add_binary(cases, Op::Sub, &loom::sub);
  add_binary(cases, Op::Mul, &loom::mul);
  add_binary(cases, Op::Div, &loom::div);
  add_scale(cases);
  add_unary(cases, Op::Sqr, &loom::sqr);
  add_unary(cases, Op::Sqrt, &loom::sqrt, {Fill::Kind::Positive});
  add_unary(cases, Op::Silu, &loom::silu);
  add_unary(cases, Op::Gelu, &loom::gelu);
  add_unary(cases, Op::Relu, &loom::relu);
  add_unary(cases, Op::SumRows, &loom::sum_rows);
  add_argmax(cases);
}

}  // namespace loom::conformance::detail
