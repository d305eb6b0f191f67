#include "loom/tensor.h"

#include <fmt/format.h>

namespace loom {

size_t Tensor::nbytes() const {
  if (nelements() == 0) return 0;
  const TypeTraits& tt = traits(type);
  size_t bytes;
  if (tt.block_size == 1) {
    bytes = tt.type_size;
    for (int i = 0; i < kMaxDims; ++i) bytes += (ne[i] - 1) * nb[i];
  } else {
    bytes = ne[0] * nb[0] / tt.block_size;
    for (int i = 1; i < kMaxDims; ++i) bytes += (ne[i] - 1) * nb[i];
  }
  return bytes;
}

int Tensor::n_dims() const {
  for (int i = kMaxDims - 1; i >= 1; --i)
    if (ne[i] > 1) return i + 1;
  return 1;
}

bool Tensor::has_contiguous_rows() const { return nb[0] == traits(type).type_size; }

bool Tensor::is_contiguous() const {
  if (!has_contiguous_rows()) return false;
  size_t expected = row_size(type, ne[0]);
  for (int i = 1; i < kMaxDims; ++i) {
    if (ne[i] != 1 && nb[i] != expected) return false;
    expected *= ne[i];
  }
  return true;
}

size_t Tensor::offset_of(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
  return i0 / traits(type).block_size * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
}

std::string Tensor::shape_string() const {
  return fmt::format("[{}, {}, {}, {}] {}", ne[0], ne[1], ne[2], ne[3], type_name(type));
}

std::string tensor_label(const Tensor& t, TensorLabel style) {
  if (t.name.empty())
    return style == TensorLabel::Bare ? fmt::format("({})", t.shape_string())
                                      : fmt::format("(unnamed {})", t.shape_string());
  switch (style) {
    case TensorLabel::Quoted: return fmt::format("'{}'", t.name);
    case TensorLabel::QuotedWithShape: return fmt::format("'{}' {}", t.name, t.shape_string());
    case TensorLabel::Bare: return t.name;
  }
  return t.name;
}

void set_contiguous_strides(Tensor& t) {
  const TypeTraits& tt = traits(t.type);
  t.nb[0] = tt.type_size;
  t.nb[1] = row_size(t.type, t.ne[0]);
  for (int i = 2; i < kMaxDims; ++i) t.nb[i] = t.nb[i - 1] * t.ne[i - 1];
}

}  // namespace loom
