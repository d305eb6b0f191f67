// The launchers behind launch_node (cuda_ops.cu): one pair per op family,
// "supports" reading only op, params, types, shapes and strides, "launch"
// queuing the node's kernels on ctx.stream (never synchronizing). mul_mat,
// mul_mat_id and flash_attn are in their own files; the rest are grouped by
// theme (rows.cu, copy.cu, elementwise.cu, reduce.cu, rope.cu).
#pragma once

#include "../cuda_launch.h"

namespace loom::cuda {

// --- matrix products and attention (mul_mat.cu, mul_mat_id.cu, flash_attn.cu)
bool supports_mul_mat(const Tensor& node);
void launch_mul_mat(const Tensor& node, const LaunchContext& ctx);
bool supports_mul_mat_id(const Tensor& node);
void launch_mul_mat_id(const Tensor& node, const LaunchContext& ctx);
bool supports_flash_attn(const Tensor& node);
void launch_flash_attn(const Tensor& node, const LaunchContext& ctx);

// --- rows.cu: get_rows (plain or quantized table), set_rows (plain or Q8_0/Q4_0/Q4_1/Q5_0/Q5_1)
void launch_get_rows(const Tensor& node, const LaunchContext& ctx);
void launch_set_rows(const Tensor& node, const LaunchContext& ctx);

// --- copy.cu: cpy/cont with type conversion (quantized on either side), concat
void launch_cpy(const Tensor& node, const LaunchContext& ctx);
void launch_concat(const Tensor& node, const LaunchContext& ctx);

// --- elementwise.cu: add/sub/mul/div (b broadcasts), and the unary ops
// scale, sqr, sqrt, silu, gelu, relu, tanh, sigmoid, clamp
void launch_binary(const Tensor& node, const LaunchContext& ctx);
void launch_unary(const Tensor& node, const LaunchContext& ctx);

// --- reduce.cu: sum_rows, argmax, argsort, rms_norm, norm, soft_max
void launch_sum_rows(const Tensor& node, const LaunchContext& ctx);
void launch_argmax(const Tensor& node, const LaunchContext& ctx);
// argsort: a bitonic sort in shared memory for rows up to 4096 elements,
// ranking by counting (O(n^2)) for longer ones: every row length runs.
void launch_argsort(const Tensor& node, const LaunchContext& ctx);
void launch_norm(const Tensor& node, const LaunchContext& ctx);
void launch_soft_max(const Tensor& node, const LaunchContext& ctx);

// --- rope.cu: normal and NeoX modes, optional freq factors
void launch_rope(const Tensor& node, const LaunchContext& ctx);

}  // namespace loom::cuda
