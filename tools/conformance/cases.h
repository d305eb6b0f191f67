// Internal to the conformance suite: helpers the case lists share (operand
// layouts, case names) and the functions that append each group of cases.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "conformance/conformance.h"

namespace loom::conformance::detail {

using Shape = std::array<int64_t, 4>;

// How an operand of logical shape `ne` is laid out in memory.
enum class Layout {
  Contiguous,  // a leaf
  Transposed,  // transpose() of a leaf [ne1, ne0, ne2, ne3]: nb0 != element size
  Permuted,    // permute(0,2,1,3) of a leaf [ne0, ne2, ne1, ne3]: rows contiguous, dims 1-2 swapped
  Shuffled,    // permute(2,0,1,3) of a leaf [ne1, ne2, ne0, ne3]: every stride out of order
  Strided,     // view of a leaf with longer rows, starting one element (block) in
  Reshaped,    // reshape() of a 2-D leaf [ne0, ne1*ne2*ne3]: contiguous, but a view
};

// An operand of shape `ne` with the given layout (Transposed and Shuffled
// need a non-quantized type).
Tensor* operand(CaseGraph& g, DType type, Shape ne, Layout layout, Fill fill = {});

// "[17,3,2,1]", with ":T", ":perm", ":shuf", ":view" or ":resh" for non-contiguous layouts.
std::string shape_name(const Shape& ne, Layout layout = Layout::Contiguous);
std::string type_str(DType type);

inline Case make_case(std::string name, Op op, DType type, std::function<Tensor*(CaseGraph&)> build) {
  Case c;
  c.name = std::move(name);
  c.op = op;
  c.type = type;
  c.build = std::move(build);
  return c;
}

void add_elementwise_cases(std::vector<Case>& cases);  // binary, unary, sum_rows, argmax
void add_movement_cases(std::vector<Case>& cases);     // get_rows, set_rows, cpy, cont, concat
void add_matmul_cases(std::vector<Case>& cases);       // mul_mat
void add_row_cases(std::vector<Case>& cases);          // rms_norm, norm, rope, soft_max
void add_family_cases(std::vector<Case>& cases);       // tanh, sigmoid, clamp, argsort, mul_mat_id
void add_attention_cases(std::vector<Case>& cases);    // flash_attn_ext

}  // namespace loom::conformance::detail
