#include "conformance/reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "loom/error.h"
#include "loom/op.h"
#include "loom/op_params.h"

namespace loom::conformance {
namespace {

using Index = std::array<int64_t, 4>;

// Calls f(i0, i1, i2, i3) for every index of `ne` in logical order.
template <class F>
void for_each_index(const std::array<int64_t, 4>& ne, F f) {
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) f(i0, i1, i2, i3);
}

double binary_value(Op op, double x, double y) {
  switch (op) {
    case Op::Add: return x + y;
    case Op::Sub: return x - y;
    case Op::Mul: return x * y;
    case Op::Div: return x / y;
    default: fail("reference: {} is not a binary op", op_name(op));
  }
}

double unary_value(const Tensor& node, double x) {
  switch (node.op) {
    case Op::Scale: {
      const ScaleParams p = scale_params(node);
      return x * p.scale + p.bias;
    }
    case Op::Sqr: return x * x;
    case Op::Sqrt: return std::sqrt(x);
    case Op::Silu: return x / (1.0 + std::exp(-x));
    case Op::Gelu: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case Op::Relu: return x > 0.0 ? x : 0.0;
    case Op::Tanh: return std::tanh(x);
    case Op::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::Clamp: {
      const ClampParams p = clamp_params(node);
      return std::min(std::max(x, static_cast<double>(p.min)), static_cast<double>(p.max));
    }
    default: fail("reference: {} is not a unary op", op_name(node.op));
  }
}

// out = a op b, with b repeated along every dim where it is smaller.
Dense ref_binary(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const double x = m.at(a, i0, i1, i2, i3);
    const double y = m.at(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    out.at(i0, i1, i2, i3) = binary_value(node.op, x, y);
  });
  return out;
}

Dense ref_unary(const Tensor& node, const RefMemory& m) {
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    out.at(i0, i1, i2, i3) = unary_value(node, m.at(*node.src[0], i0, i1, i2, i3));
  });
  return out;
}

// out[:, j, i11, i12] = a[:, rows[j, i11, i12], i11, i12]
Dense ref_get_rows(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const Tensor& rows = *node.src[1];
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i0, int64_t j, int64_t i11, int64_t i12) {
    const auto row = static_cast<int64_t>(m.at(rows, j, i11, i12, 0));
    if (row < 0 || row >= a.ne[1]) fail("reference get_rows: index {} outside [0, {})", row, a.ne[1]);
    out.at(i0, j, i11, i12) = m.at(a, i0, row, i11, i12);
  });
  return out;
}

// dst with row rows[i1, i2, i3] of each (i2, i3) replaced by src row i1.
Dense ref_set_rows(const Tensor& node, const RefMemory& m) {
  const Tensor& src = *node.src[0];
  const Tensor& rows = *node.src[1];
  const Tensor& dst = *node.src[2];
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    out.at(i0, i1, i2, i3) = m.at(dst, i0, i1, i2, i3);
  });
  for_each_index(src.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const auto row = static_cast<int64_t>(m.at(rows, i1, i2, i3, 0));
    if (row < 0 || row >= dst.ne[1]) fail("reference set_rows: index {} outside [0, {})", row, dst.ne[1]);
    out.at(i0, row, i2, i3) = m.at(src, i0, i1, i2, i3);
  });
  return out;
}

// cpy and cont: the k-th element of a (logical order) becomes the k-th of the result.
Dense ref_copy(const Tensor& node, const RefMemory& m) {
  Dense out(node.ne);
  out.v = m.read(*node.src[0]);
  return out;
}

Dense ref_sum_rows(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  Dense out(node.ne);
  for_each_index(a.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    out.at(0, i1, i2, i3) += m.at(a, i0, i1, i2, i3);
  });
  return out;
}

// out[i, j, j2, j3] = sum_k a[k, i, j2 / (B2 / A2), j3 / (B3 / A3)] * b[k, j, j2, j3]
Dense ref_mul_mat(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int64_t K = a.ne[0];
  const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i, int64_t j, int64_t j2, int64_t j3) {
    double sum = 0.0;
    for (int64_t k = 0; k < K; ++k) sum += m.at(a, k, i, j2 / r2, j3 / r3) * m.at(b, k, j, j2, j3);
    out.at(i, j, j2, j3) = sum;
  });
  return out;
}

// out[i, s, t] = sum_k as[k, i, ids[s, t]] * b[k, s % b.ne1, t]
Dense ref_mul_mat_id(const Tensor& node, const RefMemory& m) {
  const Tensor& as = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i, int64_t s, int64_t t, int64_t) {
    const auto e = static_cast<int64_t>(m.at(ids, s, t, 0, 0));
    if (e < 0 || e >= as.ne[2]) fail("reference mul_mat_id: expert id {} outside [0, {})", e, as.ne[2]);
    double sum = 0.0;
    for (int64_t k = 0; k < as.ne[0]; ++k) sum += m.at(as, k, i, e, 0) * m.at(b, k, s % b.ne[1], t, 0);
    out.at(i, s, t, 0) = sum;
  });
  return out;
}

// Per row, the indices in the order of their values (ascending or
// descending); equal values in index order, NaNs last.
Dense ref_argsort(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const bool descending = argsort_params(node).order == SortOrder::Descending;
  Dense out(node.ne);
  for_each_index({1, a.ne[1], a.ne[2], a.ne[3]}, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
    std::vector<std::pair<double, int64_t>> row;
    for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) row.emplace_back(m.at(a, i0, i1, i2, i3), i0);
    auto key = [descending](const std::pair<double, int64_t>& e) {  // NaN last, ties by index
      return std::tuple(std::isnan(e.first), std::isnan(e.first) ? 0.0 : (descending ? -e.first : e.first), e.second);
    };
    std::sort(row.begin(), row.end(), [&key](const auto& l, const auto& r) { return key(l) < key(r); });
    for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) out.at(i0, i1, i2, i3) = static_cast<double>(row[i0].second);
  });
  return out;
}

// rms_norm: x / sqrt(mean(x^2) + eps); norm: (x - mean) / sqrt(var + eps).
Dense ref_norm(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const double eps = norm_params(node).eps;
  const int64_t n = a.ne[0];
  Dense out(node.ne);
  for_each_index({1, a.ne[1], a.ne[2], a.ne[3]}, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
    double mean = 0.0;
    if (node.op == Op::Norm) {
      for (int64_t i0 = 0; i0 < n; ++i0) mean += m.at(a, i0, i1, i2, i3);
      mean /= static_cast<double>(n);
    }
    double sum_sq = 0.0;
    for (int64_t i0 = 0; i0 < n; ++i0) {
      const double d = m.at(a, i0, i1, i2, i3) - mean;
      sum_sq += d * d;
    }
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps);
    for (int64_t i0 = 0; i0 < n; ++i0) out.at(i0, i1, i2, i3) = (m.at(a, i0, i1, i2, i3) - mean) * inv;
  });
  return out;
}

// Rotates pairs of the first n_dims elements of each row by
// theta_k = position * freq_scale * freq_base^(-2k / n_dims) / factor_k
// (factor_k = 1 without a freq-factors operand). Normal mode
// pairs (2k, 2k+1), NeoX pairs (k, k + n_dims/2); the rest pass through.
Dense ref_rope(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const Tensor& positions = *node.src[1];
  const Tensor* factors = node.src[2];
  const RopeParams p = rope_params(node);
  const int64_t n_dims = p.n_dims;
  const bool neox = p.mode == RopeMode::NeoX;
  const double freq_base = p.freq_base, freq_scale = p.freq_scale, mscale = p.attn_factor;
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    out.at(i0, i1, i2, i3) = m.at(a, i0, i1, i2, i3);
  });
  for_each_index({1, a.ne[1], a.ne[2], a.ne[3]}, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
    const double position = m.at(positions, i2, 0, 0, 0);
    for (int64_t k = 0; k < n_dims / 2; ++k) {
      const double factor = factors ? m.at(*factors, k, 0, 0, 0) : 1.0;
      const double theta = position * freq_scale *
                           std::pow(freq_base, -2.0 * static_cast<double>(k) / static_cast<double>(n_dims)) / factor;
      const int64_t j0 = neox ? k : 2 * k;
      const int64_t j1 = neox ? k + n_dims / 2 : 2 * k + 1;
      const double x0 = m.at(a, j0, i1, i2, i3), x1 = m.at(a, j1, i1, i2, i3);
      out.at(j0, i1, i2, i3) = mscale * (x0 * std::cos(theta) - x1 * std::sin(theta));
      out.at(j1, i1, i2, i3) = mscale * (x0 * std::sin(theta) + x1 * std::cos(theta));
    }
  });
  return out;
}

// softmax(a * scale + mask) along dim 0; the mask row is (i1, i2 % m2, i3 % m3).
// A row whose every element is -inf gives zeros. With sinks, sinks[i2] is one
// more logit of every row, in the max and the sum only.
Dense ref_soft_max(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const Tensor* mask = node.src[1];
  const Tensor* sinks = node.src[2];
  const double scale = soft_max_params(node).scale;
  const int64_t n = a.ne[0];
  Dense out(node.ne);
  std::vector<double> x(static_cast<size_t>(n));
  for_each_index({1, a.ne[1], a.ne[2], a.ne[3]}, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t i0 = 0; i0 < n; ++i0) {
      x[i0] = m.at(a, i0, i1, i2, i3) * scale;
      if (mask) x[i0] += m.at(*mask, i0, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
      max = std::max(max, x[i0]);
    }
    const double sink = sinks ? m.at(*sinks, i2, 0, 0, 0) : -std::numeric_limits<double>::infinity();
    max = std::max(max, sink);
    if (max == -std::numeric_limits<double>::infinity()) return;  // stays zero
    double sum = std::exp(sink - max);
    for (int64_t i0 = 0; i0 < n; ++i0) sum += std::exp(x[i0] - max);
    for (int64_t i0 = 0; i0 < n; ++i0) out.at(i0, i1, i2, i3) = std::exp(x[i0] - max) / sum;
  });
  return out;
}

// flash_attn_ext: per query row r, head h and batch b, with KV head
// h / (n_head / n_head_kv) and KV batch b / (ne3 / k3):
//   x_j = softcap(scale * q . k_j) + slope_h * mask(j, r, h % m2, b % m3)
// (softcap(x) = c tanh(x / c) when c > 0; a -inf mask drops row j), then
// out(:, h, r, b) = sum_j softmax(x)_j v_j; zeros when every row is dropped.
Dense ref_flash_attn(const Tensor& node, const RefMemory& m) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  const Tensor* mask = node.src[3];
  const FlashAttnParams p = flash_attn_params(node);
  const int64_t D = q.ne[0], Dv = v.ne[0], n_kv = k.ne[1], H = q.ne[2];
  const int64_t group = H / k.ne[2], batch_group = q.ne[3] / k.ne[3];
  Dense out(node.ne);
  std::vector<double> x(static_cast<size_t>(n_kv));
  for_each_index({1, q.ne[1], H, q.ne[3]}, [&](int64_t, int64_t r, int64_t h, int64_t b) {
    const int64_t hk = h / group, bk = b / batch_group;
    // The slope as llama.cpp computes it: the largest power of two n2 <= H.
    double slope = 1.0;
    if (p.max_bias > 0.0f) {
      int64_t n2 = 1;
      while (n2 * 2 <= H) n2 *= 2;
      const double m0 = std::pow(2.0, -static_cast<double>(p.max_bias) / n2);
      const double m1 = std::pow(2.0, -static_cast<double>(p.max_bias) / 2.0 / n2);
      slope = h < n2 ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n2) + 1);
    }
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n_kv; ++j) {
      const double mv = mask ? m.at(*mask, j, r, h % mask->ne[2], b % mask->ne[3]) : 0.0;
      if (mv == -std::numeric_limits<double>::infinity()) {
        x[j] = mv;
        continue;
      }
      double dot = 0.0;
      for (int64_t i = 0; i < D; ++i) dot += m.at(q, i, r, h, b) * m.at(k, i, j, hk, bk);
      double s = dot * p.scale;
      if (p.softcap > 0.0f) s = p.softcap * std::tanh(s / p.softcap);
      x[j] = s + slope * mv;
      max = std::max(max, x[j]);
    }
    if (max == -std::numeric_limits<double>::infinity()) return;  // stays zero
    double sum = 0.0;
    for (int64_t j = 0; j < n_kv; ++j) sum += (x[j] = std::exp(x[j] - max));
    for (int64_t i = 0; i < Dv; ++i) {
      double acc = 0.0;
      for (int64_t j = 0; j < n_kv; ++j)
        if (x[j] != 0.0) acc += x[j] * m.at(v, i, j, hk, bk);
      out.at(i, h, r, b) = acc / sum;
    }
  });
  return out;
}

// The index of the first largest element of each row.
Dense ref_argmax(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  Dense out(node.ne);
  for (int64_t i1 = 0; i1 < a.ne[1]; ++i1) {
    int64_t best = 0;
    for (int64_t i0 = 1; i0 < a.ne[0]; ++i0)
      if (m.at(a, i0, i1, 0, 0) > m.at(a, best, i1, 0, 0)) best = i0;
    out.at(i1, 0, 0, 0) = static_cast<double>(best);
  }
  return out;
}

Dense ref_concat(const Tensor& node, const RefMemory& m) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int dim = concat_params(node).dim;
  Dense out(node.ne);
  for_each_index(node.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    Index i{i0, i1, i2, i3};
    double v;
    if (i[dim] < a.ne[dim]) {
      v = m.at(a, i[0], i[1], i[2], i[3]);
    } else {
      i[dim] -= a.ne[dim];
      v = m.at(b, i[0], i[1], i[2], i[3]);
    }
    out.at(i0, i1, i2, i3) = v;
  });
  return out;
}

}  // namespace

void RefMemory::set_root(const Tensor& root, std::vector<double> values) {
  if (root.view_src) fail("reference: '{}' is a view, not a root tensor", root.name);
  if (static_cast<int64_t>(values.size()) != root.nelements())
    fail("reference: '{}' {} has {} elements, {} values given", root.name, root.shape_string(),
         root.nelements(), values.size());
  roots_[&root] = std::move(values);
}

size_t RefMemory::flat_index(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
  // Byte offset into the root, then the root's (contiguous) element index.
  const TypeTraits& tt = traits(t.type);
  const size_t offset = t.view_offs + t.offset_of(i0, i1, i2, i3);
  return offset / tt.type_size * tt.block_size + static_cast<size_t>(i0 % tt.block_size);
}

double RefMemory::at(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
  auto it = roots_.find(&root_of(t));
  if (it == roots_.end()) fail("reference: tensor '{}' {} has no values yet", t.name, t.shape_string());
  const size_t k = flat_index(t, i0, i1, i2, i3);
  if (k >= it->second.size())
    fail("reference: element ({}, {}, {}, {}) of '{}' is outside its root", i0, i1, i2, i3, t.name);
  return it->second[k];
}

std::vector<double> RefMemory::read(const Tensor& t) const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.nelements()));
  for_each_index(t.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { out.push_back(at(t, i0, i1, i2, i3)); });
  return out;
}

void RefMemory::write(const Tensor& node, const std::vector<double>& values) {
  const Tensor& root = root_of(node);
  auto& storage = roots_[&root];
  if (storage.empty()) storage.assign(static_cast<size_t>(root.nelements()), 0.0);
  const int64_t n = node.ne[0];
  std::vector<float> row(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  std::vector<uint8_t> bytes;
  // Rows whose bytes a device copies unchanged hold values already in the
  // node's format; quantizing them again need not give the same blocks (the
  // K-quant searches are not idempotent), so they are stored as they are:
  // every row of a cpy/cont between equal types, and the rows set_rows
  // leaves alone.
  const bool byte_copy = (node.op == Op::Cpy || node.op == Op::Cont) && node.src[0]->type == node.type;
  std::set<std::array<int64_t, 3>> set_rows_targets;
  if (node.op == Op::SetRows) {
    const Tensor& src = *node.src[0];
    for_each_index({1, src.ne[1], src.ne[2], src.ne[3]}, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
      set_rows_targets.insert({static_cast<int64_t>(at(*node.src[1], i1, i2, i3, 0)), i2, i3});
    });
  }
  size_t k = 0;
  for_each_index({1, node.ne[1], node.ne[2], node.ne[3]}, [&](int64_t, int64_t i1, int64_t i2, int64_t i3) {
    std::vector<double> stored(values.begin() + static_cast<std::ptrdiff_t>(k),
                               values.begin() + static_cast<std::ptrdiff_t>(k + n));
    k += static_cast<size_t>(n);
    const bool unchanged = byte_copy || (node.op == Op::SetRows && !set_rows_targets.count({i1, i2, i3}));
    if (unchanged) {
      // stored as is
    } else if (node.type == DType::I32) {
      for (double& v : stored) v = std::nearbyint(v);
    } else if (node.type != DType::F32) {  // round through the stored format
      const TypeTraits& tt = traits(node.type);
      for (int64_t i = 0; i < n; ++i) row[i] = static_cast<float>(stored[i]);
      bytes.resize(row_size(node.type, n));
      tt.from_float(row.data(), bytes.data(), n);
      tt.to_float(bytes.data(), back.data(), n);
      for (int64_t i = 0; i < n; ++i) stored[i] = back[i];
    }
    for (int64_t i0 = 0; i0 < n; ++i0) storage[flat_index(node, i0, i1, i2, i3)] = stored[i0];
  });
}

std::vector<double> reference_op(const Tensor& node, const RefMemory& m) {
  switch (node.op) {
    case Op::GetRows: return ref_get_rows(node, m).v;
    case Op::SetRows: return ref_set_rows(node, m).v;
    case Op::Cpy:
    case Op::Cont: return ref_copy(node, m).v;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div: return ref_binary(node, m).v;
    case Op::Scale:
    case Op::Sqr:
    case Op::Sqrt:
    case Op::Silu:
    case Op::Gelu:
    case Op::Relu:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Clamp: return ref_unary(node, m).v;
    case Op::Argsort: return ref_argsort(node, m).v;
    case Op::MulMatId: return ref_mul_mat_id(node, m).v;
    case Op::SumRows: return ref_sum_rows(node, m).v;
    case Op::MulMat: return ref_mul_mat(node, m).v;
    case Op::RmsNorm:
    case Op::Norm: return ref_norm(node, m).v;
    case Op::Rope: return ref_rope(node, m).v;
    case Op::SoftMax: return ref_soft_max(node, m).v;
    case Op::Argmax: return ref_argmax(node, m).v;
    case Op::Concat: return ref_concat(node, m).v;
    case Op::FlashAttnExt: return ref_flash_attn(node, m).v;
    default: break;
  }
  fail("reference: no reference for op {} (tensor '{}')", op_name(node.op), node.name);
}

void evaluate(const Graph& graph, RefMemory& memory) {
  for (const Tensor* node : graph.nodes()) {
    if (!op_has_kernel(node->op)) continue;
    memory.write(*node, reference_op(*node, memory));
  }
}

}  // namespace loom::conformance
