// Graph allocator: reserve then allocate, concurrency groups, debug output,
// report and trace, ownership by identity, and real execution on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "alloc/test_graphs.h"
#include "loom/graph_alloc.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

using testing::FakeBufferType;
using testing::LlamaShape;

LlamaShape small_llama(int n_tokens) {
  LlamaShape s;
  s.n_layer = 2;
  s.n_embd = 64;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 16;
  s.n_ff = 160;
  s.n_vocab = 50;
  s.n_ctx = 32;
  s.n_tokens = n_tokens;
  return s;
}

// A llama graph whose KV cache is placed in `kv`.
struct Model {
  Context ctx;
  testing::LlamaGraph g;
  TensorAllocation cache;
  Model(const LlamaShape& s, BufferType& kv) {
    g = testing::build_llama_graph(ctx, s);
    cache = allocate_tensors(g.cache, kv);
  }
};

TEST(GraphReserve, AllocateAfterReserveReusesBuffersAndOffsets) {
  FakeBufferType compute("compute"), kv("kv");
  GraphAllocator ga({&compute});
  Model worst(small_llama(32), kv);
  ga.reserve(worst.g.graph);
  const size_t allocs = compute.n_allocs;
  const size_t reserved = ga.buffer_size(0);
  const std::vector<PlannedBlock> reserved_plan = ga.plan();
  EXPECT_GT(allocs, 0u);
  EXPECT_EQ(reserved, ga.report().types[0].peak);
  EXPECT_EQ(worst.g.logits->data, nullptr);  // reserve places nothing

  ga.allocate(worst.g.graph);  // the graph measured: exactly the plan measured
  EXPECT_EQ(compute.n_allocs, allocs);
  ASSERT_EQ(ga.plan().size(), reserved_plan.size());
  for (size_t i = 0; i < reserved_plan.size(); ++i) {
    EXPECT_EQ(ga.plan()[i].offset, reserved_plan[i].offset);
    EXPECT_EQ(ga.plan()[i].chunk, reserved_plan[i].chunk);
  }

  for (int n_tokens : {32, 17, 8, 1}) {  // same or smaller shapes: no reallocation
    Model m(small_llama(n_tokens), kv);
    ga.allocate(m.g.graph);
    EXPECT_EQ(compute.n_allocs, allocs) << n_tokens;
    EXPECT_EQ(ga.buffer_size(0), reserved) << n_tokens;
    EXPECT_EQ(ga.report().types[0].strategy, "reserved") << n_tokens;
    EXPECT_LE(ga.report().types[0].peak, reserved);
  }
}

TEST(GraphReserve, LargerGraphGrowsOrReportsTheSizes) {
  FakeBufferType compute("compute"), kv("kv");
  GraphAllocator ga({&compute});
  Model worst(small_llama(8), kv);
  ga.reserve(worst.g.graph);
  const size_t allocs = compute.n_allocs;
  const size_t reserved = ga.buffer_size(0);
  Model bigger(small_llama(32), kv);
  AllocOptions fixed;
  fixed.allow_grow = false;
  try {
    ga.allocate(bigger.g.graph, fixed);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("compute"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(reserved) + " are reserved"), std::string::npos) << msg;
  }
  ga.allocate(bigger.g.graph);
  EXPECT_GT(compute.n_allocs, allocs);
  EXPECT_GT(ga.buffer_size(0), reserved);
  EXPECT_GE(ga.buffer_size(0), ga.report().types[0].peak);
}

TEST(GraphReserve, PlansAreDeterministic) {
  FakeBufferType compute("compute"), kv("kv");
  Model a(small_llama(16), kv), b(small_llama(16), kv);
  GraphAllocator ga({&compute}), gb({&compute});
  ga.allocate(a.g.graph);
  gb.allocate(b.g.graph);
  ASSERT_EQ(ga.plan().size(), gb.plan().size());
  for (size_t i = 0; i < ga.plan().size(); ++i) {
    EXPECT_EQ(ga.plan()[i].offset, gb.plan()[i].offset);
    EXPECT_EQ(ga.plan()[i].names, gb.plan()[i].names);
  }
  EXPECT_EQ(ga.report().to_json(), gb.report().to_json());
}

TEST(GraphReserve, LlamaLayerStackIsWithinFivePercentOfTheLowerBound) {
  FakeBufferType compute("compute"), kv("kv");
  Model m(LlamaShape{}, kv);  // 22 layers, 2048 wide, 512 tokens
  GraphAllocator ga({&compute});
  ga.reserve(m.g.graph);
  const BufferTypeReport& r = ga.report().types[0];
  EXPECT_LE(r.ratio(), 1.05) << ga.report().to_string();
  EXPECT_GE(r.ratio(), 1.0);
  EXPECT_GE(r.n_inplace, 22u * 6);  // norm weights, rope q/k, soft_max, silu, gate*up, residuals
}

// Tensors two different nodes of one group touch never share memory.
void expect_group_disjoint(const Schedule& s) {
  auto root = [](Tensor* t) { return t->view_src ? t->view_src : t; };
  for (const auto& group : s.groups) {
    for (size_t i = 0; i < group.size(); ++i)
      for (size_t j = i + 1; j < group.size(); ++j) {
        auto touched = [&](Tensor* n) {
          std::set<Tensor*> ts{root(n)};
          for (Tensor* src : n->src)
            if (src) ts.insert(root(src));
          return ts;
        };
        for (Tensor* x : touched(group[i]))
          for (Tensor* y : touched(group[j])) {
            if (x == y || !x->data || !y->data || x->buffer != y->buffer) continue;  // a shared read is fine
            const auto* xa = static_cast<const char*>(x->data);
            const auto* ya = static_cast<const char*>(y->data);
            EXPECT_TRUE(xa + x->nbytes() <= ya || ya + y->nbytes() <= xa)
                << x->name << " and " << y->name << " share memory within one group";
          }
      }
  }
}

TEST(GraphConcurrency, NodesOfOneGroupNeverShareMemory) {
  FakeBufferType type("fake");
  Context ctx;
  auto w = [&](int64_t a, int64_t b) {
    Tensor* t = ctx.new_tensor(DType::F32, {a, b});
    t->flags |= kFlagWeight;
    return t;
  };
  Tensor* x = ctx.new_tensor(DType::F32, {64, 16});
  x->name = "x";
  Tensor* h = mul_mat(ctx, w(64, 64), x);
  h->name = "h";
  Tensor* q = mul_mat(ctx, w(64, 64), h);
  q->name = "q";
  Tensor* k = mul_mat(ctx, w(64, 64), h);
  k->name = "k";
  Tensor* qs = silu(ctx, q);  // in sequence q is free by now; in a group it is not
  qs->name = "qs";
  Tensor* ks = scale(ctx, k, 2.0f);
  ks->name = "ks";
  Tensor* hs = scale(ctx, h, 3.0f);  // reads h next to qs and ks
  hs->name = "hs";
  Tensor* out = add(ctx, add(ctx, qs, ks), hs);
  out->name = "out";
  Graph g = Graph::build(out);
  Schedule s;
  s.groups = {{h}, {q, k}, {qs, ks, hs}};
  for (Tensor* n : g.nodes())
    if (n != h && n != q && n != k && n != qs && n != ks && n != hs) s.groups.push_back({n});
  GraphAllocator ga({&type});
  AllocOptions opts;
  opts.schedule = &s;
  ga.allocate(g, opts);
  expect_group_disjoint(s);
  EXPECT_EQ(qs->data, q->data);  // in place within its own node is still fine
  EXPECT_EQ(ks->data, k->data);
  EXPECT_EQ(hs->data, h->data);  // q and k, h's other readers, ran in an earlier group

  // Two readers of one tensor in the same group: neither may take it over.
  Context ctx2;
  Tensor* a = ctx2.new_tensor(DType::F32, {64, 4});
  Tensor* m = mul_mat(ctx2, [&] {
    Tensor* t = ctx2.new_tensor(DType::F32, {64, 64});
    t->flags |= kFlagWeight;
    return t;
  }(), a);
  Tensor* r1 = silu(ctx2, m);
  Tensor* r2 = scale(ctx2, m, 2.0f);
  Graph g2 = Graph::build(std::vector<Tensor*>{r1, r2});
  Schedule s2;
  s2.groups = {{m}, {r1, r2}};
  GraphAllocator gb({&type});
  AllocOptions o2;
  o2.schedule = &s2;
  gb.allocate(g2, o2);
  EXPECT_NE(r1->data, m->data);
  EXPECT_NE(r2->data, m->data);
  expect_group_disjoint(s2);
  gb.allocate(g2);  // in sequence the last reader may take it over
  EXPECT_EQ(r2->data, m->data);
  EXPECT_EQ(gb.report().types[0].n_inplace, 1u);
}

TEST(GraphConcurrency, InvalidSchedulesAreRejected) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = ctx.new_tensor(DType::F32, {8});
  Tensor* a = scale(ctx, x, 1.0f);
  a->name = "a";
  Tensor* b = silu(ctx, a);
  b->name = "b";
  Graph g = Graph::build(b);
  GraphAllocator ga({&type});
  auto run = [&](std::vector<std::vector<Tensor*>> groups, const char* expected) {
    Schedule s;
    s.groups = std::move(groups);
    AllocOptions o;
    o.schedule = &s;
    try {
      ga.allocate(g, o);
      ADD_FAILURE() << "expected an error mentioning " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  run({{a, b}}, "after its operands");
  run({{b}, {a}}, "after its operands");
  run({{a}}, "missing");
  run({{a}, {b}, {a}}, "twice");
}

}  // namespace
}  // namespace loom
