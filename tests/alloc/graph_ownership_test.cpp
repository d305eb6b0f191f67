// Graph allocator: ownership by identity (seed bug 6a), tensors outliving
// their allocator (6b), observability, and real execution on the CPU with
// every reuse the planner makes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "alloc/test_graphs.h"
#include "loom/graph_alloc.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

using testing::FakeBufferType;

Tensor* named(Tensor* t, const char* name) {
  t->name = name;
  return t;
}

TEST(GraphOwnership, OwnershipIsByIdentityNotAddress) {
  FakeBufferType type("fake");  // every buffer of this type starts at the same address
  Context ctx;
  Tensor* a = named(scale(ctx, named(ctx.new_tensor(DType::F32, {64}), "x"), 2.0f), "a");
  Graph ga_graph = Graph::build(a);
  {
    GraphAllocator temporary({&type});
    temporary.allocate(ga_graph);
    EXPECT_TRUE(temporary.owns(*a));
  }
  ASSERT_NE(a->buffer, nullptr);  // a keeps its buffer alive
  void* a_data = a->data;
  std::shared_ptr<Buffer> a_buffer = a->buffer;

  GraphAllocator second({&type});
  Tensor* b = named(silu(ctx, named(ctx.new_tensor(DType::F32, {64}), "y")), "b");
  Graph gb = Graph::build(b);
  second.allocate(gb);
  EXPECT_TRUE(second.owns(*b));
  EXPECT_EQ(b->buffer->base(), a->buffer->base());  // same address, different buffers
  EXPECT_FALSE(second.owns(*a));

  // A graph that reads a: a is someone else's, so it is neither moved nor reused.
  Tensor* c = named(add(ctx, a, b), "c");
  Graph gc = Graph::build(c);
  second.allocate(gc);
  EXPECT_EQ(a->data, a_data);
  EXPECT_EQ(a->buffer, a_buffer);
  EXPECT_NE(c->data, a->data);
  for (const PlannedBlock& blk : second.plan())
    for (const Tensor* t : blk.tensors) EXPECT_NE(t, a);
}

TEST(GraphOwnership, BuffersGrownAwayAreStillOwned) {
  FakeBufferType type("fake");
  GraphAllocator ga({&type});
  Context ctx;
  Tensor* small = named(scale(ctx, ctx.new_tensor(DType::F32, {16}), 1.0f), "small");
  Graph gs = Graph::build(small);
  ga.allocate(gs);
  Tensor* big = named(scale(ctx, ctx.new_tensor(DType::F32, {4096}), 1.0f), "big");
  Graph gbig = Graph::build(big);
  ga.allocate(gbig);  // grows: `small` now points into a retired buffer
  EXPECT_NE(small->buffer, ga.buffers(0)[0]);
  EXPECT_TRUE(ga.owns(*small));
  ga.allocate(gs);  // so it is planned again, into the current buffer
  EXPECT_EQ(small->buffer, ga.buffers(0)[0]);
}

TEST(GraphOwnership, TensorsOutliveTheirAllocator) {
  Device& cpu = Registry::get().cpu();
  Context ctx;
  Tensor* x = named(ctx.new_tensor(DType::F32, {4}), "x");
  x->flags |= kFlagInput;
  Tensor* y = named(scale(ctx, x, 3.0f), "y");
  Graph g = Graph::build(y);
  std::weak_ptr<Buffer> buffer;
  {
    GraphAllocator ga({&cpu.default_buffer_type()});
    ga.allocate(g);
    buffer = ga.buffers(0)[0];
  }
  ASSERT_FALSE(buffer.expired());  // still valid: the tensors hold the buffer
  tensor_from_floats(*x, {1, 2, 3, 4});
  auto backend = cpu.create_backend({.n_threads = 1});
  backend->compute(g);
  EXPECT_EQ(tensor_to_floats(*y), (std::vector<float>{3, 6, 9, 12}));
}

TEST(GraphObservability, DebugPrintsEveryAllocationAndFree) {
  FakeBufferType type("fake");
  Context ctx;
  Tensor* x = named(ctx.new_tensor(DType::F32, {64}), "x_in");
  Tensor* a = named(mul_mat(ctx, named(ctx.new_tensor(DType::F32, {64, 64}), "w"), x), "proj");
  a->src[0]->flags |= kFlagWeight;
  Tensor* b = named(silu(ctx, a), "act");
  Tensor* c = named(cont(ctx, b), "copy");
  Graph g = Graph::build(c);
  GraphAllocator ga({&type});
  setenv("LOOM_ALLOC_DEBUG", "1", 1);
  ::testing::internal::CaptureStderr();
  ga.allocate(g);
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("LOOM_ALLOC_DEBUG");
  EXPECT_NE(err.find("alloc  proj fake[0] offset 256 size 256"), std::string::npos) << err;
  EXPECT_NE(err.find("reuse  act in place of proj"), std::string::npos) << err;
  EXPECT_NE(err.find("free   act"), std::string::npos) << err;
  EXPECT_NE(err.find("alloc  copy"), std::string::npos) << err;
  EXPECT_NE(err.find("x_in"), std::string::npos) << err;

  ::testing::internal::CaptureStderr();
  ga.allocate(g);  // quiet without the variable
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(GraphObservability, JsonReportAndTrace) {
  FakeBufferType t0("dev"), t1("host");
  Context ctx;
  Graph g = testing::build_random_dag(ctx, 7, 60, 256);
  GraphAllocator ga({&t0, &t1});
  AllocOptions o;
  o.assign = [](const Tensor& t) -> size_t { return t.name.size() % 2; };
  ga.allocate(g, o);
  const auto j = nlohmann::json::parse(ga.report().to_json());
  ASSERT_EQ(j["buffer_types"].size(), 2u);
  size_t n_inplace = 0;
  for (size_t i = 0; i < 2; ++i) {
    const auto& r = j["buffer_types"][i];
    EXPECT_EQ(r["name"], i ? "host" : "dev");
    EXPECT_EQ(r["peak"].get<size_t>(), ga.report().types[i].peak);
    EXPECT_EQ(r["lower_bound"].get<size_t>(), ga.report().types[i].lower_bound);
    EXPECT_GE(r["ratio"].get<double>(), 1.0);
    n_inplace += r["n_inplace"].get<size_t>();
  }
  EXPECT_GT(n_inplace, 0u);
  EXPECT_EQ(j["n_nodes"].get<size_t>(), g.nodes().size());

  const std::string path = ::testing::TempDir() + "loom_alloc_trace.tsv";
  ga.write_trace(path);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "# step\toffset\tsize\ttensor\ttype\tchunk");
  size_t rows = 0, expected = 0;
  for (const PlannedBlock& b : ga.plan()) expected += b.last - b.first + 1;
  while (std::getline(in, line)) {
    size_t step, offset, size, chunk;
    char tensor[128], type[32];
    ASSERT_EQ(std::sscanf(line.c_str(), "%zu\t%zu\t%zu\t%127s\t%31s\t%zu", &step, &offset, &size, tensor, type, &chunk),
              6)
        << line;
    ++rows;
  }
  EXPECT_EQ(rows, expected);
  std::remove(path.c_str());
}

// The same model computed twice on the CPU: every intermediate in its own
// memory, then planned by the graph allocator (reuse, in place, views of the
// KV cache). Results must match.
TEST(GraphExecution, PlannedGraphComputesTheSameAsUnsharedMemory) {
  Device& cpu = Registry::get().cpu();
  BufferType& host = cpu.default_buffer_type();
  testing::LlamaShape s;
  s.n_layer = 2, s.n_embd = 64, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 16, s.n_ff = 160;
  s.n_vocab = 50, s.n_ctx = 16, s.n_tokens = 12, s.n_outputs = 3;
  auto run = [&](bool planned) {
    Context ctx;
    testing::LlamaGraph g = testing::build_llama_graph(ctx, s);
    std::vector<Tensor*> fixed = g.weights;
    fixed.insert(fixed.end(), g.cache.begin(), g.cache.end());
    TensorAllocation mem = allocate_tensors(fixed, host);
    for (auto& b : mem.buffers) b->clear(0);
    std::unique_ptr<GraphAllocator> ga;
    TensorAllocation rest;
    if (planned) {
      ga = std::make_unique<GraphAllocator>(std::vector<BufferType*>{&host});
      ga->reserve(g.graph);
      ga->allocate(g.graph);
      EXPECT_GT(ga->report().types[0].n_inplace, 0u);
    } else {
      rest = allocate_tensors(ctx, host);
    }
    std::mt19937 rng(3);
    std::normal_distribution<float> dist(0.0f, 0.5f);
    for (Tensor* w : g.weights) {
      std::vector<float> v(w->nelements());
      for (auto& x : v) x = dist(rng);
      tensor_from_floats(*w, v);
    }
    auto ints = [](Tensor* t, std::vector<float> v) { tensor_from_floats(*t, v); };
    std::vector<float> tokens, pos, mask(s.n_ctx * s.n_tokens), out_ids;
    for (int i = 0; i < s.n_tokens; ++i) {
      tokens.push_back(static_cast<float>((i * 7) % s.n_vocab));
      pos.push_back(static_cast<float>(i));
      for (int j = 0; j < s.n_ctx; ++j) mask[i * s.n_ctx + j] = j <= i ? 0.0f : -INFINITY;
    }
    for (int i = 0; i < s.n_outputs; ++i) out_ids.push_back(static_cast<float>(s.n_tokens - 1 - i));
    ints(g.inputs[0], tokens);
    ints(g.inputs[1], pos);
    tensor_from_floats(*g.inputs[2], mask);
    ints(g.inputs[3], pos);  // kv slot = position
    ints(g.inputs[4], out_ids);
    auto backend = cpu.create_backend({.n_threads = 2});
    backend->compute(g.graph);
    return tensor_to_floats(*g.logits);
  };
  const std::vector<float> expected = run(false);
  const std::vector<float> got = run(true);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(expected[i]));
    EXPECT_NEAR(got[i], expected[i], 1e-4f * (1.0f + std::fabs(expected[i]))) << i;
  }
}

}  // namespace
}  // namespace loom
