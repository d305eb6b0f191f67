#include <gtest/gtest.h>

#include <cmath>

#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"

namespace loom {
namespace {

TEST(Ops, MulMatShapeAndBroadcast) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::Q4_0, {64, 10, 2, 1});
  Tensor* b = ctx.new_tensor(DType::F32, {64, 7, 6, 3});
  Tensor* c = mul_mat(ctx, a, b);
  EXPECT_EQ(c->ne, (std::array<int64_t, 4>{10, 7, 6, 3}));
  EXPECT_EQ(c->type, DType::F32);
  Tensor* bad = ctx.new_tensor(DType::F32, {32, 7});
  EXPECT_THROW(mul_mat(ctx, a, bad), Error);
  Tensor* bad_batch = ctx.new_tensor(DType::F32, {64, 7, 3});
  EXPECT_THROW(mul_mat(ctx, a, bad_batch), Error);
}

TEST(Ops, ErrorsNameTheOpAndShapes) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {4, 3});
  a->name = "left";
  Tensor* b = ctx.new_tensor(DType::F32, {5, 3});
  try {
    add(ctx, a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'left'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5, 3, 1, 1]"), std::string::npos) << msg;
  }
}

TEST(Ops, QuantizedTensorNeedsWholeBlocks) {
  Context ctx;
  EXPECT_THROW(ctx.new_tensor(DType::Q8_0, {33, 2}), Error);
}

TEST(Ops, ViewsShareTheRootSource) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8, 4, 2});
  Tensor* t = transpose(ctx, a);
  EXPECT_EQ(t->ne[0], 4);
  EXPECT_EQ(t->nb[0], a->nb[1]);
  EXPECT_FALSE(t->is_contiguous());
  Tensor* v = view_2d(ctx, t, 2, 2, t->nb[1], a->nb[1]);
  EXPECT_EQ(v->view_src, a);
  EXPECT_EQ(v->view_offs, a->nb[1]);
  EXPECT_THROW(reshape(ctx, t, {32, 2, 1, 1}), Error);  // not contiguous
  EXPECT_THROW(view_1d(ctx, a, 65, 0), Error);          // past the end
}

TEST(Ops, PermuteMovesDims) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {2, 3, 4, 5});
  Tensor* p = permute(ctx, a, {0, 2, 1, 3});
  EXPECT_EQ(p->ne, (std::array<int64_t, 4>{2, 4, 3, 5}));
  EXPECT_EQ(p->nb[1], a->nb[2]);
  EXPECT_THROW(permute(ctx, a, {0, 0, 1, 2}), Error);
}

TEST(Ops, SetRowsAndCpyAreViewsOfTheirDestination) {
  Context ctx;
  Tensor* cache = ctx.new_tensor(DType::F16, {16, 100});
  Tensor* rows = ctx.new_tensor(DType::F32, {16, 3});
  Tensor* idx = ctx.new_tensor(DType::I32, {3});
  Tensor* r = set_rows(ctx, cache, rows, idx);
  EXPECT_EQ(r->view_src, cache);
  EXPECT_EQ(r->type, DType::F16);
  Tensor* dst = ctx.new_tensor(DType::Q8_0, {32, 2});
  Tensor* src = ctx.new_tensor(DType::F32, {32, 2});
  EXPECT_EQ(cpy(ctx, src, dst)->view_src, dst);
  Tensor* src_other = ctx.new_tensor(DType::F32, {64, 1});
  EXPECT_THROW(cpy(ctx, src_other, dst), Error);  // quantized rows must line up
}

TEST(Ops, RopeAndSoftMaxChecks) {
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::F32, {64, 8, 5});
  Tensor* pos = ctx.new_tensor(DType::I32, {5});
  EXPECT_EQ(rope(ctx, q, pos, {})->ne, q->ne);
  Tensor* pos_bad = ctx.new_tensor(DType::I32, {4});
  EXPECT_THROW(rope(ctx, q, pos_bad, {}), Error);
  EXPECT_THROW(rope(ctx, q, pos, {.n_dims = 63}), Error);
  // Freq factors: f32, one per rotated pair at least.
  Tensor* factors = ctx.new_tensor(DType::F32, {16});
  EXPECT_EQ(rope(ctx, q, pos, {.n_dims = 32}, factors)->src[2], factors);
  EXPECT_THROW(rope(ctx, q, pos, {}, factors), Error);  // 64 dims need 32 factors
  EXPECT_THROW(rope(ctx, q, pos, {.n_dims = 32}, ctx.new_tensor(DType::F16, {16})), Error);
  Tensor* kq = ctx.new_tensor(DType::F32, {10, 5, 8});
  Tensor* mask = ctx.new_tensor(DType::F16, {10, 8});
  EXPECT_NO_THROW(soft_max(ctx, kq, mask, 0.1f));
  Tensor* mask_short = ctx.new_tensor(DType::F32, {10, 4});
  EXPECT_THROW(soft_max(ctx, kq, mask_short), Error);
  Tensor* sinks = ctx.new_tensor(DType::F32, {8});  // one per head (kq.ne2)
  EXPECT_EQ(soft_max(ctx, kq, mask, 0.1f, sinks)->src[2], sinks);
  EXPECT_THROW(soft_max(ctx, kq, mask, 0.1f, ctx.new_tensor(DType::F32, {5})), Error);
  EXPECT_THROW(soft_max(ctx, kq, mask, 0.1f, ctx.new_tensor(DType::F16, {8})), Error);
}

TEST(Ops, MulMatIdShapes) {
  Context ctx;
  Tensor* experts = ctx.new_tensor(DType::Q4_0, {64, 96, 8});  // [n_embd, n_ff, n_expert]
  Tensor* ids = ctx.new_tensor(DType::I32, {2, 5});            // [n_used, n_tokens]
  Tensor* x = ctx.new_tensor(DType::F32, {64, 1, 5});          // the same input for every expert
  Tensor* up = mul_mat_id(ctx, experts, x, ids);
  EXPECT_EQ(up->ne, (std::array<int64_t, 4>{96, 2, 5, 1}));
  EXPECT_EQ(up->type, DType::F32);
  EXPECT_EQ(up->src[2], ids);
  Tensor* down_w = ctx.new_tensor(DType::F16, {96, 64, 8});
  EXPECT_EQ(mul_mat_id(ctx, down_w, up, ids)->ne, (std::array<int64_t, 4>{64, 2, 5, 1}));  // one input per slot
  // Errors: inner dims, tokens, slots, id type, b type, a 4-D weight.
  EXPECT_THROW(mul_mat_id(ctx, experts, ctx.new_tensor(DType::F32, {32, 1, 5}), ids), Error);
  EXPECT_THROW(mul_mat_id(ctx, experts, ctx.new_tensor(DType::F32, {64, 1, 4}), ids), Error);
  EXPECT_THROW(mul_mat_id(ctx, experts, ctx.new_tensor(DType::F32, {64, 3, 5}), ids), Error);
  EXPECT_THROW(mul_mat_id(ctx, experts, x, ctx.new_tensor(DType::F32, {2, 5})), Error);
  EXPECT_THROW(mul_mat_id(ctx, experts, ctx.new_tensor(DType::F16, {64, 1, 5}), ids), Error);
  EXPECT_THROW(mul_mat_id(ctx, ctx.new_tensor(DType::F32, {64, 96, 4, 2}), x, ids), Error);
  EXPECT_THROW(mul_mat_id(ctx, experts, x, ctx.new_tensor(DType::I32, {2, 5, 2})), Error);
}

TEST(Ops, ArgsortAndTopK) {
  Context ctx;
  Tensor* logits = ctx.new_tensor(DType::F32, {8, 5, 2});
  Tensor* s = argsort(ctx, logits, SortOrder::Descending);
  EXPECT_EQ(s->type, DType::I32);
  EXPECT_EQ(s->ne, logits->ne);
  EXPECT_EQ(argsort_params(*s).order, SortOrder::Descending);
  Tensor* k = top_k(ctx, logits, 2);
  EXPECT_EQ(k->op, Op::View);
  EXPECT_EQ(k->ne, (std::array<int64_t, 4>{2, 5, 2, 1}));
  ASSERT_NE(k->view_src, nullptr);
  EXPECT_EQ(k->view_src->op, Op::Argsort);
  EXPECT_EQ(argsort_params(*k->view_src).order, SortOrder::Descending);
  EXPECT_EQ(k->nb[1], 8 * sizeof(int32_t));  // rows keep the sorted row's stride
  EXPECT_THROW(top_k(ctx, logits, 0), Error);
  EXPECT_THROW(top_k(ctx, logits, 9), Error);
  EXPECT_THROW(argsort(ctx, ctx.new_tensor(DType::F16, {8, 5}), SortOrder::Ascending), Error);
  EXPECT_THROW(argsort(ctx, logits, static_cast<SortOrder>(7)), Error);
}

TEST(Ops, TanhSigmoidClamp) {
  Context ctx;
  Tensor* a = ctx.new_tensor(DType::F32, {8, 3});
  EXPECT_EQ(loom::tanh(ctx, a)->op, Op::Tanh);
  EXPECT_EQ(sigmoid(ctx, a)->ne, a->ne);
  const ClampParams p = clamp_params(*clamp(ctx, a, 6.103515625e-5f, INFINITY));
  EXPECT_EQ(p.min, 6.103515625e-5f);
  EXPECT_EQ(p.max, INFINITY);
  EXPECT_THROW(clamp(ctx, a, 1.0f, -1.0f), Error);
  EXPECT_THROW(clamp(ctx, a, NAN, 1.0f), Error);
  EXPECT_THROW(loom::tanh(ctx, ctx.new_tensor(DType::F16, {8})), Error);
}

TEST(Graph, TopologicalOrderLeafsAndNodes) {
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {4});
  Tensor* w = ctx.new_tensor(DType::F32, {4});
  Tensor* y = mul(ctx, x, w);
  Tensor* z = add(ctx, y, silu(ctx, y));
  Graph g = Graph::build(z);
  ASSERT_EQ(g.leafs().size(), 2u);
  ASSERT_EQ(g.nodes().size(), 3u);
  EXPECT_EQ(g.nodes().front(), y);
  EXPECT_EQ(g.nodes().back(), z);
  EXPECT_TRUE(z->flags & kFlagOutput);
}

TEST(Graph, DeepChainsDoNotOverflowTheStack) {
  Context ctx;
  Tensor* t = ctx.new_tensor(DType::F32, {4});
  for (int i = 0; i < 100000; ++i) t = relu(ctx, t);
  Graph g = Graph::build(t);
  EXPECT_EQ(g.nodes().size(), 100000u);
}

}  // namespace
}  // namespace loom
