// Row-wise kernels: rms_norm, norm, rope, soft_max.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels.h"
#include "row_ops.h"

namespace loom::cpu {
namespace {

inline int64_t row_i1(const Tensor& t, int64_t r) { return r % t.ne[1]; }
inline int64_t row_i2(const Tensor& t, int64_t r) { return r / t.ne[1] % t.ne[2]; }
inline int64_t row_i3(const Tensor& t, int64_t r) { return r / (t.ne[1] * t.ne[2]); }

}  // namespace

void compute_norm(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const float eps = norm_params(dst).eps;
  const int64_t n = a.ne[0];
  const Range rows = split_range(a.nrows(), p.ith, p.nth);
  if (dst.op == Op::RmsNorm && a.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float)) {
    const RowOps& ops = row_ops();
    for (int64_t r = rows.begin; r < rows.end; ++r) {
      const int64_t i1 = row_i1(a, r), i2 = row_i2(a, r), i3 = row_i3(a, r);
      const auto* in = reinterpret_cast<const float*>(row_ptr(a, i1, i2, i3));
      const float s = 1.0f / std::sqrt(ops.sum_sq(in, n) / static_cast<float>(n) + eps);
      ops.scale(in, s, reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3)), n);
    }
    return;
  }
  std::vector<float> x(n);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = row_i1(a, r), i2 = row_i2(a, r), i3 = row_i3(a, r);
    const char* in = row_ptr(a, i1, i2, i3);
    for (int64_t i = 0; i < n; ++i) x[i] = *reinterpret_cast<const float*>(in + i * a.nb[0]);
    double mean = 0.0;
    if (dst.op == Op::Norm) {
      for (int64_t i = 0; i < n; ++i) mean += x[i];
      mean /= static_cast<double>(n);
    }
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
    const float s = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
    char* out = row_ptr(dst, i1, i2, i3);
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<float*>(out + i * dst.nb[0]) = static_cast<float>(x[i] - mean) * s;
  }
}

void compute_rope(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& pos = *dst.src[1];
  const RopeParams rp = rope_params(dst);
  const int n_dims = rp.n_dims;
  const bool neox = rp.mode == RopeMode::NeoX;
  const float base = rp.freq_base, freq_scale = rp.freq_scale, mscale = rp.attn_factor;
  const int64_t head_dim = a.ne[0];
  // inv_freq[k] = base^(-2k / n_dims) / freq_factors[k], shared by every row.
  const Tensor* factors = dst.src[2];
  std::vector<float> inv_freq(n_dims / 2);
  for (int k = 0; k < n_dims / 2; ++k) {
    inv_freq[k] = std::pow(base, -2.0f * static_cast<float>(k) / static_cast<float>(n_dims));
    if (factors) inv_freq[k] /= static_cast<const float*>(factors->data)[k];
  }
  std::vector<float> x(head_dim), y(head_dim);
  // cos and sin of the current position, recomputed only when it changes
  // (rows of one token's heads are consecutive).
  std::vector<float> cos_t(n_dims / 2), sin_t(n_dims / 2);
  int64_t cached_position = -1;
  const Range rows = split_range(a.nrows(), p.ith, p.nth);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = row_i1(a, r), i2 = row_i2(a, r), i3 = row_i3(a, r);
    const int32_t position = *reinterpret_cast<const int32_t*>(static_cast<const char*>(pos.data) + i2 * pos.nb[0]);
    if (position != cached_position || r == rows.begin) {
      for (int k = 0; k < n_dims / 2; ++k) {
        const float theta = freq_scale * static_cast<float>(position) * inv_freq[k];
        cos_t[k] = std::cos(theta) * mscale;
        sin_t[k] = std::sin(theta) * mscale;
      }
      cached_position = position;
    }
    const char* in = row_ptr(a, i1, i2, i3);
    for (int64_t i = 0; i < head_dim; ++i) x[i] = *reinterpret_cast<const float*>(in + i * a.nb[0]);
    y = x;  // dims past n_dims pass through
    for (int k = 0; k < n_dims / 2; ++k) {
      const float c = cos_t[k], s = sin_t[k];
      const int64_t j0 = neox ? k : 2 * k;
      const int64_t j1 = neox ? k + n_dims / 2 : 2 * k + 1;
      y[j0] = x[j0] * c - x[j1] * s;
      y[j1] = x[j0] * s + x[j1] * c;
    }
    char* out = row_ptr(dst, i1, i2, i3);
    for (int64_t i = 0; i < head_dim; ++i) *reinterpret_cast<float*>(out + i * dst.nb[0]) = y[i];
  }
}

void compute_soft_max(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor* mask = dst.src[1];
  const Tensor* sinks = dst.src[2];
  const float scale = soft_max_params(dst).scale;
  const int64_t n = a.ne[0];
  std::vector<float> x(n), m(n);
  const Range rows = split_range(a.nrows(), p.ith, p.nth);
  if (!sinks && a.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float)) {
    const RowOps& ops = row_ops();
    const bool mask_f32 = mask && mask->type == DType::F32 && mask->nb[0] == sizeof(float);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
      const int64_t i1 = row_i1(a, r), i2 = row_i2(a, r), i3 = row_i3(a, r);
      const float* mrow = nullptr;
      if (mask) {
        const char* mr = row_ptr(*mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
        if (mask_f32) {
          mrow = reinterpret_cast<const float*>(mr);
        } else {
          traits(mask->type).to_float(mr, m.data(), n);
          mrow = m.data();
        }
      }
      ops.soft_max(reinterpret_cast<const float*>(row_ptr(a, i1, i2, i3)), mrow,
                   reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3)), n, scale);
    }
    return;
  }
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = row_i1(a, r), i2 = row_i2(a, r), i3 = row_i3(a, r);
    const char* in = row_ptr(a, i1, i2, i3);
    for (int64_t i = 0; i < n; ++i) x[i] = *reinterpret_cast<const float*>(in + i * a.nb[0]) * scale;
    if (mask) {
      traits(mask->type).to_float(row_ptr(*mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]), m.data(), n);
      for (int64_t i = 0; i < n; ++i) x[i] += m[i];
    }
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
    // The sink of this row's head: one more logit, without an output.
    const float sink = sinks ? *reinterpret_cast<const float*>(static_cast<const char*>(sinks->data) + i2 * sinks->nb[0])
                             : -std::numeric_limits<float>::infinity();
    max = std::max(max, sink);
    char* out = row_ptr(dst, i1, i2, i3);
    if (max == -std::numeric_limits<float>::infinity()) {  // every element masked
      for (int64_t i = 0; i < n; ++i) *reinterpret_cast<float*>(out + i * dst.nb[0]) = 0.0f;
      continue;
    }
    double sum = sinks ? std::exp(sink - max) : 0.0;
    for (int64_t i = 0; i < n; ++i) {
      x[i] = std::exp(x[i] - max);
      sum += x[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<float*>(out + i * dst.nb[0]) = x[i] * inv;
  }
}

}  // namespace loom::cpu
