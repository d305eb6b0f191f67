// Cases for the data-movement ops: get_rows from every type, set_rows into
// every type, cpy between every float pair and to/from the quantized types,
// cont of every view kind, concat along each dim.
#include <fmt/format.h>

#include "conformance/cases.h"
#include "loom/ops.h"

namespace loom::conformance::detail {
namespace {

using L = Layout;

constexpr DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

bool is_quantized(DType t) { return traits(t).is_quantized; }

// Every type rows can be read from and written to: the float and quantized ones.
std::vector<DType> row_types() {
  std::vector<DType> list(std::begin(kFloatTypes), std::end(kFloatTypes));
  list.insert(list.end(), std::begin(kQuantizedTypes), std::end(kQuantizedTypes));
  return list;
}

// Elements in n blocks of a quantized type (32 or 256 per block).
int64_t blocks(DType t, int64_t n) { return n * traits(t).block_size; }

// Row lengths to try: odd ones for plain types, whole blocks for quantized.
std::vector<int64_t> row_lengths(DType t, int64_t odd_a, int64_t odd_b) {
  if (is_quantized(t)) return {blocks(t, 1), blocks(t, 3)};
  return {1, odd_a, odd_b};
}

void add_get_rows(std::vector<Case>& cases) {
  struct Shapes {
    Shape a;
    Shape rows;  // [n, a.ne2, a.ne3, 1]
    Layout la = L::Contiguous;
  };
  for (DType t : row_types()) {
    std::vector<Shapes> list;
    for (int64_t n0 : row_lengths(t, 17, 33)) {
      list.push_back({{n0, 10, 1, 1}, {5, 1, 1, 1}});
      list.push_back({{n0, 7, 2, 3}, {4, 2, 3, 1}});
      list.push_back({{n0, 1, 1, 1}, {3, 1, 1, 1}});
    }
    const int64_t n0 = is_quantized(t) ? blocks(t, 2) : 17;
    list.push_back({{n0, 6, 3, 1}, {4, 3, 1, 1}, L::Permuted});
    list.push_back({{n0, 9, 2, 1}, {5, 2, 1, 1}, L::Strided});
    for (const Shapes& s : list) {
      cases.push_back(make_case(fmt::format("get_rows(type={},a={},rows={})", type_str(t), shape_name(s.a, s.la),
                                   shape_name(s.rows)),
                       Op::GetRows, t, [s, t](CaseGraph& g) {
                         Tensor* a = operand(g, t, s.a, s.la);
                         Tensor* rows = g.input(DType::I32, s.rows, {Fill::Kind::Indices, s.a[1]});
                         return get_rows(g.ctx, a, rows);
                       }));
    }
  }
}

void add_set_rows(std::vector<Case>& cases) {
  struct Shapes {
    Shape dst, src;  // rows: [src.ne1, src.ne2, src.ne3, 1]
    Layout ldst = L::Contiguous, lsrc = L::Contiguous;
  };
  for (DType t : row_types()) {
    std::vector<Shapes> list;
    for (int64_t n0 : is_quantized(t) ? std::vector<int64_t>{blocks(t, 1), blocks(t, 2)} : std::vector<int64_t>{3, 33}) {
      list.push_back({{n0, 10, 1, 1}, {n0, 4, 1, 1}});
      list.push_back({{n0, 6, 2, 3}, {n0, 6, 2, 3}});
      list.push_back({{n0, 9, 2, 1}, {n0, 1, 2, 1}});
    }
    const int64_t n0 = is_quantized(t) ? blocks(t, 2) : 17;
    list.push_back({{n0, 8, 2, 1}, {n0, 5, 2, 1}, L::Contiguous, L::Transposed});
    list.push_back({{n0, 7, 3, 1}, {n0, 2, 3, 1}, L::Permuted, L::Contiguous});
    for (const Shapes& s : list) {
      cases.push_back(make_case(fmt::format("set_rows(type={},dst={},src={})", type_str(t), shape_name(s.dst, s.ldst),
                                   shape_name(s.src, s.lsrc)),
                       Op::SetRows, t, [s, t](CaseGraph& g) {
                         Tensor* dst = operand(g, t, s.dst, s.ldst);
                         Tensor* src = operand(g, DType::F32, s.src, s.lsrc);
                         Tensor* rows = g.input(DType::I32, {s.src[1], s.src[2], s.src[3], 1},
                                                {Fill::Kind::UniqueIndices, s.dst[1]});
                         return set_rows(g.ctx, dst, src, rows);
                       }));
    }
  }
}

struct CopyShapes {
  Shape a, b;
  Layout la = L::Contiguous, lb = L::Contiguous;
};

void add_cpy_case(std::vector<Case>& cases, DType ta, DType tb, const CopyShapes& s) {
  cases.push_back(make_case(fmt::format("cpy(type={}->{},a={},b={})", type_str(ta), type_str(tb), shape_name(s.a, s.la),
                               shape_name(s.b, s.lb)),
                   Op::Cpy, tb, [s, ta, tb](CaseGraph& g) {
                     Tensor* a = operand(g, ta, s.a, s.la);
                     Tensor* b = operand(g, tb, s.b, s.lb);
                     return cpy(g.ctx, a, b);
                   }));
}

void add_cpy(std::vector<Case>& cases) {
  const CopyShapes float_shapes[] = {
      {{17, 3, 2, 1}, {17, 3, 2, 1}},
      {{33, 5, 1, 2}, {33, 5, 1, 2}},
      {{7, 9, 1, 1}, {7, 9, 1, 1}, L::Transposed, L::Contiguous},
      {{7, 9, 1, 1}, {7, 9, 1, 1}, L::Contiguous, L::Transposed},
      {{6, 4, 1, 1}, {8, 3, 1, 1}},  // same element count, different rows
      {{5, 4, 3, 2}, {5, 4, 3, 2}, L::Shuffled, L::Contiguous},
  };
  for (DType ta : kFloatTypes)
    for (DType tb : kFloatTypes)
      for (const CopyShapes& s : float_shapes) add_cpy_case(cases, ta, tb, s);
  // Rows of 1, 2 and 3 blocks of the quantized type of the pair.
  auto quant_shapes = [](DType t) {
    const int64_t b = traits(t).block_size;
    return std::vector<CopyShapes>{
        {{b, 3, 1, 1}, {b, 3, 1, 1}},
        {{2 * b, 5, 2, 1}, {2 * b, 5, 2, 1}},
        {{3 * b, 3, 2, 1}, {3 * b, 3, 2, 1}, L::Permuted, L::Contiguous},
    };
  };
  std::vector<std::pair<DType, DType>> quant_pairs = {
      {DType::F32, DType::Q8_0},  {DType::F32, DType::Q4_0},  {DType::F16, DType::Q8_0},
      {DType::BF16, DType::Q4_0}, {DType::Q8_0, DType::F32},  {DType::Q4_0, DType::F32},
      {DType::Q4_0, DType::F16},  {DType::Q8_0, DType::Q8_0}, {DType::Q4_0, DType::Q4_0},
  };
  // The other quantized types: from and to f32 (quantize / dequantize), to
  // f16, and a raw copy.
  for (DType t : kQuantizedTypes) {
    if (t == DType::Q8_0 || t == DType::Q4_0) continue;
    for (auto pair : {std::pair{DType::F32, t}, std::pair{t, DType::F32}, std::pair{t, DType::F16}, std::pair{t, t}})
      quant_pairs.push_back(pair);
  }
  for (auto [ta, tb] : quant_pairs)
    for (const CopyShapes& s : quant_shapes(is_quantized(ta) ? ta : tb)) add_cpy_case(cases, ta, tb, s);
}

void add_cont(std::vector<Case>& cases) {
  struct Shapes {
    Shape ne;
    Layout layout;
  };
  const Shapes plain[] = {{{17, 3, 2, 1}, L::Contiguous}, {{17, 5, 1, 1}, L::Transposed},
                          {{33, 3, 4, 2}, L::Permuted},   {{7, 5, 3, 2}, L::Shuffled},
                          {{17, 3, 2, 1}, L::Strided}};
  auto quant = [](DType t) {
    const int64_t b = traits(t).block_size;
    return std::vector<Shapes>{{{2 * b, 3, 2, 1}, L::Contiguous}, {{2 * b, 3, 4, 2}, L::Permuted},
                               {{b, 3, 2, 1}, L::Strided}};
  };
  auto add_one = [&cases](DType t, const Shapes& s) {
    const Fill fill{t == DType::I32 ? Fill::Kind::Ints : Fill::Kind::Normal};
    cases.push_back(make_case(fmt::format("cont(type={},a={})", type_str(t), shape_name(s.ne, s.layout)), Op::Cont, t,
                     [s, t, fill](CaseGraph& g) { return cont(g.ctx, operand(g, t, s.ne, s.layout, fill)); }));
  };
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32})
    for (const Shapes& s : plain) add_one(t, s);
  for (DType t : kQuantizedTypes)
    for (const Shapes& s : quant(t)) add_one(t, s);
}

void add_concat(std::vector<Case>& cases) {
  const Shape base{5, 3, 2, 2};
  auto add_one = [&cases, &base](DType t, int dim, Layout la, Layout lb) {
    Shape b = base;
    b[dim] += 1;
    const Fill fill{t == DType::I32 ? Fill::Kind::Ints : Fill::Kind::Normal};
    cases.push_back(make_case(fmt::format("concat(type={},dim={},a={},b={})", type_str(t), dim, shape_name(base, la),
                                 shape_name(b, lb)),
                     Op::Concat, t, [=](CaseGraph& g) {
                       return concat(g.ctx, operand(g, t, base, la, fill), operand(g, t, b, lb, fill), dim);
                     }));
  };
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32})
    for (int dim = 0; dim < 4; ++dim) add_one(t, dim, L::Contiguous, L::Contiguous);
  for (int dim = 0; dim < 4; ++dim) {
    add_one(DType::F32, dim, L::Transposed, L::Strided);
    add_one(DType::F16, dim, L::Permuted, L::Shuffled);
  }
}

}  // namespace

void add_movement_cases(std::vector<Case>& cases) {
  add_get_rows(cases);
  add_set_rows(cases);
  add_cpy(cases);
  add_cont(cases);
  add_concat(cases);
}

}  // namespace loom::conformance::detail
