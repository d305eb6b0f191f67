// Tensor metadata: type, up to 4 dims (ne, elements) and byte strides (nb),
// the op that produces it and its operands, and where its data lives.
// A tensor placed in a buffer holds a shared reference to that buffer, so the
// memory it points into lives at least as long as the tensor.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "loom/op.h"
#include "loom/types.h"

namespace loom {

class Buffer;

inline constexpr int kMaxDims = 4;
inline constexpr int kMaxSrc = 4;       // most operands any op takes
inline constexpr int kMaxOpParams = 8;  // 32-bit words of op parameters

enum TensorFlag : uint32_t {
  kFlagInput = 1u << 0,   // data is set from outside before compute
  kFlagOutput = 1u << 1,  // data is read after compute; never reused
  kFlagWeight = 1u << 2,  // a model parameter
};

struct Tensor {
  DType type = DType::F32;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // elements per dim
  std::array<size_t, kMaxDims> nb{};             // bytes between steps per dim

  Op op = Op::None;
  std::array<int32_t, kMaxOpParams> op_params{};  // read and written through op_params.h
  std::array<Tensor*, kMaxSrc> src{};

  Tensor* view_src = nullptr;  // root tensor whose memory this one views
  size_t view_offs = 0;        // byte offset into view_src

  void* data = nullptr;            // address inside `buffer` (opaque for device memory)
  std::shared_ptr<Buffer> buffer;  // keeps the memory alive
  std::string name;
  uint32_t flags = 0;

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t nrows() const { return ne[1] * ne[2] * ne[3]; }
  // Bytes spanned by the tensor from its first to its last element.
  size_t nbytes() const;
  size_t row_bytes() const { return row_size(type, ne[0]); }
  int n_dims() const;  // highest dim with ne > 1, at least 1
  bool is_contiguous() const;
  // Rows are contiguous (nb[0] is the element size) even if rows are strided.
  bool has_contiguous_rows() const;
  bool is_view() const { return view_src != nullptr; }
  bool is_allocated() const { return data != nullptr || nbytes() == 0; }
  bool same_shape(const Tensor& o) const { return ne == o.ne; }
  // Byte offset of element (i0, i1, i2, i3); i0 must be on a block boundary.
  size_t offset_of(int64_t i0, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) const;

  std::string shape_string() const;  // "[4096, 32, 1, 1] f16"
};

// Sets contiguous strides for the tensor's type and shape.
void set_contiguous_strides(Tensor& t);

// How a tensor is named in messages, reports and graph drawings, the same
// everywhere; a tensor without a name is known by its shape.
enum class TensorLabel {
  Quoted,           // 'name', or (unnamed [4, 3, 1, 1] f32): error messages
  QuotedWithShape,  // 'name' [4, 3, 1, 1] f32, or (unnamed [4, 3, 1, 1] f32)
  Bare,             // name, or ([4, 3, 1, 1] f32): report tables and graph drawings
};
std::string tensor_label(const Tensor& t, TensorLabel style = TensorLabel::Quoted);

}  // namespace loom
