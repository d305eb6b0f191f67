#include "repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/quant_dot.h"
#include "kernels/vec.h"
#include "loom/error.h"

namespace loom::cpu {
namespace {

// A plain block is a run of fields, each N pieces of W bytes. Interleaved,
// a field's pieces go piece-major over the group's 16 rows: piece t of row r
// lies (t * 16 + r) * W bytes from the field's start, and the field starts
// at 16 times its offset in the plain block. kPack copies plain -> packed,
// otherwise packed -> plain; plain and packed step past the field.
template <bool kPack, int W, int N>
inline void field(uint8_t*& plain, uint8_t*& packed, int lane) {
  for (int t = 0; t < N; ++t) {
    uint8_t* p = plain + t * W;
    uint8_t* q = packed + (t * kRepackRows + lane) * W;
    if constexpr (kPack) std::memcpy(q, p, W);
    else std::memcpy(p, q, W);
  }
  plain += W * N;
  packed += kRepackRows * W * N;
}

// One block of row `lane`: the fields of each type's block (types.h).
template <bool kPack>
void block(DType type, uint8_t* plain, uint8_t* packed, int lane) {
  switch (type) {
    case DType::Q4_0:  // d, qs
      field<kPack, 2, 1>(plain, packed, lane);
      field<kPack, 4, 4>(plain, packed, lane);
      break;
    case DType::Q8_0:  // d, qs
      field<kPack, 2, 1>(plain, packed, lane);
      field<kPack, 4, 8>(plain, packed, lane);
      break;
    case DType::Q4_K:  // d, dmin, scales, qs
      field<kPack, 2, 1>(plain, packed, lane);
      field<kPack, 2, 1>(plain, packed, lane);
      field<kPack, 1, 12>(plain, packed, lane);
      field<kPack, 4, 32>(plain, packed, lane);
      break;
    case DType::Q6_K:  // ql, qh, scales, d
      field<kPack, 4, 32>(plain, packed, lane);
      field<kPack, 4, 16>(plain, packed, lane);
      field<kPack, 1, 16>(plain, packed, lane);
      field<kPack, 2, 1>(plain, packed, lane);
      break;
    default: fail("CPU_Repack: no interleaved layout for {}", type_name(type));
  }
}

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
  const int64_t nb = t.ne[0] / traits(t.type).block_size;
  for (int r = 0; r < kRepackRows; ++r) unpack_row(t.type, group, nb, r, rows + r * t.nb[1]);
}

}  // namespace

bool repackable(const Tensor& t) {
  const bool layout = t.type == DType::Q4_0 || t.type == DType::Q8_0 || t.type == DType::Q4_K || t.type == DType::Q6_K;
  return layout && !t.view_src && t.ne[1] % kRepackRows == 0 && t.ne[2] == 1 && t.ne[3] == 1 && t.is_contiguous();
}

bool is_repacked(const Tensor& t) {
  return t.buffer && dynamic_cast<const RepackBufferType*>(&t.buffer->type()) && repackable(t);
}

size_t repack_block_bytes(DType type) { return kRepackRows * traits(type).type_size; }

void repack_group(DType type, const uint8_t* rows, size_t row_bytes, int64_t nb, uint8_t* out) {
  const size_t size = traits(type).type_size, group_block = repack_block_bytes(type);
  for (int r = 0; r < kRepackRows; ++r)
    for (int64_t b = 0; b < nb; ++b)
      block<true>(type, const_cast<uint8_t*>(rows + r * row_bytes + b * size), out + b * group_block, r);
}

void unpack_row(DType type, const uint8_t* group, int64_t nb, int lane, uint8_t* row) {
  const size_t size = traits(type).type_size, group_block = repack_block_bytes(type);
  for (int64_t b = 0; b < nb; ++b) block<false>(type, row + b * size, const_cast<uint8_t*>(group + b * group_block), lane);
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
  const int64_t nb = t.ne[0] / traits(t.type).block_size;
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
  const DType type = node.src[0]->type;
  if (type == DType::Q4_K || type == DType::Q6_K) return quant_gemm16(mul_mat_isa(), type, 1) != nullptr;
  const WKind kind = type == DType::Q4_0 ? WKind::Q4_0 : WKind::Q8_0;
  return mul_mat_kernels(mul_mat_isa()).gemm16[static_cast<int>(kind)] != nullptr;
}

std::shared_ptr<Buffer> RepackBufferType::alloc_impl(size_t size) {
  const size_t rounded = (size + 63) / 64 * 64;
  void* data = std::aligned_alloc(64, rounded);
  if (!data) fail("buffer type CPU_Repack: out of memory allocating {} bytes", size);
  return std::make_shared<RepackBuffer>(*this, data, size);
}

}  // namespace loom::cpu
