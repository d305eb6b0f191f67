// The profiler through the scheduler: one record per node with its op, shape,
// bytes and FLOPs, times that add up to at most the wall time, split copies
// whose bytes are the tensors copied between the CPU and OpenCL0, a Chrome
// trace that parses, and nothing recorded while paused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "loom/ops.h"
#include "loom/profiler.h"
#include "loom/registry.h"
#include "loom/scheduler.h"
#include "loom/tensor_alloc.h"
#include "test_devices.h"

namespace loom {
namespace {

constexpr int64_t kWidth = 64, kBatch = 8;

// x -> (mul_mat w_l, silu, add residual) per layer; weight l in homes[l].
struct Layers {
  Context ctx;
  Tensor* x = nullptr;
  Tensor* out = nullptr;
  std::vector<std::shared_ptr<Buffer>> buffers;
  Graph graph;

  explicit Layers(const std::vector<BufferType*>& homes) {
    x = ctx.new_tensor(DType::F32, {kWidth, kBatch});
    x->name = "x";
    x->flags |= kFlagInput;
    Tensor* cur = x;
    std::vector<Tensor*> weights;
    for (size_t l = 0; l < homes.size(); ++l) {
      Tensor* w = ctx.new_tensor(DType::F32, {kWidth, kWidth});
      w->name = fmt::format("w{}", l);
      w->flags |= kFlagWeight;
      weights.push_back(w);
      Tensor* y = mul_mat(ctx, w, cur);
      y->name = fmt::format("mm{}", l);
      Tensor* s = silu(ctx, y);
      s->name = fmt::format("silu{}", l);
      cur = add(ctx, s, cur);
      cur->name = fmt::format("res{}", l);
    }
    out = cur;
    graph = Graph::build(out);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
    for (size_t l = 0; l < weights.size(); ++l) {
      Tensor* w = weights[l];
      auto a = allocate_tensors(std::span<Tensor* const>(&w, 1), *homes[l], BufferUsage::Weights);
      buffers.insert(buffers.end(), a.buffers.begin(), a.buffers.end());
      std::vector<float> v(w->nelements());
      for (auto& f : v) f = dist(rng);
      tensor_from_floats(*w, v);
    }
  }
  void set_input() { tensor_from_floats(*x, std::vector<float>(x->nelements(), 0.5f)); }
};

SchedulerOptions profiling(Profiler& prof) {
  SchedulerOptions o;
  o.profiler = &prof;
  return o;
}

// The graph's output computed by `backends` without a profiler.
std::vector<float> unprofiled_output(const std::vector<BufferType*>& homes, const std::vector<Backend*>& backends) {
  Layers g(homes);
  Scheduler sched(backends);
  sched.allocate(g.graph);
  g.set_input();
  sched.compute(g.graph);
  return tensor_to_floats(*g.out);
}

// Computes once under the profiler; returns the wall time in ns.
int64_t profiled_compute(Scheduler& sched, Layers& g) {
  sched.allocate(g.graph);
  g.set_input();
  const int64_t start = Profiler::now_ns();
  sched.compute(g.graph);
  return Profiler::now_ns() - start;
}

void expect_nodes_match_graph(const Profiler& prof, const Layers& g, int64_t wall_ns) {
  const auto& nodes = prof.nodes();
  ASSERT_EQ(nodes.size(), g.graph.nodes().size());
  int64_t sum = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeProfile& n = nodes[i];
    const Tensor& t = *g.graph.nodes()[i];
    SCOPED_TRACE(n.name);
    EXPECT_EQ(n.name, t.name);
    EXPECT_EQ(n.op, t.op);
    EXPECT_EQ(n.shape, t.shape_string());
    EXPECT_TRUE(n.timed);
    EXPECT_GT(n.busy_ns, 0);
    EXPECT_GT(n.time_ns, 0);
    EXPECT_LE(n.start_ns, n.end_ns);
    EXPECT_GE(n.n_intervals, 1u);
    EXPECT_EQ(n.bytes_written, t.nbytes());
    if (t.op == Op::MulMat) {
      EXPECT_EQ(n.flops, 2.0 * kWidth * kWidth * kBatch);  // 2*M*N*K
      EXPECT_EQ(n.bytes_read, t.src[0]->nbytes() + t.src[1]->nbytes());
    }
    sum += n.time_ns;
  }
  EXPECT_LE(sum, wall_ns);
  ASSERT_EQ(prof.graphs().size(), 1u);
  EXPECT_LE(prof.graphs()[0].end_ns - prof.graphs()[0].start_ns, wall_ns);
  EXPECT_EQ(prof.graphs()[0].n_nodes, nodes.size());
}

TEST(Profiler, CpuGraphGivesOneTimedRecordPerNode) {
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  Layers g({cpu, cpu, cpu});
  auto backend = Registry::get().cpu().create_backend({.n_threads = 2});
  Profiler prof;
  Scheduler sched({backend.get()}, profiling(prof));
  const int64_t wall = profiled_compute(sched, g);
  expect_nodes_match_graph(prof, g, wall);
  EXPECT_EQ(tensor_to_floats(*g.out), unprofiled_output({cpu, cpu, cpu}, {backend.get()}));  // the same kernels ran
  ASSERT_EQ(prof.splits().size(), 1u);
  EXPECT_EQ(prof.splits()[0].backend, "CPU");
  EXPECT_TRUE(prof.splits()[0].nodes_timed);
  EXPECT_EQ(prof.splits()[0].copy_bytes, 0u);
  EXPECT_TRUE(prof.copies().empty());
  EXPECT_EQ(op_name(prof.nodes()[0].op), "mul_mat");
  EXPECT_EQ(op_name(prof.nodes()[1].op), "silu");
  EXPECT_EQ(op_name(prof.nodes()[2].op), "add");
}

TEST(Profiler, SplitCopiesBetweenCpuAndOpenClCountTheTensorsBytes) {
  REQUIRE_OPENCL(1);
  Device* cl = test::opencl(0);
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  // Layer 0 on OpenCL0 reads x from the CPU; layer 1 on the CPU reads res0
  // back; layer 2 on OpenCL0 reads res1.
  Layers g({&cl->default_buffer_type(), cpu, &cl->default_buffer_type()});
  auto cpu_backend = Registry::get().cpu().create_backend();
  auto cl_backend = cl->create_backend();
  Profiler prof;
  Scheduler sched({cl_backend.get(), cpu_backend.get()}, profiling(prof));
  const int64_t wall = profiled_compute(sched, g);
  expect_nodes_match_graph(prof, g, wall);
  EXPECT_EQ(tensor_to_floats(*g.out), unprofiled_output({&cl->default_buffer_type(), cpu, &cl->default_buffer_type()},
                                                        {cl_backend.get(), cpu_backend.get()}));
  const SchedReport& r = sched.report();
  ASSERT_EQ(prof.splits().size(), r.n_splits());
  ASSERT_EQ(r.n_splits(), 3u);
  size_t copied = 0;
  for (size_t i = 0; i < r.n_splits(); ++i) {
    SCOPED_TRACE(i);
    const SplitProfile& s = prof.splits()[i];
    EXPECT_EQ(s.backend, r.splits[i].backend);
    EXPECT_EQ(s.copy_bytes, r.splits[i].copy_bytes);
    EXPECT_EQ(s.n_copies, r.splits[i].inputs.size());
    EXPECT_EQ(s.n_nodes, r.splits[i].n_nodes);
    EXPECT_TRUE(s.nodes_timed);
    EXPECT_LE(s.start_ns, s.compute_ns);
    EXPECT_LE(s.compute_ns, s.end_ns);
    copied += s.copy_bytes;
  }
  EXPECT_EQ(copied, r.copy_bytes);
  // Each copy is one of the graph's tensors, whole, between two memories;
  // every split but the first reads at least one activation from the other device.
  std::vector<std::string> expected;
  for (const SplitReport& s : r.splits)
    for (const SplitInputReport& in : s.inputs) expected.push_back(in.tensor);
  ASSERT_EQ(prof.copies().size(), expected.size());
  EXPECT_GE(expected.size(), 3u);
  EXPECT_EQ(prof.copies()[0].tensor, "x");
  size_t summed = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const CopyProfile& c = prof.copies()[i];
    EXPECT_EQ(c.tensor, expected[i]);
    const Tensor* t = nullptr;
    for (const Tensor* n : g.graph.nodes())
      if (n->name == c.tensor) t = n;
    if (c.tensor == "x") t = g.x;
    ASSERT_NE(t, nullptr) << c.tensor;
    EXPECT_EQ(c.bytes, t->nbytes()) << c.tensor;
    EXPECT_EQ(c.bytes, size_t{kWidth * kBatch * sizeof(float)});
    EXPECT_NE(c.from, c.to);
    EXPECT_LE(c.start_ns, c.end_ns);
    summed += c.bytes;
  }
  EXPECT_EQ(summed, copied);
  EXPECT_EQ(prof.nodes()[0].backend, std::string(cl->name()));
  EXPECT_EQ(prof.nodes()[3].backend, "CPU");
}

TEST(Profiler, PausedRecordsNothing) {
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  Layers g({cpu, cpu});
  auto backend = Registry::get().cpu().create_backend();
  Profiler prof;
  prof.pause();
  Scheduler sched({backend.get()}, profiling(prof));
  profiled_compute(sched, g);
  EXPECT_TRUE(prof.graphs().empty());
  EXPECT_TRUE(prof.splits().empty());
  EXPECT_TRUE(prof.nodes().empty());
  EXPECT_TRUE(prof.intervals().empty());
  prof.resume();
  profiled_compute(sched, g);
  EXPECT_EQ(prof.nodes().size(), g.graph.nodes().size());
}

TEST(Profiler, StopsRecordingWholeGraphsAtTheNodeLimit) {
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  Layers g({cpu, cpu});
  auto backend = Registry::get().cpu().create_backend();
  Profiler prof;
  prof.set_node_limit(g.graph.nodes().size() + 1);  // reached within the second graph
  Scheduler sched({backend.get()}, profiling(prof));
  profiled_compute(sched, g);
  EXPECT_FALSE(prof.limit_reached());
  profiled_compute(sched, g);
  EXPECT_TRUE(prof.limit_reached());
  profiled_compute(sched, g);  // not recorded: the limit was reached before it began
  EXPECT_EQ(prof.graphs().size(), 2u);
  EXPECT_EQ(prof.nodes().size(), 2 * g.graph.nodes().size());
  EXPECT_NE(prof.table().find("recording stopped at the limit"), std::string::npos);
}

TEST(Profiler, ChromeTraceParsesWithTheRequiredFields) {
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  Layers g({cpu, cpu});
  auto backend = Registry::get().cpu().create_backend({.n_threads = 2});
  Profiler prof;
  Scheduler sched({backend.get()}, profiling(prof));
  profiled_compute(sched, g);
  profiled_compute(sched, g);
  const nlohmann::json trace = nlohmann::json::parse(prof.chrome_trace());
  ASSERT_TRUE(trace.contains("traceEvents"));
  const auto& events = trace["traceEvents"];
  ASSERT_TRUE(events.is_array());
  size_t node_events = 0, graph_events = 0, split_events = 0;
  std::set<std::string> ops, processes;
  for (const auto& e : events) {
    ASSERT_TRUE(e.contains("name") && e.contains("ph") && e.contains("pid") && e.contains("tid")) << e.dump();
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
      continue;
    }
    ASSERT_EQ(e["ph"], "X") << e.dump();
    ASSERT_TRUE(e["ts"].is_number() && e["dur"].is_number()) << e.dump();
    EXPECT_GE(e["ts"].get<double>(), 0.0);
    const std::string cat = e["cat"];
    if (cat == "graph") ++graph_events;
    if (cat == "split") ++split_events;
    if (cat != "node") continue;
    ++node_events;
    ops.insert(e["name"].get<std::string>());
    const auto& a = e["args"];
    for (const char* key : {"tensor", "shape", "bytes_read", "bytes_written", "flops", "graph"})
      EXPECT_TRUE(a.contains(key)) << key << " in " << e.dump();
    if (e["name"] == "mul_mat") EXPECT_EQ(a["flops"].get<double>(), 2.0 * kWidth * kWidth * kBatch);
  }
  EXPECT_EQ(graph_events, 2u);
  EXPECT_EQ(split_events, 2u);
  EXPECT_GE(node_events, prof.nodes().size());  // one event per thread that ran a node
  EXPECT_EQ(ops, (std::set<std::string>{"mul_mat", "silu", "add"}));
  EXPECT_TRUE(processes.count("scheduler") && processes.count("CPU"));
}

TEST(Profiler, TableListsOpTypesAndNodesByTime) {
  BufferType* cpu = &Registry::get().cpu().default_buffer_type();
  Layers g({cpu, cpu});
  auto backend = Registry::get().cpu().create_backend();
  Profiler prof;
  Scheduler sched({backend.get()}, profiling(prof));
  profiled_compute(sched, g);
  const std::string table = prof.table();
  for (const char* part : {"profile: 1 graphs, 6 nodes, 1 splits", "by op type", "mul_mat", "silu", "mm1",
                           "splits by backend", "per node"})
    EXPECT_NE(table.find(part), std::string::npos) << part << " in\n" << table;
  prof.clear();
  EXPECT_TRUE(prof.nodes().empty());
}

TEST(Profiler, FlopsAndBytesOfSingleNodes) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::F32, {32, 48});  // K = 32, M = 48
  Tensor* x = ctx.new_tensor(DType::F32, {32, 5});   // N = 5
  Tensor* y = mul_mat(ctx, w, x);
  EXPECT_EQ(node_flops(*y), 2.0 * 48 * 5 * 32);
  EXPECT_EQ(node_bytes_read(*y), w->nbytes() + x->nbytes());
  Tensor* table = ctx.new_tensor(DType::F32, {16, 1000});
  Tensor* ids = ctx.new_tensor(DType::I32, {3});
  Tensor* rows = get_rows(ctx, table, ids);
  EXPECT_EQ(node_bytes_read(*rows), 3 * 16 * sizeof(float) + ids->nbytes());  // the rows gathered, not the table
  EXPECT_EQ(node_flops(*silu(ctx, y)), 0.0);
  EXPECT_EQ(node_flops(*add(ctx, y, y)), 48.0 * 5);
  // Fused attention: 4 query heads x 3 tokens, each 2*n_kv*(64 + 32) over 10 cells.
  Tensor* q = ctx.new_tensor(DType::F32, {64, 3, 4});
  Tensor* k = ctx.new_tensor(DType::F16, {64, 10, 2});
  Tensor* v = ctx.new_tensor(DType::F16, {32, 10, 2});
  EXPECT_EQ(node_flops(*flash_attn_ext(ctx, q, k, v, nullptr, 0.125f)), 4.0 * 3 * 10 * 2 * (64 + 32));
}

}  // namespace
}  // namespace loom
