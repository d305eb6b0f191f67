// Session: the KV cache and the per-micro-batch graph around the family's
// layers (see model.h and arch/arch.h).
#include <algorithm>
#include <chrono>
#include <iterator>

#include "arch/arch.h"
#include "arch/blocks.h"
#include "loom/error.h"
#include "loom/log.h"
#include "loom/model.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"

namespace loom {

namespace {

// Cache cells attended are rounded up to this (as llama.cpp pads n_kv): 255 of
// 256 generated tokens then run the graph of the token before.
constexpr int64_t kKvPadding = 256;

int64_t elapsed_ns(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

struct Session::UbatchGraph {
  int64_t n = 0, n_kv = 0, n_kv_swa = 0, n_out = 0;  // the shape it was built for
  Context ctx;
  Tensor* tokens = nullptr;
  Tensor* positions = nullptr;
  Tensor* kv_cells = nullptr;
  Tensor* kv_cells_swa = nullptr;  // the tokens' cells in the sliding-window cache (when there is one)
  Tensor* mask = nullptr;
  // Rows whose logits are wanted; always an input, also when every row is,
  // so that every graph has the structure of the reserve (its offsets).
  Tensor* out_ids = nullptr;
  Tensor* mask_swa = nullptr;  // sliding-window layers' mask (HParams::n_swa > 0), over their cache's cells
  // [n_vocab, n_out]; with more outputs than logits_per_graph_, null, and the
  // graph ends at their hidden states [n_embd, n_out] (for head_logits).
  Tensor* logits = nullptr;
  Tensor* hidden = nullptr;
  Graph graph;
};

struct Session::HeadGraph {
  Context ctx;
  Tensor* hidden = nullptr;  // input [n_embd, rows]
  Tensor* logits = nullptr;
  Graph graph;
};

struct Session::DecodeUndo {
  std::vector<int32_t> occupied, occupied_swa;  // cells taken
  // Per sliding-window cell: kTaken by this decode, kWritten once a graph
  // writing its rows has started.
  enum : uint8_t { kFree = 0, kTaken = 1, kWritten = 2 };
  std::vector<uint8_t> swa_state;
  // Sliding-window cells of the cache as it was before the decode that a
  // micro-batch's end freed (drop_outside_window).
  struct Drop {
    int32_t seq, cell, pos;
  };
  std::vector<Drop> dropped;
  std::vector<int32_t> floors;  // swa_floor_ before the decode
};

namespace {

bool is_plain_cache_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_quantized_cache_type(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1;
}

// The K and V caches may be quantized as llama.cpp allows (each head's row a
// whole number of blocks: the attention reads them per head), but for
// iq4_nl, which the OpenCL kernels cannot quantize yet.
void check_cache_types(DType type_k, DType type_v, int64_t head_dim) {
  for (auto [which, type] : {std::pair{"K", type_k}, std::pair{"V", type_v}}) {
    if (!is_plain_cache_type(type) && !is_quantized_cache_type(type))
      fail("{} cache type {} is not supported (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1)", which, type_name(type));
    if (is_quantized_cache_type(type) && head_dim % traits(type).block_size != 0)
      fail("{} cache type {} stores blocks of {} elements, which do not divide the head size {}", which,
           type_name(type), traits(type).block_size, head_dim);
  }
}

// The names of the devices holding layers that cannot run flash_attn_ext for
// this model's heads and cache types: a node built as attention() builds it
// (a single token over 256 cells) is put to each layer's device.
std::vector<std::string> devices_without_flash_attn(const Model& model, DType type_k, DType type_v) {
  const HParams& h = model.hparams();
  const int64_t hd = h.head_dim(), n_kv = 256;
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::F32, {hd, h.n_head, 1, 1});
  Tensor* k = ctx.new_tensor(type_k, {h.n_embd_kv(), n_kv});
  Tensor* v = ctx.new_tensor(type_v, {h.n_embd_kv(), n_kv});
  Tensor* mask = ctx.new_tensor(DType::F32, {n_kv, 1});
  Tensor* node = flash_attn_ext(ctx, permute(ctx, q, {0, 2, 1, 3}), cache_heads(ctx, k, hd, h.n_head_kv, n_kv),
                                cache_heads(ctx, v, hd, h.n_head_kv, n_kv), mask, 1.0f, 0.0f, h.attn_softcap);
  std::vector<std::string> names;
  for (int64_t l = 0; l < h.n_layer; ++l) {
    const Device& d = model.layer_device(l);
    const std::string name(d.name());
    if (!d.supports_op(*node) && std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names;
}

}  // namespace

Session::Session(const Model& model, const SessionOptions& options) : model_(model), options_(options) {
  const HParams& h = model.hparams();
  n_ctx_ = options.n_ctx > 0 ? options.n_ctx : std::min<int64_t>(h.n_ctx_train, 4096);
  // The context sizes the KV cache and the attention buffers (n_ctx x n_ubatch
  // x n_head): bounded well above any model's training context.
  constexpr int64_t kMaxContext = int64_t{1} << 24;
  if (n_ctx_ < 1 || n_ctx_ > kMaxContext)
    fail("context size {} is outside [1, {}] (the limit on the context size)", n_ctx_, kMaxContext);
  if (options_.n_ubatch <= 0 || options_.n_batch <= 0)
    fail("batch sizes must be positive (n_batch = {}, n_ubatch = {})", options_.n_batch, options_.n_ubatch);
  options_.n_ubatch = std::min(options_.n_ubatch, options_.n_batch);
  cells_ = KvCells(n_ctx_);
  constexpr int kMaxSequences = 1 << 16;
  if (options_.n_seq_max < 1 || options_.n_seq_max > kMaxSequences)
    fail("n_seq_max {} is outside [1, {}] (the limit on sequences)", options_.n_seq_max, kMaxSequences);
  // The sliding-window layers' own cache, where it is smaller than the context.
  const auto& layers = model.layers();
  const bool any_swa = std::any_of(layers.begin(), layers.end(), [](const Layer& L) { return L.swa; });
  if (any_swa && !options_.swa_full) {
    const int64_t want = std::min(h.n_swa, n_ctx_) * options_.n_seq_max + std::min(options_.n_ubatch, n_ctx_);
    const int64_t cells = std::min(n_ctx_, (want + kKvPadding - 1) / kKvPadding * kKvPadding);
    if (cells < n_ctx_) {
      swa_cells_ = KvCells(cells);
      swa_floor_.assign(static_cast<size_t>(options_.n_seq_max), 0);
    }
  }
  if (options_.poll < 0 || options_.poll > kMaxPoll)
    fail("poll level {} is outside [0, {}]", options_.poll, kMaxPoll);
  check_cache_types(options_.type_k, options_.type_v, h.head_dim());
  // Fused attention: auto turns it on where every layer's device runs it;
  // on keeps it where one does not (the scheduler runs that device's
  // attention on the CPU, copying its cache there), with a warning.
  const std::vector<std::string> without = options_.flash_attn == FlashAttn::Off
                                               ? std::vector<std::string>{}
                                               : devices_without_flash_attn(model, options_.type_k, options_.type_v);
  const std::string unsupported = fmt::format("{} cannot run flash_attn_ext for {} K and {} V", fmt::join(without, ", "),
                                              type_name(options_.type_k), type_name(options_.type_v));
  flash_attn_ = options_.flash_attn == FlashAttn::On || (options_.flash_attn == FlashAttn::Auto && without.empty());
  if (options_.flash_attn == FlashAttn::On && !without.empty())
    log(LogLevel::Warn, "fused attention (-fa on): {}; that attention runs on the CPU", unsupported);
  // A quantized V cache needs fused attention, as in llama.cpp: without it
  // V is read transposed, across blocks.
  if (is_quantized_cache_type(options_.type_v) && !flash_attn_)
    fail("V cache type {} needs fused attention (-fa on; llama.cpp requires it too), but {}; quantize only the K "
         "cache (-ctk) or turn fused attention on",
         type_name(options_.type_v),
         options_.flash_attn == FlashAttn::Off ? "it is off (-fa off)"
                                               : fmt::format("-fa auto turned it off: {}", unsupported));
  // Each layer's cache lives on the layer's device.
  std::vector<std::pair<Device*, std::vector<Tensor*>>> by_device;
  for (int64_t l = 0; l < h.n_layer; ++l) {
    const int64_t cells = layers[l].swa && swa_cache_cells() > 0 ? swa_cache_cells() : n_ctx_;
    Tensor* k = cache_ctx_.new_tensor(options.type_k, {h.n_embd_kv(), cells});
    k->name = "cache_k_l" + std::to_string(l);
    Tensor* v = cache_ctx_.new_tensor(options.type_v, {h.n_embd_kv(), cells});
    v->name = "cache_v_l" + std::to_string(l);
    k_cache_.push_back(k);
    v_cache_.push_back(v);
    Device* d = &model.layer_device(l);
    auto it = std::find_if(by_device.begin(), by_device.end(), [d](const auto& p) { return p.first == d; });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {d, {}});
    it->second.push_back(k);
    it->second.push_back(v);
  }
  for (auto& [device, tensors] : by_device) {
    try {
      TensorAllocation a = allocate_tensors(tensors, device->default_buffer_type(), BufferUsage::Any);
      for (auto& b : a.buffers) {
        b->clear(0);
        cache_buffers_.push_back(std::move(b));
      }
    } catch (const OutOfMemory& e) {
      const std::string swa =
          swa_cache_cells() > 0 ? fmt::format(", {} for sliding-window layers", swa_cache_cells()) : "";
      throw e.within(fmt::format("the KV cache ({} cells{}, {} layers on {})", n_ctx_, swa, tensors.size() / 2,
                                 device->name()),
                     MemoryUse::KvCache);
    }
  }
  // One backend per device holding weights or cache, the CPU last.
  std::vector<Backend*> order;
  for (Device* d : model.devices()) {
    backends_.push_back(d->create_backend({.n_threads = options.n_threads, .poll = options.poll}));
    order.push_back(backends_.back().get());
  }
  SchedulerOptions sched_options;
  sched_options.profiler = options.profiler;
  scheduler_ = std::make_unique<Scheduler>(order, sched_options);
  if (options_.logits_per_graph < 0) fail("logits_per_graph {} is negative", options_.logits_per_graph);
  logits_per_graph_ = options_.logits_per_graph > 0 ? options_.logits_per_graph
                                                     : std::max<int64_t>(32, options_.n_seq_max);
  // ComputeBuffers::Worst: size the compute buffers once for the worst case,
  // a full micro-batch attending to the whole context: with every token's
  // hidden state and the head graph, and with as many logits as one graph
  // computes (the buffers keep the largest size each reserve asks for).
  if (options_.compute_buffers == ComputeBuffers::Grow) return;
  const int64_t worst = std::min(options_.n_ubatch, n_ctx_);
  try {
    if (worst > logits_per_graph_) {
      UbatchGraph hidden;
      build_graph(hidden, worst, n_ctx_, swa_cache_cells(), worst);
      scheduler_->reserve(hidden.graph);
      HeadGraph head;
      build_head_graph(head, logits_per_graph_);
      scheduler_->reserve(head.graph);
    }
    // Last: the graphs of prompts and generated tokens reuse its offsets.
    UbatchGraph g;
    build_graph(g, worst, n_ctx_, swa_cache_cells(), std::min(worst, logits_per_graph_));
    scheduler_->reserve(g.graph);
  } catch (const OutOfMemory& e) {
    throw e.within(fmt::format("the compute buffers ({} tokens a micro-batch, context {})", worst, n_ctx_),
                   MemoryUse::Compute);
  }
}

Session::~Session() = default;

std::vector<std::pair<std::string, size_t>> Session::kv_cache_bytes_by_buffer_type() const {
  std::vector<std::pair<std::string, size_t>> out;
  for (const auto& b : cache_buffers_) {
    const std::string name(b->type().name());
    auto it = std::find_if(out.begin(), out.end(), [&name](const auto& p) { return p.first == name; });
    if (it == out.end()) it = out.insert(out.end(), {name, 0});
    it->second += b->size();
  }
  return out;
}

std::vector<float> Session::decode(std::span<const int32_t> tokens, bool all_logits) {
  if (tokens.empty()) fail("decode: no tokens given");
  const int64_t n_past = this->n_past();
  if (cells_.used() + static_cast<int64_t>(tokens.size()) > n_ctx_)
    fail("decode: {} tokens after {} already in the cache exceed the context of {} (raise -c)", tokens.size(),
         cells_.used(), n_ctx_);
  Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.add(tokens[i], static_cast<int32_t>(n_past + i), 0, all_logits || i + 1 == tokens.size());
  return decode(batch);
}

std::vector<float> Session::decode(const Batch& batch) {
  const size_t n = batch.size();
  if (n == 0) fail("decode: no tokens given");
  if (batch.positions.size() != n || batch.seq_ids.size() != n || batch.want_logits.size() != n)
    fail("decode: the batch has {} tokens but {} positions, {} sequence ids and {} logits flags", n,
         batch.positions.size(), batch.seq_ids.size(), batch.want_logits.size());
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = batch.tokens[i];
    if (t < 0 || t >= n_vocab) fail("decode: token id {} is outside the vocabulary [0, {})", t, n_vocab);
    if (batch.positions[i] < 0 || batch.seq_ids[i] < 0)
      fail("decode: token {} has position {} and sequence {}; both must be >= 0", i, batch.positions[i],
           batch.seq_ids[i]);
  }
  if (cells_.used() + static_cast<int64_t>(n) > n_ctx_)
    fail("decode: {} tokens after {} already in the cache exceed the context of {} (raise -c)", n, cells_.used(),
         n_ctx_);
  if (swa_cache_cells() > 0) check_swa_batch(batch);
  std::vector<float> logits;
  DecodeUndo undo;
  undo.floors = swa_floor_;
  undo.swa_state.assign(static_cast<size_t>(swa_cache_cells()), DecodeUndo::kFree);
  try {
    for (size_t i = 0; i < n; i += static_cast<size_t>(options_.n_ubatch)) {
      std::vector<float> out = decode_ubatch(batch, i, std::min<size_t>(options_.n_ubatch, n - i), undo);
      logits.insert(logits.end(), out.begin(), out.end());
    }
  } catch (...) {
    for (int32_t c : undo.occupied) cells_.vacate(c);
    for (int32_t c : undo.occupied_swa) swa_cells_.vacate(c);
    // Window cells freed after a micro-batch come back, but for those whose
    // rows a later micro-batch's graph wrote: the window before them is
    // gone from the sequence, which can_continue then tells.
    swa_floor_ = undo.floors;
    for (auto d = undo.dropped.rbegin(); d != undo.dropped.rend(); ++d) {
      if (undo.swa_state[static_cast<size_t>(d->cell)] == DecodeUndo::kWritten)
        swa_floor_[d->seq] = std::max(swa_floor_[d->seq], d->pos + 1);
      else
        swa_cells_.tag(d->cell, d->seq, d->pos);
    }
    throw;
  }
  return logits;
}

void Session::check_swa_batch(const Batch& batch) const {
  std::vector<int32_t> first(swa_floor_.size(), -1);  // each sequence's lowest position in the batch
  for (size_t i = 0; i < batch.size(); ++i) {
    const int32_t seq = batch.seq_ids[i];
    if (seq >= options_.n_seq_max)
      fail("decode: token {} is in sequence {}, but the sliding-window cache was sized for {} sequences "
           "(n_seq_max; the server's -np): use ids below it, or keep full-context caches (--swa-full)",
           i, seq, options_.n_seq_max);
    int32_t& f = first[static_cast<size_t>(seq)];
    f = f < 0 ? batch.positions[i] : std::min(f, batch.positions[i]);
  }
  for (size_t seq = 0; seq < first.size(); ++seq)
    if (first[seq] >= 0 && !can_continue(static_cast<int32_t>(seq), first[seq]))
      fail("decode: sequence {} continues at position {}, but the sliding-window cache has dropped its cells "
           "below position {} that the window ({} positions) needs; decode the sequence again from its start, "
           "or keep full-context caches (--swa-full)",
           seq, first[seq], swa_floor_[seq], model_.hparams().n_swa);
}

bool Session::can_continue(int32_t seq, int32_t pos) const {
  if (swa_cache_cells() == 0) return true;
  if (seq < 0 || seq >= static_cast<int32_t>(swa_floor_.size())) return false;
  const int64_t window_start = std::max<int64_t>(0, pos - model_.hparams().n_swa + 1);
  return swa_floor_[static_cast<size_t>(seq)] <= window_start;
}

void Session::drop_outside_window(std::span<const int32_t> seqs, std::span<const int32_t> positions,
                                  DecodeUndo& undo) {
  std::vector<int32_t> last(swa_floor_.size(), -1);  // each sequence's highest position in the micro-batch
  for (size_t i = 0; i < seqs.size(); ++i) {
    int32_t& l = last[static_cast<size_t>(seqs[i])];
    l = std::max(l, positions[i]);
  }
  // The next token (after `last`) sees positions above last + 1 - n_swa.
  const int64_t n_swa = model_.hparams().n_swa;
  for (size_t seq = 0; seq < last.size(); ++seq) {
    if (last[seq] < 0) continue;
    const int64_t keep_from = last[seq] + 2 - n_swa;
    if (keep_from <= 0) continue;
    const auto s = static_cast<int32_t>(seq);
    for (const KvCells::Dropped& d : swa_cells_.drop_older(s, static_cast<int32_t>(keep_from))) {
      // A cell this decode took is vacated anyway if it throws.
      if (undo.swa_state[static_cast<size_t>(d.cell)] == DecodeUndo::kFree) undo.dropped.push_back({s, d.cell, d.pos});
      swa_floor_[seq] = std::max(swa_floor_[seq], d.pos + 1);
    }
  }
}

void Session::seq_rm(int32_t seq, int32_t p0, int32_t p1) {
  cells_.seq_rm(seq, p0, p1);
  swa_cells_.seq_rm(seq, p0, p1);
  forget_emptied_floors();
}

void Session::seq_cp(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  if (swa_cache_cells() > 0) {
    const auto n = static_cast<int32_t>(swa_floor_.size());
    if (src < 0 || src >= n || dst < 0 || dst >= n)
      fail("seq_cp: sequences {} and {} must be in [0, {}) (n_seq_max of the sliding-window cache)", src, dst, n);
    swa_floor_[dst] = std::max(swa_floor_[dst], swa_floor_[src]);
  }
  cells_.seq_cp(src, dst, p0, p1);
  swa_cells_.seq_cp(src, dst, p0, p1);
}

void Session::seq_keep(int32_t seq) {
  cells_.seq_keep(seq);
  swa_cells_.seq_keep(seq);
  forget_emptied_floors();
}

// A sequence with no cell left starts again: nothing of it is missing.
void Session::forget_emptied_floors() {
  for (size_t seq = 0; seq < swa_floor_.size(); ++seq)
    if (swa_floor_[seq] > 0 && cells_.seq_pos_max(static_cast<int32_t>(seq)) < 0) swa_floor_[seq] = 0;
}

void Session::reset() {
  cells_.clear();
  swa_cells_.clear();
  std::fill(swa_floor_.begin(), swa_floor_.end(), 0);
}

void Session::shrink_compute_buffers() {
  last_graph_.reset();  // their tensors hold the buffers
  last_head_.reset();
  scheduler_->release_buffers();
}

size_t Session::compute_buffer_bytes() const {
  size_t total = 0;
  for (const SchedBufferReport& b : scheduler_->report().buffers) total += b.bytes;
  return total;
}

int64_t Session::padded_n_kv(const KvCells& cells) {
  const int64_t used = std::max<int64_t>(cells.n_kv(), 1);
  return std::min(cells.size(), (used + kKvPadding - 1) / kKvPadding * kKvPadding);
}

void Session::build_graph(UbatchGraph& g, int64_t n, int64_t n_kv, int64_t n_kv_swa, int64_t n_out) const {
  const HParams& h = model_.hparams();
  Context& ctx = g.ctx;
  Tensor* tok = g.tokens = ctx.new_tensor(DType::I32, {n});
  tok->name = "tokens";
  Tensor* pos = g.positions = ctx.new_tensor(DType::I32, {n});
  pos->name = "positions";
  for (Tensor* t : {tok, pos}) t->flags |= kFlagInput;
  // Each input only where a layer reads it (a graph's inputs must be used:
  // gemma3 with fewer than 6 layers has no global one).
  const auto input = [&ctx](DType type, std::vector<int64_t> shape, const char* name) {
    Tensor* t = ctx.new_tensor(type, shape);
    t->name = name;
    t->flags |= kFlagInput;
    return t;
  };
  const bool own_swa_cache = swa_cache_cells() > 0;
  const auto& layers = model_.layers();
  const bool any_global = std::any_of(layers.begin(), layers.end(), [](const Layer& L) { return !L.swa; });
  const bool any_swa = std::any_of(layers.begin(), layers.end(), [](const Layer& L) { return L.swa; });
  Tensor* cells = nullptr;
  if (any_global || !own_swa_cache) cells = g.kv_cells = input(DType::I32, {n}, "kv_cells");
  Tensor* mask = nullptr;
  if (any_global) mask = g.mask = input(DType::F32, {n_kv, n}, "kq_mask");
  if (any_swa) g.mask_swa = input(DType::F32, {own_swa_cache ? n_kv_swa : n_kv, n}, "kq_mask_swa");
  if (any_swa && own_swa_cache) g.kv_cells_swa = input(DType::I32, {n}, "kv_cells_swa");

  Tensor* x = get_rows(ctx, model_.token_embd(), tok);
  if (h.embd_scale != 1.0f) x = scale(ctx, x, h.embd_scale);
  LayerGraph lg{ctx, model_, h, n, n_kv, pos, cells, mask, g.mask_swa};
  lg.flash_attn = flash_attn_;
  for (int64_t l = 0; l < h.n_layer; ++l) {
    lg.k_cache = k_cache_[l];
    lg.v_cache = v_cache_[l];
    const bool in_swa_cache = own_swa_cache && layers[l].swa;
    lg.n_kv = in_swa_cache ? n_kv_swa : n_kv;
    lg.kv_cells = in_swa_cache ? g.kv_cells_swa : cells;
    x = model_.arch().build_layer(lg, model_.layers()[l], x);
  }
  Tensor* out = mul(ctx, rms_norm(ctx, x, h.rms_eps), model_.output_norm());
  g.out_ids = ctx.new_tensor(DType::I32, {n_out});
  g.out_ids->name = "out_ids";
  g.out_ids->flags |= kFlagInput;
  out = get_rows(ctx, out, g.out_ids);
  if (n_out > logits_per_graph_) {
    g.hidden = out;
    g.hidden->name = "hidden_out";
    g.graph = Graph::build(g.hidden);
    return;
  }
  g.logits = output_head(ctx, out);
  g.graph = Graph::build(g.logits);
}

Tensor* Session::output_head(Context& ctx, Tensor* hidden) const {
  const HParams& h = model_.hparams();
  LayerGraph lg{ctx, model_, h, hidden->ne[1]};
  Tensor* logits = linear(lg, model_.output(), hidden);
  if (h.final_softcap > 0.0f) logits = soft_cap(lg, logits, h.final_softcap);
  logits->name = "logits";
  return logits;
}

void Session::build_head_graph(HeadGraph& g, int64_t rows) const {
  g.hidden = g.ctx.new_tensor(DType::F32, {model_.hparams().n_embd, rows});
  g.hidden->name = "hidden_in";
  g.hidden->flags |= kFlagInput;
  g.logits = output_head(g.ctx, g.hidden);
  g.graph = Graph::build(g.logits);
}

std::vector<float> Session::read_floats(const Tensor& t) {
  std::vector<float> out;
  if (t.type == DType::F32 && t.is_contiguous()) {
    out.resize(static_cast<size_t>(t.nelements()));
    scheduler_->get_tensor_async(t, out.data(), 0, out.size() * sizeof(float));
    scheduler_->synchronize();
  } else {
    scheduler_->synchronize();
    out = tensor_to_floats(t);
  }
  return out;
}

std::vector<float> Session::head_logits(std::span<const float> hidden, int64_t n_out) {
  const int64_t n_embd = model_.hparams().n_embd;
  std::vector<float> logits;
  logits.reserve(static_cast<size_t>(n_out * model_.hparams().n_vocab));
  for (int64_t first = 0; first < n_out; first += logits_per_graph_) {
    const int64_t rows = std::min(logits_per_graph_, n_out - first);
    last_head_.reset();
    last_head_ = std::make_unique<HeadGraph>();
    build_head_graph(*last_head_, rows);
    try {
      scheduler_->allocate(last_head_->graph);
    } catch (const OutOfMemory& oom) {
      throw oom.within(fmt::format("the compute buffers (the logits of {} tokens)", rows), MemoryUse::Compute);
    }
    tensor_set(*last_head_->hidden, hidden.data() + first * n_embd, 0,
               static_cast<size_t>(rows * n_embd) * sizeof(float));
    scheduler_->compute_async(last_head_->graph);
    const std::vector<float> part = read_floats(*last_head_->logits);
    logits.insert(logits.end(), part.begin(), part.end());
  }
  return logits;
}

std::vector<float> Session::decode_ubatch(const Batch& batch, size_t first, size_t n, DecodeUndo& undo) {
  const auto span = [first, n](const std::vector<int32_t>& v) { return std::span(v).subspan(first, n); };
  const std::span<const int32_t> seqs = span(batch.seq_ids), positions = span(batch.positions);
  std::vector<int32_t> out_ids;
  for (size_t i = 0; i < n; ++i)
    if (batch.want_logits[first + i]) out_ids.push_back(static_cast<int32_t>(i));
  if (out_ids.empty()) out_ids.push_back(static_cast<int32_t>(n - 1));  // a graph needs an output
  const bool wanted_any = batch.want_logits.begin() + first + n !=
                          std::find(batch.want_logits.begin() + first, batch.want_logits.begin() + first + n, 1);

  std::vector<int32_t> cells = cells_.find_free(static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    cells_.occupy(cells[i], seqs[i], positions[i]);
    undo.occupied.push_back(cells[i]);
  }
  const bool own_swa_cache = swa_cache_cells() > 0;
  std::vector<int32_t> swa_cells;
  if (own_swa_cache) {
    swa_cells = swa_cells_.find_free(static_cast<int64_t>(n), "sliding-window KV cache");
    for (size_t i = 0; i < n; ++i) {
      swa_cells_.occupy(swa_cells[i], seqs[i], positions[i]);
      undo.occupied_swa.push_back(swa_cells[i]);
      undo.swa_state[static_cast<size_t>(swa_cells[i])] = DecodeUndo::kTaken;
    }
  }
  const int64_t n_kv = padded_n_kv(cells_);
  const int64_t n_kv_swa = own_swa_cache ? padded_n_kv(swa_cells_) : 0;

  const auto host_start = std::chrono::steady_clock::now();
  const int64_t n_out = static_cast<int64_t>(out_ids.size());
  const int64_t n_tokens = static_cast<int64_t>(n);
  const bool same_shape = last_graph_ && last_graph_->n == n_tokens && last_graph_->n_kv == n_kv &&
                          last_graph_->n_kv_swa == n_kv_swa && last_graph_->n_out == n_out;
  // A graph whose build, placement or run failed is not kept: the next
  // micro-batch builds and plans its own.
  try {
    if (options_.reuse_graph && same_shape) {
      ++stats_.graphs_reused;
    } else {
      last_graph_.reset();
      last_graph_ = std::make_unique<UbatchGraph>();
      last_graph_->n = n_tokens;
      last_graph_->n_kv = n_kv;
      last_graph_->n_kv_swa = n_kv_swa;
      last_graph_->n_out = n_out;
      build_graph(*last_graph_, n_tokens, n_kv, n_kv_swa, n_out);
      try {
        scheduler_->allocate(last_graph_->graph);
      } catch (const OutOfMemory& oom) {
        throw oom.within(fmt::format("the compute buffers ({} tokens attending to {} cells)", n, n_kv),
                         MemoryUse::Compute);
      }
      ++stats_.graphs_built;
    }
    UbatchGraph& g = *last_graph_;
    tensor_set(*g.tokens, batch.tokens.data() + first, 0, n * sizeof(int32_t));
    tensor_set(*g.positions, positions.data(), 0, n * sizeof(int32_t));
    if (g.kv_cells) tensor_set(*g.kv_cells, cells.data(), 0, n * sizeof(int32_t));
    tensor_set(*g.out_ids, out_ids.data(), 0, out_ids.size() * sizeof(int32_t));
    std::vector<float> m;  // one mask at a time, each sized for its cells
    if (g.mask) {
      m.resize(static_cast<size_t>(n_kv) * n);
      fill_kq_mask(cells_, seqs, positions, n_kv, 0, m);
      tensor_set(*g.mask, m.data(), 0, m.size() * sizeof(float));
    }
    if (g.kv_cells_swa) tensor_set(*g.kv_cells_swa, swa_cells.data(), 0, n * sizeof(int32_t));
    if (g.mask_swa) {
      const auto window = static_cast<int32_t>(model_.hparams().n_swa);
      const int64_t cols = own_swa_cache ? n_kv_swa : n_kv;
      m.resize(static_cast<size_t>(cols) * n);
      fill_kq_mask(own_swa_cache ? swa_cells_ : cells_, seqs, positions, cols, window, m);
      tensor_set(*g.mask_swa, m.data(), 0, m.size() * sizeof(float));
    }

    const auto compute_start = std::chrono::steady_clock::now();
    stats_.host_ns += elapsed_ns(host_start);
    // The logits are read in the same stream as the graph: a remote device
    // sends them in the reply of its compute call.
    for (int32_t c : swa_cells) undo.swa_state[static_cast<size_t>(c)] = DecodeUndo::kWritten;
    const Scheduler::ExpertCopies experts_before = scheduler_->expert_copies();
    scheduler_->compute_async(g.graph);
    stats_.expert_bytes_copied += scheduler_->expert_copies().bytes_copied - experts_before.bytes_copied;
    stats_.expert_bytes_skipped += scheduler_->expert_copies().bytes_skipped - experts_before.bytes_skipped;
    std::vector<float> logits;
    if (!wanted_any) {
      scheduler_->synchronize();
    } else if (g.logits) {
      logits = read_floats(*g.logits);
    } else {
      const std::vector<float> hidden = read_floats(*g.hidden);
      last_graph_.reset();  // the head graphs re-plan the compute buffers
      logits = head_logits(hidden, n_out);
    }
    stats_.compute_ns += elapsed_ns(compute_start);
    if (own_swa_cache) drop_outside_window(seqs, positions, undo);
    return logits;
  } catch (...) {
    last_graph_.reset();
    throw;
  }
}

std::string_view compute_buffers_name(ComputeBuffers c) { return c == ComputeBuffers::Grow ? "grow" : "worst"; }

std::optional<ComputeBuffers> compute_buffers_from_name(std::string_view name) {
  for (ComputeBuffers c : {ComputeBuffers::Worst, ComputeBuffers::Grow})
    if (name == compute_buffers_name(c)) return c;
  return std::nullopt;
}

std::string_view flash_attn_name(FlashAttn fa) {
  switch (fa) {
    case FlashAttn::Off: return "off";
    case FlashAttn::On: return "on";
    case FlashAttn::Auto: return "auto";
  }
  return "?";
}

std::optional<FlashAttn> flash_attn_from_name(std::string_view name) {
  for (FlashAttn fa : {FlashAttn::Off, FlashAttn::On, FlashAttn::Auto})
    if (name == flash_attn_name(fa)) return fa;
  return std::nullopt;
}

}  // namespace loom
