// Session: the KV cache and the per-micro-batch graph around the family's
// layers (see model.h and arch/arch.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "arch/arch.h"
#include "arch/blocks.h"
#include "loom/error.h"
#include "loom/model.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

// Fills the attention masks of n tokens at positions n_past.. over the
// n_past + n cached ones: 0 where a token may attend, -inf elsewhere. Causal:
// later positions are hidden; in mask_swa (when not null) also those
// `window` or more positions back (llama.cpp's standard sliding window).
void set_masks(Tensor& mask, Tensor* mask_swa, int64_t n_past, int64_t n, int64_t window) {
  const int64_t n_kv = n_past + n;
  constexpr float kHidden = -std::numeric_limits<float>::infinity();
  std::vector<float> m(static_cast<size_t>(n_kv * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n_kv; ++j) m[i * n_kv + j] = j <= n_past + i ? 0.0f : kHidden;
  tensor_set(mask, m.data(), 0, m.size() * sizeof(float));
  if (!mask_swa) return;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n_kv; ++j)
      if (n_past + i - j >= window) m[i * n_kv + j] = kHidden;
  tensor_set(*mask_swa, m.data(), 0, m.size() * sizeof(float));
}

}  // namespace

struct Session::UbatchGraph {
  Context ctx;
  Tensor* tokens = nullptr;
  Tensor* positions = nullptr;
  Tensor* mask = nullptr;
  Tensor* mask_swa = nullptr;  // sliding-window layers' mask (HParams::n_swa > 0)
  Tensor* logits = nullptr;
  Graph graph;
};

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
  for (DType t : {options.type_k, options.type_v})
    if (t != DType::F32 && t != DType::F16 && t != DType::BF16)
      fail("KV cache type {} is not supported (f32, f16, bf16)", type_name(t));
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
    TensorAllocation a = allocate_tensors(tensors, device->default_buffer_type(), BufferUsage::Any);
    for (auto& b : a.buffers) {
      b->clear(0);
      cache_buffers_.push_back(std::move(b));
    }
  }
  // One backend per device holding weights or cache, the CPU last.
  std::vector<Backend*> order;
  for (Device* d : model.devices()) {
    backends_.push_back(d->create_backend({.n_threads = options.n_threads}));
    order.push_back(backends_.back().get());
  }
  scheduler_ = std::make_unique<Scheduler>(order);
  // Size the compute buffers once for the worst case: a full micro-batch
  // attending to the whole context.
  const int64_t worst = std::min(options_.n_ubatch, n_ctx_);
  UbatchGraph g;
  build_graph(g, worst, n_ctx_ - worst, true);
  scheduler_->reserve(g.graph);
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
  if (n_past_ + static_cast<int64_t>(tokens.size()) > n_ctx_)
    fail("decode: {} tokens after {} already in the cache exceed the context of {} (raise -c)", tokens.size(),
         n_past_, n_ctx_);
  const int64_t n_vocab = model_.hparams().n_vocab;
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab) fail("decode: token id {} is outside the vocabulary [0, {})", t, n_vocab);
  std::vector<float> logits;
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(options_.n_ubatch)) {
    const size_t n = std::min<size_t>(options_.n_ubatch, tokens.size() - i);
    const bool last = i + n == tokens.size();
    std::vector<float> out = decode_ubatch(tokens.subspan(i, n), all_logits);
    if (all_logits)
      logits.insert(logits.end(), out.begin(), out.end());
    else if (last)
      logits = std::move(out);
  }
  return logits;
}

void Session::build_graph(UbatchGraph& g, int64_t n, int64_t n_past, bool all_logits) const {
  const HParams& h = model_.hparams();
  const int64_t n_kv = n_past + n;
  Context& ctx = g.ctx;
  Tensor* tok = g.tokens = ctx.new_tensor(DType::I32, {n});
  tok->name = "tokens";
  Tensor* pos = g.positions = ctx.new_tensor(DType::I32, {n});
  pos->name = "positions";
  Tensor* mask = g.mask = ctx.new_tensor(DType::F32, {n_kv, n});
  mask->name = "kq_mask";
  for (Tensor* t : {tok, pos, mask}) t->flags |= kFlagInput;
  if (h.n_swa > 0) {
    g.mask_swa = ctx.new_tensor(DType::F32, {n_kv, n});
    g.mask_swa->name = "kq_mask_swa";
    g.mask_swa->flags |= kFlagInput;
  }

  Tensor* x = get_rows(ctx, model_.token_embd(), tok);
  if (h.embd_scale != 1.0f) x = scale(ctx, x, h.embd_scale);
  LayerGraph lg{ctx, model_, h, n, n_kv, pos, mask, g.mask_swa};
  for (int64_t l = 0; l < h.n_layer; ++l) {
    lg.k_cache = k_cache_[l];
    lg.v_cache = v_cache_[l];
    x = model_.arch().build_layer(lg, model_.layers()[l], x);
  }
  Tensor* out = mul(ctx, rms_norm(ctx, x, h.rms_eps), model_.output_norm());
  if (!all_logits) out = view_2d(ctx, out, h.n_embd, 1, out->nb[1], (n - 1) * out->nb[1]);
  g.logits = linear(lg, model_.output(), out);
  if (h.final_softcap > 0.0f) g.logits = soft_cap(lg, g.logits, h.final_softcap);
  g.logits->name = "logits";
  g.graph = Graph::build(g.logits);
}

std::vector<float> Session::decode_ubatch(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  last_graph_.reset();
  last_graph_ = std::make_unique<UbatchGraph>();
  UbatchGraph& g = *last_graph_;
  build_graph(g, n, n_past_, all_logits);
  scheduler_->allocate(g.graph);
  tensor_set(*g.tokens, tokens.data(), 0, tokens.size_bytes());
  std::vector<int32_t> positions(n);
  for (int64_t i = 0; i < n; ++i) positions[i] = static_cast<int32_t>(n_past_ + i);
  tensor_set(*g.positions, positions.data(), 0, positions.size() * sizeof(int32_t));
  set_masks(*g.mask, g.mask_swa, n_past_, n, model_.hparams().n_swa);

  scheduler_->compute(g.graph);
  n_past_ += n;
  return tensor_to_floats(*g.logits);
}

}  // namespace loom
