// Graph allocator rules: leafs and nodes, placed tensors left alone, views,
// inputs, outputs, in-place reuse, the lower bound, reserve/allocate,
// concurrency groups, observability.
#include "loom/graph_alloc.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "alloc/test_graphs.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

using testing::FakeBufferType;

Tensor* input(Context& ctx, std::initializer_list<int64_t> ne, const char* name) {
  Tensor* t = ctx.new_tensor(DType::F32, ne);
  t->name = name;
  t->flags |= kFlagInput;
  return t;
}

Tensor* weight(Context& ctx, std::initializer_list<int64_t> ne, const char* name) {
  Tensor* t = ctx.new_tensor(DType::F32, ne);
  t->name = name;
  t->flags |= kFlagWeight;
  return t;
}

Tensor* named(Tensor* t, const char* name) {
  t->name = name;
  return t;
}

const PlannedBlock* block_of(const GraphAllocator& ga, const Tensor* t) {
  for (const PlannedBlock& b : ga.plan())
    for (const Tensor* m : b.tensors)
      if (m == t) return &b;
  return nullptr;
}

// Blocks alive at the same step in the same buffer never overlap, and every
// planned tensor sits where the plan says.
void expect_valid_plan(const GraphAllocator& ga) {
  const auto& plan = ga.plan();
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedBlock& a = plan[i];
    for (const Tensor* t : a.tensors) {
      ASSERT_EQ(t->buffer, ga.buffers(a.type)[a.chunk]) << a.names[0];
      EXPECT_EQ(t->buffer->offset_of(*t), a.offset) << a.names[0];
    }
    for (size_t j = i + 1; j < plan.size(); ++j) {
      const PlannedBlock& b = plan[j];
      if (a.type != b.type || a.chunk != b.chunk || a.last < b.first || b.last < a.first) continue;
      EXPECT_TRUE(a.offset + a.size <= b.offset || b.offset + b.size <= a.offset)
          << a.names[0] << " and " << b.names[0] << " overlap while both alive";
    }
  }
}

TEST(GraphAlloc, LeafsAndNodes) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = input(ctx, {64, 4}, "x");
  Tensor* w = weight(ctx, {64, 32}, "w");
  Tensor* h = named(mul_mat(ctx, w, x), "h");
  Tensor* y = named(mul_mat(ctx, weight(ctx, {32, 8}, "w2"), h), "y");
  Graph g = Graph::build(y);
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  EXPECT_NE(x->data, nullptr);  // an unplaced leaf is an input: we give it memory
  EXPECT_EQ(w->buffer, nullptr);  // weights are the tensor allocator's job
  EXPECT_TRUE(ga.owns(*h) && ga.owns(*y) && ga.owns(*x));
  EXPECT_EQ(block_of(ga, x)->first, 0u);
  EXPECT_EQ(block_of(ga, h)->first, 0u);
  EXPECT_EQ(block_of(ga, y)->first, 1u);
  EXPECT_EQ(ga.plan().size(), 3u);
}

TEST(GraphAlloc, PlacedTensorsAreLeftAlone) {
  FakeBufferType compute("compute"), weights("weights");
  Context ctx;
  Tensor* x = input(ctx, {64, 4}, "x");
  Tensor* w = weight(ctx, {64, 64}, "w");
  Tensor* cache = named(ctx.new_tensor(DType::F32, {64, 16}), "cache");
  std::vector<Tensor*> placed{w, cache};
  allocate_tensors(placed, weights);
  void* w_data = w->data;
  auto w_buffer = w->buffer;
  Tensor* h = mul_mat(ctx, w, x);
  Tensor* stored = cpy(ctx, h, view_2d(ctx, cache, 64, 4, cache->nb[1], 0));
  Tensor* read = view_2d(ctx, stored, 64, 8, cache->nb[1], 0);
  Tensor* out = named(scale(ctx, read, 2.0f), "out");
  Graph g = Graph::build(out);
  GraphAllocator ga({&compute});
  ga.allocate(g);
  expect_valid_plan(ga);
  EXPECT_EQ(w->data, w_data);
  EXPECT_EQ(w->buffer, w_buffer);
  EXPECT_FALSE(ga.owns(*w));
  EXPECT_FALSE(ga.owns(*cache));
  EXPECT_EQ(block_of(ga, w), nullptr);
  EXPECT_EQ(block_of(ga, cache), nullptr);
  EXPECT_EQ(stored->data, cache->data);  // cpy writes through a view of the cache
  EXPECT_EQ(read->buffer, cache->buffer);
}

TEST(GraphAlloc, ViewsOwnNoMemoryAndKeepTheirSourceAlive) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = input(ctx, {32, 8}, "x");
  Tensor* a = named(mul_mat(ctx, weight(ctx, {32, 64}, "w"), x), "a");  // [64, 8]
  Tensor* r = reshape(ctx, a, {8, 8, 8, 1});
  Tensor* t = permute(ctx, r, {1, 0, 2, 3});
  Tensor* c = named(cont(ctx, t), "c");  // reads a only through two views
  Tensor* big = named(mul_mat(ctx, weight(ctx, {32, 512}, "w2"), x), "big");
  Tensor* out = named(add(ctx, c, named(sum_rows(ctx, big), "sb")), "out");
  Graph g = Graph::build(out);
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  for (const PlannedBlock& b : ga.plan())
    for (const Tensor* m : b.tensors) EXPECT_FALSE(m->is_view()) << m->name;
  EXPECT_EQ(r->data, a->data);
  EXPECT_EQ(t->data, a->data);
  EXPECT_EQ(t->buffer, a->buffer);
  size_t step_c = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i] == c) step_c = i;
  EXPECT_GE(block_of(ga, a)->last, step_c);
}

TEST(GraphAlloc, ViewOfATensorInAnotherBufferType) {
  FakeBufferType t0("gpu"), t1("host");
  Context ctx;
  Tensor* x = input(ctx, {16, 4}, "x");
  Tensor* a = named(mul_mat(ctx, weight(ctx, {16, 16}, "w"), x), "a");
  Tensor* v = reshape(ctx, a, {4, 4, 4, 1});
  Tensor* out = named(cont(ctx, permute(ctx, v, {1, 0, 2, 3})), "out");
  Graph g = Graph::build(out);
  GraphAllocator ga({&t0, &t1});
  AllocOptions opts;
  opts.assign = [&](const Tensor& t) -> size_t { return &t == a ? 1 : 0; };  // the view's node says 0
  ga.allocate(g, opts);
  expect_valid_plan(ga);
  EXPECT_EQ(block_of(ga, a)->type, 1u);
  EXPECT_EQ(&v->buffer->type(), &t1);  // a view lives where its source lives
  EXPECT_EQ(v->data, a->data);
  EXPECT_EQ(&out->buffer->type(), &t0);
  EXPECT_EQ(ga.report().types[1].n_tensors, 1u);
}

TEST(GraphAlloc, InputsComeFirstAndLiveUntilTheirLastUse) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = input(ctx, {256}, "x");
  Tensor* cur = named(scale(ctx, input(ctx, {256}, "y"), 1.0f), "s0");
  for (int i = 0; i < 6; ++i) cur = cont(ctx, cur);
  Tensor* out = named(add(ctx, cur, x), "out");  // x is read by the last node only
  Graph g = Graph::build(out);
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  for (int i : {0, 1}) {  // inputs are allocated first
    EXPECT_TRUE(ga.plan()[i].tensors[0]->flags & kFlagInput);
    EXPECT_TRUE(ga.plan()[i].input);
  }
  EXPECT_EQ(block_of(ga, x)->first, 0u);
  EXPECT_EQ(block_of(ga, x)->last, g.nodes().size() - 1);
  EXPECT_NE(out->data, x->data);  // an input is never reused in place
}

TEST(GraphAlloc, OutputsAreNeverFreed) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = input(ctx, {256}, "x");
  Tensor* early = named(scale(ctx, x, 2.0f), "early");
  Tensor* cur = early;
  for (int i = 0; i < 6; ++i) cur = named(cont(ctx, cur), "c");
  Tensor* last = named(silu(ctx, cur), "last");
  Graph g = Graph::build(std::vector<Tensor*>{early, last});
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  EXPECT_EQ(block_of(ga, early)->last, ga.report().n_steps - 1);
  EXPECT_EQ(block_of(ga, early)->tensors.size(), 1u);  // no node took it over in place
}

TEST(GraphAlloc, InPlaceReuseWhenAllowed) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = input(ctx, {64, 8}, "x");
  Tensor* a = named(mul_mat(ctx, weight(ctx, {64, 64}, "w"), x), "a");
  Tensor* b = named(silu(ctx, a), "b");
  Tensor* c = named(scale(ctx, b, 0.5f), "c");
  Tensor* d = named(rms_norm(ctx, reshape(ctx, c, {32, 16, 1, 1}), 1e-5f), "d");  // through a whole reshape
  Tensor* e = named(cont(ctx, d), "e");  // cont never runs in place
  Tensor* f = named(soft_max(ctx, e), "f");
  Graph g = Graph::build(f);
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  EXPECT_EQ(b->data, a->data);
  EXPECT_EQ(c->data, a->data);
  EXPECT_EQ(d->data, a->data);
  EXPECT_NE(e->data, d->data);
  EXPECT_EQ(f->data, e->data);
  EXPECT_EQ(ga.report().types[0].n_inplace, 4u);
}

TEST(GraphAlloc, NoInPlaceWhenUnsafe) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = input(ctx, {64, 8}, "x");
  Tensor* w = weight(ctx, {64, 64}, "w");
  Tensor* a = named(mul_mat(ctx, w, x), "a");
  Tensor* b = named(silu(ctx, a), "b");  // a is read again later
  Tensor* c = named(add(ctx, b, a), "c");
  Tensor* p = named(mul_mat(ctx, w, x), "p");
  Tensor* pt = named(relu(ctx, transpose(ctx, p)), "pt");  // layouts differ
  Tensor* q = named(mul_mat(ctx, w, x), "q");
  Tensor* qv = named(sqr(ctx, view_2d(ctx, q, 64, 4, q->nb[1], q->nb[1] * 4)), "qv");  // part of q only
  Tensor* xs = named(sqrt(ctx, x), "xs");                                              // x is an input
  Tensor* o = named(mul_mat(ctx, w, x), "o");
  Tensor* os = named(gelu(ctx, o), "os");  // o is an output
  Tensor* r = named(mul_mat(ctx, w, x), "r");
  Tensor* rr = named(div(ctx, r, reshape(ctx, r, {64, 8, 1, 1})), "rr");  // r read through a view too
  Graph g = Graph::build(std::vector<Tensor*>{c, pt, qv, xs, o, os, rr});
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  EXPECT_NE(b->data, a->data);
  EXPECT_EQ(c->data, b->data);  // b has no other reader: c takes it over
  EXPECT_NE(pt->data, p->data);
  EXPECT_NE(qv->data, q->data);
  EXPECT_NE(xs->data, x->data);
  EXPECT_NE(os->data, o->data);
  EXPECT_NE(rr->data, r->data);
  EXPECT_EQ(ga.report().types[0].n_inplace, 1u);
}

TEST(GraphAlloc, LowerBoundOfAChain) {
  FakeBufferType type("fake", 256);
  Context ctx;
  Tensor* x = input(ctx, {256}, "x");                                  // 1024 B, steps 0-0
  Tensor* a = named(mul_mat(ctx, weight(ctx, {256, 512}, "w"), x), "a");  // 2048 B, steps 0-1
  Tensor* b = named(cont(ctx, a), "b");                                // 2048 B, steps 1-2
  Tensor* c = named(mul_mat(ctx, weight(ctx, {512, 100}, "w2"), b), "c");  // 400 -> 512 B, step 2
  Graph g = Graph::build(c);
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  const BufferTypeReport& r = ga.report().types[0];
  EXPECT_EQ(r.lower_bound, 4096u);  // step 1: a and b
  EXPECT_EQ(r.peak, 4096u);
  EXPECT_DOUBLE_EQ(r.ratio(), 1.0);
  EXPECT_EQ(block_of(ga, c)->size, 512u);  // alignment rounding counts
}

TEST(GraphAlloc, RandomDagsArePlannedSafely) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    FakeBufferType type("fake");
    Context ctx;
    Graph g = testing::build_random_dag(ctx, seed, 200, 512);
    GraphAllocator ga({&type});
    ga.allocate(g);
    expect_valid_plan(ga);
    const BufferTypeReport& r = ga.report().types[0];
    EXPECT_GE(r.peak, r.lower_bound) << "seed " << seed;
    EXPECT_LE(r.ratio(), 1.5) << "seed " << seed;
    for (Tensor* n : g.nodes()) EXPECT_TRUE(n->nbytes() == 0 || n->data) << n->name;
  }
}

TEST(GraphAlloc, SplitsIntoChunksAtMaxSize) {
  FakeBufferType type("small", 64, 4096);
  Context ctx;
  Tensor* x = input(ctx, {512}, "x");  // 2 KiB
  Tensor* a = named(scale(ctx, x, 1.0f), "a");
  Tensor* b = named(add(ctx, a, x), "b");
  Tensor* c = named(add(ctx, b, a), "c");  // x, a, b alive together: 6 KiB > 4 KiB
  Graph g = Graph::build(c);
  GraphAllocator ga({&type});
  ga.allocate(g);
  expect_valid_plan(ga);
  EXPECT_GE(ga.report().types[0].n_chunks, 2u);
  for (const auto& buf : ga.buffers(0)) EXPECT_LE(buf->size(), 4096u);
}

TEST(GraphAlloc, TensorLargerThanMaxSizeIsAnError) {
  FakeBufferType type("small", 64, 1024);
  Context ctx;
  Tensor* out = named(scale(ctx, input(ctx, {1024}, "x"), 1.0f), "huge");
  Graph g = Graph::build(out);
  GraphAllocator ga({&type});
  try {
    ga.allocate(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos) << e.what();
  }
}

TEST(GraphAlloc, OutOfMemoryNamesTheSizes) {
  FakeBufferType type("tiny", 64, SIZE_MAX, 1000);
  Context ctx;
  Graph g = Graph::build(named(scale(ctx, input(ctx, {1024}, "x"), 1.0f), "y"));
  GraphAllocator ga({&type});
  try {
    ga.allocate(g);
    FAIL() << "expected OutOfMemory";
  } catch (const OutOfMemory& e) {
    EXPECT_EQ(e.requested(), 8192u);
    EXPECT_NE(std::string(e.what()).find("tiny"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace loom
