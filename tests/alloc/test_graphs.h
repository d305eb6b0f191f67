// Helpers for the allocator tests and loom-bench-alloc: a fake buffer type
// (small max_size, a capacity to run out of, every buffer at the same
// address) and graph builders (a llama-shaped layer stack, random DAGs).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "loom/backend.h"
#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"

namespace loom::testing {

// Memory that is never touched: data pointers are addresses, not storage.
class FakeBufferType final : public BufferType {
 public:
  explicit FakeBufferType(std::string name, size_t alignment = 64, size_t max_size = SIZE_MAX,
                          size_t capacity = SIZE_MAX)
      : name_(std::move(name)), alignment_(alignment), max_size_(max_size), capacity_(capacity) {}
  std::string_view name() const override { return name_; }
  size_t alignment() const override { return alignment_; }
  size_t max_size() const override { return max_size_; }
  bool is_host() const override { return false; }
  Device* device() const override { return nullptr; }
  size_t n_allocs = 0;    // successful allocations
  size_t live_bytes = 0;  // bytes in buffers still alive

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override {
    if (size > capacity_ - live_bytes)
      fail("{}: device out of memory ({} bytes asked, {} of {} in use)", name_, size, live_bytes, capacity_);
    ++n_allocs;
    return std::make_shared<FakeBuffer>(*this, size);
  }

 private:
  class FakeBuffer final : public Buffer {
   public:
    FakeBuffer(FakeBufferType& type, size_t size) : Buffer(type, size), owner_(type) { owner_.live_bytes += size; }
    ~FakeBuffer() override { owner_.live_bytes -= size(); }
    // Every buffer starts at the same address: ownership must be decided by identity.
    void* base() override { return reinterpret_cast<void*>(uintptr_t{1} << 40); }
    void set_tensor(Tensor&, const void*, size_t, size_t) override {}
    void get_tensor(const Tensor&, void*, size_t, size_t) override {}
    void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
    void clear(uint8_t) override {}

   private:
    FakeBufferType& owner_;
  };
  std::string name_;
  size_t alignment_, max_size_, capacity_;
};

struct LlamaShape {
  int n_layer = 22, n_embd = 2048, n_head = 32, n_head_kv = 4, head_dim = 64, n_ff = 5632;
  int n_tokens = 512, n_ctx = 512, n_vocab = 32000, n_outputs = 1;
  DType weight_type = DType::F16;
  DType cache_type = DType::F16;
};

struct LlamaGraph {
  std::vector<Tensor*> inputs;   // tokens, positions, mask, kv slots, output ids
  std::vector<Tensor*> weights;  // kFlagWeight, not placed
  std::vector<Tensor*> cache;    // KV cache, to be placed before planning
  Tensor* logits = nullptr;
  Graph graph;
};

// A llama-style decoder: rms_norm, q/k/v projections, rope, KV cache written
// with set_rows and read through views, grouped-query attention with a
// masked soft_max, output projection, SwiGLU FFN, residual adds, final norm
// and output projection for the last n_outputs tokens.
inline LlamaGraph build_llama_graph(Context& ctx, const LlamaShape& s) {
  LlamaGraph g;
  auto input = [&](DType t, std::initializer_list<int64_t> ne, const char* name) {
    Tensor* x = ctx.new_tensor(t, ne);
    x->name = name;
    x->flags |= kFlagInput;
    g.inputs.push_back(x);
    return x;
  };
  auto weight = [&](std::initializer_list<int64_t> ne, std::string name, DType t) {
    Tensor* w = ctx.new_tensor(t, ne);
    w->name = std::move(name);
    w->flags |= kFlagWeight;
    g.weights.push_back(w);
    return w;
  };
  const int64_t hd = s.head_dim, nkv = s.n_head_kv, nh = s.n_head, T = s.n_tokens, C = s.n_ctx;
  const int64_t n_q = hd * nh, n_k = hd * nkv;
  Tensor* tokens = input(DType::I32, {T}, "tokens");
  Tensor* pos = input(DType::I32, {T}, "positions");
  Tensor* mask = input(DType::F32, {C, T}, "kq_mask");
  Tensor* slots = input(DType::I32, {T}, "kv_slots");
  Tensor* out_ids = input(DType::I32, {s.n_outputs}, "output_ids");
  Tensor* x = get_rows(ctx, weight({s.n_embd, s.n_vocab}, "token_embd", s.weight_type), tokens);
  x->name = "inp_embd";
  const float kq_scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int l = 0; l < s.n_layer; ++l) {
    auto w = [&](std::initializer_list<int64_t> ne, const char* what, DType t) {
      return weight(ne, fmt::format("blk.{}.{}", l, what), t);
    };
    auto named = [&](Tensor* t, const char* what) {
      t->name = fmt::format("{}-{}", what, l);
      return t;
    };
    Tensor* cur = named(rms_norm(ctx, x, 1e-5f), "attn_norm");
    cur = named(mul(ctx, cur, w({s.n_embd}, "attn_norm.weight", DType::F32)), "attn_norm_w");
    Tensor* q = named(mul_mat(ctx, w({s.n_embd, n_q}, "attn_q", s.weight_type), cur), "q");
    Tensor* k = named(mul_mat(ctx, w({s.n_embd, n_k}, "attn_k", s.weight_type), cur), "k");
    Tensor* v = named(mul_mat(ctx, w({s.n_embd, n_k}, "attn_v", s.weight_type), cur), "v");
    q = named(rope(ctx, reshape(ctx, q, {hd, nh, T, 1}), pos, {.mode = RopeMode::NeoX}), "q_rope");
    k = named(rope(ctx, reshape(ctx, k, {hd, nkv, T, 1}), pos, {.mode = RopeMode::NeoX}), "k_rope");
    Tensor* cache_k = ctx.new_tensor(s.cache_type, {n_k, C});
    cache_k->name = fmt::format("cache_k-{}", l);
    Tensor* cache_v = ctx.new_tensor(s.cache_type, {n_k, C});
    cache_v->name = fmt::format("cache_v-{}", l);
    g.cache.push_back(cache_k);
    g.cache.push_back(cache_v);
    Tensor* k_stored = named(set_rows(ctx, cache_k, reshape(ctx, k, {n_k, T, 1, 1}), slots), "k_store");
    Tensor* v_stored = named(set_rows(ctx, cache_v, v, slots), "v_store");
    const size_t rk = row_size(s.cache_type, hd);
    // [hd, n_kv_head, n_ctx] views of the cache, read after the writes
    Tensor* kv = view(ctx, k_stored, {hd, nkv, C, 1}, {rk, rk * nkv, rk * nkv * C}, 0);
    Tensor* vv = view(ctx, v_stored, {hd, nkv, C, 1}, {rk, rk * nkv, rk * nkv * C}, 0);
    Tensor* kh = permute(ctx, kv, {0, 2, 1, 3});                      // [hd, C, nkv]
    Tensor* qh = permute(ctx, q, {0, 2, 1, 3});                       // [hd, T, nh]
    Tensor* kq = named(mul_mat(ctx, kh, qh), "kq");                   // [C, T, nh]
    kq = named(soft_max(ctx, kq, mask, kq_scale), "kq_soft_max");     // in place
    Tensor* vt = named(cont(ctx, permute(ctx, vv, {1, 2, 0, 3})), "v_t");  // [C, hd, nkv]
    Tensor* kqv = named(mul_mat(ctx, vt, kq), "kqv");                 // [hd, T, nh]
    Tensor* merged = named(cont(ctx, permute(ctx, kqv, {0, 2, 1, 3})), "kqv_merged");  // [hd, nh, T]
    merged = reshape(ctx, merged, {n_q, T, 1, 1});
    Tensor* attn = named(mul_mat(ctx, w({n_q, s.n_embd}, "attn_output", s.weight_type), merged), "attn_out");
    x = named(add(ctx, attn, x), "ffn_inp");
    cur = named(rms_norm(ctx, x, 1e-5f), "ffn_norm");
    cur = named(mul(ctx, cur, w({s.n_embd}, "ffn_norm.weight", DType::F32)), "ffn_norm_w");
    Tensor* gate = named(mul_mat(ctx, w({s.n_embd, s.n_ff}, "ffn_gate", s.weight_type), cur), "ffn_gate");
    Tensor* up = named(mul_mat(ctx, w({s.n_embd, s.n_ff}, "ffn_up", s.weight_type), cur), "ffn_up");
    Tensor* act = named(mul(ctx, named(silu(ctx, gate), "ffn_silu"), up), "ffn_gate_par");
    Tensor* down = named(mul_mat(ctx, w({s.n_ff, s.n_embd}, "ffn_down", s.weight_type), act), "ffn_out");
    x = named(add(ctx, down, x), "l_out");
  }
  x = get_rows(ctx, x, out_ids);
  x->name = "last_tokens";
  x = rms_norm(ctx, x, 1e-5f);
  x->name = "result_norm";
  x = mul(ctx, x, weight({s.n_embd}, "output_norm", DType::F32));
  g.logits = mul_mat(ctx, weight({s.n_embd, s.n_vocab}, "output", s.weight_type), x);
  g.logits->name = "logits";
  g.graph = Graph::build(g.logits);
  return g;
}

// A random DAG of f32 tensors: element-wise ops, soft_max and norms (which
// may run in place), mat-muls against weights that change widths, views
// (transpose + cont, reshape) and several outputs. Inputs are drawn mostly
// from recent nodes, as in real models.
inline Graph build_random_dag(Context& ctx, uint32_t seed, int n_nodes, int64_t max_width = 1024) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  std::vector<Tensor*> pool;
  std::vector<int> uses;
  auto width = [&] { return int64_t{64} << pick(static_cast<int>(std::log2(max_width / 64)) + 1); };
  const int64_t rows = 16 + 16 * pick(8);
  for (int i = 0; i < 3; ++i) {
    Tensor* in = ctx.new_tensor(DType::F32, {width(), rows});
    in->name = fmt::format("in{}", i);
    in->flags |= kFlagInput;
    pool.push_back(in);
    uses.push_back(0);
  }
  auto recent = [&] {  // geometric bias toward the newest tensors
    int back = 0;
    while (back + 1 < static_cast<int>(pool.size()) && rng() % 3 != 0) ++back;
    return static_cast<int>(pool.size()) - 1 - back;
  };
  for (int i = 0; i < n_nodes; ++i) {
    const int ai = recent();
    Tensor* a = pool[ai];
    Tensor* r = nullptr;
    switch (pick(7)) {
      case 0: r = silu(ctx, a); break;
      case 1: r = scale(ctx, a, 0.5f); break;
      case 2: r = rms_norm(ctx, a, 1e-5f); break;
      case 3: r = soft_max(ctx, a); break;
      case 4: {  // binary with another tensor of the same shape, if any
        Tensor* b = nullptr;
        for (int k = 0; k < 8 && !b; ++k) {
          Tensor* c = pool[recent()];
          if (c != a && c->ne == a->ne) b = c;
        }
        r = b ? (pick(2) ? add(ctx, a, b) : mul(ctx, a, b)) : relu(ctx, a);
        break;
      }
      case 5: {
        Tensor* w = ctx.new_tensor(DType::F32, {a->ne[0], width()});
        w->name = fmt::format("w{}", i);
        w->flags |= kFlagWeight;
        r = mul_mat(ctx, w, a);
        break;
      }
      default: r = cont(ctx, transpose(ctx, a)); break;
    }
    r->name = fmt::format("n{}", i);
    pool.push_back(r);
    uses.push_back(0);
    for (Tensor* s : r->src)
      for (size_t k = 0; k < pool.size(); ++k)
        if (s && (pool[k] == s || pool[k] == s->view_src)) ++uses[k];
  }
  // Outputs: the last node and the unused ones among the last tenth; the
  // other unused nodes are dead and left out of the graph.
  std::vector<Tensor*> outputs{pool.back()};
  for (size_t k = pool.size() - pool.size() / 10; k + 1 < pool.size(); ++k)
    if (uses[k] == 0) outputs.push_back(pool[k]);
  return Graph::build(outputs);
}

}  // namespace loom::testing
