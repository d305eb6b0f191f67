// The one way messages, reports and graph drawings name a tensor.
#include <gtest/gtest.h>

#include "loom/context.h"
#include "loom/tensor.h"

namespace loom {
namespace {

TEST(TensorLabel, NamedAndUnnamedInEveryStyle) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F16, {4, 3});
  EXPECT_EQ(tensor_label(*t), "(unnamed [4, 3, 1, 1] f16)");
  EXPECT_EQ(tensor_label(*t, TensorLabel::QuotedWithShape), "(unnamed [4, 3, 1, 1] f16)");
  EXPECT_EQ(tensor_label(*t, TensorLabel::Bare), "([4, 3, 1, 1] f16)");
  t->name = "wq";
  EXPECT_EQ(tensor_label(*t), "'wq'");
  EXPECT_EQ(tensor_label(*t, TensorLabel::QuotedWithShape), "'wq' [4, 3, 1, 1] f16");
  EXPECT_EQ(tensor_label(*t, TensorLabel::Bare), "wq");
}

}  // namespace
}  // namespace loom
