// Data-movement kernels: get_rows, set_rows, cpy/cont (with type
// conversion), concat.
#include <algorithm>
#include <cstring>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include "kernels.h"
#include "row_ops.h"

namespace loom::cpu {
namespace {

// 16-bit element t of cell i, at in + i * in_stride + 2 t, goes to
// out + t * out_stride + 2 i, for t < n_dims and i < n_cells: a transpose,
// 8 x 8 blocks in registers where SSE2 (x86-64's baseline) has them.
void transpose_u16(const char* in, size_t in_stride, char* out, size_t out_stride, int64_t n_dims, int64_t n_cells) {
  int64_t t0 = 0, i_done = 0;
#ifdef __SSE2__
  i_done = n_cells / 8 * 8;
  for (; t0 + 8 <= n_dims; t0 += 8) {
    for (int64_t i = 0; i < i_done; i += 8) {
      __m128i r[8], u[8];
      for (int c = 0; c < 8; ++c)
        r[c] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (i + c) * in_stride + 2 * t0));
      for (int c = 0; c < 4; ++c) {
        u[2 * c] = _mm_unpacklo_epi16(r[2 * c], r[2 * c + 1]);
        u[2 * c + 1] = _mm_unpackhi_epi16(r[2 * c], r[2 * c + 1]);
      }
      // r[4h + q]: cells 4h..4h+3 of dims 2q and 2q + 1.
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 2; ++e) {
          r[4 * h + 2 * e] = _mm_unpacklo_epi32(u[4 * h + e], u[4 * h + 2 + e]);
          r[4 * h + 2 * e + 1] = _mm_unpackhi_epi32(u[4 * h + e], u[4 * h + 2 + e]);
        }
      for (int q = 0; q < 4; ++q) {
        char* o = out + (t0 + 2 * q) * out_stride + 2 * i;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o), _mm_unpacklo_epi64(r[q], r[4 + q]));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + out_stride), _mm_unpackhi_epi64(r[q], r[4 + q]));
      }
    }
  }
#endif
  // The dims past the last block of 8 (every cell), then the cells past the
  // last block of 8 (the blocked dims).
  for (int64_t i = t0 < n_dims ? 0 : i_done; i < n_cells; ++i) {
    const auto* s = reinterpret_cast<const uint16_t*>(in + i * in_stride);
    for (int64_t t = i < i_done ? t0 : 0; t < n_dims; ++t) reinterpret_cast<uint16_t*>(out + t * out_stride)[i] = s[t];
  }
}

// Reads a row of `n` elements (stride nb0) as floats.
void row_to_floats(const Tensor& t, const char* row, int64_t n, float* out) {
  const TypeTraits& tt = traits(t.type);
  if (t.type == DType::F16 && t.nb[0] == sizeof(uint16_t)) {
    row_ops().f16_to_f32(reinterpret_cast<const uint16_t*>(row), out, n);
  } else if (t.nb[0] == tt.type_size) {
    tt.to_float(row, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) tt.to_float(row + i * t.nb[0], out + i, 1);
  }
}

void row_from_floats(const Tensor& t, char* row, int64_t n, const float* in) {
  const TypeTraits& tt = traits(t.type);
  if (t.type == DType::F16 && t.nb[0] == sizeof(uint16_t)) {
    row_ops().f32_to_f16(in, reinterpret_cast<uint16_t*>(row), n);
  } else if (t.nb[0] == tt.type_size) {
    tt.from_float(in, row, n);
  } else {
    for (int64_t i = 0; i < n; ++i) tt.from_float(in + i, row + i * t.nb[0], 1);
  }
}

struct Index4 {
  int64_t i0, i1, i2, i3;
};
inline Index4 unflatten(const Tensor& t, int64_t k) {
  Index4 ix;
  ix.i0 = k % t.ne[0];
  k /= t.ne[0];
  ix.i1 = k % t.ne[1];
  k /= t.ne[1];
  ix.i2 = k % t.ne[2];
  ix.i3 = k / t.ne[2];
  return ix;
}
inline char* element_ptr(const Tensor& t, const Index4& ix) {
  return static_cast<char*>(t.data) + ix.i0 * t.nb[0] + ix.i1 * t.nb[1] + ix.i2 * t.nb[2] + ix.i3 * t.nb[3];
}

}  // namespace

void compute_get_rows(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& idx = *dst.src[1];
  const int64_t n = idx.ne[0] * idx.ne[1] * idx.ne[2];
  const Range rows = split_range(n, p.ith, p.nth);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i10 = r % idx.ne[0], i11 = r / idx.ne[0] % idx.ne[1], i12 = r / (idx.ne[0] * idx.ne[1]);
    const int32_t row =
        *reinterpret_cast<const int32_t*>(static_cast<const char*>(idx.data) + i10 * idx.nb[0] +
                                          i11 * idx.nb[1] + i12 * idx.nb[2]);
    auto* out = reinterpret_cast<float*>(row_ptr(dst, i10, i11, i12));
    if (row < 0 || row >= a.ne[1]) {
      p.errors->report(fmt::format("get_rows '{}': row index {} is outside [0, {}) of '{}'", dst.name, row,
                                   a.ne[1], a.name));
      continue;
    }
    row_to_floats(a, row_ptr(a, row, i11, i12), a.ne[0], out);
  }
}

void compute_set_rows(const ComputeParams& p, Tensor& dst) {
  const Tensor& src = *dst.src[0];
  const Tensor& idx = *dst.src[1];
  const Range rows = split_range(src.nrows(), p.ith, p.nth);
  std::vector<float> tmp;
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t i1 = r % src.ne[1], i2 = r / src.ne[1] % src.ne[2], i3 = r / (src.ne[1] * src.ne[2]);
    const int32_t row = *reinterpret_cast<const int32_t*>(static_cast<const char*>(idx.data) +
                                                          i1 * idx.nb[0] + i2 * idx.nb[1] + i3 * idx.nb[2]);
    if (row < 0 || row >= dst.ne[1]) {
      p.errors->report(fmt::format("set_rows '{}': row index {} is outside [0, {})", dst.name, row, dst.ne[1]));
      continue;
    }
    const char* in = row_ptr(src, i1, i2, i3);
    if (src.nb[0] != sizeof(float)) {
      tmp.resize(src.ne[0]);
      row_to_floats(src, in, src.ne[0], tmp.data());
      in = reinterpret_cast<const char*>(tmp.data());
    }
    row_from_floats(dst, row_ptr(dst, row, i2, i3), dst.ne[0], reinterpret_cast<const float*>(in));
  }
}

void compute_cpy(const ComputeParams& p, Tensor& dst) {
  const Tensor& src = *dst.src[0];
  const size_t src_el = traits(src.type).type_size, dst_el = traits(dst.type).type_size;
  if (src.ne[0] == dst.ne[0]) {  // rows line up: convert row by row
    const bool raw = src.type == dst.type && src.has_contiguous_rows() && dst.has_contiguous_rows();
    const Range rows = split_range(dst.nrows(), p.ith, p.nth);
    if (src.type == dst.type && src_el == 2 && src.ne == dst.ne && src.nb[1] == 2 && src.nb[0] != 2 &&
        dst.nb[0] == 2) {
      // A transpose (the V cache viewed slot-minor): consecutive rows read
      // neighbouring elements, so copy up to 16 rows per pass over the
      // elements and each source cache line is read once.
      for (int64_t r = rows.begin; r < rows.end;) {
        const int64_t d1 = r % dst.ne[1], d2 = r / dst.ne[1] % dst.ne[2], d3 = r / (dst.ne[1] * dst.ne[2]);
        const int64_t n = std::min({int64_t{16}, rows.end - r, dst.ne[1] - d1});
        transpose_u16(row_ptr(src, d1, d2, d3), src.nb[0], row_ptr(dst, d1, d2, d3), dst.nb[1], n, dst.ne[0]);
        r += n;
      }
      return;
    }
    std::vector<float> tmp(raw ? 0 : dst.ne[0]);
    for (int64_t r = rows.begin; r < rows.end; ++r) {
      const int64_t s1 = r % src.ne[1], s2 = r / src.ne[1] % src.ne[2], s3 = r / (src.ne[1] * src.ne[2]);
      const int64_t d1 = r % dst.ne[1], d2 = r / dst.ne[1] % dst.ne[2], d3 = r / (dst.ne[1] * dst.ne[2]);
      const char* in = row_ptr(src, s1, s2, s3);
      char* out = row_ptr(dst, d1, d2, d3);
      if (raw) {
        std::memcpy(out, in, dst.row_bytes());
      } else if (src.type == dst.type && src_el == 2) {  // strided f16/bf16: move the bits
        for (int64_t i = 0; i < dst.ne[0]; ++i)
          *reinterpret_cast<uint16_t*>(out + i * dst.nb[0]) = *reinterpret_cast<const uint16_t*>(in + i * src.nb[0]);
      } else if (src.type == dst.type && src_el == 4) {
        for (int64_t i = 0; i < dst.ne[0]; ++i)
          *reinterpret_cast<uint32_t*>(out + i * dst.nb[0]) = *reinterpret_cast<const uint32_t*>(in + i * src.nb[0]);
      } else if (src.type == DType::I32) {
        for (int64_t i = 0; i < dst.ne[0]; ++i) std::memcpy(out + i * dst.nb[0], in + i * src.nb[0], 4);
      } else {
        row_to_floats(src, in, src.ne[0], tmp.data());
        row_from_floats(dst, out, dst.ne[0], tmp.data());
      }
    }
    return;
  }
  // Shapes differ (plain types only): walk both in logical element order.
  const Range elems = split_range(dst.nelements(), p.ith, p.nth);
  for (int64_t k = elems.begin; k < elems.end; ++k) {
    const char* in = element_ptr(src, unflatten(src, k));
    char* out = element_ptr(dst, unflatten(dst, k));
    if (src.type == dst.type) {
      std::memcpy(out, in, src_el);
    } else {
      float v;
      traits(src.type).to_float(in, &v, 1);
      traits(dst.type).from_float(&v, out, 1);
    }
  }
  (void)dst_el;
}

void compute_concat(const ComputeParams& p, Tensor& dst) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const int dim = concat_params(dst).dim;
  const size_t el = traits(dst.type).type_size;
  const Range elems = split_range(dst.nelements(), p.ith, p.nth);
  for (int64_t k = elems.begin; k < elems.end; ++k) {
    Index4 ix = unflatten(dst, k);
    char* out = element_ptr(dst, ix);
    int64_t* coord[4] = {&ix.i0, &ix.i1, &ix.i2, &ix.i3};
    if (*coord[dim] < a.ne[dim]) {
      std::memcpy(out, element_ptr(a, ix), el);
    } else {
      *coord[dim] -= a.ne[dim];
      std::memcpy(out, element_ptr(b, ix), el);
    }
  }
}

}  // namespace loom::cpu
