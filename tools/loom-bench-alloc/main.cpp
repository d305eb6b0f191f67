// loom-bench-alloc: plans the graph of a llama-shaped layer stack and of
// random DAGs with the graph allocator and prints, per graph, the peak
// memory of the plan, the liveness lower bound and their ratio (target on
// the transformer graph: <= 1.05). Nothing is computed or timed; memory is a
// fake buffer type, so any size can be planned.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "alloc/test_graphs.h"
#include "loom/error.h"
#include "loom/graph_alloc.h"
#include "loom/tensor_alloc.h"

namespace {

using namespace loom;

struct Options {
  testing::LlamaShape llama;
  int seeds = 5;
  int dag_nodes = 500;
  size_t max_size = SIZE_MAX;
  bool json = false;
  std::string trace;
};

void usage() {
  std::printf(
      "usage: loom-bench-alloc [options]\n"
      "  --layers N      llama layers (default 22)\n"
      "  --embd N        embedding width (default 2048)\n"
      "  --ff N          feed-forward width (default 5632)\n"
      "  --heads N       query heads (default 32), --heads-kv N (default 4), head dim = embd / heads\n"
      "  --tokens N      tokens in the batch (default 512)\n"
      "  --ctx N         KV cache length (default 512)\n"
      "  --seeds N       random DAGs to plan (default 5)\n"
      "  --dag-nodes N   nodes per random DAG (default 500)\n"
      "  --max-size B    largest buffer of the planned type in bytes (default unlimited)\n"
      "  --trace FILE    write the llama plan's trace for scripts/plot-memory\n"
      "  --json          machine-readable output\n");
}

Options parse(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> long long {
    if (i + 1 >= argc) fail("option {} needs a value", argv[i]);
    char* end = nullptr;
    const long long v = std::strtoll(argv[++i], &end, 10);
    if (*end || v < 0) fail("option {}: '{}' is not a number >= 0", argv[i - 1], argv[i]);
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--layers") o.llama.n_layer = static_cast<int>(value(i));
    else if (a == "--embd") o.llama.n_embd = static_cast<int>(value(i));
    else if (a == "--ff") o.llama.n_ff = static_cast<int>(value(i));
    else if (a == "--heads") o.llama.n_head = static_cast<int>(value(i));
    else if (a == "--heads-kv") o.llama.n_head_kv = static_cast<int>(value(i));
    else if (a == "--tokens") o.llama.n_tokens = static_cast<int>(value(i));
    else if (a == "--ctx") o.llama.n_ctx = static_cast<int>(value(i));
    else if (a == "--seeds") o.seeds = static_cast<int>(value(i));
    else if (a == "--dag-nodes") o.dag_nodes = static_cast<int>(value(i));
    else if (a == "--max-size") o.max_size = static_cast<size_t>(value(i));
    else if (a == "--trace") {
      if (i + 1 >= argc) fail("option --trace needs a file name");
      o.trace = argv[++i];
    } else if (a == "--json") o.json = true;
    else if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    } else {
      fail("unknown option '{}' (see --help)", a);
    }
  }
  const auto& l = o.llama;
  if (l.n_embd <= 0 || l.n_ff <= 0 || l.n_head <= 0 || l.n_head_kv <= 0 || l.n_tokens <= 0 || l.n_ctx < l.n_tokens ||
      o.dag_nodes <= 0)
    fail("--embd, --ff, --heads, --heads-kv, --tokens and --dag-nodes must be positive, and --ctx at least --tokens");
  if (o.llama.n_embd % o.llama.n_head != 0) fail("--embd {} is not a multiple of --heads {}", o.llama.n_embd, o.llama.n_head);
  if (o.llama.n_head % o.llama.n_head_kv != 0) fail("--heads must be a multiple of --heads-kv");
  o.llama.head_dim = o.llama.n_embd / o.llama.n_head;
  return o;
}

struct Row {
  std::string graph;
  size_t nodes = 0;
  BufferTypeReport r;
  std::string json;
};

Row plan_llama(const Options& o) {
  Context ctx;
  testing::LlamaGraph g = testing::build_llama_graph(ctx, o.llama);
  testing::FakeBufferType kv("KV"), compute("Compute", 64, o.max_size);
  allocate_tensors(g.cache, kv);  // the cache is placed before planning, like a real model's
  GraphAllocator ga({&compute});
  ga.reserve(g.graph);
  if (!o.trace.empty()) ga.write_trace(o.trace);
  const auto& s = o.llama;
  return {fmt::format("llama {}L embd {} ff {} heads {}/{} tokens {} ctx {}", s.n_layer, s.n_embd, s.n_ff, s.n_head,
                      s.n_head_kv, s.n_tokens, s.n_ctx),
          g.graph.nodes().size(), ga.report().types[0], ga.report().to_json()};
}

Row plan_dag(const Options& o, uint32_t seed) {
  Context ctx;
  Graph g = testing::build_random_dag(ctx, seed, o.dag_nodes);
  testing::FakeBufferType compute("Compute", 64, o.max_size);
  GraphAllocator ga({&compute});
  ga.reserve(g);
  return {fmt::format("random DAG seed {}", seed), g.nodes().size(), ga.report().types[0], ga.report().to_json()};
}

int run(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<Row> rows;
  rows.push_back(plan_llama(o));
  for (int seed = 1; seed <= o.seeds; ++seed) rows.push_back(plan_dag(o, static_cast<uint32_t>(seed)));
  if (o.json) {
    std::string out = "[";
    for (size_t i = 0; i < rows.size(); ++i)
      out += fmt::format("{}{{\"graph\": \"{}\", \"nodes\": {}, \"plan\": {}}}", i ? ",\n " : "", rows[i].graph,
                         rows[i].nodes, rows[i].json);
    std::printf("%s]\n", out.c_str());
    return 0;
  }
  std::printf("%-58s %6s %10s %10s %7s %8s %8s %8s %6s  %s\n", "graph", "nodes", "peak MiB", "bound MiB", "ratio",
              "best-fit", "greedy", "in-place", "chunks", "chosen");
  auto ratio = [](size_t peak, size_t bound) { return bound ? static_cast<double>(peak) / bound : 1.0; };
  for (const Row& row : rows)
    std::printf("%-58s %6zu %10.2f %10.2f %7.4f %8.4f %8.4f %8zu %6zu  %s\n", row.graph.c_str(), row.nodes,
                row.r.peak / 1048576.0, row.r.lower_bound / 1048576.0, row.r.ratio(),
                ratio(row.r.best_fit_peak, row.r.lower_bound), ratio(row.r.greedy_peak, row.r.lower_bound),
                row.r.n_inplace, row.r.n_chunks, row.r.strategy.c_str());
  std::printf("\nratio = peak / lower bound (largest total of tensors alive at one step); best-fit and greedy are the\n"
              "ratios of the two placements, the smaller is kept\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom-bench-alloc: error: %s\n", e.what());
    return 1;
  }
}
