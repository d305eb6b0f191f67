#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "arch/arch.h"
#include "loom/error.h"
#include "loom/model.h"
#include "loom/log.h"
#include "loom/ops.h"
#include "loom/tensor_alloc.h"
#include "loom/tokenizer.h"
#include "tensor_pattern.h"

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

Model::~Model() = default;

Tensor* Model::weight(const std::string& name, std::span<const int64_t> ne, int64_t layer, Op use, bool required) {
  asked_.push_back(name);
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
    std::string known;
    for (DType t : kAllTypes)
      if (t != DType::I32) known += fmt::format("{}{}", known.empty() ? "" : ", ", type_name(t));
    fail("{}: tensor '{}' has type {}, which Loom does not support ({})", file_->path(), name,
         ti ? ti->name : "unknown", known);
  }
  if (info->type == static_cast<uint32_t>(DType::I32))
    fail("{}: tensor '{}' is i32; weights must be float or quantized", file_->path(), name);
  Tensor* t = ctx_.new_tensor(static_cast<DType>(info->type), std::span<const int64_t>(want.data(), 4));
  t->name = name;
  t->flags |= kFlagWeight;
  weights_.push_back({t, info, 0, layer, use});
  return t;
}

std::unique_ptr<Model> Model::load(const std::string& path, const std::vector<Device*>& devices,
                                             const LoadOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Model> m(new Model());
  m->given_devices_ = devices;
  m->cpu_ = &host_device(devices);
  m->file_ = gguf::File::open(path, options.use_mmap);
  m->hparams_ = HParams::from_gguf(*m->file_);
  m->tokenizer_ = Tokenizer::from_gguf(*m->file_);
  const gguf::TensorInfo* embd = m->file_->find_tensor("token_embd.weight");
  if (!embd) fail("{}: tensor 'token_embd.weight' is missing", path);
  m->hparams_.n_vocab = embd->ne[1];
  const HParams& h = m->hparams_;
  m->arch_ = find_arch(h.arch);
  if (m->tokenizer_->n_vocab() != h.n_vocab)
    fail("{}: the tokenizer has {} tokens but token_embd.weight has {} rows", path, m->tokenizer_->n_vocab(),
         h.n_vocab);
  ModelWeights w(*m);
  m->token_embd_ = w("token_embd.weight", {h.n_embd, h.n_vocab}, -1, Op::GetRows);
  m->layers_.resize(h.n_layer);
  for (int64_t l = 0; l < h.n_layer; ++l) m->arch_->declare_layer(w, h, l, m->layers_[l]);
  m->output_norm_ = w("output_norm.weight", {h.n_embd}, h.n_layer, Op::Mul);
  if (m->arch_->reads_output_weight())
    m->output_ = w.optional("output.weight", {h.n_embd, h.n_vocab}, h.n_layer, Op::MulMat);
  if (!m->output_) m->output_ = m->token_embd_;  // tied: placed in place_weights
  m->refuse_unused_tensors();
  try {
    m->place_weights(options);
  } catch (const OutOfMemory& e) {
    throw e.within(fmt::format("{}: loading the weights", path), MemoryUse::Weights);
  }
  m->load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

void Model::refuse_unused_tensors() {
  std::sort(asked_.begin(), asked_.end());
  std::string unused;
  size_t n = 0;
  for (const gguf::TensorInfo& t : file_->tensors())
    if (!std::binary_search(asked_.begin(), asked_.end(), t.name) && n++ < 16)
      unused += fmt::format("{}{} [{}, {}, {}, {}]", unused.empty() ? "" : ", ", t.name, t.ne[0], t.ne[1], t.ne[2],
                            t.ne[3]);
  if (n)
    fail("{}: {} tensor{} that Loom's '{}' family does not use: {}{}; refusing to run the file rather than ignore "
         "them",
         file_->path(), n, n == 1 ? "" : "s", hparams_.arch, unused, n > 16 ? ", ..." : "");
}

namespace {

// How the graph uses weight `w`: src0 of mul_mat, mul_mat_id or get_rows,
// operand b of mul or add, the freq factors of rope, with `batch` rows of F32
// activations (I32 indices for get_rows, I32 positions for rope, I32 expert
// ids [1, batch] for mul_mat_id). The device questions read only op, types
// and shapes, never memory, so the node is plain Tensor values here: no
// Context, no graph, nothing allocated. (Building it with
// the ops.h builders would need a Context; the result shapes below are the
// builders' for these uses.)
struct WeightUse {
  Tensor weight, other, positions, node;
  int slot = 0;  // the weight's operand slot in node

  WeightUse(const Tensor& w, Op use, int64_t batch) {
    weight.type = w.type;
    weight.ne = w.ne;
    set_contiguous_strides(weight);
    node.op = use;
    node.type = DType::F32;
    if (use == Op::Rope) {  // rotating 2 * ne0 dims of one head per token
      other.type = DType::F32;
      other.ne = {2 * w.ne[0], 1, batch, 1};
      positions.type = DType::I32;
      positions.ne = {batch, 1, 1, 1};
      set_contiguous_strides(positions);
      node.ne = other.ne;
      set_rope_params(node, {static_cast<int32_t>(2 * w.ne[0]), RopeMode::Normal, 10000.0f, 1.0f});
      slot = 2;
      node.src[0] = &other;
      node.src[1] = &positions;
    } else if (use == Op::MulMatId) {  // w [K, M, n_expert]
      other.type = DType::F32;
      other.ne = {w.ne[0], 1, batch, 1};
      positions.type = DType::I32;  // the expert ids
      positions.ne = {1, batch, 1, 1};
      set_contiguous_strides(positions);
      node.ne = {w.ne[1], 1, batch, 1};
      node.src[1] = &other;
      node.src[2] = &positions;
    } else {
      other.type = use == Op::GetRows ? DType::I32 : DType::F32;
      other.ne = {use == Op::GetRows ? batch : w.ne[0], use == Op::GetRows ? 1 : batch, 1, 1};
      node.ne = {use == Op::MulMat ? w.ne[1] : w.ne[0], batch, 1, 1};
      slot = use == Op::MulMat || use == Op::GetRows ? 0 : 1;
      node.src[1 - slot] = &other;
    }
    set_contiguous_strides(other);
    set_contiguous_strides(node);
    node.src[slot] = &weight;
  }
  WeightUse(const WeightUse&) = delete;  // node points into this object
  WeightUse& operator=(const WeightUse&) = delete;
};

// Whether `device` can run the op a weight is used in, with a batch-sized
// activation (the prompt case), reading the weight from its default memory;
// asked before anything is allocated.
bool device_runs(Device& device, const Tensor& w, Op use) {
  const WeightUse u(w, use, 512);
  return device.supports_op(u.node) && device.supports_operand(u.node, u.slot, device.default_buffer_type());
}

// A buffer type of `device` beyond its default and host memory (CPU_Repack,
// or a remote CPU's) that wants `w` as src0 of its mul_mats
// (BufferType::supports_op) and that the device can read it from there
// (Device::supports_operand), or null.
BufferType* weight_layout_type(Device& device, const Tensor& w) {
  const WeightUse u(w, Op::MulMat, 1);
  for (BufferType* bt : device.buffer_types())
    if (bt != &device.default_buffer_type() && !bt->is_host() && device.supports_operand(u.node, u.slot, *bt) &&
        bt->supports_op(u.node))
      return bt;
  return nullptr;
}

}  // namespace

BufferType& Model::choose_buffer_type(const Tensor& w, int64_t layer, Op use, const LoadOptions& o,
                                           std::string& fallback) const {
  for (const TensorOverride& ov : o.placement.overrides) {
    bool matches = false;
    try {
      matches = TensorPattern(ov.pattern).search(w.name);
    } catch (const Error& e) {
      throw PlacementError(PlacementField::Overrides, fmt::format("tensor override '{}={}': {}", ov.pattern,
                                                                  ov.buffer_type, e.what()));
    }
    if (!matches) continue;
    BufferType* bt = find_buffer_type(given_devices_, ov.buffer_type);
    if (!bt) {
      std::string names;
      for (Device* d : given_devices_)
        for (BufferType* t : d->buffer_types()) names += (names.empty() ? "" : ", ") + std::string(t->name());
      throw PlacementError(PlacementField::Overrides,
                           fmt::format("tensor override '{}={}': no buffer type named '{}' (available: {})",
                                       ov.pattern, ov.buffer_type, ov.buffer_type, names));
    }
    return *bt;
  }
  Device& cpu = *cpu_;
  Device* device = layer < 0                  ? &cpu
                   : layer >= hparams_.n_layer ? plan_.output_device
                                               : plan_.layer_device[layer];
  if (device != &cpu && !device_runs(*device, w, use)) {
    fallback = fmt::format("{} cannot run {} with {} weights", device->name(), op_name(use), type_name(w.type));
    device = &cpu;
  }
  // Matrices a device multiplies faster in its own layout are copied there
  // (CPU_Repack, RPC0:CPU_Repack); an override to a plain type (CPU_Mapped,
  // RPC0:CPU) keeps one plain instead.
  if (use == Op::MulMat)
    if (BufferType* bt = weight_layout_type(*device, w)) return *bt;
  if (device == &cpu && file_->mapped() && file_->alignment() % 32 == 0)
    if (BufferType* mapped = cpu.host_ptr_buffer_type()) return *mapped;
  return device->default_buffer_type();
}

void Model::place_weights(const LoadOptions& options) {
  const HParams& h = hparams_;
  plan_ = plan_layers(h.n_layer, given_devices_, options.placement);
  Device& cpu = *cpu_;
  for (const TensorOverride& ov : options.placement.overrides) {
    try {
      TensorPattern check(ov.pattern);
    } catch (const Error& e) {
      throw PlacementError(PlacementField::Overrides,
                           fmt::format("tensor override '{}={}': {}", ov.pattern, ov.buffer_type, e.what()));
    }
  }
  const bool row = options.placement.split_mode == SplitMode::Row && !plan_.row_devices.empty();
  std::vector<Weight> parts;  // row-split slices, added after the loop
  for (Weight& w : weights_) {
    std::string fallback;
    const bool offloaded_layer = w.layer >= 0 && w.layer < h.n_layer && plan_.layer_device[w.layer] != &cpu;
    if (row && w.use == Op::MulMat && offloaded_layer) {
      // Split the matrix's rows (ne1) over the row devices.
      const int64_t rows = w.tensor->ne[1];
      const size_t row_bytes = w.tensor->nb[1];
      int64_t begin = 0;
      float cum = 0.0f;
      std::vector<Tensor*>& list = row_parts_[w.tensor];
      for (size_t i = 0; i < plan_.row_devices.size(); ++i) {
        cum += plan_.row_fractions[i];
        const int64_t end = i + 1 == plan_.row_devices.size() ? rows : static_cast<int64_t>(cum * rows + 0.5f);
        if (end <= begin) continue;
        Tensor* p = ctx_.new_tensor(w.tensor->type, {w.tensor->ne[0], end - begin});
        p->name = fmt::format("{}[{}:{}]", w.tensor->name, begin, end);
        p->flags |= kFlagWeight;
        Device& d = *plan_.row_devices[i];
        std::string why;
        BufferType* bt = &d.default_buffer_type();
        if (!device_runs(d, *p, Op::MulMat)) {
          why = fmt::format("{} cannot run mul_mat with {} weights", d.name(), type_name(p->type));
          bt = &cpu.default_buffer_type();
        }
        parts.push_back({p, w.info, static_cast<uint64_t>(begin) * row_bytes, w.layer, Op::MulMat, bt});
        placements_.push_back({p->name, std::string(bt->name()), p->nbytes(), why});
        list.push_back(p);
        begin = end;
      }
      w.type = nullptr;  // the whole matrix is never placed
      continue;
    }
    w.type = &choose_buffer_type(*w.tensor, w.layer, w.use, options, fallback);
    placements_.push_back({w.tensor->name, std::string(w.type->name()), w.info->size, fallback});
  }
  weights_.insert(weights_.end(), parts.begin(), parts.end());
  // Tied output: the token embedding serves as the output matrix. Load it a
  // second time only when the output layer's buffer type differs.
  if (output_ == token_embd_) {
    // Copied out, not referenced: the push_back below may reallocate weights_.
    const auto embd = std::find_if(weights_.begin(), weights_.end(),
                                   [this](const Weight& w) { return w.tensor == token_embd_; });
    if (embd == weights_.end()) throw Error("tied output: token_embd.weight has no weight entry");
    const gguf::TensorInfo* embd_info = embd->info;
    const BufferType* embd_type = embd->type;
    std::string fallback;
    BufferType& bt = choose_buffer_type(*token_embd_, h.n_layer, Op::MulMat, options, fallback);
    if (&bt != embd_type) {
      output_ = ctx_.dup_tensor(*token_embd_);
      output_->name = "output.weight (tied to token_embd.weight)";
      output_->flags |= kFlagWeight;
      weights_.push_back({output_, embd_info, 0, h.n_layer, Op::MulMat, &bt});
      placements_.push_back({output_->name, std::string(bt.name()), embd_info->size, fallback});
    }
  }
  for (const Weight& w : weights_)
    if (w.type) {
      weight_bytes_ += w.tensor->nbytes();
      Device* d = w.type->device();
      if (d && std::find(devices_.begin(), devices_.end(), d) == devices_.end()) devices_.push_back(d);
    }
  if (std::find(devices_.begin(), devices_.end(), &cpu) == devices_.end()) devices_.push_back(&cpu);
  for (int64_t l = 0; l < h.n_layer; ++l)
    if (std::find(devices_.begin(), devices_.end(), plan_.layer_device[l]) == devices_.end())
      devices_.push_back(plan_.layer_device[l]);
  // The CPU last: the scheduler takes devices in priority order.
  std::stable_partition(devices_.begin(), devices_.end(), [&cpu](Device* d) { return d != &cpu; });
  upload(options);
  size_t n_fallback = 0;
  for (const auto& p : placements_) n_fallback += !p.fallback.empty();
  if (n_fallback) {
    log(LogLevel::Warn, "{} weights fall back to the CPU:", n_fallback);
    for (const auto& p : placements_)
      if (!p.fallback.empty()) log(LogLevel::Warn, "  {}: {}", p.name, p.fallback);
  }
}

void Model::upload(const LoadOptions& options) {
  ProgressBar bar(options.progress);
  BufferType* mapped = cpu_->host_ptr_buffer_type();
  // Mapped weights stay in the page cache: one CPU_Mapped buffer over the file.
  std::shared_ptr<Buffer> map_buffer;
  std::vector<std::pair<BufferType*, std::vector<Tensor*>>> groups;
  for (const Weight& w : weights_) {
    if (!w.type) continue;
    if (w.type == mapped) {
      if (!map_buffer) {
        map_buffer = cpu_->buffer_from_host_ptr(const_cast<uint8_t*>(file_->map_base()), file_->file_size());
        map_buffer->set_usage(BufferUsage::Weights);
        buffers_.push_back(map_buffer);
      }
      map_buffer->place(*w.tensor, w.info->file_offset + w.offset);
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&w](const auto& g) { return g.first == w.type; });
    if (it == groups.end()) it = groups.insert(groups.end(), {w.type, {}});
    it->second.push_back(w.tensor);
  }
  for (auto& [type, tensors] : groups) {
    TensorAllocation a = allocate_tensors(tensors, *type, BufferUsage::Weights);
    for (auto& b : a.buffers) buffers_.push_back(std::move(b));
  }
  if (DryRun::active()) return;  // the buffers have no memory to fill
  uint64_t total = 0, done = 0;
  for (const Weight& w : weights_)
    if (w.type) total += w.tensor->nbytes();
  std::vector<uint8_t> staging;
  for (const Weight& w : weights_) {
    if (!w.type) continue;
    const size_t n = w.tensor->nbytes();
    if (w.type == mapped) {
      file_->populate(w.info->file_offset + w.offset, n);
    } else if (file_->mapped()) {
      tensor_set(*w.tensor, file_->data(*w.info) + w.offset, 0, n);
    } else if (w.type->is_host()) {
      file_->read_tensor(*w.info, w.tensor->data, w.offset, n);
    } else {
      staging.resize(n);
      file_->read_tensor(*w.info, staging.data(), w.offset, n);
      tensor_set(*w.tensor, staging.data(), 0, n);
    }
    bar.update(done += n, total);
  }
}

const std::vector<Tensor*>& Model::row_parts(const Tensor* w) const {
  static const std::vector<Tensor*> kNone;
  auto it = row_parts_.find(w);
  return it == row_parts_.end() ? kNone : it->second;
}

std::vector<std::pair<std::string, size_t>> Model::weight_bytes_by_buffer_type() const {
  std::vector<std::pair<std::string, size_t>> out;
  for (const Weight& w : weights_) {
    if (!w.type) continue;
    const std::string name(w.type->name());
    auto it = std::find_if(out.begin(), out.end(), [&name](const auto& p) { return p.first == name; });
    if (it == out.end()) it = out.insert(out.end(), {name, 0});
    it->second += w.tensor->nbytes();
  }
  return out;
}

std::string Model::describe_buffers() const {
  std::string s;
  for (const auto& [name, bytes] : weight_bytes_by_buffer_type())
    s += fmt::format("{}{} {:.1f} MiB", s.empty() ? "" : ", ", name, bytes / 1048576.0);
  return s;
}

}  // namespace loom
