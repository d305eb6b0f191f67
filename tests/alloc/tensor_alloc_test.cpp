#include "loom/tensor_alloc.h"

#include <gtest/gtest.h>

#include "alloc/test_graphs.h"
#include "loom/ops.h"
#include "loom/registry.h"

namespace loom {
namespace {

using testing::FakeBufferType;

Tensor* f32(Context& ctx, int64_t n, const char* name) {
  Tensor* t = ctx.new_tensor(DType::F32, {n});
  t->name = name;
  return t;
}

size_t offset_in(const Tensor& t) { return t.buffer->offset_of(t); }

TEST(TensorAlloc, NothingToAllocateIsAResultNotAnError) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* placed = f32(ctx, 16, "placed");
  allocate_tensors(std::span<Tensor* const>(&placed, 1), type);
  ASSERT_EQ(type.n_allocs, 1u);
  Tensor* empty = ctx.new_tensor(DType::F32, {0});
  Tensor* v = view_1d(ctx, placed, 4, 0);
  std::vector<Tensor*> set{placed, empty, v};
  TensorAllocation r = allocate_tensors(set, type);
  EXPECT_EQ(r.status, AllocStatus::NothingToAllocate);
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.buffers.empty());
  EXPECT_EQ(r.n_tensors, 0u);
  EXPECT_EQ(r.n_views, 1u);  // the view still gets its source's memory
  EXPECT_EQ(v->data, placed->data);
  EXPECT_EQ(type.n_allocs, 1u);  // no buffer was allocated

  TensorAllocation none = allocate_tensors(std::span<Tensor* const>(), type);
  EXPECT_EQ(none.status, AllocStatus::NothingToAllocate);
}

TEST(TensorAlloc, PacksLinearlyWithAlignment) {
  FakeBufferType type("fake", 64);
  Context ctx;
  std::vector<Tensor*> ts{f32(ctx, 10, "a"), f32(ctx, 100, "b"), f32(ctx, 1, "c")};
  TensorAllocation r = allocate_tensors(ts, type, BufferUsage::Weights);
  EXPECT_EQ(r.status, AllocStatus::Allocated);
  ASSERT_EQ(r.buffers.size(), 1u);
  EXPECT_EQ(r.buffers[0]->usage(), BufferUsage::Weights);
  EXPECT_EQ(offset_in(*ts[0]), 0u);
  EXPECT_EQ(offset_in(*ts[1]), 64u);   // 40 bytes rounded up
  EXPECT_EQ(offset_in(*ts[2]), 512u);  // 64 + 400 rounded up
  EXPECT_EQ(r.total_bytes, 516u);
  EXPECT_EQ(r.n_tensors, 3u);
}

TEST(TensorAlloc, SplitsAcrossBuffersWhenOverMaxSize) {
  FakeBufferType type("small", 64, 1000);
  Context ctx;
  std::vector<Tensor*> ts;
  for (int i = 0; i < 5; ++i) ts.push_back(f32(ctx, 100, "t"));  // 400 bytes each
  TensorAllocation r = allocate_tensors(ts, type);
  ASSERT_EQ(r.buffers.size(), 3u);  // 400 + 448..848, then a new buffer every two
  for (const auto& b : r.buffers) EXPECT_LE(b->size(), 1000u);
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(ts[i]->buffer, r.buffers[i / 2]) << i;
    EXPECT_EQ(offset_in(*ts[i]), i % 2 ? 448u : 0u) << i;
  }
  EXPECT_EQ(r.n_tensors, 5u);
  EXPECT_EQ(type.n_allocs, 3u);
}

TEST(TensorAlloc, TensorLargerThanMaxSizeNamesTheTensor) {
  FakeBufferType type("small", 64, 1000);
  Context ctx;
  Tensor* big = f32(ctx, 1000, "too_big");
  try {
    allocate_tensors(std::span<Tensor* const>(&big, 1), type);
    FAIL() << "expected an error";
  } catch (const OutOfMemory&) {
    FAIL() << "a tensor over max_size is not an out-of-memory condition";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("too_big"), std::string::npos) << msg;
    EXPECT_NE(msg.find("4000"), std::string::npos) << msg;
    EXPECT_NE(msg.find("small"), std::string::npos) << msg;
  }
  EXPECT_EQ(big->buffer, nullptr);
}

TEST(TensorAlloc, OutOfMemoryIsReportedAndLeavesTensorsUntouched) {
  FakeBufferType type("tiny_device", 64, 1000, 1500);  // room for one full buffer only
  Context ctx;
  std::vector<Tensor*> ts;
  for (int i = 0; i < 4; ++i) ts.push_back(f32(ctx, 200, "w"));  // 800 bytes: one per buffer
  try {
    allocate_tensors(ts, type);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.buffer_type(), "tiny_device");
    EXPECT_EQ(e.requested(), 800u);
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("800 bytes"), std::string::npos) << msg;
  }
  for (Tensor* t : ts) {
    EXPECT_EQ(t->buffer, nullptr);
    EXPECT_EQ(t->data, nullptr);
  }
  EXPECT_EQ(type.live_bytes, 0u);  // the buffer allocated before the failure was released
}

TEST(TensorAlloc, TensorOutlivesItsAllocation) {  // seed bug 6(b) for the tensor allocator
  BufferType& cpu = Registry::get().cpu().default_buffer_type();
  Context ctx;
  Tensor* t = f32(ctx, 8, "kept");
  std::weak_ptr<Buffer> buffer;
  {
    TensorAllocation r = allocate_tensors(std::span<Tensor* const>(&t, 1), cpu);
    buffer = r.buffers[0];
  }
  ASSERT_FALSE(buffer.expired());  // the tensor keeps its buffer alive
  tensor_from_floats(*t, {1, 2, 3, 4, 5, 6, 7, 8});
  EXPECT_EQ(tensor_to_floats(*t)[7], 8.0f);
  t->buffer.reset();
  t->data = nullptr;
  EXPECT_TRUE(buffer.expired());  // and nothing else does
}

}  // namespace
}  // namespace loom
