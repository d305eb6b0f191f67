// FreeBlockAllocator (declared in graph_alloc.h): best-fit over free blocks,
// merging neighbours on free, any number of chunks and blocks.
#include <limits>
#include <tuple>

#include "loom/align.h"
#include "loom/error.h"
#include "loom/graph_alloc.h"

namespace loom {

FreeBlockAllocator::FreeBlockAllocator(size_t alignment, size_t max_chunk_size)
    : alignment_(alignment ? alignment : 1), max_(max_chunk_size / alignment_ * alignment_) {}

size_t FreeBlockAllocator::total_size() const {
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.high_water;
  return total;
}

FreeBlockAllocator::Addr FreeBlockAllocator::alloc(size_t size) {
  if (size == 0) fail("free-block allocator: zero-byte allocation");
  if (size > max_)
    fail("free-block allocator: {} bytes exceed the largest chunk ({} bytes)", size, max_);
  size = align_up(size, alignment_);
  // Score: (growth of the chunk, bytes of the block below the high-water mark).
  using Score = std::tuple<size_t, size_t>;
  Score best{std::numeric_limits<size_t>::max(), std::numeric_limits<size_t>::max()};
  size_t best_chunk = chunks_.size(), best_offset = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const Chunk& ch = chunks_[c];
    for (const auto& [offset, block] : ch.free) {
      if (block < size) continue;
      const size_t end = offset + size;
      const size_t growth = end > ch.high_water ? end - ch.high_water : 0;
      const size_t below = std::min(offset + block, std::max(ch.high_water, offset)) - offset;
      const Score score{growth, below};
      if (score < best) {
        best = score;
        best_chunk = c;
        best_offset = offset;
      }
    }
  }
  if (best_chunk == chunks_.size()) {  // nothing fits anywhere: a new chunk
    chunks_.emplace_back();
    chunks_.back().free.emplace(0, max_);
    best_offset = 0;
  }
  Chunk& ch = chunks_[best_chunk];
  auto it = ch.free.find(best_offset);
  const size_t block = it->second;
  ch.free.erase(it);
  if (block > size) ch.free.emplace(best_offset + size, block - size);
  ch.high_water = std::max(ch.high_water, best_offset + size);
  return {best_chunk, best_offset};
}

void FreeBlockAllocator::free(Addr addr, size_t size) {
  size = align_up(size, alignment_);
  if (addr.chunk >= chunks_.size() || addr.offset + size > chunks_[addr.chunk].high_water)
    fail("free-block allocator: free of {} bytes at chunk {} offset {} is outside the allocated memory", size,
         addr.chunk, addr.offset);
  auto& free = chunks_[addr.chunk].free;
  auto next = free.lower_bound(addr.offset);
  if (next != free.end() && next->first < addr.offset + size)
    fail("free-block allocator: double free of {} bytes at chunk {} offset {}", size, addr.chunk, addr.offset);
  size_t offset = addr.offset;
  if (next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second > offset)
      fail("free-block allocator: double free of {} bytes at chunk {} offset {}", size, addr.chunk, addr.offset);
    if (prev->first + prev->second == offset) {  // merge with the block before
      offset = prev->first;
      size += prev->second;
      free.erase(prev);
    }
  }
  if (next != free.end() && next->first == offset + size) {  // and with the one after
    size += next->second;
    free.erase(next);
  }
  free.emplace(offset, size);
}

}  // namespace loom
