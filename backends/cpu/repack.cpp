#include "repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/vec.h"
#include "loom/error.h"

namespace loom::cpu {
namespace {

// Quant bytes per block of the type (16 for Q4_0, 32 for Q8_0).
size_t qs_bytes(DType type) { return type == DType::Q4_0 ? 16 : 32; }

// Calls fn(group, group_offset_in_tensor, lo, hi) for each 16-row group that
// [offset, offset + size) touches, with [lo, hi) the touched bytes inside it.
template <class F>
void for_groups(const Tensor& t, size_t offset, size_t size, F fn) {
  const size_t group_bytes = kRepackRows * t.nb[1];
  for (size_t g = offset / group_bytes; g * group_bytes < offset + size; ++g) {
    const size_t start = g * group_bytes;
    fn(start, std::max(offset, start) - start, std::min(offset + size, start + group_bytes) - start);
  }
}

void unpack_group(const Tensor& t, const uint8_t* group, uint8_t* rows) {
  const int64_t nb = t.ne[0] / kQBlock;
  for (int r = 0; r < kRepackRows; ++r) unpack_row(t.type, group, nb, r, rows + r * t.nb[1]);
}

}  // namespace

bool repackable(const Tensor& t) {
  return (t.type == DType::Q4_0 || t.type == DType::Q8_0) && !t.view_src && t.ne[1] % kRepackRows == 0 &&
         t.ne[2] == 1 && t.ne[3] == 1 && t.is_contiguous();
}

bool is_repacked(const Tensor& t) {
  return t.buffer && dynamic_cast<const RepackBufferType*>(&t.buffer->type()) && repackable(t);
}

size_t repack_block_bytes(DType type) { return kRepackRows * (sizeof(uint16_t) + qs_bytes(type)); }

void repack_group(DType type, const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  const size_t qb = qs_bytes(type), block = sizeof(uint16_t) + qb;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* o = out + b * repack_block_bytes(type);
    for (int r = 0; r < kRepackRows; ++r) {
      const uint8_t* src = rows + r * row_bytes + b * block;
      std::memcpy(o + r * sizeof(uint16_t), src, sizeof(uint16_t));
      for (size_t t = 0; t < qb / 4; ++t)
        std::memcpy(o + kRepackRows * sizeof(uint16_t) + (t * kRepackRows + r) * 4, src + sizeof(uint16_t) + t * 4, 4);
    }
  }
}

void unpack_row(DType type, const uint8_t* group, int64_t nb, int lane, uint8_t* row) {
  const size_t qb = qs_bytes(type), block = sizeof(uint16_t) + qb;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* g = group + b * repack_block_bytes(type);
    uint8_t* dst = row + b * block;
    std::memcpy(dst, g + lane * sizeof(uint16_t), sizeof(uint16_t));
    for (size_t t = 0; t < qb / 4; ++t)
      std::memcpy(dst + sizeof(uint16_t) + t * 4, g + kRepackRows * sizeof(uint16_t) + (t * kRepackRows + lane) * 4, 4);
  }
}

RepackBuffer::RepackBuffer(BufferType& type, void* data, size_t size) : Buffer(type, size), data_(data) {}

RepackBuffer::~RepackBuffer() { std::free(data_); }

void RepackBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  auto* base = static_cast<uint8_t*>(t.data);
  const auto* src = static_cast<const uint8_t*>(data);
  if (!repackable(t)) {
    std::memcpy(base + offset, src, size);
    return;
  }
  const int64_t nb = t.ne[0] / kQBlock;
  const size_t group_bytes = kRepackRows * t.nb[1];
  std::vector<uint8_t> tmp;
  for_groups(t, offset, size, [&](size_t start, size_t lo, size_t hi) {
    const uint8_t* rows = src + start - offset;  // the whole group is in `data`
    if (hi - lo != group_bytes) {  // partial: merge with what is there
      tmp.resize(group_bytes);
      unpack_group(t, base + start, tmp.data());
      std::memcpy(tmp.data() + lo, src + (start + lo - offset), hi - lo);
      rows = tmp.data();
    }
    repack_group(t.type, rows, t.nb[1], nb, base + start);
  });
}

void RepackBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  const auto* base = static_cast<const uint8_t*>(t.data);
  auto* dst = static_cast<uint8_t*>(data);
  if (!repackable(t)) {
    std::memcpy(dst, base + offset, size);
    return;
  }
  std::vector<uint8_t> tmp(kRepackRows * t.nb[1]);
  for_groups(t, offset, size, [&](size_t start, size_t lo, size_t hi) {
    unpack_group(t, base + start, tmp.data());
    std::memcpy(dst + (start + lo - offset), tmp.data() + lo, hi - lo);
  });
}

void RepackBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  if (!repackable(t)) {
    std::memset(static_cast<uint8_t*>(t.data) + offset, value, size);
    return;
  }
  std::vector<uint8_t> bytes(size, value);
  set_tensor(t, bytes.data(), offset, size);
}

// A permutation of bytes that all have one value: the same as plain.
void RepackBuffer::clear(uint8_t value) { std::memset(data_, value, size()); }

bool RepackBufferType::supports_op(const Tensor& node) const {
  if (node.op != Op::MulMat || !node.src[0] || !repackable(*node.src[0]) || !node.src[1] ||
      node.src[1]->type != DType::F32)
    return false;
  // Only where the level mul_mat runs at has a kernel for interleaved rows
  // (AVX2, AVX-512); without one every row would be unpacked first.
  const WKind kind = node.src[0]->type == DType::Q4_0 ? WKind::Q4_0 : WKind::Q8_0;
  return mul_mat_kernels(mul_mat_isa()).gemm16[static_cast<int>(kind)] != nullptr;
}

std::shared_ptr<Buffer> RepackBufferType::alloc_impl(size_t size) {
  const size_t rounded = (size + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, rounded);
  if (!data) fail("buffer type CPU_Repack: out of memory allocating {} bytes", size);
  return std::make_shared<RepackBuffer>(*this, data, size);
}

}  // namespace loom::cpu
