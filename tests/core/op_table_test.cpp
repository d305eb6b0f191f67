// The op table (op.h) and the typed op parameters (op_params.h).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "loom/error.h"
#include "loom/ops.h"

namespace loom {
namespace {

TEST(OpTable, OneRowPerOpWithAUniqueName) {
  std::set<std::string_view> names;
  for (size_t i = 0; i < kOpCount; ++i) {
    const Op op = static_cast<Op>(i);
    const OpInfo& info = op_info(op);
    EXPECT_EQ(info.op, op);
    EXPECT_FALSE(info.name.empty()) << i;
    EXPECT_EQ(op_name(op), info.name);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(op_from_name(info.name), op);
    std::string upper(info.name);
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    EXPECT_EQ(op_from_name(upper), op);
    EXPECT_LE(info.min_src, info.max_src);
    EXPECT_LE(info.max_src, kMaxSrc);
    for (int s = info.max_src; s < 8; ++s) EXPECT_FALSE(info.may_overwrite(s)) << info.name << " src " << s;
  }
  EXPECT_EQ(op_name(Op::Count), "?");
  EXPECT_FALSE(op_from_name("no_such_op"));
}

TEST(OpTable, ViewsAndLeavesRunNoKernel) {
  for (Op op : {Op::View, Op::Reshape, Op::Permute, Op::Transpose}) {
    EXPECT_TRUE(op_is_view(op)) << op_name(op);
    EXPECT_FALSE(op_has_kernel(op)) << op_name(op);
  }
  EXPECT_FALSE(op_is_view(Op::None));
  EXPECT_FALSE(op_has_kernel(Op::None));
  EXPECT_FALSE(op_is_view(Op::Count));
  EXPECT_FALSE(op_has_kernel(Op::Count));
  for (Op op : {Op::Add, Op::MulMat, Op::Cpy, Op::SetRows, Op::Concat}) EXPECT_TRUE(op_has_kernel(op)) << op_name(op);
}

TEST(OpTable, InPlaceColumn) {
  for (Op op : {Op::Add, Op::Sub, Op::Mul}) {
    EXPECT_TRUE(op_info(op).may_overwrite(0));
    EXPECT_TRUE(op_info(op).may_overwrite(1));
  }
  for (Op op : {Op::Div, Op::Scale, Op::Sqr, Op::Sqrt, Op::Silu, Op::Gelu, Op::Relu, Op::RmsNorm, Op::Norm, Op::Rope,
                Op::SoftMax, Op::Tanh, Op::Sigmoid, Op::Clamp}) {
    EXPECT_TRUE(op_info(op).may_overwrite(0)) << op_name(op);
    EXPECT_FALSE(op_info(op).may_overwrite(1)) << op_name(op);
  }
  for (Op op : {Op::MulMat, Op::GetRows, Op::SetRows, Op::Cpy, Op::Cont, Op::Concat, Op::SumRows, Op::Argmax,
                Op::Argsort, Op::MulMatId})
    for (int s = 0; s < kMaxSrc; ++s) EXPECT_FALSE(op_info(op).may_overwrite(s)) << op_name(op);
  EXPECT_FALSE(op_info(Op::Add).may_overwrite(-1));
}

// The builders store parameters the accessors give back.
TEST(OpParams, BuildersAndAccessorsRoundTrip) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8, 4, 3});
  Tensor* pos = ctx.new_tensor(DType::I32, {3});

  const ScaleParams sp = scale_params(*scale(ctx, a, 2.5f, -1.0f));
  EXPECT_EQ(sp.scale, 2.5f);
  EXPECT_EQ(sp.bias, -1.0f);
  EXPECT_EQ(norm_params(*rms_norm(ctx, a, 1e-5f)).eps, 1e-5f);
  EXPECT_EQ(norm_params(*norm(ctx, a, 1e-6f)).eps, 1e-6f);
  const RopeParams rp = rope_params(*rope(ctx, a, pos, {4, RopeMode::NeoX, 500000.0f, 0.25f}));
  EXPECT_EQ(rp.n_dims, 4);
  EXPECT_EQ(rp.mode, RopeMode::NeoX);
  EXPECT_EQ(rp.freq_base, 500000.0f);
  EXPECT_EQ(rp.freq_scale, 0.25f);
  EXPECT_EQ(rope_params(*rope(ctx, a, pos, {})).n_dims, 8);  // 0 resolves to ne0
  EXPECT_EQ(soft_max_params(*soft_max(ctx, a, nullptr, 0.125f)).scale, 0.125f);
  EXPECT_EQ(concat_params(*concat(ctx, a, a, 2)).dim, 2);
  EXPECT_EQ(permute_params(*permute(ctx, a, {2, 0, 1, 3})).axis, (std::array<int32_t, 4>{2, 0, 1, 3}));
  EXPECT_EQ(permute_params(*transpose(ctx, a)).axis, (std::array<int32_t, 4>{1, 0, 2, 3}));
}

TEST(OpParams, SettersAndGettersRoundTripOnEveryKind) {
  Tensor t;
  for (const OpInfo& info : kOpTable) {
    t = Tensor{};
    t.op = info.op;
    switch (info.params) {
      case OpParamsKind::None: break;
      case OpParamsKind::Scale:
        set_scale_params(t, {3.0f, 0.5f});
        EXPECT_EQ(scale_params(t).scale, 3.0f);
        EXPECT_EQ(scale_params(t).bias, 0.5f);
        break;
      case OpParamsKind::Norm:
        set_norm_params(t, {1e-3f});
        EXPECT_EQ(norm_params(t).eps, 1e-3f);
        break;
      case OpParamsKind::Rope:
        set_rope_params(t, {6, RopeMode::NeoX, 1e4f, 2.0f});
        EXPECT_EQ(rope_params(t).n_dims, 6);
        EXPECT_EQ(rope_params(t).mode, RopeMode::NeoX);
        EXPECT_EQ(rope_params(t).freq_base, 1e4f);
        EXPECT_EQ(rope_params(t).freq_scale, 2.0f);
        break;
      case OpParamsKind::SoftMax:
        set_soft_max_params(t, {0.5f});
        EXPECT_EQ(soft_max_params(t).scale, 0.5f);
        break;
      case OpParamsKind::Concat:
        set_concat_params(t, {3});
        EXPECT_EQ(concat_params(t).dim, 3);
        break;
      case OpParamsKind::Permute:
        set_permute_params(t, {{3, 2, 1, 0}});
        EXPECT_EQ(permute_params(t).axis, (std::array<int32_t, 4>{3, 2, 1, 0}));
        break;
    }
  }
}

// Reading or writing another op's parameters is a programmer error, caught.
TEST(OpParams, AccessorOnAnotherOpThrows) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8, 4});
  Tensor* s = add(ctx, a, a);
  s->name = "sum";
  EXPECT_THROW(rope_params(*s), Error);
  EXPECT_THROW(set_scale_params(*s, {}), Error);
  try {
    norm_params(*s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'sum'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("add"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
