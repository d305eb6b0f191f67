// Rounding a size or an offset up to an alignment: the one helper the
// allocators, the graph planner, the kernels' workspaces and the backends
// use, so that they all agree on where a tensor may start.
#pragma once

#include <cstddef>

namespace loom {

// The smallest multiple of `alignment` (> 0, any value, not only powers of
// two) that is >= n. With a constant power of two the compiler emits an add
// and a mask.
constexpr size_t align_up(size_t n, size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

static_assert(align_up(0, 64) == 0 && align_up(1, 64) == 64 && align_up(64, 64) == 64 && align_up(7, 3) == 9);

}  // namespace loom
