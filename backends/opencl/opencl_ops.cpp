// What the OpenCL kernels can run (kernel_supports) and how each node is
// launched (OpenClBackend::enqueue_node). Kernels live in kernels/*.cl; they
// get loom's op and type ids as compiler defines (kernel_defines).
#include <algorithm>
#include <cctype>

#include "loom/align.h"
#include "loom/error.h"
#include "loom/op_params.h"
#include "opencl_backend.h"

namespace loom::opencl {
namespace {

bool is_plain_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
bool is_quantized(DType t) { return traits(t).is_quantized; }
// The quantized types kernels also write (quantize_block in quants.cl); the
// others are only read.
bool can_quantize(DType t) {
  return t == DType::Q8_0 || t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1;
}
// Quantized tensors must step whole blocks along dim 0.
bool rows_ok(const Tensor& t) { return !is_quantized(t.type) || t.has_contiguous_rows(); }

// flash_attn.cl: FA_WG work-items a group, FA_PER_ITEM outputs each, q in
// local memory of 512 floats.
constexpr int64_t kFlashAttnGroup = 64, kFlashAttnMaxHead = 512;

// Type and op ids as the kernels see them: T_* and OP_* (kernel_defines).
cl_int type_code(DType t) { return static_cast<cl_int>(t); }
cl_int op_code(Op op) { return static_cast<cl_int>(op); }

std::string upper(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return u;
}

std::string lower(std::string_view s) {
  std::string u(s);
  for (char& c : u) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return u;
}

// Sets kernel arguments in order; a tensor is four of them (see common.cl).
class Args {
 public:
  Args(cl_kernel k, cl_mem dummy, const char* name) : k_(k), dummy_(dummy), name_(name) {}
  template <class T>
  Args& value(const T& v) {
    const cl_uint i = i_++;
    check(clSetKernelArg(k_, i, sizeof(T), &v), fmt::format("setting argument {} of kernel {}", i, name_));
    return *this;
  }
  Args& tensor(const Tensor& t) {
    OpenClBuffer* b = opencl_buffer_of(t);
    // A zero-byte tensor lives in an empty buffer: any valid cl_mem will do.
    const cl_mem mem = b ? b->mem() : dummy_;
    const cl_ulong offset = b ? b->offset_in(t) : 0;
    cl_long4 ne;
    cl_ulong4 nb;
    for (int i = 0; i < 4; ++i) {
      ne.s[i] = t.ne[i];
      nb.s[i] = t.nb[i];
    }
    return value(mem).value(offset).value(ne).value(nb);
  }
  Args& absent() {  // an unused tensor argument
    cl_long4 ne = {{1, 1, 1, 1}};
    cl_ulong4 nb = {{0, 0, 0, 0}};
    return value(dummy_).value(cl_ulong{0}).value(ne).value(nb);
  }

 private:
  cl_kernel k_;
  cl_mem dummy_;
  const char* name_;
  cl_uint i_ = 0;
};

}  // namespace

std::string kernel_defines() {
  std::string defines;
  for (DType t : kAllTypes) defines += fmt::format(" -DT_{}={}", upper(type_name(t)), type_code(t));
  for (DType t : kQuantizedTypes)
    defines += fmt::format(" -D{0}_BYTES={1} -D{0}_ELEMS={2}", upper(type_name(t)), traits(t).type_size,
                           traits(t).block_size);
  for (const OpInfo& info : kOpTable) defines += fmt::format(" -DOP_{}={}", upper(info.name), op_code(info.op));
  return defines;
}

bool kernel_supports(const Tensor& node) {
  if (!op_has_kernel(node.op)) return static_cast<size_t>(node.op) < kOpCount;  // nothing to run
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  switch (node.op) {
    case Op::GetRows:
      return node.type == DType::F32 && (is_plain_float(a->type) || is_quantized(a->type)) && rows_ok(*a) &&
             b->type == DType::I32;
    case Op::SetRows:
      return a->type == DType::F32 && b->type == DType::I32 &&
             (is_plain_float(node.type) || can_quantize(node.type)) && rows_ok(node);
    case Op::Cpy:
    case Op::Cont: {
      const DType s = a->type, d = node.type;
      if (!rows_ok(*a) || !rows_ok(node)) return false;
      if (s == DType::I32 || d == DType::I32) return s == d;
      if (is_quantized(d)) return a->ne[0] == node.ne[0] && (s == d || can_quantize(d));
      if (is_quantized(s)) return a->ne[0] == node.ne[0];
      return is_plain_float(s) && is_plain_float(d);
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
      return node.type == DType::F32 && a->type == DType::F32 && b->type == DType::F32;
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Clamp:
    case Op::SumRows:
    case Op::RmsNorm:
    case Op::Norm:
      return node.type == DType::F32 && a->type == DType::F32;
    case Op::Argmax:
    case Op::Argsort:
      return node.type == DType::I32 && a->type == DType::F32;
    case Op::Concat:
      return a->type == b->type && node.type == a->type && (is_plain_float(a->type) || a->type == DType::I32);
    case Op::Rope:
      return node.type == DType::F32 && a->type == DType::F32 && b->type == DType::I32 &&
             (!node.src[2] || node.src[2]->type == DType::F32) &&
             (rope_params(node).mode == RopeMode::Normal || rope_params(node).mode == RopeMode::NeoX);
    case Op::SoftMax:
      return node.type == DType::F32 && a->type == DType::F32 &&
             (!b || ((b->type == DType::F32 || b->type == DType::F16) && b->has_contiguous_rows())) &&
             (!node.src[2] || node.src[2]->type == DType::F32);
    case Op::MulMat:
      return node.type == DType::F32 && b->type == DType::F32 && a->has_contiguous_rows() &&
             (is_plain_float(a->type) || is_quantized(a->type));
    case Op::MulMatId:
      return node.type == DType::F32 && b->type == DType::F32 && node.src[2]->type == DType::I32 &&
             a->has_contiguous_rows() && (is_plain_float(a->type) || is_quantized(a->type));
    case Op::FlashAttnExt: {
      // k_flash_attn: q in local memory (D <= 512), 8 outputs per work-item
      // of 64 (Dv <= 512); K and V of any readable type.
      const Tensor* v = node.src[2];
      const Tensor* mask = node.src[3];
      const auto readable = [](DType t) { return is_plain_float(t) || is_quantized(t); };
      return node.type == DType::F32 && a->type == DType::F32 && readable(b->type) && readable(v->type) &&
             rows_ok(*b) && rows_ok(*v) && a->ne[0] <= kFlashAttnMaxHead && v->ne[0] <= kFlashAttnMaxHead &&
             (!mask || ((mask->type == DType::F32 || mask->type == DType::F16) && mask->has_contiguous_rows()));
    }
    default:
      return false;  // no OpenCL kernel
  }
}

void OpenClBackend::enqueue_node(Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  const cl_mem dummy = error_buffer();
  const size_t max_wg = std::max<size_t>(1, device_.max_work_group());
  // Local size along dim 0: a power of two covering short rows, at most 64.
  auto local_for = [max_wg](int64_t n) {
    size_t l = 1;
    while (l < static_cast<size_t>(n) && l < 64 && l * 2 <= max_wg) l *= 2;
    return l;
  };
  auto launch = [&](cl_kernel k, const char* name, int64_t g0, int64_t g1, int64_t g2) {
    if (g0 <= 0 || g1 <= 0 || g2 <= 0) return;
    const size_t local[3] = {local_for(g0), 1, 1};
    const size_t global[3] = {align_up(static_cast<size_t>(g0), local[0]), static_cast<size_t>(g1),
                              static_cast<size_t>(g2)};
    check(clEnqueueNDRangeKernel(queue(), k, 3, nullptr, global, local, 0, nullptr, nullptr),
          fmt::format("{}: running kernel {} for '{}' {}", device_.name(), name, node.name, node.shape_string()));
  };
  auto start = [&](const char* name) { return std::pair<cl_kernel, Args>(kernel(name), Args(kernel(name), dummy, name)); };
  const int64_t rows = node.ne[1], mats = node.ne[2] * node.ne[3];

  switch (node.op) {
    case Op::GetRows: {
      auto [k, args] = start("k_get_rows");
      const int label = add_error_label(fmt::format("get_rows '{}' from '{}' ({} rows)", node.name, a->name, a->ne[1]));
      args.tensor(*a).value(type_code(a->type)).tensor(*b).tensor(node).value(dummy).value(cl_int{label});
      return launch(k, "k_get_rows", node.ne[0], b->ne[0], b->ne[1] * b->ne[2]);
    }
    case Op::SetRows: {
      const bool q = is_quantized(node.type);
      const char* name = q ? "k_set_rows_q" : "k_set_rows";
      auto [k, args] = start(name);
      const Tensor* target = node.view_src ? node.view_src : &node;
      const int label = add_error_label(fmt::format("set_rows '{}' into '{}' ({} rows)", node.name, target->name, node.ne[1]));
      args.tensor(*a).tensor(*b).tensor(node).value(type_code(node.type)).value(dummy).value(cl_int{label});
      const int64_t n0 = q ? a->ne[0] / traits(node.type).block_size : a->ne[0];
      return launch(k, name, n0, a->ne[1], a->ne[2] * a->ne[3]);
    }
    case Op::Cpy:
    case Op::Cont: {
      const bool q = is_quantized(node.type);
      const char* name = q ? "k_cpy_q" : "k_cpy";
      auto [k, args] = start(name);
      args.tensor(*a).value(type_code(a->type)).tensor(node).value(type_code(node.type));
      const int64_t n0 = q ? node.ne[0] / traits(node.type).block_size : node.ne[0];
      return launch(k, name, n0, rows, mats);
    }
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div: {
      auto [k, args] = start("k_binary");
      args.tensor(*a).tensor(*b).tensor(node).value(op_code(node.op));
      return launch(k, "k_binary", node.ne[0], rows, mats);
    }
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Clamp: {
      // p0, p1: scale and bias, or clamp's min and max
      ScaleParams sp{0.0f, 0.0f};
      if (node.op == Op::Scale) sp = scale_params(node);
      if (node.op == Op::Clamp) sp = {clamp_params(node).min, clamp_params(node).max};
      auto [k, args] = start("k_unary");
      args.tensor(*a).tensor(node).value(op_code(node.op)).value(cl_float{sp.scale}).value(cl_float{sp.bias});
      return launch(k, "k_unary", node.ne[0], rows, mats);
    }
    case Op::Concat: {
      auto [k, args] = start("k_concat");
      args.tensor(*a).tensor(*b).tensor(node).value(cl_int{concat_params(node).dim})
          .value(static_cast<cl_int>(traits(node.type).type_size));
      return launch(k, "k_concat", node.ne[0], rows, mats);
    }
    case Op::SumRows:
    case Op::Argmax: {
      const char* name = node.op == Op::SumRows ? "k_sum_rows" : "k_argmax";
      auto [k, args] = start(name);
      args.tensor(*a).tensor(node);
      return launch(k, name, a->nrows(), 1, 1);
    }
    case Op::Argsort: {
      auto [k, args] = start("k_argsort");
      args.tensor(*a).tensor(node).value(cl_int{argsort_params(node).order == SortOrder::Descending});
      return launch(k, "k_argsort", a->ne[0], a->nrows(), 1);
    }
    case Op::MulMatId: {
      const Tensor* ids = node.src[2];
      auto [k, args] = start("k_mul_mat_id");
      const int label = add_error_label(
          fmt::format("mul_mat_id '{}': expert id of '{}' outside [0, {})", node.name, ids->name, a->ne[2]));
      args.tensor(*a).value(type_code(a->type)).tensor(*b).tensor(*ids).tensor(node).value(dummy)
          .value(cl_int{label});
      return launch(k, "k_mul_mat_id", a->ne[1], ids->ne[0], ids->ne[1]);
    }
    case Op::RmsNorm:
    case Op::Norm: {
      auto [k, args] = start("k_norm");
      args.tensor(*a).tensor(node).value(cl_int{node.op == Op::RmsNorm}).value(cl_float{norm_params(node).eps});
      return launch(k, "k_norm", a->nrows(), 1, 1);
    }
    case Op::SoftMax: {
      auto [k, args] = start("k_soft_max");
      const Tensor* sinks = node.src[2];
      args.tensor(*a);
      if (b) args.tensor(*b); else args.absent();
      if (sinks) args.tensor(*sinks); else args.absent();
      args.tensor(node).value(cl_int{b ? type_code(b->type) : -1}).value(cl_int{sinks != nullptr})
          .value(cl_float{soft_max_params(node).scale});
      return launch(k, "k_soft_max", a->nrows(), 1, 1);
    }
    case Op::Rope: {
      const RopeParams rp = rope_params(node);
      const int n_dims = rp.n_dims;
      const Tensor* factors = node.src[2];
      auto [k, args] = start("k_rope");
      args.tensor(*a).tensor(*b);
      if (factors) args.tensor(*factors); else args.absent();
      args.tensor(node).value(cl_int{n_dims}).value(cl_int{rp.mode == RopeMode::NeoX}).value(cl_int{factors != nullptr})
          .value(cl_float{rp.freq_base}).value(cl_float{rp.freq_scale}).value(cl_float{rp.attn_factor});
      return launch(k, "k_rope", n_dims / 2 + (a->ne[0] - n_dims), a->nrows(), 1);
    }
    case Op::MulMat: {
      OpenClBuffer* bb = opencl_buffer_of(*b);
      const bool fast = b->nb[0] == sizeof(float) && bb && bb->offset_in(*b) % 4 == 0 && b->nb[1] % 4 == 0 &&
                        b->nb[2] % 4 == 0 && b->nb[3] % 4 == 0;
      if (!fast) {
        auto [k, args] = start("k_mul_mat_any");
        args.tensor(*a).value(type_code(a->type)).tensor(*b).tensor(node);
        return launch(k, "k_mul_mat_any", a->ne[1], b->ne[1], b->ne[2] * b->ne[3]);
      }
      constexpr int64_t kColumnsPerItem = 4;  // MM_NC in mul_mat.cl
      const int64_t column_groups = (b->ne[1] + kColumnsPerItem - 1) / kColumnsPerItem;
      const std::string name = "k_mul_mat_" + lower(type_name(a->type));
      auto [k, args] = start(name.c_str());
      args.tensor(*a).tensor(*b).tensor(node);
      if (!is_quantized(a->type)) return launch(k, name.c_str(), a->ne[1], column_groups, b->ne[2] * b->ne[3]);
      // `lanes` work-items per row of a (no more than its 32-element chunks
      // need), a work-group of up to 64 (a power of two) covering group / lanes rows.
      const size_t group = local_for(64);
      const size_t lanes = std::min<size_t>(local_for(a->ne[0] / 32), std::min<size_t>(device_.mul_mat_lanes(), group));
      const size_t rows_per_group = group / lanes;
      args.value(static_cast<cl_int>(lanes));
      const size_t local[3] = {group, 1, 1};
      const size_t global[3] = {(static_cast<size_t>(a->ne[1]) + rows_per_group - 1) / rows_per_group * group,
                                static_cast<size_t>(column_groups), static_cast<size_t>(b->ne[2] * b->ne[3])};
      check(clEnqueueNDRangeKernel(queue(), k, 3, nullptr, global, local, 0, nullptr, nullptr),
            fmt::format("{}: running kernel {} for '{}' {}", device_.name(), name, node.name, node.shape_string()));
      return;
    }
    case Op::FlashAttnExt: {
      if (max_wg < static_cast<size_t>(kFlashAttnGroup))
        fail("{}: flash_attn_ext needs work-groups of {} work-items; the device allows {} (tensor '{}')",
             device_.name(), kFlashAttnGroup, max_wg, node.name);
      const Tensor* v = node.src[2];
      const Tensor* mask = node.src[3];
      const FlashAttnParams fp = flash_attn_params(node);
      auto [k, args] = start("k_flash_attn");
      args.tensor(*a).tensor(*b).value(type_code(b->type)).tensor(*v).value(type_code(v->type));
      if (mask) args.tensor(*mask); else args.absent();
      args.value(cl_int{mask ? type_code(mask->type) : -1}).tensor(node).value(cl_float{fp.scale})
          .value(cl_float{fp.max_bias}).value(cl_float{fp.softcap});
      const size_t local[3] = {static_cast<size_t>(kFlashAttnGroup), 1, 1};
      const size_t global[3] = {static_cast<size_t>(kFlashAttnGroup), static_cast<size_t>(a->ne[1] * a->ne[2]),
                                static_cast<size_t>(a->ne[3])};
      check(clEnqueueNDRangeKernel(queue(), k, 3, nullptr, global, local, 0, nullptr, nullptr),
            fmt::format("{}: running kernel k_flash_attn for '{}' {}", device_.name(), node.name, node.shape_string()));
      return;
    }
    default:
      break;
  }
  fail("{}: no kernel for op {} (tensor '{}')", device_.name(), op_name(node.op), node.name);
}

}  // namespace loom::opencl
