// The CPU's answers to the two device questions: can it run a node (op,
// params, types, shapes only) and can it read an operand from a buffer type
// (host memory always; CPU_Repack only as mul_mat's whole src0).
#include <gtest/gtest.h>

#include "../alloc/test_graphs.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

BufferType& find_type(std::string_view name) {
  for (BufferType* bt : Registry::get().cpu().buffer_types())
    if (bt->name() == name) return *bt;
  throw std::runtime_error("no buffer type " + std::string(name));
}

TEST(CpuDeviceQuestions, SupportsOpIgnoresWhereOperandsLie) {
  Device& cpu = Registry::get().cpu();
  testing::FakeBufferType elsewhere("Elsewhere");
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8, 4});
  Tensor* sum = add(ctx, a, a);
  auto memory = allocate_tensors(std::span<Tensor* const>(&a, 1), elsewhere);
  ASSERT_TRUE(a->buffer);
  EXPECT_TRUE(cpu.supports_op(*sum));  // the kernel exists
  EXPECT_FALSE(cpu.supports_buffer_type(elsewhere));
  EXPECT_FALSE(cpu.supports_operand(*sum, 0, elsewhere));  // but not for memory it cannot read
  EXPECT_TRUE(cpu.supports_operand(*sum, 0, cpu.default_buffer_type()));
}

TEST(CpuDeviceQuestions, SupportsOpOnPlainTensorValues) {
  // No Context: a node and its operands as values on the stack.
  Tensor w, x, node;
  w.type = DType::Q8_0;
  w.ne = {64, 32, 1, 1};
  set_contiguous_strides(w);
  x.ne = {64, 8, 1, 1};
  set_contiguous_strides(x);
  node.op = Op::MulMat;
  node.ne = {32, 8, 1, 1};
  set_contiguous_strides(node);
  node.src = {&w, &x, nullptr, nullptr};
  EXPECT_TRUE(Registry::get().cpu().supports_op(node));
  node.op = Op::Count;
  EXPECT_FALSE(Registry::get().cpu().supports_op(node));
}

TEST(CpuDeviceQuestions, HostMemoryServesEveryOperand) {
  Device& cpu = Registry::get().cpu();
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, {64, 32});
  Tensor* idx = ctx.new_tensor(DType::I32, {2});
  Tensor* rows = get_rows(ctx, w, idx);
  for (std::string_view name : {"CPU", "CPU_Mapped"})
    for (int slot = 0; slot < 2; ++slot) EXPECT_TRUE(cpu.supports_operand(*rows, slot, find_type(name))) << name;
}

TEST(CpuDeviceQuestions, RepackMemoryOnlyForMulMatsWholeSrc0) {
  Device& cpu = Registry::get().cpu();
  BufferType& repack = find_type("CPU_Repack");
  EXPECT_TRUE(cpu.supports_buffer_type(repack));
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q4_0, {64, 32});    // stored interleaved there
  Tensor* odd = ctx.new_tensor(DType::Q4_0, {64, 40});  // rows not a multiple of 16: stored plain
  Tensor* x = ctx.new_tensor(DType::F32, {64, 3});
  Tensor* idx = ctx.new_tensor(DType::I32, {2});
  EXPECT_TRUE(cpu.supports_operand(*mul_mat(ctx, w, x), 0, repack));
  EXPECT_FALSE(cpu.supports_operand(*get_rows(ctx, w, idx), 0, repack));
  EXPECT_FALSE(cpu.supports_operand(*cpy(ctx, w, ctx.new_tensor(DType::Q4_0, {64, 32})), 0, repack));
  Tensor* view = reshape(ctx, w, {128, 16, 1, 1});
  EXPECT_FALSE(cpu.supports_operand(*mul_mat(ctx, view, ctx.new_tensor(DType::F32, {128, 2})), 0, repack));
  // Tensors CPU_Repack keeps plain are read anywhere.
  EXPECT_TRUE(cpu.supports_operand(*get_rows(ctx, odd, idx), 0, repack));
  EXPECT_TRUE(cpu.supports_operand(*mul_mat(ctx, w, x), 1, repack));  // f32 activations stay plain
}

// CPU_Repack interleaves only Q4_0 / Q8_0 / Q4_K / Q6_K (the layouts of its
// 16-row kernels; the K-quants' are in repack_test): the other quantized types are never
// asked for there and, if placed there, stay plain, so every op reads them.
TEST(CpuDeviceQuestions, RepackKeepsOtherQuantizedTypesPlain) {
  Device& cpu = Registry::get().cpu();
  BufferType& repack = find_type("CPU_Repack");
  for (DType t : kQuantizedTypes) {
    if (t == DType::Q4_0 || t == DType::Q8_0 || t == DType::Q4_K || t == DType::Q6_K) continue;
    Context ctx;
    Tensor* w = ctx.new_tensor(t, {256, 32});
    Tensor* x = ctx.new_tensor(DType::F32, {256, 3});
    Tensor* idx = ctx.new_tensor(DType::I32, {2});
    Tensor* mm = mul_mat(ctx, w, x);
    EXPECT_TRUE(cpu.supports_op(*mm)) << type_name(t);
    EXPECT_FALSE(repack.supports_op(*mm)) << type_name(t);
    EXPECT_TRUE(cpu.supports_operand(*get_rows(ctx, w, idx), 0, repack)) << type_name(t);
  }
}

}  // namespace
}  // namespace loom
