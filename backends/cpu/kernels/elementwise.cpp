// Element-wise kernels (binary with broadcasting, unary), sum_rows, argmax, argsort.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels.h"
#include "row_ops.h"

namespace loom::cpu {
namespace {

inline float load(const char* row, int64_t i, size_t nb0) {
  return *reinterpret_cast<const float*>(row + i * nb0);
}

// Row helper for contiguous rows of equal length (null: none for this op).
using RowBinaryFn = void (*)(const float*, const float*, float*, int64_t);

template <class F>
void binary_rows(const ComputeParams& p, Tensor& dst, F f, RowBinaryFn row_fn = nullptr) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const Range rows = split_range(dst.nrows(), p.ith, p.nth);
  const int64_t ne0 = dst.ne[0];
  const bool contiguous = a.nb[0] == 4 && b.nb[0] == 4 && dst.nb[0] == 4;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = r % dst.ne[1], i2 = r / dst.ne[1] % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    const char* ar = row_ptr(a, i1, i2, i3);
    const char* br = row_ptr(b, i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    char* dr = row_ptr(dst, i1, i2, i3);
    if (contiguous) {
      const auto* x = reinterpret_cast<const float*>(ar);
      const auto* y = reinterpret_cast<const float*>(br);
      auto* z = reinterpret_cast<float*>(dr);
      if (b.ne[0] == ne0 && row_fn) {
        row_fn(x, y, z, ne0);
      } else if (b.ne[0] == ne0) {
        for (int64_t i = 0; i < ne0; ++i) z[i] = f(x[i], y[i]);
      } else {
        for (int64_t i = 0; i < ne0; ++i) z[i] = f(x[i], y[i % b.ne[0]]);
      }
    } else {
      for (int64_t i = 0; i < ne0; ++i)
        *reinterpret_cast<float*>(dr + i * dst.nb[0]) = f(load(ar, i, a.nb[0]), load(br, i % b.ne[0], b.nb[0]));
    }
  }
}

using RowUnaryFn = void (*)(const float*, float*, int64_t);

template <class F>
void unary_rows(const ComputeParams& p, Tensor& dst, F f, RowUnaryFn row_fn = nullptr) {
  const Tensor& a = *dst.src[0];
  const Range rows = split_range(dst.nrows(), p.ith, p.nth);
  const bool contiguous = a.nb[0] == sizeof(float) && dst.nb[0] == sizeof(float);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = r % dst.ne[1], i2 = r / dst.ne[1] % dst.ne[2], i3 = r / (dst.ne[1] * dst.ne[2]);
    const char* ar = row_ptr(a, i1, i2, i3);
    char* dr = row_ptr(dst, i1, i2, i3);
    if (row_fn && contiguous) {
      row_fn(reinterpret_cast<const float*>(ar), reinterpret_cast<float*>(dr), dst.ne[0]);
      continue;
    }
    for (int64_t i = 0; i < dst.ne[0]; ++i)
      *reinterpret_cast<float*>(dr + i * dst.nb[0]) = f(load(ar, i, a.nb[0]));
  }
}

}  // namespace

void compute_binary(const ComputeParams& p, Tensor& dst) {
  switch (dst.op) {
    case Op::Add: return binary_rows(p, dst, [](float x, float y) { return x + y; }, row_ops().add);
    case Op::Sub: return binary_rows(p, dst, [](float x, float y) { return x - y; });
    case Op::Mul: return binary_rows(p, dst, [](float x, float y) { return x * y; }, row_ops().mul);
    case Op::Div: return binary_rows(p, dst, [](float x, float y) { return x / y; });
    default: return;
  }
}

void compute_unary(const ComputeParams& p, Tensor& dst) {
  switch (dst.op) {
    case Op::Scale: {
      const ScaleParams sp = scale_params(dst);
      const float s = sp.scale, bias = sp.bias;
      return unary_rows(p, dst, [s, bias](float x) { return x * s + bias; });
    }
    case Op::Sqr: return unary_rows(p, dst, [](float x) { return x * x; });
    case Op::Sqrt: return unary_rows(p, dst, [](float x) { return std::sqrt(x); });
    case Op::Silu: return unary_rows(p, dst, [](float x) { return x / (1.0f + std::exp(-x)); }, row_ops().silu);
    case Op::Gelu:
      return unary_rows(p, dst, [](float x) {
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + 0.044715f * x * x)));
      });
    case Op::Relu: return unary_rows(p, dst, [](float x) { return x > 0.0f ? x : 0.0f; });
    case Op::Tanh: return unary_rows(p, dst, [](float x) { return std::tanh(x); });
    case Op::Sigmoid: return unary_rows(p, dst, [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
    case Op::Clamp: {
      const ClampParams cp = clamp_params(dst);
      const float lo = cp.min, hi = cp.max;
      return unary_rows(p, dst, [lo, hi](float x) { return std::min(std::max(x, lo), hi); });
    }
    default: return;
  }
}

void compute_sum_rows(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Range rows = split_range(a.nrows(), p.ith, p.nth);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = r % a.ne[1], i2 = r / a.ne[1] % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    const char* ar = row_ptr(a, i1, i2, i3);
    double sum = 0.0;
    for (int64_t i = 0; i < a.ne[0]; ++i) sum += load(ar, i, a.nb[0]);
    *reinterpret_cast<float*>(row_ptr(dst, i1, i2, i3)) = static_cast<float>(sum);
  }
}

void compute_argmax(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Range rows = split_range(a.ne[1], p.ith, p.nth);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const char* ar = row_ptr(a, r, 0, 0);
    int32_t best = 0;
    float best_value = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < a.ne[0]; ++i) {
      const float v = load(ar, i, a.nb[0]);
      if (v > best_value) {
        best_value = v;
        best = static_cast<int32_t>(i);
      }
    }
    *reinterpret_cast<int32_t*>(static_cast<char*>(dst.data) + r * dst.nb[0]) = best;
  }
}

// A stable sort of each row's indices by value: equal values keep their
// index order in both orders; NaNs come last.
void compute_argsort(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const bool descending = argsort_params(dst).order == SortOrder::Descending;
  const int64_t n = a.ne[0];
  std::vector<int32_t> idx(n);
  std::vector<float> x(n);
  const Range rows = split_range(a.nrows(), p.ith, p.nth);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = r % a.ne[1], i2 = r / a.ne[1] % a.ne[2], i3 = r / (a.ne[1] * a.ne[2]);
    const char* ar = row_ptr(a, i1, i2, i3);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = load(ar, i, a.nb[0]);
      idx[i] = static_cast<int32_t>(i);
    }
    std::stable_sort(idx.begin(), idx.end(), [&x, descending](int32_t l, int32_t r) {
      if (std::isnan(x[l])) return false;  // NaNs last
      if (std::isnan(x[r])) return true;
      return descending ? x[l] > x[r] : x[l] < x[r];
    });
    char* dr = row_ptr(dst, i1, i2, i3);
    for (int64_t i = 0; i < n; ++i) std::memcpy(dr + i * dst.nb[0], &idx[i], sizeof(int32_t));
  }
}

}  // namespace loom::cpu
