#include "loom/context.h"

#include <cstdint>

#include "loom/error.h"

namespace loom {

Tensor* Context::new_node() { return &tensors_.emplace_back(); }

Tensor* Context::new_tensor(DType type, std::span<const int64_t> ne) {
  if (ne.empty() || ne.size() > kMaxDims)
    fail("a tensor has 1 to {} dims, {} given", kMaxDims, ne.size());
  Tensor t;
  t.type = type;
  for (size_t i = 0; i < ne.size(); ++i) {
    if (ne[i] < 0) fail("tensor dim {} is negative ({})", i, ne[i]);
    t.ne[i] = ne[i];
  }
  if (t.ne[0] % traits(type).block_size != 0)
    fail("a {} tensor needs ne0 a multiple of {}, got {}", type_name(type), traits(type).block_size,
         t.ne[0]);
  // Dims come from files and options: refuse a tensor whose byte size does
  // not fit in 63 bits rather than let nbytes() wrap around to a small size.
  uint64_t bytes = traits(type).type_size;
  for (int i = 0; i < kMaxDims; ++i) {
    const uint64_t n = i == 0 ? static_cast<uint64_t>(t.ne[0]) / traits(type).block_size : t.ne[i];
    if (__builtin_mul_overflow(bytes, n, &bytes) || bytes > static_cast<uint64_t>(INT64_MAX))
      fail("a {} tensor of {} x {} x {} x {} elements is larger than 2^63 bytes", type_name(type), t.ne[0], t.ne[1],
           t.ne[2], t.ne[3]);
  }
  set_contiguous_strides(t);
  return &tensors_.emplace_back(std::move(t));
}

Tensor* Context::dup_tensor(const Tensor& t) {
  return new_tensor(t.type, std::span<const int64_t>(t.ne.data(), kMaxDims));
}

Tensor* Context::find(std::string_view name) {
  for (Tensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace loom
