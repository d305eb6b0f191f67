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
  int64_t n = 0, n_kv = 0, n_out = 0;  // the shape it was built for
  Context ctx;
  Tensor* tokens = nullptr;
  Tensor* positions = nullptr;
  Tensor* kv_cells = nullptr;
  Tensor* mask = nullptr;
  Tensor* out_ids = nullptr;  // rows whose logits are wanted (null: every row)
  Tensor* mask_swa = nullptr;  // sliding-window layers' mask (HParams::n_swa > 0)
  Tensor* logits = nullptr;
  Graph graph;
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
    Tensor* k = cache_ctx_.new_tensor(options.type_k, {h.n_embd_kv(), n_ctx_});
    k->name = "cache_k_l" + std::to_string(l);
    Tensor* v = cache_ctx_.new_tensor(options.type_v, {h.n_embd_kv(), n_ctx_});
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
      throw e.within(fmt::format("the KV cache ({} cells, {} layers on {})", n_ctx_, tensors.size() / 2,
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
  // ComputeBuffers::Worst: size the compute buffers once for the worst case,
  // a full micro-batch attending to the whole context.
  if (options_.compute_buffers == ComputeBuffers::Grow) return;
  const int64_t worst = std::min(options_.n_ubatch, n_ctx_);
  UbatchGraph g;
  build_graph(g, worst, n_ctx_, worst);
  try {
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
  std::vector<float> logits;
  std::vector<int32_t> occupied;  // this call's cells, vacated again if a micro-batch fails
  try {
    for (size_t i = 0; i < n; i += static_cast<size_t>(options_.n_ubatch)) {
      std::vector<float> out = decode_ubatch(batch, i, std::min<size_t>(options_.n_ubatch, n - i), occupied);
      logits.insert(logits.end(), out.begin(), out.end());
    }
  } catch (...) {
    for (int32_t c : occupied) cells_.vacate(c);
    throw;
  }
  return logits;
}

void Session::shrink_compute_buffers() {
  last_graph_.reset();  // its tensors hold the buffers
  scheduler_->release_buffers();
}

size_t Session::compute_buffer_bytes() const {
  size_t total = 0;
  for (const SchedBufferReport& b : scheduler_->report().buffers) total += b.bytes;
  return total;
}

int64_t Session::padded_n_kv() const {
  const int64_t used = std::max<int64_t>(cells_.n_kv(), 1);
  return std::min(n_ctx_, (used + kKvPadding - 1) / kKvPadding * kKvPadding);
}

void Session::build_graph(UbatchGraph& g, int64_t n, int64_t n_kv, int64_t n_out) const {
  const HParams& h = model_.hparams();
  Context& ctx = g.ctx;
  Tensor* tok = g.tokens = ctx.new_tensor(DType::I32, {n});
  tok->name = "tokens";
  Tensor* pos = g.positions = ctx.new_tensor(DType::I32, {n});
  pos->name = "positions";
  Tensor* cells = g.kv_cells = ctx.new_tensor(DType::I32, {n});
  cells->name = "kv_cells";
  Tensor* mask = g.mask = ctx.new_tensor(DType::F32, {n_kv, n});
  mask->name = "kq_mask";
  for (Tensor* t : {tok, pos, cells, mask}) t->flags |= kFlagInput;
  if (h.n_swa > 0) {
    g.mask_swa = ctx.new_tensor(DType::F32, {n_kv, n});
    g.mask_swa->name = "kq_mask_swa";
    g.mask_swa->flags |= kFlagInput;
  }

  Tensor* x = get_rows(ctx, model_.token_embd(), tok);
  if (h.embd_scale != 1.0f) x = scale(ctx, x, h.embd_scale);
  LayerGraph lg{ctx, model_, h, n, n_kv, pos, cells, mask, g.mask_swa};
  lg.flash_attn = flash_attn_;
  for (int64_t l = 0; l < h.n_layer; ++l) {
    lg.k_cache = k_cache_[l];
    lg.v_cache = v_cache_[l];
    x = model_.arch().build_layer(lg, model_.layers()[l], x);
  }
  Tensor* out = mul(ctx, rms_norm(ctx, x, h.rms_eps), model_.output_norm());
  if (n_out != n) {
    g.out_ids = ctx.new_tensor(DType::I32, {n_out});
    g.out_ids->name = "out_ids";
    g.out_ids->flags |= kFlagInput;
    out = get_rows(ctx, out, g.out_ids);
  }
  g.logits = linear(lg, model_.output(), out);
  if (h.final_softcap > 0.0f) g.logits = soft_cap(lg, g.logits, h.final_softcap);
  g.logits->name = "logits";
  g.graph = Graph::build(g.logits);
}

std::vector<float> Session::decode_ubatch(const Batch& batch, size_t first, size_t n,
                                          std::vector<int32_t>& occupied) {
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
    occupied.push_back(cells[i]);
  }
  const int64_t n_kv = padded_n_kv();

  const auto host_start = std::chrono::steady_clock::now();
  const int64_t n_out = static_cast<int64_t>(out_ids.size());
  const int64_t n_tokens = static_cast<int64_t>(n);
  const bool same_shape =
      last_graph_ && last_graph_->n == n_tokens && last_graph_->n_kv == n_kv && last_graph_->n_out == n_out;
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
      last_graph_->n_out = n_out;
      build_graph(*last_graph_, n_tokens, n_kv, n_out);
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
    tensor_set(*g.kv_cells, cells.data(), 0, n * sizeof(int32_t));
    if (g.out_ids) tensor_set(*g.out_ids, out_ids.data(), 0, out_ids.size() * sizeof(int32_t));
    std::vector<float> m(static_cast<size_t>(n_kv) * n);
    fill_kq_mask(cells_, seqs, positions, n_kv, 0, m);
    tensor_set(*g.mask, m.data(), 0, m.size() * sizeof(float));
    if (g.mask_swa) {
      fill_kq_mask(cells_, seqs, positions, n_kv, static_cast<int32_t>(model_.hparams().n_swa), m);
      tensor_set(*g.mask_swa, m.data(), 0, m.size() * sizeof(float));
    }

    const auto compute_start = std::chrono::steady_clock::now();
    stats_.host_ns += elapsed_ns(host_start);
    // The logits are read in the same stream as the graph: a remote device
    // sends them in the reply of its compute call.
    const Scheduler::ExpertCopies experts_before = scheduler_->expert_copies();
    scheduler_->compute_async(g.graph);
    stats_.expert_bytes_copied += scheduler_->expert_copies().bytes_copied - experts_before.bytes_copied;
    stats_.expert_bytes_skipped += scheduler_->expert_copies().bytes_skipped - experts_before.bytes_skipped;
    std::vector<float> logits;
    const bool plain = g.logits->type == DType::F32 && g.logits->is_contiguous();
    if (wanted_any && plain) {
      logits.resize(static_cast<size_t>(g.logits->nelements()));
      scheduler_->get_tensor_async(*g.logits, logits.data(), 0, logits.size() * sizeof(float));
    }
    scheduler_->synchronize();
    if (wanted_any && !plain) logits = tensor_to_floats(*g.logits);
    stats_.compute_ns += elapsed_ns(compute_start);
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
