#include <gtest/gtest.h>

#include <cstring>

#include "loom/error.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

BufferType& cpu_type() { return Registry::get().cpu().default_buffer_type(); }

TEST(Buffer, ZeroSizeAllocationIsAValidEmptyBuffer) {
  auto buf = cpu_type().alloc(0);
  ASSERT_NE(buf, nullptr);
  EXPECT_EQ(buf->size(), 0u);
  EXPECT_NE(buf->base(), nullptr);
  Context ctx;
  Tensor* empty = ctx.new_tensor(DType::F32, {0, 4});
  buf->place(*empty, 0);
  EXPECT_TRUE(empty->is_allocated());
  Tensor* one = ctx.new_tensor(DType::F32, {1});
  EXPECT_THROW(buf->place(*one, 0), Error);
}

TEST(Buffer, PlaceIsBoundsAndAlignmentChecked) {
  auto buf = cpu_type().alloc(256);
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {32});
  t->name = "t";
  EXPECT_NO_THROW(buf->place(*t, 128));
  Tensor* u = ctx.new_tensor(DType::F32, {32});
  EXPECT_THROW(buf->place(*u, 192), Error);  // 128 bytes at 192 > 256
  EXPECT_THROW(buf->place(*u, 4), Error);    // misaligned
  try {
    buf->place(*u, 192);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("256"), std::string::npos) << e.what();
  }
}

TEST(Buffer, TensorKeepsItsBufferAlive) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {4});
  std::weak_ptr<Buffer> weak;
  {
    auto buf = cpu_type().alloc(64);
    weak = buf;
    buf->place(*t, 0);
  }  // the only other owner is gone
  ASSERT_FALSE(weak.expired());
  tensor_from_floats(*t, {1, 2, 3, 4});
  EXPECT_EQ(tensor_to_floats(*t), (std::vector<float>{1, 2, 3, 4}));
  t->buffer.reset();
  t->data = nullptr;
  EXPECT_TRUE(weak.expired());
}

TEST(Buffer, UnplacedTensorIsAClearError) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {4});
  t->name = "orphan";
  try {
    tensor_to_floats(*t);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("orphan"), std::string::npos);
  }
}

TEST(Buffer, ViewsShareMemoryWithTheirSource) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 3});
  Tensor* row1 = view_1d(ctx, a, 4, a->nb[1]);
  allocate_tensors(ctx, cpu_type());
  ASSERT_EQ(row1->buffer, a->buffer);
  tensor_from_floats(*a, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(tensor_to_floats(*row1), (std::vector<float>{4, 5, 6, 7}));
}

TEST(TensorIo, OutOfRangeAccessNamesTheTensor) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F16, {8});
  t->name = "small";
  allocate_tensors(ctx, cpu_type());
  std::vector<uint8_t> bytes(32);
  EXPECT_THROW(tensor_set(*t, bytes.data(), 8, 16), Error);
  EXPECT_NO_THROW(tensor_set(*t, bytes.data(), 8, 8));
}

TEST(TensorIo, CopyBetweenBuffersAndTypesMustMatch) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::Q8_0, {64, 2});
  Tensor* b = ctx.new_tensor(DType::Q8_0, {64, 2});
  Tensor* c = ctx.new_tensor(DType::Q4_0, {64, 2});
  for (Tensor* t : {a, b, c}) allocate_tensors(std::span<Tensor* const>(&t, 1), cpu_type());
  EXPECT_NE(a->buffer, b->buffer);
  std::vector<float> v(128);
  for (int i = 0; i < 128; ++i) v[i] = static_cast<float>(i % 7) - 3.0f;
  tensor_from_floats(*a, v);
  tensor_copy(*a, *b);
  std::vector<uint8_t> ra(a->nbytes()), rb(b->nbytes());
  tensor_get(*a, ra.data(), 0, ra.size());
  tensor_get(*b, rb.data(), 0, rb.size());
  EXPECT_EQ(ra, rb);
  EXPECT_THROW(tensor_copy(*a, *c), Error);
}

TEST(TensorAlloc, MappedBufferWrapsForeignMemory) {
  Device& cpu = Registry::get().cpu();
  alignas(64) static float storage[32];
  for (int i = 0; i < 32; ++i) storage[i] = static_cast<float>(i);
  auto buf = cpu.buffer_from_host_ptr(storage, sizeof storage);
  EXPECT_EQ(buf->type().name(), "CPU_Mapped");
  // The capability names the type before anything is wrapped (the loader's way to it).
  EXPECT_TRUE(cpu.caps().buffer_from_host_ptr);
  EXPECT_EQ(cpu.host_ptr_buffer_type(), &buf->type());
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {8});
  EXPECT_THROW(buf->place(*t, 16), Error);  // misaligned for the type
  buf->place(*t, 64);
  EXPECT_EQ(tensor_to_floats(*t)[0], 16.0f);
  EXPECT_THROW(buf->type().alloc(64), Error);  // CPU_Mapped only wraps
}

}  // namespace
}  // namespace loom
