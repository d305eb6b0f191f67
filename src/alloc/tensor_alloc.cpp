#include "loom/tensor_alloc.h"

#include "loom/align.h"
#include "loom/error.h"

namespace loom {
namespace {

// Views last: their sources have memory now (views of views resolve to the root).
void place_views(std::span<Tensor* const> tensors, TensorAllocation& result) {
  for (Tensor* t : tensors)
    if (t->view_src && !t->buffer && t->view_src->buffer) {
      Buffer::place_view(*t);
      ++result.n_views;
    }
}

}  // namespace

std::shared_ptr<Buffer> alloc_buffer_or_throw(BufferType& type, size_t size, std::string_view what) {
  try {
    return type.alloc(size);
  } catch (const OutOfMemory&) {
    throw;
  } catch (const std::exception& e) {  // loom::Error from the type, std::bad_alloc, ...
    const Device* d = type.device();
    const size_t free = d ? d->memory().free : 0;
    throw OutOfMemory(
        fmt::format("{}: out of memory: allocating {} bytes ({:.1f} MiB) of buffer type {}{} failed: {}", what, size,
                    size / 1048576.0, type.name(),
                    d ? fmt::format(" on device {} ({} bytes, {:.1f} MiB, free)", d->name(), free, free / 1048576.0)
                      : std::string(),
                    e.what()),
        std::string(type.name()), size, d ? std::string(d->name()) : std::string(), free);
  }
}

TensorAllocation allocate_tensors(std::span<Tensor* const> tensors, BufferType& type, BufferUsage usage) {
  const size_t align = type.alignment();
  const size_t max = type.max_size();
  // Plan: group tensors into chunks that each fit in one buffer.
  struct Chunk {
    std::vector<std::pair<Tensor*, size_t>> placed;  // tensor, offset
    size_t size = 0;
  };
  std::vector<Chunk> chunks(1);
  for (Tensor* t : tensors) {
    if (t->view_src || t->buffer || t->nbytes() == 0) continue;
    const size_t need = type.alloc_size(*t);
    if (need > max)
      fail("tensor {} {} needs {} bytes, more than the largest {} allocation ({} bytes)", tensor_label(*t),
           t->shape_string(), need, type.name(), max);
    size_t offset = align_up(chunks.back().size, align);
    if (offset > max || need > max - offset) {
      chunks.emplace_back();
      offset = 0;
    }
    chunks.back().placed.emplace_back(t, offset);
    chunks.back().size = offset + need;
  }
  TensorAllocation result;
  if (chunks.front().placed.empty()) {
    place_views(tensors, result);
    return result;
  }

  // Allocate every buffer before placing anything, so a failure leaves the
  // tensors untouched (the buffers allocated so far are released).
  std::vector<std::shared_ptr<Buffer>> buffers;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    buffers.push_back(alloc_buffer_or_throw(
        type, c.size,
        fmt::format("tensor allocator: {} tensors (first {}, buffer {} of {}, {} bytes in all so far)", c.placed.size(),
                    tensor_label(*c.placed.front().first), i + 1, chunks.size(), result.total_bytes + c.size)));
    result.total_bytes += c.size;
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    buffers[i]->set_usage(usage);
    for (auto& [t, offset] : chunks[i].placed) buffers[i]->place(*t, offset);
    result.n_tensors += chunks[i].placed.size();
  }
  result.buffers = std::move(buffers);
  result.status = AllocStatus::Allocated;
  place_views(tensors, result);
  return result;
}

TensorAllocation allocate_tensors(Context& ctx, BufferType& type, BufferUsage usage) {
  std::vector<Tensor*> all;
  all.reserve(ctx.size());
  for (Tensor& t : ctx.tensors()) all.push_back(&t);
  return allocate_tensors(all, type, usage);
}

}  // namespace loom
