// mul_mat_id's expert ids are data: an id outside [0, n_expert) is an error
// that names the node and the ids tensor, on the CPU and on OpenCL (each
// device the registry has). The values themselves are checked by the
// conformance suite.
#include <gtest/gtest.h>

#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"
#include "test_devices.h"

namespace loom {
namespace {

void expect_bad_id_reported(Device& device) {
  Context ctx;
  Tensor* experts = ctx.new_tensor(DType::F32, {8, 4, 3});  // 3 experts
  Tensor* x = ctx.new_tensor(DType::F32, {8, 1, 2});
  Tensor* ids = ctx.new_tensor(DType::I32, {2, 2});
  ids->name = "selected";
  Tensor* out = mul_mat_id(ctx, experts, x, ids);
  out->name = "moe_up";
  Graph graph = Graph::build(out);
  auto memory = allocate_tensors(ctx, device.default_buffer_type());
  tensor_from_floats(*experts, std::vector<float>(96, 1.0f));
  tensor_from_floats(*x, std::vector<float>(16, 1.0f));
  tensor_from_floats(*ids, {0, 2, 1, 3});  // 3 is not an expert
  auto backend = device.create_backend();
  try {
    backend->compute(graph);
    backend->synchronize();
    ADD_FAILURE() << device.name() << ": no error reported";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("moe_up"), std::string::npos) << msg;
    EXPECT_NE(msg.find("selected"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  }
}

TEST(MulMatId, OutOfRangeExpertIdIsAnErrorOnTheCpu) { expect_bad_id_reported(Registry::get().cpu()); }

TEST(MulMatId, OutOfRangeExpertIdIsAnErrorOnOpenCl) {
  REQUIRE_OPENCL(1);
  expect_bad_id_reported(*test::opencl(0));
}

}  // namespace
}  // namespace loom
