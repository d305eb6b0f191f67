#include "loom/tensor_alloc.h"

#include "loom/error.h"

namespace loom {
namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

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
    if (t->view_src || t->buffer) continue;
    const size_t need = type.alloc_size(*t);
    if (need > max)
      fail("tensor '{}' {} needs {} bytes, more than the largest {} allocation ({} bytes)", t->name,
           t->shape_string(), need, type.name(), max);
    size_t offset = align_up(chunks.back().size, align);
    if (offset + need > max) {
      chunks.emplace_back();
      offset = 0;
    }
    chunks.back().placed.emplace_back(t, offset);
    chunks.back().size = offset + need;
  }
  TensorAllocation result;
  for (Chunk& c : chunks) {
    if (c.placed.empty()) continue;
    std::shared_ptr<Buffer> buffer;
    try {
      buffer = type.alloc(c.size);
    } catch (const Error& e) {
      fail("allocating {} bytes of {} for {} tensors (first '{}') failed: {}", c.size, type.name(),
           c.placed.size(), c.placed.front().first->name, e.what());
    }
    buffer->set_usage(usage);
    for (auto& [t, offset] : c.placed) buffer->place(*t, offset);
    result.total_bytes += c.size;
    result.n_tensors += c.placed.size();
    result.buffers.push_back(std::move(buffer));
  }
  // Views last: their sources have memory now (views of views resolve to the root).
  for (Tensor* t : tensors)
    if (t->view_src && !t->buffer && t->view_src->buffer) Buffer::place_view(*t);
  return result;
}

TensorAllocation allocate_tensors(Context& ctx, BufferType& type, BufferUsage usage) {
  std::vector<Tensor*> all;
  all.reserve(ctx.size());
  for (Tensor& t : ctx.tensors()) all.push_back(&t);
  return allocate_tensors(all, type, usage);
}

}  // namespace loom
