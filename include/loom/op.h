// The operations a graph node can perform. Shape rules live with the builder
// functions in ops.h; kernels live in the backends.
#pragma once

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
  View,
  Reshape,
  Permute,
  Transpose,
  Count,
};

std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);  // case-insensitive

// Ops that only reinterpret their source's memory; kernels skip them.
bool op_is_view(Op op);

// Rope modes (op param 1).
enum class RopeMode : int32_t { Normal = 0, NeoX = 2 };

}  // namespace loom
