// The one path for moving tensor bytes: bounds checks, then the buffer's own
// implementation, staging through host memory when two buffers cannot copy
// directly.
#include <cstring>
#include <vector>

#include "loom/backend.h"
#include "loom/error.h"

namespace loom {
namespace {

Buffer& checked_buffer(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (!t.buffer)
    fail("{} tensor {}: it has no memory (not placed in a buffer)", what,
         tensor_label(t, TensorLabel::QuotedWithShape));
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    fail("{} tensor {}: bytes [{}, {}) are outside its {} bytes", what, tensor_label(t), offset, offset + size,
         t.nbytes());
  return *t.buffer;
}

}  // namespace

void tensor_set(Tensor& t, const void* data, size_t offset, size_t size) {
  Buffer& b = checked_buffer(t, offset, size, "write to");
  if (size) b.set_tensor(t, data, offset, size);
}

void tensor_get(const Tensor& t, void* data, size_t offset, size_t size) {
  Buffer& b = checked_buffer(t, offset, size, "read from");
  if (size) b.get_tensor(t, data, offset, size);
}

void tensor_memset(Tensor& t, uint8_t value, size_t offset, size_t size) {
  Buffer& b = checked_buffer(t, offset, size, "memset");
  if (size) b.memset_tensor(t, value, offset, size);
}

void tensor_copy(const Tensor& src, Tensor& dst) {
  if (src.type != dst.type || src.ne != dst.ne || src.nbytes() != dst.nbytes())
    fail("copy {} -> {}: type or shape differ", tensor_label(src, TensorLabel::QuotedWithShape),
         tensor_label(dst, TensorLabel::QuotedWithShape));
  const size_t n = src.nbytes();
  Buffer& sb = checked_buffer(src, 0, n, "copy from");
  Buffer& db = checked_buffer(dst, 0, n, "copy to");
  if (n == 0 || &src == &dst) return;
  if (sb.is_host() && db.is_host()) {
    std::memmove(dst.data, src.data, n);
  } else if (db.is_host()) {
    sb.get_tensor(src, dst.data, 0, n);
  } else if (sb.is_host()) {
    db.set_tensor(dst, src.data, 0, n);
  } else if (!db.copy_tensor(src, dst)) {
    std::vector<uint8_t> staging(n);
    sb.get_tensor(src, staging.data(), 0, n);
    db.set_tensor(dst, staging.data(), 0, n);
  }
}

std::vector<float> tensor_to_floats(const Tensor& t) {
  std::vector<uint8_t> raw(t.nbytes());
  tensor_get(t, raw.data(), 0, raw.size());
  const TypeTraits& tt = traits(t.type);
  std::vector<float> out(static_cast<size_t>(t.nelements()));
  size_t k = 0;
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
        const uint8_t* row = raw.data() + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
        if (t.type == DType::I32 || !t.has_contiguous_rows()) {
          for (int64_t i0 = 0; i0 < t.ne[0]; ++i0) {
            const uint8_t* p = row + i0 * t.nb[0];
            if (t.type == DType::I32) {
              int32_t v;
              std::memcpy(&v, p, 4);
              out[k + i0] = static_cast<float>(v);
            } else {
              tt.to_float(p, &out[k + i0], 1);
            }
          }
        } else {
          tt.to_float(row, &out[k], t.ne[0]);
        }
        k += t.ne[0];
      }
  return out;
}

void tensor_from_floats(Tensor& t, const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != t.nelements())
    fail("tensor {} has {} elements, {} values given", tensor_label(t, TensorLabel::QuotedWithShape), t.nelements(),
         values.size());
  if (!t.is_contiguous()) fail("tensor {} is not contiguous", tensor_label(t, TensorLabel::QuotedWithShape));
  std::vector<uint8_t> raw(t.nbytes());
  if (t.type == DType::I32) {
    for (size_t i = 0; i < values.size(); ++i) {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(raw.data() + 4 * i, &v, 4);
    }
  } else {
    traits(t.type).from_float(values.data(), raw.data(), t.nelements());
  }
  tensor_set(t, raw.data(), 0, raw.size());
}

}  // namespace loom
