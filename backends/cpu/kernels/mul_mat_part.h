// mul_mat's plan and kernels for one product inside a node that runs several
// (mul_mat_id: one per expert). The caller owns the task split and the
// scratch: it packs b into `packed` (pack, one call per unit), waits for every
// unit, then runs the chunks (chunk), each thread with its own scratch of
// thread_bytes(). b is never packed privately per thread, unlike mul_mat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "loom/tensor.h"

namespace loom::cpu {

struct MulMatPlan;

class MulMatPart {
 public:
  // dst: F32 [M, N] with src[0] = a (2-D weights, contiguous rows, not
  // interleaved) and src[1] = b (F32 [K, N]); the tensors must outlive this.
  MulMatPart(const Tensor& dst, int n_threads);
  size_t packed_bytes() const;  // a multiple of 64
  size_t thread_bytes() const;
  int64_t pack_units() const;
  int64_t chunks() const;
  void pack(int64_t unit, uint8_t* packed, uint8_t* thread) const;  // packed: 64-byte aligned
  void chunk(int64_t chunk, const uint8_t* packed, uint8_t* thread) const;

 private:
  const Tensor& dst_;
  std::shared_ptr<const MulMatPlan> plan_;
};

// Upper bounds over every ISA level and every N <= max_n for parts with
// weights shaped like `a`'s matrices: per-thread scratch, and packed bytes,
// which are at most (N + spare_columns) * column_bytes for one part.
struct MulMatPartBounds {
  size_t thread_bytes = 0;
  size_t column_bytes = 0;
  int64_t spare_columns = 0;
};
MulMatPartBounds mul_mat_part_bounds(const Tensor& a, int64_t max_n, int n_threads);

}  // namespace loom::cpu
