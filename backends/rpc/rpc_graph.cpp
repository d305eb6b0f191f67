#include "rpc_graph.h"

#include <algorithm>
#include <vector>

#include "loom/context.h"
#include "loom/error.h"
#include "loom/op_params.h"
#include "loom/ops.h"

namespace loom::rpc {
namespace {

// Bounds far above any real model, low enough that no sum below overflows.
constexpr int64_t kMaxDimElements = int64_t{1} << 40;
constexpr uint64_t kMaxStride = uint64_t{1} << 48;
constexpr int kMaxTensors = 1 << 20;
constexpr size_t kMaxNameBytes = 256;

// Numbers of a graph's tensors: an open-addressing table from pointer to
// index, with the graph's nodes entered first as not yet numbered. A
// generation step looks up every operand of some thousand tensors, so this
// replaces std::unordered_map's node allocations and pointer chasing.
class TensorIds {
 public:
  static constexpr int32_t kAbsent = -1;   // not in the graph (or null)
  static constexpr int32_t kPending = -2;  // a node not numbered yet

  explicit TensorIds(size_t n_tensors) {
    size_t cap = 64;
    while (cap < 2 * n_tensors) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  int32_t get(const Tensor* t) const {
    if (!t) return kAbsent;
    for (size_t i = hash(t) & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].key == t) return slots_[i].value;
      if (!slots_[i].key) return kAbsent;
    }
  }
  void set(const Tensor* t, int32_t value) {
    if (2 * (used_ + 1) > slots_.size()) grow();
    Slot& s = slot(t);
    if (!s.key) ++used_;
    s = {t, value};
  }

 private:
  struct Slot {
    const Tensor* key = nullptr;
    int32_t value = kAbsent;
  };
  static size_t hash(const Tensor* t) { return (reinterpret_cast<uintptr_t>(t) >> 4) * 0x9E3779B97F4A7C15ull >> 16; }
  Slot& slot(const Tensor* t) {
    size_t i = hash(t) & mask_;
    while (slots_[i].key && slots_[i].key != t) i = (i + 1) & mask_;
    return slots_[i];
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old)
      if (s.key) slot(s.key) = s;
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t used_ = 0;
};

int32_t index_of(const TensorIds& ids, const Tensor* t) {
  if (!t) return -1;
  const int32_t id = ids.get(t);
  if (id < 0) fail("rpc: tensor {} is not part of the encoded graph", tensor_label(*t));
  return id;
}

}  // namespace

void encode_tensor(const Tensor& t, RemoteRef ref, TensorMsg& m) {
  m.set_type(static_cast<uint32_t>(t.type));
  for (int d = 0; d < kMaxDims; ++d) {
    m.add_ne(t.ne[d]);
    m.add_nb(t.nb[d]);
  }
  m.set_op(static_cast<uint32_t>(Op::None));
  m.set_view_src(-1);
  m.set_buffer(ref.buffer);
  m.set_offset(ref.offset);
  m.set_flags(t.flags);
  m.set_name(t.name.substr(0, kMaxNameBytes));
}

namespace {

// Calls visit(t, node, ids) once for each of `nodes` and every tensor they
// reach, operands and view sources before the tensors that use them; `ids`
// numbers the tensors visited before. A tensor that is not a node (a
// weight, an input, a result of an earlier graph) is data only: its
// operands are not visited.
template <class Visit>
TensorIds visit_in_order(std::span<Tensor* const> nodes, Visit&& visit) {
  TensorIds ids(nodes.size() * 2);
  for (Tensor* n : nodes) ids.set(n, TensorIds::kPending);
  int32_t next = 0;
  // Depth first without recursion: a frame's `child` walks the view source,
  // then (for a node) the operands; the tensor is numbered after them.
  struct Frame {
    Tensor* t;
    bool node;
    int child;
  };
  std::vector<Frame> stack;
  const auto enter = [&](Tensor* t) {
    if (!t) return;
    const int32_t id = ids.get(t);
    if (id >= 0) return;
    stack.push_back({t, id == TensorIds::kPending, 0});
  };
  for (Tensor* n : nodes) {
    enter(n);
    while (!stack.empty()) {
      Frame& f = stack.back();
      const int n_children = f.node ? 1 + kMaxSrc : 1;
      if (f.child < n_children) {
        Tensor* c = f.child == 0 ? f.t->view_src : f.t->src[f.child - 1];
        ++f.child;
        enter(c);  // may grow the stack: f is not used after this
        continue;
      }
      visit(*f.t, f.node, ids);
      ids.set(f.t, next++);
      stack.pop_back();
    }
  }
  return ids;
}

}  // namespace

void encode_graph(std::span<Tensor* const> nodes, const RemoteRefOf& ref_of, uint32_t device, GraphMsg& out) {
  out.Clear();
  out.set_device(device);
  const auto ids = visit_in_order(nodes, [&](const Tensor& t, bool node, auto& ids) {
    TensorMsg& m = *out.add_tensors();
    encode_tensor(t, ref_of(t), m);
    if (node) {
      m.set_op(static_cast<uint32_t>(t.op));
      for (int32_t p : t.op_params) m.add_op_params(p);
      for (Tensor* s : t.src) m.add_src(index_of(ids, s));
    }
    m.set_view_src(index_of(ids, t.view_src));
    m.set_view_offs(t.view_offs);
  });
  for (Tensor* n : nodes) out.add_nodes(ids.get(n));
}

GraphSignature graph_signature(std::span<Tensor* const> nodes, const RemoteRefOf& ref_of, uint32_t device) {
  GraphSignature sig;
  sig.reserve(nodes.size() * 48);
  sig.push_back(device);
  // The fields encode_graph writes, in its order, names left out; every
  // tensor gives the same count of words, so no two graphs run together.
  const auto ids = visit_in_order(nodes, [&](const Tensor& t, bool node, auto& ids) {
    sig.push_back(static_cast<uint64_t>(t.type));
    for (int d = 0; d < kMaxDims; ++d) {
      sig.push_back(static_cast<uint64_t>(t.ne[d]));
      sig.push_back(t.nb[d]);
    }
    sig.push_back(node);
    sig.push_back(static_cast<uint64_t>(node ? t.op : Op::None));
    for (int32_t p : t.op_params) sig.push_back(node ? static_cast<uint32_t>(p) : 0);
    for (Tensor* s : t.src) sig.push_back(node ? static_cast<uint32_t>(index_of(ids, s)) : 0);
    sig.push_back(static_cast<uint32_t>(index_of(ids, t.view_src)));
    sig.push_back(t.view_offs);
    const RemoteRef ref = ref_of(t);
    sig.push_back(ref.buffer);
    sig.push_back(ref.offset);
    sig.push_back(t.flags);
  });
  sig.push_back(nodes.size());
  for (Tensor* n : nodes) sig.push_back(static_cast<uint64_t>(ids.get(n)));
  return sig;
}

namespace {

std::string label(const TensorMsg& m, int i) {
  return m.name().empty() ? fmt::format("#{}", i) : fmt::format("#{} '{}'", i, m.name());
}

bool known_type(uint32_t id) {
  return std::any_of(std::begin(kAllTypes), std::end(kAllTypes), [&](DType t) { return static_cast<uint32_t>(t) == id; });
}

// The alignment kernels need for a block of a quantized type: they read its
// fp16 scales as uint16_t fields of the block struct.
size_t block_alignment(DType type) {
  switch (type) {
    case DType::Q8_0: return alignof(BlockQ8_0);
    case DType::Q4_0: return alignof(BlockQ4_0);
    case DType::Q4_1: return alignof(BlockQ4_1);
    case DType::Q5_0: return alignof(BlockQ5_0);
    case DType::Q5_1: return alignof(BlockQ5_1);
    case DType::Q2_K: return alignof(BlockQ2_K);
    case DType::Q3_K: return alignof(BlockQ3_K);
    case DType::Q4_K: return alignof(BlockQ4_K);
    case DType::Q5_K: return alignof(BlockQ5_K);
    case DType::Q6_K: return alignof(BlockQ6_K);
    case DType::IQ4_NL: return alignof(BlockIQ4_NL);
    case DType::IQ4_XS: return alignof(BlockIQ4_XS);
    case DType::MXFP4: return alignof(BlockMXFP4);
    default: return traits(type).type_size;  // plain types: their element
  }
}

// Offsets and strides that kernels can use: elements and blocks at
// addresses aligned for their C++ types (one misaligned is undefined
// behaviour, a fuzz finding), and blocks along ne[0] at least a block
// apart: kernels read a row's blocks as one array, and checked_nbytes
// counts a row as ne[0] / block_size steps of nb[0].
void check_alignment(const Tensor& t, uint64_t offset, const std::string& what) {
  const TypeTraits& tt = traits(t.type);
  const size_t align = block_alignment(t.type);
  const char* unit = tt.block_size == 1 ? "elements" : "blocks";
  if (offset % align != 0)
    fail("rpc: tensor {}: offset {} is not aligned to the {} bytes its {} {} need", what, offset, align,
         type_name(t.type), unit);
  for (int d = 0; d < kMaxDims; ++d)
    if (t.nb[d] % align != 0)
      fail("rpc: tensor {}: nb[{}] = {} is not a multiple of the {} bytes its {} {} need", what, d, t.nb[d], align,
           type_name(t.type), unit);
  if (tt.block_size != 1 && t.nb[0] < tt.type_size)
    fail("rpc: tensor {}: nb[0] = {} is less than a {} block ({} bytes): its blocks would overlap", what, t.nb[0],
         type_name(t.type), tt.type_size);
}

// Bytes the tensor spans (Tensor::nbytes), computed without overflow.
size_t checked_nbytes(const Tensor& t, const std::string& what) {
  for (int d = 0; d < kMaxDims; ++d)
    if (t.ne[d] == 0) return 0;
  const TypeTraits& tt = traits(t.type);
  unsigned __int128 bytes = tt.block_size == 1 ? tt.type_size : 0;
  if (tt.block_size != 1) bytes = static_cast<unsigned __int128>(t.ne[0]) * t.nb[0] / tt.block_size;
  for (int d = tt.block_size == 1 ? 0 : 1; d < kMaxDims; ++d)
    bytes += static_cast<unsigned __int128>(t.ne[d] - 1) * t.nb[d];
  if (bytes > kMaxStride) fail("rpc: tensor {} spans {} bytes, more than any buffer", what, static_cast<uint64_t>(bytes));
  return static_cast<size_t>(bytes);
}

// The node its ops.h builder makes from `src` and its parameters, or null
// for view ops (their memory is checked, their shape is free).
Tensor* rebuild(Context& ctx, const Tensor& n, const std::array<Tensor*, kMaxSrc>& s) {
  switch (n.op) {
    case Op::GetRows: return get_rows(ctx, s[0], s[1]);
    case Op::SetRows: return set_rows(ctx, s[2], s[0], s[1]);
    case Op::Cpy: return cpy(ctx, s[0], s[1]);
    case Op::Cont: return cont(ctx, s[0]);
    case Op::Add: return add(ctx, s[0], s[1]);
    case Op::Sub: return sub(ctx, s[0], s[1]);
    case Op::Mul: return mul(ctx, s[0], s[1]);
    case Op::Div: return div(ctx, s[0], s[1]);
    case Op::Scale: {
      const ScaleParams p = scale_params(n);
      return scale(ctx, s[0], p.scale, p.bias);
    }
    case Op::Sqr: return sqr(ctx, s[0]);
    case Op::Sqrt: return sqrt(ctx, s[0]);
    case Op::SumRows: return sum_rows(ctx, s[0]);
    case Op::MulMat: return mul_mat(ctx, s[0], s[1]);
    case Op::RmsNorm: return rms_norm(ctx, s[0], norm_params(n).eps);
    case Op::Norm: return norm(ctx, s[0], norm_params(n).eps);
    case Op::Rope: return rope(ctx, s[0], s[1], rope_params(n), s[2]);
    case Op::SoftMax: return soft_max(ctx, s[0], s[1], soft_max_params(n).scale, s[2]);
    case Op::Silu: return silu(ctx, s[0]);
    case Op::Gelu: return gelu(ctx, s[0]);
    case Op::Relu: return relu(ctx, s[0]);
    case Op::Argmax: return argmax(ctx, s[0]);
    case Op::Concat: return concat(ctx, s[0], s[1], concat_params(n).dim);
    case Op::Tanh: return tanh(ctx, s[0]);
    case Op::Sigmoid: return sigmoid(ctx, s[0]);
    case Op::Clamp: {
      const ClampParams p = clamp_params(n);
      return clamp(ctx, s[0], p.min, p.max);
    }
    case Op::Argsort: return argsort(ctx, s[0], argsort_params(n).order);
    case Op::MulMatId: return mul_mat_id(ctx, s[0], s[1], s[2]);
    case Op::FlashAttnExt: {
      const FlashAttnParams p = flash_attn_params(n);
      return flash_attn_ext(ctx, s[0], s[1], s[2], s[3], p.scale, p.max_bias, p.softcap);
    }
    case Op::None:
    case Op::View:
    case Op::Reshape:
    case Op::Permute:
    case Op::Transpose:
    case Op::Count: return nullptr;
  }
  return nullptr;
}

// The node's type, shape and strides are what its builder gives.
void check_node_shape(const Tensor& n, const std::string& what) {
  Context ctx;
  std::array<Tensor*, kMaxSrc> s{};
  for (int i = 0; i < kMaxSrc; ++i)
    if (n.src[i]) {
      s[i] = ctx.new_node();
      *s[i] = *n.src[i];
      s[i]->buffer = nullptr;
    }
  const Tensor* want;
  try {
    want = rebuild(ctx, n, s);
  } catch (const Error& e) {
    fail("rpc: node {}: {}", what, e.what());
  }
  if (!want) return;
  if (want->type != n.type || want->ne != n.ne || want->nb != n.nb)
    fail("rpc: node {} ({}) is {} with strides [{}], its operands give {} with strides [{}]", what,
         op_name(n.op), n.shape_string(), fmt::join(n.nb, ", "), want->shape_string(), fmt::join(want->nb, ", "));
}

}  // namespace

std::unique_ptr<DecodedGraph> decode_graph(const GraphMsg& msg, Device& device, const BufferLookup& lookup) {
  if (msg.tensors_size() > kMaxTensors) fail("rpc: graph has {} tensors, at most {}", msg.tensors_size(), kMaxTensors);
  auto out = std::make_unique<DecodedGraph>();
  std::vector<uint64_t> offsets;
  for (int i = 0; i < msg.tensors_size(); ++i) {
    const TensorMsg& m = msg.tensors(i);
    const std::string what = label(m, i);
    if (m.ne_size() != kMaxDims || m.nb_size() != kMaxDims)
      fail("rpc: tensor {} has {} dims and {} strides, not {}", what, m.ne_size(), m.nb_size(), kMaxDims);
    if (m.op_params_size() > kMaxOpParams || m.src_size() > kMaxSrc)
      fail("rpc: tensor {} has {} op params and {} operands (at most {} and {})", what, m.op_params_size(),
           m.src_size(), kMaxOpParams, kMaxSrc);
    if (!known_type(m.type())) fail("rpc: tensor {} has unknown type id {}", what, m.type());
    if (m.op() >= kOpCount) fail("rpc: tensor {} has unknown op id {}", what, m.op());
    if (m.name().size() > kMaxNameBytes) fail("rpc: tensor {} has a name of {} bytes", what, m.name().size());

    Tensor& t = out->tensors.emplace_back();
    t.type = static_cast<DType>(m.type());
    t.op = static_cast<Op>(m.op());
    t.name = m.name();
    t.flags = m.flags();
    for (int d = 0; d < kMaxDims; ++d) {
      if (m.ne(d) < 0 || m.ne(d) > kMaxDimElements) fail("rpc: tensor {} has ne[{}] = {}", what, d, m.ne(d));
      if (m.nb(d) > kMaxStride) fail("rpc: tensor {} has nb[{}] = {}", what, d, m.nb(d));
      t.ne[d] = m.ne(d);
      t.nb[d] = m.nb(d);
    }
    if (t.ne[0] % traits(t.type).block_size != 0)
      fail("rpc: tensor {}: ne[0] = {} is not whole blocks of {}", what, t.ne[0], type_name(t.type));
    check_alignment(t, m.offset(), what);
    for (int p = 0; p < m.op_params_size(); ++p) t.op_params[p] = m.op_params(p);

    const OpInfo& info = op_info(t.op);
    for (int k = 0; k < m.src_size(); ++k) {
      const int32_t s = m.src(k);
      if (s == -1) continue;
      if (s < 0 || s >= i) fail("rpc: tensor {}: operand {} refers to #{}, not an earlier tensor", what, k, s);
      t.src[k] = &out->tensors[s];
    }
    for (int k = 0; k < kMaxSrc; ++k)
      if ((k < info.min_src && !t.src[k]) || (k >= info.max_src && t.src[k]))
        fail("rpc: tensor {}: {} takes {} to {} operands; operand {} is {}", what, info.name, info.min_src,
             info.max_src, k, t.src[k] ? "set" : "missing");

    const int32_t v = m.view_src();
    if (v != -1) {
      if (v < 0 || v >= i) fail("rpc: tensor {}: view source #{} is not an earlier tensor", what, v);
      t.view_src = &out->tensors[v];
      if (t.view_src->view_src) fail("rpc: tensor {}: view source #{} is itself a view", what, v);
      t.view_offs = m.view_offs();
      if (lookup && (m.buffer() != msg.tensors(v).buffer() || m.offset() != offsets[v] + m.view_offs()))
        fail("rpc: view {} does not lie at its source's offset {} + {}", what, offsets[v], m.view_offs());
    } else if (info.is_view) {
      fail("rpc: tensor {}: a {} needs a view source", what, info.name);
    }

    const size_t bytes = checked_nbytes(t, what);
    offsets.push_back(m.offset());
    if (!lookup) continue;
    if (m.buffer() == 0) {
      if (bytes != 0) fail("rpc: tensor {} of {} bytes has no buffer", what, bytes);
      continue;
    }
    std::shared_ptr<Buffer> buf = lookup(m.buffer());
    if (!buf) fail("rpc: tensor {} refers to unknown buffer {}", what, m.buffer());
    if (m.offset() > buf->size() || bytes > buf->size() - m.offset())
      fail("rpc: tensor {} ({} bytes at offset {}) does not fit in its buffer of {} bytes", what, bytes, m.offset(),
           buf->size());
    if (!device.supports_buffer_type(buf->type()))
      fail("rpc: tensor {} lies in {} memory, which {} cannot use", what, buf->type().name(), device.name());
    t.buffer = buf;
    t.data = static_cast<char*>(buf->base()) + m.offset();
    buf->init_tensor(t);
  }

  std::vector<bool> is_node(out->tensors.size(), false);
  for (int k = 0; k < msg.nodes_size(); ++k) {
    const int32_t i = msg.nodes(k);
    if (i < 0 || static_cast<size_t>(i) >= out->tensors.size()) fail("rpc: graph node {} refers to #{}", k, i);
    if (is_node[i]) fail("rpc: tensor #{} is listed twice as a node", i);
    is_node[i] = true;
    Tensor& n = out->tensors[i];
    const std::string what = label(msg.tensors(i), i);
    if (n.op == Op::None) fail("rpc: node {} has no op", what);
    check_node_shape(n, what);
    if (op_has_kernel(n.op) && !device.supports_op(n))
      fail("rpc: {} has no kernel for node {} ({} {})", device.name(), what, op_name(n.op), n.shape_string());
    // Memory in a layout of its own (CPU_Repack) is read only where the
    // device's kernel knows that layout: as a mul_mat's weight, whole.
    for (int j = 0; j < kMaxSrc; ++j) {
      const Tensor* s = n.src[j];
      const Tensor* root = s && s->view_src ? s->view_src : s;
      if (root && root->buffer && !device.supports_operand(n, j, root->buffer->type()))
        fail("rpc: node {} ({}) cannot read operand {} from {} memory there", what, op_name(n.op), j,
             root->buffer->type().name());
    }
    out->graph.nodes().push_back(&n);
  }
  return out;
}

}  // namespace loom::rpc
