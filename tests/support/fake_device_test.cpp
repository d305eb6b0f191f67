// The fake device itself: bytes move only through its buffers, memory is
// accounted, and a device limited to some ops leaves the rest to the CPU.
#include "support/fake_device.h"

#include <gtest/gtest.h>

#include <numeric>

#include "loom/error.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/scheduler.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

using test::FakeDevice;

TEST(FakeDevice, BytesLiveBehindAnOpaqueAddressAndMoveThroughTheBuffer) {
  FakeDevice dev({.name = "Fake7", .memory = 1 << 20});
  EXPECT_EQ(dev.type(), DeviceType::GPU);
  EXPECT_FALSE(dev.default_buffer_type().is_host());
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {16});
  Tensor* b = ctx.new_tensor(DType::F32, {16});
  Tensor* ab[] = {a, b};
  auto alloc = allocate_tensors(std::span<Tensor* const>(ab), dev.default_buffer_type());
  EXPECT_EQ(alloc.buffers.front()->type().name(), "Fake7");
  // Not a host address: the top bits are set (non-canonical on x86-64).
  EXPECT_GE(reinterpret_cast<uintptr_t>(a->data), uintptr_t{0xF0000000'00000000});
  std::vector<float> v(16);
  std::iota(v.begin(), v.end(), 1.0f);
  tensor_from_floats(*a, v);
  tensor_copy(*a, *b);
  EXPECT_EQ(tensor_to_floats(*b), v);
  tensor_memset(*b, 0, 0, b->nbytes());
  EXPECT_EQ(tensor_to_floats(*b), std::vector<float>(16, 0.0f));
}

TEST(FakeDevice, MemoryIsAccountedAndRunsOut) {
  FakeDevice dev({.name = "Fake7", .memory = 4096});
  EXPECT_EQ(dev.memory().free, 4096u);
  {
    auto buf = dev.default_buffer_type().alloc(1024);
    EXPECT_EQ(dev.memory().free, 3072u);
    EXPECT_EQ(dev.memory().total, 4096u);
    try {
      dev.default_buffer_type().alloc(4000);
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("Fake7: out of device memory (4000 bytes asked, 3072 of 4096 free)"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(dev.memory().free, 4096u);
}

TEST(FakeDevice, OpsItLacksFallBackToTheCpu) {
  FakeDevice dev({.name = "Fake7", .ops = std::set<Op>{Op::MulMat, Op::Add}});
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8, 2});
  x->flags |= kFlagInput;
  Tensor* w = ctx.new_tensor(DType::F32, {8, 8});
  w->flags |= kFlagWeight;
  auto wa = allocate_tensors(std::span<Tensor* const>(&w, 1), dev.default_buffer_type(), BufferUsage::Weights);
  std::vector<float> wv(64), xv(16);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.01f * static_cast<float>(i % 7);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = 0.1f * static_cast<float>(i);
  tensor_from_floats(*w, wv);
  Tensor* y = mul_mat(ctx, w, x);
  Tensor* s = silu(ctx, y);
  Tensor* o = add(ctx, s, y);
  Graph g = Graph::build(o);
  auto fake = dev.create_backend();
  auto cpu = Registry::get().cpu().create_backend();
  Scheduler sched({fake.get(), cpu.get()});
  sched.allocate(g);
  tensor_from_floats(*x, xv);
  sched.compute(g);
  EXPECT_EQ(sched.backend_of(y), fake.get());
  EXPECT_EQ(sched.backend_of(s), cpu.get());  // silu is not in its op set
  // The same graph on the CPU alone.
  std::vector<float> want(16);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 8; ++i) {
      float acc = 0;
      for (int k = 0; k < 8; ++k) acc += wv[i * 8 + k] * xv[r * 8 + k];
      want[r * 8 + i] = acc / (1 + std::exp(-acc)) + acc;
    }
  const std::vector<float> got = tensor_to_floats(*o);
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << i;
}

TEST(FakeDevice, ComputeRefusesOperandsInOtherMemory) {
  FakeDevice dev({.name = "Fake7"});
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4});
  Tensor* b = ctx.new_tensor(DType::F32, {4});
  Tensor* ab[] = {a, b};
  auto host = allocate_tensors(std::span<Tensor* const>(ab), Registry::get().cpu().default_buffer_type());
  Tensor* c = add(ctx, a, b);
  c->name = "sum";
  EXPECT_TRUE(dev.supports_op(*c));  // the op itself it can run
  const BufferType& host_type = a->buffer->type();
  EXPECT_FALSE(dev.supports_operand(*c, 0, host_type));  // but not with operands in host memory
  EXPECT_FALSE(dev.supports_operand(*c, 1, host_type));
  Graph g = Graph::build(c);
  auto mine = allocate_tensors(std::span<Tensor* const>(&c, 1), dev.default_buffer_type());
  try {
    dev.create_backend()->compute(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("in CPU memory, which Fake7 cannot use"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
