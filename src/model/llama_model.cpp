#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "loom/error.h"
#include "loom/llama.h"
#include "loom/log.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "loom/tokenizer.h"

namespace loom {
namespace {

// A bar on stderr while weights are read, shown only on a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled && isatty(fileno(stderr))) {}
  void update(uint64_t done, uint64_t total) {
    if (!enabled_ || total == 0) return;
    const int pct = static_cast<int>(done * 100 / total);
    if (pct == last_) return;
    last_ = pct;
    const int filled = pct / 5;
    std::fprintf(stderr, "\rloading weights [%.*s%.*s] %3d%%", filled, "####################", 20 - filled,
                 "                    ", pct);
    if (done == total) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  int last_ = -1;
};

}  // namespace

LlamaHParams LlamaHParams::from_gguf(const gguf::File& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama")
    fail("{}: architecture '{}' is not supported (only 'llama')", f.path(), arch);
  LlamaHParams h;
  h.n_embd = static_cast<int64_t>(f.get_uint("llama.embedding_length"));
  h.n_layer = static_cast<int64_t>(f.get_uint("llama.block_count"));
  h.n_head = static_cast<int64_t>(f.get_uint("llama.attention.head_count"));
  h.n_head_kv = static_cast<int64_t>(f.get_uint_or("llama.attention.head_count_kv").value_or(h.n_head));
  h.n_ff = static_cast<int64_t>(f.get_uint("llama.feed_forward_length"));
  h.n_ctx_train = static_cast<int64_t>(f.get_uint("llama.context_length"));
  h.rms_eps = f.get_f32_or("llama.attention.layer_norm_rms_epsilon").value_or(1e-5f);
  h.rope_freq_base = f.get_f32_or("llama.rope.freq_base").value_or(10000.0f);
  if (auto factor = f.get_f32_or("llama.rope.scale_linear")) h.rope_freq_scale = 1.0f / *factor;
  if (h.n_head <= 0 || h.n_embd % h.n_head != 0)
    fail("{}: llama.attention.head_count = {} does not divide llama.embedding_length = {}", f.path(), h.n_head,
         h.n_embd);
  if (h.n_head_kv <= 0 || h.n_head % h.n_head_kv != 0)
    fail("{}: llama.attention.head_count_kv = {} does not divide head_count = {}", f.path(), h.n_head_kv, h.n_head);
  h.n_rot = static_cast<int64_t>(f.get_uint_or("llama.rope.dimension_count").value_or(h.head_dim()));
  if (h.n_rot <= 0 || h.n_rot > h.head_dim() || h.n_rot % 2)
    fail("{}: llama.rope.dimension_count = {} must be even and at most the head size {}", f.path(), h.n_rot,
         h.head_dim());
  if (h.n_layer <= 0 || h.n_ff <= 0 || h.n_ctx_train <= 0)
    fail("{}: block_count ({}), feed_forward_length ({}) and context_length ({}) must be positive", f.path(),
         h.n_layer, h.n_ff, h.n_ctx_train);
  return h;
}

LlamaModel::~LlamaModel() = default;

Tensor* LlamaModel::weight(const std::string& name, std::initializer_list<int64_t> ne, bool required) {
  const gguf::TensorInfo* info = file_->find_tensor(name);
  if (!info) {
    if (required) fail("{}: tensor '{}' is missing", file_->path(), name);
    return nullptr;
  }
  std::array<int64_t, 4> want{1, 1, 1, 1};
  std::copy(ne.begin(), ne.end(), want.begin());
  if (info->ne != want)
    fail("{}: tensor '{}' has shape [{}, {}, {}, {}], expected [{}, {}, {}, {}]", file_->path(), name, info->ne[0],
         info->ne[1], info->ne[2], info->ne[3], want[0], want[1], want[2], want[3]);
  if (!is_known_type(info->type)) {
    const gguf::TypeInfo* ti = gguf::type_info(info->type);
    fail("{}: tensor '{}' has type {}, which Loom does not support (f32, f16, bf16, q8_0, q4_0)", file_->path(), name,
         ti ? ti->name : "unknown");
  }
  Tensor* t = ctx_.new_tensor(static_cast<DType>(info->type), std::span<const int64_t>(want.data(), 4));
  t->name = name;
  t->flags |= kFlagWeight;
  weights_.emplace_back(t, info);
  return t;
}

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = gguf::File::open(path, options.use_mmap);
  m->hparams_ = LlamaHParams::from_gguf(*m->file_);
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  const gguf::TensorInfo* embd = m->file_->find_tensor("token_embd.weight");
  if (!embd) fail("{}: tensor 'token_embd.weight' is missing", path);
  m->hparams_.n_vocab = embd->ne[1];
  const LlamaHParams& h = m->hparams_;
  m->token_embd_ = m->weight("token_embd.weight", {h.n_embd, h.n_vocab});
  for (int64_t l = 0; l < h.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayer L;
    L.attn_norm = m->weight(p + "attn_norm.weight", {h.n_embd});
    L.wq = m->weight(p + "attn_q.weight", {h.n_embd, h.n_embd});
    L.wk = m->weight(p + "attn_k.weight", {h.n_embd, h.n_embd_kv()});
    L.wv = m->weight(p + "attn_v.weight", {h.n_embd, h.n_embd_kv()});
    L.wo = m->weight(p + "attn_output.weight", {h.n_embd, h.n_embd});
    L.ffn_norm = m->weight(p + "ffn_norm.weight", {h.n_embd});
    L.ffn_gate = m->weight(p + "ffn_gate.weight", {h.n_embd, h.n_ff});
    L.ffn_up = m->weight(p + "ffn_up.weight", {h.n_embd, h.n_ff});
    L.ffn_down = m->weight(p + "ffn_down.weight", {h.n_ff, h.n_embd});
    m->layers_.push_back(L);
  }
  m->output_norm_ = m->weight("output_norm.weight", {h.n_embd});
  m->output_ = m->weight("output.weight", {h.n_embd, m->hparams_.n_vocab}, false);
  if (!m->output_) m->output_ = m->token_embd_;  // tied embeddings: one copy
  for (const auto& [t, info] : m->weights_)
    if (t->type == DType::I32) fail("{}: tensor '{}' is i32; weights must be float or quantized", path, t->name);
  m->place_weights(options);
  m->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

void LlamaModel::place_weights(const LoadOptions& options) {
  Device& cpu = Registry::get().cpu();
  ProgressBar bar(options.progress);
  for (const auto& [t, info] : weights_) weight_bytes_ += info->size;
  if (file_->mapped() && file_->alignment() % 32 == 0) {
    // The weights stay in the page cache: a CPU_Mapped buffer over the file.
    auto buffer = cpu.buffer_from_host_ptr(const_cast<uint8_t*>(file_->map_base()), file_->file_size());
    buffer->set_usage(BufferUsage::Weights);
    for (const auto& [t, info] : weights_) buffer->place(*t, info->file_offset);  // no copy: no progress to show
    buffers_.push_back(std::move(buffer));
    return;
  }
  if (file_->mapped()) log(LogLevel::Info, "{}: alignment {} is below 32 bytes; reading weights into memory",
                           file_->path(), file_->alignment());
  std::vector<Tensor*> tensors;
  for (const auto& [t, info] : weights_) tensors.push_back(t);
  TensorAllocation a = allocate_tensors(tensors, cpu.default_buffer_type(), BufferUsage::Weights);
  buffers_ = std::move(a.buffers);
  uint64_t done = 0;
  for (const auto& [t, info] : weights_) {
    file_->read_tensor(*info, t->data, 0, info->size);
    bar.update(done += info->size, weight_bytes_);
  }
}

std::string LlamaModel::describe_buffers() const {
  std::string s;
  for (const auto& b : buffers_)
    s += fmt::format("{}{} {:.1f} MiB", s.empty() ? "" : ", ", b->type().name(), b->size() / 1048576.0);
  return s;
}

}  // namespace loom
