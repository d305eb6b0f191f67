// The OpenCL backend on real devices (PoCL: POCL_DEVICES="pthread pthread"
// gives OpenCL0 and OpenCL1). Uses only the public interfaces, so it runs
// the same whether the backend is built in or loaded as a plugin; without an
// OpenCL device every test skips with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "conformance/conformance.h"
#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "opencl/opencl_device.h"
#include "test_devices.h"

namespace loom {
namespace {

using test::opencl;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> read_all(const Tensor& t) {
  std::vector<uint8_t> out(t.nbytes());
  tensor_get(t, out.data(), 0, out.size());
  return out;
}

TEST(OpenCL, DevicesAreRegisteredWithTheirOwnMemory) {
  REQUIRE_OPENCL(1);
  for (int i = 0; opencl(i); ++i) {
    Device& d = *opencl(i);
    EXPECT_NE(d.type(), DeviceType::CPU) << d.name();
    EXPECT_FALSE(d.default_buffer_type().is_host()) << d.name();
    EXPECT_EQ(d.default_buffer_type().name(), d.name());
    EXPECT_EQ(d.default_buffer_type().device(), &d);
    EXPECT_TRUE(d.caps().async && d.caps().events && d.caps().host_buffer);
    EXPECT_GT(d.memory().total, 0u);
    EXPECT_LE(d.memory().free, d.memory().total);
    ASSERT_NE(d.host_buffer_type(), nullptr);
    EXPECT_TRUE(d.host_buffer_type()->is_host());
    EXPECT_TRUE(d.supports_buffer_type(d.default_buffer_type()));
    EXPECT_FALSE(d.supports_buffer_type(Registry::get().cpu().default_buffer_type()));
  }
}

TEST(OpenCL, SetGetMemsetRoundTrip) {
  REQUIRE_OPENCL(1);
  BufferType& type = opencl(0)->default_buffer_type();
  const size_t free_before = opencl(0)->memory().free;
  auto buf = type.alloc(4096);
  EXPECT_EQ(opencl(0)->memory().free, free_before - 4096);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {100});
  Tensor* b = ctx.new_tensor(DType::F32, {100});
  buf->place(*a, 0);
  buf->place(*b, 512);
  const auto bytes = random_bytes(400, 1);
  tensor_set(*a, bytes.data(), 0, 400);
  tensor_memset(*b, 0x5a, 0, 400);
  EXPECT_EQ(read_all(*a), bytes);
  tensor_memset(*a, 0xff, 8, 16);
  auto expect = bytes;
  std::memset(expect.data() + 8, 0xff, 16);
  EXPECT_EQ(read_all(*a), expect);
  EXPECT_EQ(read_all(*b), std::vector<uint8_t>(400, 0x5a));
  uint8_t part[10];
  tensor_get(*a, part, 100, 10);
  EXPECT_EQ(std::memcmp(part, expect.data() + 100, 10), 0);
  EXPECT_THROW(tensor_get(*a, part, 395, 10), Error);  // past the end
  buf->clear(0);
  EXPECT_EQ(read_all(*b), std::vector<uint8_t>(400, 0));
}

TEST(OpenCL, ZeroSizeAndTooLargeAllocations) {
  REQUIRE_OPENCL(1);
  BufferType& type = opencl(0)->default_buffer_type();
  auto empty = type.alloc(0);
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_THROW(type.alloc(type.max_size() + 1), Error);
}

// PoCL keeps device memory in host memory and aborts when its own allocation
// fails: a request larger than the host's available memory is refused first,
// with Loom's message. (max_size() is below the available memory on an idle
// machine, so the check is called directly.)
TEST(OpenCL, HostMemoryDeviceRefusesMoreThanTheHostHasAvailable) {
  REQUIRE_OPENCL(1);
  auto* device = dynamic_cast<opencl::OpenClDevice*>(opencl(0));
  ASSERT_NE(device, nullptr);
  if (!device->uses_host_memory()) GTEST_SKIP() << device->name() << " has memory of its own";
  const size_t available = Registry::get().cpu().memory().free;
  EXPECT_NO_THROW(device->check_host_memory(available / 4, "OpenCL0"));
  try {
    device->check_host_memory(available + (size_t{1} << 30), "OpenCL0");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("keeps its memory in host memory, where only"), std::string::npos) << e.what();
  }
}

TEST(OpenCL, CopyCpuToOpenCL0ToOpenCL1ToCpuKeepsEveryByte) {
  REQUIRE_OPENCL(2);
  Context ctx;
  std::vector<Tensor*> hops;
  for (int i = 0; i < 4; ++i) hops.push_back(ctx.new_tensor(DType::Q4_0, {256, 33}));
  BufferType* types[4] = {&Registry::get().cpu().default_buffer_type(), &opencl(0)->default_buffer_type(),
                          &opencl(1)->default_buffer_type(), &Registry::get().cpu().default_buffer_type()};
  std::vector<TensorAllocation> memory;
  for (int i = 0; i < 4; ++i) memory.push_back(allocate_tensors(std::span<Tensor* const>(&hops[i], 1), *types[i]));
  const auto bytes = random_bytes(hops[0]->nbytes(), 7);
  tensor_set(*hops[0], bytes.data(), 0, bytes.size());
  for (int i = 0; i < 3; ++i) tensor_copy(*hops[i], *hops[i + 1]);
  EXPECT_EQ(read_all(*hops[1]), bytes);
  EXPECT_EQ(read_all(*hops[2]), bytes);
  EXPECT_EQ(read_all(*hops[3]), bytes);
}

TEST(OpenCL, AsyncCopiesOrderedByEvents) {
  REQUIRE_OPENCL(2);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {1000});
  Tensor* b = ctx.new_tensor(DType::F32, {1000});
  auto m0 = allocate_tensors(std::span<Tensor* const>(&a, 1), opencl(0)->default_buffer_type());
  auto m1 = allocate_tensors(std::span<Tensor* const>(&b, 1), opencl(1)->default_buffer_type());
  auto be0 = opencl(0)->create_backend();
  auto be1 = opencl(1)->create_backend();
  const auto bytes = random_bytes(4000, 3);
  be0->set_tensor_async(*a, bytes.data(), 0, bytes.size());
  auto event = be0->create_event();
  ASSERT_NE(event, nullptr);
  event->record(*be0);
  event->wait(*be1);
  ASSERT_TRUE(be1->copy_tensor_async(*a, *b));  // device to device, on OpenCL1's queue
  std::vector<uint8_t> back(4000);
  be1->get_tensor_async(*b, back.data(), 0, back.size());
  be1->synchronize();
  event->synchronize();
  EXPECT_EQ(back, bytes);
}

TEST(OpenCL, HostBufferIsHostMemoryAndCopiesBothWays) {
  REQUIRE_OPENCL(1);
  BufferType* host = opencl(0)->host_buffer_type();
  Context ctx;
  Tensor* h = ctx.new_tensor(DType::F16, {300});
  Tensor* d = ctx.new_tensor(DType::F16, {300});
  Tensor* h2 = ctx.new_tensor(DType::F16, {300});
  auto mh = allocate_tensors(std::span<Tensor* const>(&h, 1), *host);
  auto mh2 = allocate_tensors(std::span<Tensor* const>(&h2, 1), *host);
  auto md = allocate_tensors(std::span<Tensor* const>(&d, 1), opencl(0)->default_buffer_type());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(h->data) % host->alignment(), 0u);
  const auto bytes = random_bytes(600, 5);
  std::memcpy(h->data, bytes.data(), bytes.size());  // the CPU writes it directly
  tensor_copy(*h, *d);
  tensor_copy(*d, *h2);
  EXPECT_EQ(std::memcmp(h2->data, bytes.data(), bytes.size()), 0);
  EXPECT_EQ(read_all(*d), bytes);
}

// Builds the same graph twice, runs it on the CPU and on `device`, and
// returns both results as floats.
using Builder = std::function<Tensor*(Context&, std::vector<Tensor*>&)>;

std::vector<float> run_graph(Device& device, const Builder& build, uint32_t seed) {
  Context ctx;
  std::vector<Tensor*> inputs;
  Tensor* out = build(ctx, inputs);
  Graph graph = Graph::build(out);
  auto memory = allocate_tensors(ctx, device.default_buffer_type());
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor* t = inputs[i];
    if (t->type == DType::I32) continue;  // indices were given by the builder through op_params[7] (see ints())
    tensor_from_floats(*t, random_floats(t->nelements(), seed + static_cast<uint32_t>(i)));
  }
  for (Tensor* t : inputs)
    if (t->type == DType::I32) {
      std::vector<float> v(t->nelements());
      for (int64_t k = 0; k < t->nelements(); ++k) v[k] = static_cast<float>((k * 7 + t->op_params[7]) % t->op_params[6]);
      tensor_from_floats(*t, v);
    }
  for (Tensor* node : graph.nodes()) EXPECT_TRUE(device.supports_op(*node)) << op_name(node->op) << " on " << device.name();
  auto backend = device.create_backend();
  backend->compute(graph);
  backend->synchronize();
  return tensor_to_floats(*out);
}

// I32 indices (k * 7 + start) % modulo, for get_rows, set_rows and rope.
Tensor* ints(Context& ctx, std::vector<Tensor*>& inputs, std::initializer_list<int64_t> ne, int modulo, int start = 0) {
  Tensor* t = ctx.new_tensor(DType::I32, ne);
  t->op_params[6] = modulo;
  t->op_params[7] = start;
  inputs.push_back(t);
  return t;
}

Tensor* input(Context& ctx, std::vector<Tensor*>& inputs, DType type, std::initializer_list<int64_t> ne) {
  Tensor* t = ctx.new_tensor(type, ne);
  inputs.push_back(t);
  return t;
}

// `reference` (default: build) runs on the CPU; both must create their inputs
// in the same order.
void expect_close(const Builder& build, double max_nmse, const char* what, const Builder& reference = nullptr) {
  REQUIRE_OPENCL(1);
  const auto want = run_graph(Registry::get().cpu(), reference ? reference : build, 11);
  const auto got = run_graph(*opencl(0), build, 11);
  ASSERT_EQ(want.size(), got.size()) << what;
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (double(want[i]) - got[i]) * (double(want[i]) - got[i]);
    norm += double(want[i]) * want[i];
  }
  EXPECT_LE(err / std::max(norm, 1e-30), max_nmse) << what << ": first values " << want[0] << " vs " << got[0];
}

// The reference dequantizes a to f32 first: the CPU's quantized mul_mat
// also quantizes b, which the OpenCL kernels do not.
std::vector<DType> weight_types() {
  std::vector<DType> types = {DType::F32, DType::F16, DType::BF16};
  types.insert(types.end(), std::begin(kQuantizedTypes), std::end(kQuantizedTypes));
  return types;
}

TEST(OpenCL, MulMatMatchesTheCpuForEveryWeightType) {
  for (DType type : weight_types()) {
    for (int64_t n : {1, 3, 9}) {
      auto build = [&](bool dequantize) {
        return [=](Context& ctx, std::vector<Tensor*>& in) {
          Tensor* a = input(ctx, in, type, {256, 37, 2, 1});
          Tensor* b = input(ctx, in, DType::F32, {256, n, 4, 1});
          if (dequantize) a = cpy(ctx, a, ctx.new_tensor(DType::F32, {256, 37, 2, 1}));
          return mul_mat(ctx, a, b);
        };
      };
      expect_close(build(false), 1e-9, type_name(type).data(), build(true));
    }
  }
  // b with strided elements (the generic kernel), K not a multiple of 16.
  expect_close(
      [](Context& ctx, std::vector<Tensor*>& in) {
        Tensor* a = input(ctx, in, DType::F16, {40, 5});
        Tensor* bt = input(ctx, in, DType::F32, {3, 40});
        return mul_mat(ctx, a, transpose(ctx, bt));
      },
      1e-6, "transposed b");
}

TEST(OpenCL, RowOpsMatchTheCpu) {
  expect_close([](Context& ctx, std::vector<Tensor*>& in) { return rms_norm(ctx, input(ctx, in, DType::F32, {100, 7, 3}), 1e-5f); },
               1e-8, "rms_norm");
  expect_close([](Context& ctx, std::vector<Tensor*>& in) { return norm(ctx, input(ctx, in, DType::F32, {64, 5}), 1e-5f); },
               1e-8, "norm");
  expect_close(
      [](Context& ctx, std::vector<Tensor*>& in) {
        Tensor* a = input(ctx, in, DType::F32, {33, 4, 6, 2});
        Tensor* mask = input(ctx, in, DType::F16, {33, 5, 3, 1});
        return soft_max(ctx, a, mask, 0.7f);
      },
      1e-8, "soft_max with f16 mask");
  for (RopeMode mode : {RopeMode::Normal, RopeMode::NeoX}) {
    expect_close(
        [mode](Context& ctx, std::vector<Tensor*>& in) {
          Tensor* a = input(ctx, in, DType::F32, {12, 3, 5});
          Tensor* pos = ints(ctx, in, {5}, 1000, 3);
          return rope(ctx, a, pos, {.n_dims = 8, .mode = mode});
        },
        1e-8, "rope");
  }
  expect_close([](Context& ctx, std::vector<Tensor*>& in) { return sum_rows(ctx, input(ctx, in, DType::F32, {300, 9})); },
               1e-10, "sum_rows");
  expect_close([](Context& ctx, std::vector<Tensor*>& in) { return argmax(ctx, input(ctx, in, DType::F32, {77, 9})); },
               0, "argmax");
}

TEST(OpenCL, ElementwiseAndDataMovementMatchTheCpu) {
  expect_close(
      [](Context& ctx, std::vector<Tensor*>& in) {
        Tensor* a = input(ctx, in, DType::F32, {10, 6, 4});
        Tensor* b = input(ctx, in, DType::F32, {10, 1, 2});
        Tensor* x = div(ctx, mul(ctx, sub(ctx, add(ctx, a, b), b), a), scale(ctx, b, 2.0f, 3.0f));
        return gelu(ctx, silu(ctx, relu(ctx, sqrt(ctx, sqr(ctx, x)))));
      },
      1e-10, "binary and unary chain");
  expect_close(
      [](Context& ctx, std::vector<Tensor*>& in) {
        Tensor* a = input(ctx, in, DType::F32, {8, 6, 5});
        return cont(ctx, permute(ctx, a, {2, 0, 1, 3}));
      },
      0, "permute + cont");
  expect_close(
      [](Context& ctx, std::vector<Tensor*>& in) {
        Tensor* a = input(ctx, in, DType::F32, {64, 3});
        Tensor* b = ctx.new_tensor(DType::Q8_0, {64, 3});
        Tensor* c = ctx.new_tensor(DType::F16, {64, 3});
        return cpy(ctx, cpy(ctx, a, b), c);
      },
      0, "cpy f32 -> q8_0 -> f16");
  expect_close(
      [](Context& ctx, std::vector<Tensor*>& in) {
        Tensor* a = input(ctx, in, DType::F16, {6, 4, 3});
        Tensor* b = input(ctx, in, DType::F16, {6, 2, 3});
        return concat(ctx, a, b, 1);
      },
      0, "concat");
  // Rows of 256: whole blocks of every type.
  for (DType type : weight_types()) {
    expect_close(
        [type](Context& ctx, std::vector<Tensor*>& in) {
          Tensor* a = input(ctx, in, type, {256, 10, 2});
          Tensor* rows = ints(ctx, in, {5, 2}, 10);
          return get_rows(ctx, a, rows);
        },
        0, "get_rows");
  }
  // The types OpenCL kernels write: the same blocks as the CPU's.
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                     DType::Q5_1}) {
    expect_close(
        [type](Context& ctx, std::vector<Tensor*>& in) {
          Tensor* dst = input(ctx, in, type, {64, 10});
          Tensor* src = input(ctx, in, DType::F32, {64, 3});
          Tensor* rows = ints(ctx, in, {3}, 10, 1);
          return set_rows(ctx, dst, src, rows);
        },
        0, "set_rows");
  }
}

TEST(OpenCL, OutOfRangeRowIndexIsReportedAndWritesNothing) {
  REQUIRE_OPENCL(1);
  Context ctx;
  Tensor* dst = ctx.new_tensor(DType::F32, {16, 4});
  Tensor* src = ctx.new_tensor(DType::F32, {16, 2});
  Tensor* rows = ctx.new_tensor(DType::I32, {2});
  dst->name = "cache";
  Tensor* out = set_rows(ctx, dst, src, rows);
  Graph graph = Graph::build(out);
  auto memory = allocate_tensors(ctx, opencl(0)->default_buffer_type());
  tensor_from_floats(*dst, std::vector<float>(64, 1.0f));
  tensor_from_floats(*src, std::vector<float>(32, 2.0f));
  tensor_from_floats(*rows, {1, 4});  // 4 is out of range
  auto backend = opencl(0)->create_backend();
  backend->compute(graph);
  try {
    backend->synchronize();
    ADD_FAILURE() << "no error reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cache"), std::string::npos) << e.what();
  }
  const auto v = tensor_to_floats(*dst);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(v[i], i / 16 == 1 ? 2.0f : 1.0f) << i;
  backend->synchronize();  // the error was reported once
}

TEST(OpenCL, DeclinesOperandsInOtherMemory) {
  REQUIRE_OPENCL(1);
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8});
  Tensor* b = add(ctx, a, a);
  auto memory = allocate_tensors(std::span<Tensor* const>(&a, 1), Registry::get().cpu().default_buffer_type());
  // It has the kernel, but cannot read the operand where it lies.
  EXPECT_TRUE(opencl(0)->supports_op(*b));
  EXPECT_FALSE(opencl(0)->supports_operand(*b, 0, a->buffer->type()));
  EXPECT_TRUE(opencl(0)->supports_operand(*b, 0, opencl(0)->default_buffer_type()));
  Graph graph = Graph::build(b);
  EXPECT_THROW(opencl(0)->create_backend()->compute(graph), Error);
}

// The two device questions: the kernel (op, types, layout) and the memory an
// operand may be read from (only the device's own).
TEST(OpenCL, CapabilityAndMemoryAreSeparateQuestions) {
  REQUIRE_OPENCL(2);
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::Q8_0, {64, 32});
  Tensor* x = ctx.new_tensor(DType::F32, {64, 4});
  Tensor* mm = mul_mat(ctx, w, x);
  Tensor* i32 = ctx.new_tensor(DType::I32, {64, 4});
  Tensor* bad = ctx.new_node();  // sum_rows of i32: no kernel
  bad->op = Op::SumRows;
  bad->type = DType::F32;
  bad->ne = {1, 4, 1, 1};
  set_contiguous_strides(*bad);
  bad->src[0] = i32;
  for (int d = 0; d < 2; ++d) {
    Device& dev = *opencl(d);
    EXPECT_TRUE(dev.supports_op(*mm)) << dev.name();
    EXPECT_FALSE(dev.supports_op(*bad)) << dev.name();
    for (int slot = 0; slot < 2; ++slot) {
      EXPECT_TRUE(dev.supports_operand(*mm, slot, dev.default_buffer_type())) << dev.name();
      EXPECT_FALSE(dev.supports_operand(*mm, slot, opencl(1 - d)->default_buffer_type())) << dev.name();
      EXPECT_FALSE(dev.supports_operand(*mm, slot, Registry::get().cpu().default_buffer_type())) << dev.name();
      EXPECT_FALSE(dev.supports_operand(*mm, slot, *dev.host_buffer_type())) << dev.name();
    }
  }
}

// The conformance suite on the OpenCL devices after the first. Its
// per-device tests (Devices/Conformance) name the devices ctest discovery
// saw when the tests were built, which is OpenCL0 alone unless POCL_DEVICES
// was set then; OpenCL0 is always among them, so it is not run twice here.
// Everything supports_op accepts must pass, and on PoCL that is every case.
TEST(OpenCL, ConformanceSuitePassesOnTheOtherOpenCLDevices) {
  REQUIRE_OPENCL(2);
  for (int i = 1; opencl(i); ++i) {
    size_t passed = 0, unsupported = 0;
    const auto results = conformance::run_conformance(*opencl(i), conformance::Filter{});
    ASSERT_FALSE(results.empty());
    for (const auto& r : results) {
      EXPECT_NE(r.status, conformance::CaseStatus::Failed) << r.device << " " << r.name << ": " << r.message;
      passed += r.status == conformance::CaseStatus::Passed;
      unsupported += r.status == conformance::CaseStatus::Unsupported;
    }
    std::printf("[ OpenCL%d ] %zu passed, %zu unsupported of %zu cases\n", i, passed, unsupported, results.size());
  }
}

}  // namespace
}  // namespace loom
