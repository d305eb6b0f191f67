// The tensor allocator: places a set of tensors (a model's weights, a test's
// operands) one after another, aligned, into buffers of one buffer type,
// opening a new buffer whenever the next tensor would exceed the type's
// max_size. Views are given their source's memory afterwards.
//
// Outcomes are distinct: "nothing to allocate" is a normal result
// (status NothingToAllocate, no buffers); a failed allocation throws
// OutOfMemory naming the buffer type and the sizes, and leaves every tensor
// as it was (buffers are all allocated before any tensor is placed).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loom/backend.h"
#include "loom/context.h"
#include "loom/error.h"

namespace loom {

// What the memory was for, so that a front end can say which of its options
// would need less (fewer offloaded layers, a smaller context, ...).
enum class MemoryUse { Other, Weights, KvCache, Compute };

// A buffer type could not provide the memory asked for. The message names the
// buffer type, its device, the bytes asked for and the bytes the device had free.
class OutOfMemory : public Error {
 public:
  OutOfMemory(const std::string& what, std::string buffer_type, size_t requested, std::string device = {},
              size_t free = 0, MemoryUse use = MemoryUse::Other)
      : Error(what),
        buffer_type_(std::move(buffer_type)),
        requested_(requested),
        device_(std::move(device)),
        free_(free),
        use_(use) {}
  const std::string& buffer_type() const { return buffer_type_; }
  size_t requested() const { return requested_; }  // bytes of the allocation that failed
  const std::string& device() const { return device_; }  // "" when the type has no device
  size_t free() const { return free_; }                  // the device's free bytes then
  MemoryUse use() const { return use_; }
  // The same failure, its message prefixed with `context` and its use set.
  OutOfMemory within(std::string_view context, MemoryUse use) const {
    return OutOfMemory(fmt::format("{}: {}", context, what()), buffer_type_, requested_, device_, free_, use);
  }

 private:
  std::string buffer_type_;
  size_t requested_;
  std::string device_;
  size_t free_;
  MemoryUse use_;
};

// Allocates `size` bytes of `type`, turning any failure into OutOfMemory whose
// message starts with `what` (e.g. "weights of model.gguf").
std::shared_ptr<Buffer> alloc_buffer_or_throw(BufferType& type, size_t size, std::string_view what);

enum class AllocStatus {
  Allocated,          // at least one tensor was placed
  NothingToAllocate,  // every tensor already had memory, was a view or had zero bytes
};

struct TensorAllocation {
  AllocStatus status = AllocStatus::NothingToAllocate;
  std::vector<std::shared_ptr<Buffer>> buffers;  // one per chunk; empty when nothing was allocated
  size_t total_bytes = 0;
  size_t n_tensors = 0;  // tensors placed (views not counted)
  size_t n_views = 0;    // views given their source's memory
  bool empty() const { return status == AllocStatus::NothingToAllocate; }
};

// Places every tensor of `tensors` that has no memory yet. A tensor larger
// than the type's max_size throws loom::Error; a failed allocation throws
// OutOfMemory. Either way no tensor of the set is placed.
TensorAllocation allocate_tensors(std::span<Tensor* const> tensors, BufferType& type,
                                  BufferUsage usage = BufferUsage::Any);
// Every tensor of the context.
TensorAllocation allocate_tensors(Context& ctx, BufferType& type, BufferUsage usage = BufferUsage::Any);

}  // namespace loom
