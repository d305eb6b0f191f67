// The tensor allocator: places a set of tensors (a model's weights, a test's
// operands) one after another, aligned, into buffers of one buffer type,
// opening a new buffer whenever the next tensor would exceed the type's
// max_size. Views are given their source's memory afterwards.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "loom/backend.h"
#include "loom/context.h"

namespace loom {

struct TensorAllocation {
  std::vector<std::shared_ptr<Buffer>> buffers;  // empty when nothing needed memory
  size_t total_bytes = 0;
  size_t n_tensors = 0;  // tensors placed (views not counted)
  bool empty() const { return buffers.empty(); }
};

// Places every tensor of `tensors` that has no memory yet. A tensor larger
// than the type's max_size, or a failed allocation, throws loom::Error with
// the tensor's name and the sizes.
TensorAllocation allocate_tensors(std::span<Tensor* const> tensors, BufferType& type,
                                  BufferUsage usage = BufferUsage::Any);
// Every tensor of the context.
TensorAllocation allocate_tensors(Context& ctx, BufferType& type, BufferUsage usage = BufferUsage::Any);

}  // namespace loom
