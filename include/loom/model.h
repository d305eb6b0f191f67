// The model runtime: hyper-parameters and weights read from a GGUF file,
// and a Session that keeps a KV cache and evaluates token batches.
//
// The family (general.architecture) decides which tensors a layer has and
// how it computes; each family is one file under src/model/arch/ (see
// arch.h there), built from shared blocks. Every family's graph per
// micro-batch (n tokens at positions p..p+n-1) is
//   x = get_rows(token_embd, tokens)
//   per layer: x = the family's layer (attention and FFN, e.g. llama's
//              x += W_o attn(rope(W_q h), rope(W_k h), W_v h), h = rms_norm(x) * attn_norm;
//              x += W_down (silu(W_gate h) * W_up h), h = rms_norm(x) * ffn_norm)
//   logits = W_out (rms_norm(x) * output_norm)   (W_out = token_embd if tied)
// (gemma2/3 scale the embeddings and may soft-cap the logits: HParams.)
// A file with a tensor or an "<arch>." key that its family does not use is
// refused: Loom runs a file faithfully or not at all.
#pragma once

#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/backend.h"
#include "loom/context.h"
#include "loom/gguf.h"
#include "loom/kv_cells.h"
#include "loom/placement.h"
#include "loom/scheduler.h"

namespace loom {

class Arch;
class Tokenizer;

struct HParams {
  std::string arch;  // general.architecture
  int64_t n_vocab = 0;
  int64_t n_ctx_train = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t n_embd_head = 0;  // size of one head of q, k and v (attention.key_length, else n_embd / n_head)
  int64_t n_rot = 0;        // rotated dims per head
  RopeMode rope_mode = RopeMode::Normal;  // the family's
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: scales the rotated dims of q and k (LongRoPE)
  int64_t n_ctx_orig = 0;         // rope.scaling.original_context_length (else n_ctx_train): LongRoPE's switch
  float rms_eps = 1e-5f;
  // Sliding-window attention (gemma2, gemma3): the layers with Layer::swa
  // (is_swa) see, from a token at position p, only positions
  // p - n_swa < j <= p. They rope with their own base and scale.
  int64_t n_swa = 0;       // 0: no sliding-window layers
  int64_t swa_period = 0;  // every swa_period-th layer is global, the others use the window (0: all do)
  // A per-layer attention.sliding_window_pattern array (true: windowed), in
  // place of the period; empty: the period decides.
  std::vector<bool> swa_layers;
  float rope_freq_base_swa = 10000.0f;
  float rope_freq_scale_swa = 1.0f;
  float embd_scale = 1.0f;     // token embeddings are multiplied by it (gemma: sqrt(n_embd))
  float attn_scale = 0.0f;     // attention logit scale; 0: 1 / sqrt(head_dim)
  float attn_softcap = 0.0f;   // attention logits become c * tanh(logits / c); 0: none
  float final_softcap = 0.0f;  // output logits likewise
  // Mixture of experts (0 when the layers are dense): experts per layer,
  // experts each token uses, and the feed-forward size of one expert.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // layer 0's when expert_used_count is a per-layer array
  int64_t n_ff_exp = 0;
  std::vector<int64_t> n_expert_used_layers;  // that array; empty: n_expert_used in every layer

  int64_t head_dim() const { return n_embd_head; }
  int64_t n_embd_q() const { return head_dim() * n_head; }
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }
  // Layer il uses the sliding window: as swa_layers says, else all but the
  // last of each swa_period layers.
  bool is_swa(int64_t il) const {
    if (n_swa <= 0) return false;
    if (!swa_layers.empty()) return swa_layers[static_cast<size_t>(il)];
    return swa_period == 0 || il % swa_period < swa_period - 1;
  }
  int64_t expert_used(int64_t il) const {
    return n_expert_used_layers.empty() ? n_expert_used : n_expert_used_layers[static_cast<size_t>(il)];
  }
  // Reads and checks the "<arch>." keys of a supported family; refuses an
  // unknown family and any "<arch>." key the family does not read. Errors
  // name the file and key.
  static HParams from_gguf(const gguf::File& file);
};

// The names of the supported families (general.architecture values).
std::vector<std::string> supported_architectures();

// A layer's weights; a family sets those it has (null: absent).
struct Layer {
  Tensor* attn_norm = nullptr;
  Tensor* wq = nullptr;    // separate q, k, v projections ...
  Tensor* wk = nullptr;
  Tensor* wv = nullptr;
  Tensor* wqkv = nullptr;  // ... or one fused [n_embd, q + k + v] (phi3)
  Tensor* bq = nullptr;    // optional biases (qwen2)
  Tensor* bk = nullptr;
  Tensor* bv = nullptr;
  Tensor* bqkv = nullptr;
  Tensor* attn_q_norm = nullptr;  // per-head RMS norm weights [head_dim] (qwen3)
  Tensor* attn_k_norm = nullptr;
  Tensor* rope_freqs = nullptr;   // per-pair frequency divisors [n_rot / 2] (Llama 3 rope scaling)
  // LongRoPE (phi3): rope_freqs holds the short factors, this the long ones,
  // used instead when the context is longer than HParams::n_ctx_orig.
  Tensor* rope_freqs_long = nullptr;
  bool swa = false;               // sliding-window attention and rope (HParams::n_swa; gemma2/3)
  Tensor* attn_post_norm = nullptr;  // RMS norm of the attention output before the residual add (gemma2/3)
  Tensor* wo = nullptr;
  Tensor* bo = nullptr;
  Tensor* ffn_norm = nullptr;
  Tensor* ffn_gate = nullptr;
  Tensor* ffn_up = nullptr;  // [n_embd, 2 n_ff] gate and up fused when there is no ffn_gate (phi3)
  Tensor* ffn_down = nullptr;
  Tensor* ffn_post_norm = nullptr;  // RMS norm of the FFN output before the residual add (gemma2/3)
  // Mixture of experts, in place of ffn_gate/up/down: the router
  // [n_embd, n_expert] and every expert's matrices stacked along dim 2
  // ([n_embd, n_ff_exp, n_expert]; down [n_ff_exp, n_embd, n_expert]).
  Tensor* ffn_gate_inp = nullptr;
  Tensor* ffn_gate_exps = nullptr;
  Tensor* ffn_up_exps = nullptr;
  Tensor* ffn_down_exps = nullptr;
  int64_t n_expert_used = 0;  // experts each token uses in this layer (HParams::expert_used)
};

struct LoadOptions {
  bool use_mmap = true;
  bool progress = false;  // print a progress bar to stderr
  PlacementOptions placement;
};

// One weight as loaded: where it went and why.
struct WeightPlacement {
  std::string name;
  std::string buffer_type;
  size_t bytes = 0;
  std::string fallback;  // why it is not on its layer's device ("" when it is)
};

class Model {
 public:
  // Loads a model onto `devices` (in priority order; the CLI passes
  // Registry::get().devices()). One of them must be of type CPU: the host,
  // which holds the embedding, the layers not offloaded and every fallback;
  // the non-CPU ones are the offload devices (see placement.h). Throws
  // loom::Error when there is no CPU device, PlacementError for placement
  // options that do not fit the model or the devices.
  static std::unique_ptr<Model> load(const std::string& path, const std::vector<Device*>& devices,
                                          const LoadOptions& options = {});
  ~Model();

  const HParams& hparams() const { return hparams_; }
  const gguf::File& file() const { return *file_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  Tensor* token_embd() const { return token_embd_; }
  Tensor* output_norm() const { return output_norm_; }
  Tensor* output() const { return output_; }  // token_embd when tied
  const std::vector<Layer>& layers() const { return layers_; }
  size_t weight_bytes() const { return weight_bytes_; }
  // The family's graph builder (src/model/arch/arch.h).
  const Arch& arch() const { return *arch_; }
  double load_seconds() const { return load_seconds_; }
  std::string describe_buffers() const;

  // Placement: the device of each layer (KV cache and attention run there),
  // the devices holding any weight, and row-split parts of a matrix (empty
  // unless SplitMode::Row split it).
  Device& layer_device(int64_t layer) const { return *plan_.layer_device[layer]; }
  const std::vector<Device*>& devices() const { return devices_; }
  const std::vector<Tensor*>& row_parts(const Tensor* w) const;
  const std::vector<WeightPlacement>& placements() const { return placements_; }
  // Weight bytes per buffer type name.
  std::vector<std::pair<std::string, size_t>> weight_bytes_by_buffer_type() const;

 private:
  Model() = default;
  friend class ModelWeights;
  // Declares a weight of `layer` (-1: input layer, n_layer: output layer)
  // used by `use` (MulMat, MulMatId, Mul, Add, Rope or GetRows).
  Tensor* weight(const std::string& name, std::span<const int64_t> ne, int64_t layer, Op use, bool required = true);
  // Fails naming the file and tensors when the file has tensors no weight() asked for.
  void refuse_unused_tensors();
  void place_weights(const LoadOptions& options);
  BufferType& choose_buffer_type(const Tensor& w, int64_t layer, Op use, const LoadOptions& options,
                                 std::string& fallback) const;
  void upload(const LoadOptions& options);

  struct Weight {
    Tensor* tensor;
    const gguf::TensorInfo* info;
    uint64_t offset = 0;  // bytes into the file tensor (row parts)
    int64_t layer;
    Op use;
    BufferType* type = nullptr;
  };

  std::unique_ptr<gguf::File> file_;
  std::vector<Device*> given_devices_;  // what load() may use
  Device* cpu_ = nullptr;               // the host device among them
  std::unique_ptr<Tokenizer> tokenizer_;
  const Arch* arch_ = nullptr;
  HParams hparams_;
  std::vector<std::string> asked_;  // every tensor name weight() was asked for
  Context ctx_;
  std::vector<Weight> weights_;
  std::vector<std::shared_ptr<Buffer>> buffers_;
  LayerPlan plan_;
  std::vector<Device*> devices_;
  std::vector<WeightPlacement> placements_;
  std::map<const Tensor*, std::vector<Tensor*>> row_parts_;
  Tensor* token_embd_ = nullptr;
  Tensor* output_norm_ = nullptr;
  Tensor* output_ = nullptr;
  std::vector<Layer> layers_;
  size_t weight_bytes_ = 0;
  double load_seconds_ = 0.0;
};

// Fused attention (flash_attn_ext) in the layers: llama.cpp's -fa.
enum class FlashAttn { Off, On, Auto };
std::string_view flash_attn_name(FlashAttn fa);            // "off", "on", "auto"
std::optional<FlashAttn> flash_attn_from_name(std::string_view name);

// How a session sizes its compute buffers.
enum class ComputeBuffers {
  // Once, at construction, for the worst case (a full micro-batch attending
  // to the whole context): what `loom fit` predicts; no decode allocates.
  Worst,
  // Per graph shape, when it first comes: memory follows the longest context
  // and largest micro-batch seen so far (and shrink_compute_buffers() gives
  // it back). A decode needing more than a device has throws OutOfMemory and
  // leaves the session as it was.
  Grow,
};
std::string_view compute_buffers_name(ComputeBuffers c);  // "worst", "grow"
std::optional<ComputeBuffers> compute_buffers_from_name(std::string_view name);

struct SessionOptions {
  int64_t n_ctx = 0;      // 0: min(training context, 4096)
  int64_t n_batch = 2048; // logical batch: tokens per decode() call are split into these
  int64_t n_ubatch = 512; // micro-batch: tokens per graph
  DType type_k = DType::F16;
  DType type_v = DType::F16;
  int n_threads = 0;      // 0: one per physical core
  int poll = kDefaultPoll; // CPU threads' polling before they sleep, 0..100 (llama.cpp's --poll)
  // Keep the last micro-batch's graph and run it again when the next one has
  // the same shape (tokens, cache cells attended, outputs): a generated token
  // then only sets inputs. Off: build and plan every graph anew.
  bool reuse_graph = true;
  // Off: attention is mul_mat, soft_max, mul_mat (the logits materialized,
  // V made contiguous per layer). On: one flash_attn_ext node per layer; a
  // quantized V cache needs it. Auto: on when every device holding layers
  // runs flash_attn_ext for the cache types (supports_op), else off.
  FlashAttn flash_attn = FlashAttn::Auto;
  ComputeBuffers compute_buffers = ComputeBuffers::Worst;
  // Sliding-window layers (HParams::n_swa) keep their own cache of
  // n_swa * n_seq_max + n_ubatch cells (rounded up to 256, at most n_ctx),
  // as llama.cpp does: a token's window fits, older cells are reused. Then
  // sequence ids must be below n_seq_max, and a sequence cannot go back
  // (seq_rm) to a position whose window the cache has dropped
  // (Session::can_continue). swa_full: a full-context cache, as --swa-full.
  bool swa_full = false;
  int n_seq_max = 1;
  // Rows of logits one graph computes. A micro-batch that wants more (every
  // token's logits: eval --all-logits, perplexity) computes its final hidden
  // states, then the output matrix over them in graphs of this many rows, so
  // that the compute buffers hold this many rows of n_vocab logits rather
  // than n_ubatch (llama.cpp reserves all n_ubatch). 0: max(32, n_seq_max),
  // which keeps a token of every sequence in one graph.
  int64_t logits_per_graph = 0;
  // Records where each graph's time goes (profiler.h); null: off. Not owned.
  Profiler* profiler = nullptr;
};

// Where a session's host time goes, summed over its decodes.
struct SessionStats {
  int64_t graphs_built = 0;   // micro-batch graphs built and planned
  int64_t graphs_reused = 0;  // micro-batches that ran the kept graph
  int64_t host_ns = 0;        // building/planning graphs and setting inputs (not computing)
  int64_t compute_ns = 0;     // running the graphs, reading the logits
  // Expert weights in host memory copied to the device running their
  // mul_mat_id (op offload), and the bytes of experts no token selected,
  // which stayed behind.
  uint64_t expert_bytes_copied = 0, expert_bytes_skipped = 0;
  int64_t n_graphs() const { return graphs_built + graphs_reused; }
};

// Tokens of one or more sequences for Session::decode: each token has its
// sequence id, its position in that sequence and whether its logits are
// wanted. Tokens of one sequence must come in increasing positions.
struct Batch {
  std::vector<int32_t> tokens, positions, seq_ids;
  std::vector<uint8_t> want_logits;

  void add(int32_t token, int32_t pos, int32_t seq, bool logits) {
    tokens.push_back(token);
    positions.push_back(pos);
    seq_ids.push_back(seq);
    want_logits.push_back(logits ? 1 : 0);
  }
  size_t size() const { return tokens.size(); }
  void clear() { *this = {}; }
};

class Session {
 public:
  Session(const Model& model, const SessionOptions& options);
  ~Session();

  // Evaluates a batch of tokens of any sequences, each into a free cache
  // cell; a token attends to the cells of its own sequence at positions up
  // to its own. Returns the logits ([n_vocab] each) of the tokens that
  // want them, in batch order. Throws loom::Error for a malformed batch or
  // when the cache has too few free cells; a decode that throws leaves the
  // cache's cells as they were before the call.
  std::vector<float> decode(const Batch& batch);
  // Sequence 0 alone: evaluates `tokens` at its next positions. Returns the
  // logits of the last token ([n_vocab]), or of every token
  // ([n_tokens * n_vocab]) with all_logits.
  std::vector<float> decode(std::span<const int32_t> tokens, bool all_logits = false);
  // Sequence 0's next position.
  int64_t n_past() const { return cells_.seq_pos_max(0) + 1; }
  int64_t n_ctx() const { return n_ctx_; }
  void reset();

  // The cache's cells: which sequences hold which positions. The edits act
  // on every cache (the sliding-window one too), as KvCells' do: seq_rm
  // removes positions [p0, p1) of a sequence (seq < 0: of all), seq_cp
  // shares a sequence's cells with another without copying data, seq_keep
  // removes every other sequence.
  const KvCells& cells() const { return cells_; }
  void seq_rm(int32_t seq, int32_t p0 = 0, int32_t p1 = -1);
  void seq_cp(int32_t src, int32_t dst, int32_t p0 = 0, int32_t p1 = -1);
  void seq_keep(int32_t seq);
  // Whether seq can decode a token at pos: false when the sliding-window
  // cache has dropped cells of the window before pos (after a seq_rm back
  // past the window); then decode the sequence again from its start.
  bool can_continue(int32_t seq, int32_t pos) const;
  // Cells of the sliding-window layers' own cache; 0: none (no such layers,
  // or swa_full).
  int64_t swa_cache_cells() const { return swa_cells_.size(); }
  // Frees the compute buffers: the next decode allocates what its graph
  // needs (with ComputeBuffers::Worst too, which then grows like Grow). For
  // a session whose long conversation ended.
  void shrink_compute_buffers();
  // Compute buffer bytes held now, summed over devices.
  size_t compute_buffer_bytes() const;
  // KV cache bytes per buffer type name.
  std::vector<std::pair<std::string, size_t>> kv_cache_bytes_by_buffer_type() const;
  // The scheduler's report of the last graph run (splits, copies, compute buffers).
  const SchedReport& last_report() const { return scheduler_->report(); }
  const SessionStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }
  // Whether the layers use flash_attn_ext (SessionOptions::flash_attn resolved).
  bool flash_attn() const { return flash_attn_; }
  void write_dot(const std::string& path) const { scheduler_->write_dot(path); }

 private:
  struct UbatchGraph;
  struct HeadGraph;  // the output head alone, over given hidden states
  // What a decode changed in the caches, undone when it throws.
  struct DecodeUndo;
  // Builds the graph for n tokens attending to n_kv cells (n_kv_swa of the
  // sliding-window cache, when there is one), with the logits of n_out of
  // them (rows chosen by an input, out_ids).
  // More than logits_per_graph_ outputs: the graph ends at their hidden
  // states (UbatchGraph::hidden) instead, for head_logits.
  void build_graph(UbatchGraph& g, int64_t n, int64_t n_kv, int64_t n_kv_swa, int64_t n_out) const;
  // The output head (final softcap included) over `hidden` [n_embd, rows].
  Tensor* output_head(Context& ctx, Tensor* hidden) const;
  void build_head_graph(HeadGraph& g, int64_t rows) const;
  // The logits of n_out hidden states ([n_out * n_embd]), logits_per_graph_
  // rows a graph.
  std::vector<float> head_logits(std::span<const float> hidden, int64_t n_out);
  // A graph output's floats, read in the stream that computed it.
  std::vector<float> read_floats(const Tensor& t);
  // The cells a micro-batch attends to: the used ones, rounded up to
  // kKvPadding (masked), so that consecutive tokens share one graph shape.
  static int64_t padded_n_kv(const KvCells& cells);
  // Refuses a batch the sliding-window cache cannot take.
  void check_swa_batch(const Batch& batch) const;
  // Tokens [first, first + n) of a checked batch; the cells it takes and the
  // window cells it frees are recorded in `undo` as they change.
  std::vector<float> decode_ubatch(const Batch& batch, size_t first, size_t n, DecodeUndo& undo);
  // Frees the sliding-window cells of the micro-batch's sequences that the
  // next token of each can no longer see.
  void drop_outside_window(std::span<const int32_t> seqs, std::span<const int32_t> positions, DecodeUndo& undo);
  void forget_emptied_floors();

  const Model& model_;
  SessionOptions options_;
  bool flash_attn_ = false;
  int64_t n_ctx_ = 0;
  KvCells cells_;
  // The sliding-window layers' cache (empty: none). swa_floor_[seq]: the
  // lowest position from which on seq's cells are all still there.
  KvCells swa_cells_;
  std::vector<int32_t> swa_floor_;
  Context cache_ctx_;
  std::vector<Tensor*> k_cache_, v_cache_;
  std::vector<std::shared_ptr<Buffer>> cache_buffers_;

  std::vector<std::unique_ptr<Backend>> backends_;  // the model's devices, then the CPU
  std::unique_ptr<Scheduler> scheduler_;
  // The last graph run, kept until the next one: the scheduler's report and
  // picture refer to its tensors.
  std::unique_ptr<UbatchGraph> last_graph_;
  std::unique_ptr<HeadGraph> last_head_;  // the last head_logits graph, for the same reason
  int64_t logits_per_graph_ = 0;          // SessionOptions::logits_per_graph resolved
  SessionStats stats_;
};

}  // namespace loom
