// mul_mat: dst[i, j] = dot(a row i, b row j) per matrix, a broadcast over b's
// dims 2-3. Phase 1 packs b into contiguous f32 rows in scratch; phase 2
// splits a's rows among threads.
#include <cstring>
#include <vector>

#include "kernels.h"

namespace loom::cpu {

size_t mul_mat_work_size(const Tensor& dst, int n_threads) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  return static_cast<size_t>(b.nelements()) * sizeof(float) + n_threads * a.ne[0] * sizeof(float) + 64;
}

void compute_mul_mat(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int64_t K = a.ne[0];
  auto* packed = reinterpret_cast<float*>(p.wdata);
  {
    const Range rows = split_range(b.nrows(), p.ith, p.nth);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
      const int64_t i1 = r % b.ne[1], i2 = r / b.ne[1] % b.ne[2], i3 = r / (b.ne[1] * b.ne[2]);
      const char* in = row_ptr(b, i1, i2, i3);
      for (int64_t k = 0; k < K; ++k) packed[r * K + k] = *reinterpret_cast<const float*>(in + k * b.nb[0]);
    }
  }
  p.barrier();
  float* arow = packed + b.nelements() + p.ith * K;
  const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
  const int64_t n_a_rows = a.ne[1] * b.ne[2] * b.ne[3];
  const Range rows = split_range(n_a_rows, p.ith, p.nth);
  const TypeTraits& tt = traits(a.type);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = r % a.ne[1], j2 = r / a.ne[1] % b.ne[2], j3 = r / (a.ne[1] * b.ne[2]);
    tt.to_float(row_ptr(a, i1, j2 / r2, j3 / r3), arow, K);
    for (int64_t j = 0; j < b.ne[1]; ++j) {
      const float* brow = packed + ((j3 * b.ne[2] + j2) * b.ne[1] + j) * K;
      float sum = 0.0f;
      for (int64_t k = 0; k < K; ++k) sum += arow[k] * brow[k];
      *reinterpret_cast<float*>(row_ptr(dst, j, j2, j3) + i1 * dst.nb[0]) = sum;
    }
  }
}

}  // namespace loom::cpu
