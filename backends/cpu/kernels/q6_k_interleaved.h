// Q6_K rows interleaved in CPU_Repack (repack.h), for the 16-row kernels
// (quant_gemm16_q6_k_*.cpp): the group block's offsets and the rows' scale
// pairs. Internal linkage on purpose, as q4_k_interleaved.h.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "loom/types.h"

namespace loom::cpu {
namespace {  // internal linkage: see above

// One group block, the plain block's fields in order, each an array over the
// 16 rows: uint8 ql[32][16][4]; uint8 qh[16][16][4]; int8 scales[16][16];
// uint16 d[16]. Dword t of a row's ql holds ql[4t..4t+3], of its qh qh[4t..].
constexpr size_t kQ6KQlOff = 0, kQ6KQhOff = 2048, kQ6KScalesOff = 3072, kQ6KDOff = 3328,
                 kQ6KGroupBlock = 16 * sizeof(BlockQ6_K);
static_assert(kQ6KDOff + 32 == kQ6KGroupBlock);
constexpr size_t kQ6KPrefetchBlocks = 2;  // as kQ4KPrefetchBlocks

inline void prefetch_q6_k_block(const uint8_t* g) {
  for (size_t line = 0; line < kQ6KGroupBlock; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(g + kQ6KPrefetchBlocks * kQ6KGroupBlock + line), _MM_HINT_T0);
}

// Elements of half hf (0, 1) of a block: with u = 0..7 and l = 4u..4u+3,
// quarter j's element 128hf + 32j + l has low bits in ql[64hf + 32(j % 2) + l]
// (low nibble for j < 2, high for j >= 2) and top bits at 2j in qh[32hf + l].
// So dword u of the half gives 4 elements of each quarter from ql dwords
// 16hf + u and 16hf + 8 + u and qh dword 8hf + u; they lie in sub-block
// 8hf + 2j + u / 4 (16 elements per scale). Values are unsigned (0..63),
// the offset of 32 goes in as 32 * scale * (the column's q8 sum of the
// sub-block, Q8_K's bsums).

}  // namespace
}  // namespace loom::cpu
