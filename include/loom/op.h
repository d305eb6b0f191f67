// The operations a graph node can perform, and the op table: the facts about
// every op in one place (name, operand count, whether it is a view, which
// operands its result may overwrite, which parameter struct it carries).
// Backends, the graph allocator and the conformance suite read the table
// instead of restating these facts; a static_assert keeps it complete.
// Shape rules live with the builder functions in ops.h; parameter structs and
// their accessors in op_params.h; kernels live in the backends.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom {

enum class Op : uint8_t {
  None,  // a leaf: data provided from outside
  GetRows,
  SetRows,
  Cpy,
  Cont,
  Add,
  Sub,
  Mul,
  Div,
  Scale,
  Sqr,
  Sqrt,
  SumRows,
  MulMat,
  RmsNorm,
  Norm,
  Rope,
  SoftMax,
  Silu,
  Gelu,
  Relu,
  Argmax,
  Concat,
  Tanh,
  Sigmoid,
  Clamp,
  Argsort,
  MulMatId,
  View,
  Reshape,
  Permute,
  Transpose,
  FlashAttnExt,  // after the views: op ids are stable (RPC graphs, fuzz corpora); new ops go last
  Count,
};

inline constexpr size_t kOpCount = static_cast<size_t>(Op::Count);

// Which parameter struct (op_params.h) an op's op_params hold.
enum class OpParamsKind : uint8_t { None, Scale, Norm, Rope, SoftMax, Concat, Permute, Clamp, Argsort, FlashAttn };

struct OpInfo {
  Op op;
  std::string_view name;  // what users type: "mul_mat"
  uint8_t min_src;        // operands that must be set (src[0..min_src))
  uint8_t max_src;        // operands that may be set; the rest are null
  bool is_view;           // only reinterprets src[0]'s memory: no kernel runs
  // Bit i: the result may take over src[i]'s memory (the graph allocator
  // reuses a dying operand in place). Only for ops whose kernels read each
  // element before writing the same element.
  uint8_t in_place;
  OpParamsKind params;

  constexpr bool may_overwrite(int src) const { return src >= 0 && src < 8 && (in_place >> src & 1u); }
};

namespace op_table_detail {
using K = OpParamsKind;
constexpr uint8_t kSrc0 = 1u, kSrc01 = 3u;
}  // namespace op_table_detail

// One row per op, in enum order.
inline constexpr std::array<OpInfo, kOpCount> kOpTable = [] {
  using namespace op_table_detail;
  return std::array<OpInfo, kOpCount>{{
      //  op             name        src    view   in place  params
      {Op::None, "none", 0, 0, false, 0, K::None},
      {Op::GetRows, "get_rows", 2, 2, false, 0, K::None},  // a, row indices
      {Op::SetRows, "set_rows", 3, 3, false, 0, K::None},  // rows, indices, destination
      {Op::Cpy, "cpy", 2, 2, false, 0, K::None},           // source, destination
      {Op::Cont, "cont", 1, 1, false, 0, K::None},
      {Op::Add, "add", 2, 2, false, kSrc01, K::None},
      {Op::Sub, "sub", 2, 2, false, kSrc01, K::None},
      {Op::Mul, "mul", 2, 2, false, kSrc01, K::None},
      {Op::Div, "div", 2, 2, false, kSrc0, K::None},
      {Op::Scale, "scale", 1, 1, false, kSrc0, K::Scale},
      {Op::Sqr, "sqr", 1, 1, false, kSrc0, K::None},
      {Op::Sqrt, "sqrt", 1, 1, false, kSrc0, K::None},
      {Op::SumRows, "sum_rows", 1, 1, false, 0, K::None},
      {Op::MulMat, "mul_mat", 2, 2, false, 0, K::None},
      {Op::RmsNorm, "rms_norm", 1, 1, false, kSrc0, K::Norm},
      {Op::Norm, "norm", 1, 1, false, kSrc0, K::Norm},
      {Op::Rope, "rope", 2, 3, false, kSrc0, K::Rope},  // a, positions, optional freq factors
      {Op::SoftMax, "soft_max", 1, 3, false, kSrc0, K::SoftMax},  // a, optional mask, optional sinks
      {Op::Silu, "silu", 1, 1, false, kSrc0, K::None},
      {Op::Gelu, "gelu", 1, 1, false, kSrc0, K::None},
      {Op::Relu, "relu", 1, 1, false, kSrc0, K::None},
      {Op::Argmax, "argmax", 1, 1, false, 0, K::None},
      {Op::Concat, "concat", 2, 2, false, 0, K::Concat},
      {Op::Tanh, "tanh", 1, 1, false, kSrc0, K::None},
      {Op::Sigmoid, "sigmoid", 1, 1, false, kSrc0, K::None},
      {Op::Clamp, "clamp", 1, 1, false, kSrc0, K::Clamp},
      {Op::Argsort, "argsort", 1, 1, false, 0, K::Argsort},
      {Op::MulMatId, "mul_mat_id", 3, 3, false, 0, K::None},  // expert weights, b, expert ids
      {Op::View, "view", 1, 1, true, 0, K::None},
      {Op::Reshape, "reshape", 1, 1, true, 0, K::None},
      {Op::Permute, "permute", 1, 1, true, 0, K::Permute},
      {Op::Transpose, "transpose", 1, 1, true, 0, K::Permute},
      {Op::FlashAttnExt, "flash_attn_ext", 3, 4, false, 0, K::FlashAttn},  // q, k, v, optional mask
  }};
}();

constexpr bool op_table_complete() {
  for (size_t i = 0; i < kOpCount; ++i)
    if (static_cast<size_t>(kOpTable[i].op) != i || kOpTable[i].name.empty() ||
        kOpTable[i].min_src > kOpTable[i].max_src || kOpTable[i].max_src > 4)
      return false;
  return true;
}
static_assert(op_table_complete(), "kOpTable needs one row per Op, in enum order");

// The row of `op` (op < Op::Count).
constexpr const OpInfo& op_info(Op op) { return kOpTable[static_cast<size_t>(op)]; }

std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);  // case-insensitive

// Ops that only reinterpret their source's memory; kernels skip them.
constexpr bool op_is_view(Op op) { return static_cast<size_t>(op) < kOpCount && op_info(op).is_view; }
// Whether a backend runs a kernel for a node with this op: not a leaf, not a view.
constexpr bool op_has_kernel(Op op) { return op != Op::None && static_cast<size_t>(op) < kOpCount && !op_is_view(op); }

// Rope modes (RopeParams::mode).
enum class RopeMode : int32_t { Normal = 0, NeoX = 2 };

// Argsort orders (ArgsortParams::order).
enum class SortOrder : int32_t { Ascending = 0, Descending = 1 };

}  // namespace loom
