// Q4_K rows interleaved in CPU_Repack (repack.h), for the 16-row kernels
// (quant_gemm16_*.cpp): the group block's offsets and the 16 rows' scales
// and mins decoded together. Internal linkage on purpose: each ISA's file
// compiles its own copy with its own flags, so no copy built for a higher
// level can stand in for another's.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "loom/types.h"

namespace loom::cpu {
namespace {  // internal linkage: see above

// One group block: uint16 d[16], dmin[16]; uint8 sc[12][16]; uint8 v[32][16][4].
constexpr size_t kQ4KDOff = 0, kQ4KDminOff = 32, kQ4KScalesOff = 64, kQ4KQsOff = 256,
                 kQ4KGroupBlock = 16 * sizeof(BlockQ4_K);
static_assert(kQ4KQsOff + 32 * 64 == kQ4KGroupBlock);
// Group blocks ahead to prefetch: the hardware prefetchers alone left a
// mat-vec from memory at ~40 GB/s on 2 Zen 5 cores, asking for the block
// after next made it ~60. A prefetch past the weights' end is harmless.
constexpr size_t kQ4KPrefetchBlocks = 2;

inline void prefetch_q4_k_block(const uint8_t* g) {
  for (size_t line = 0; line < kQ4KGroupBlock; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(g + kQ4KPrefetchBlocks * kQ4KGroupBlock + line), _MM_HINT_T0);
}

// sc[s] and m[s] (s = 0..7): byte r is row r's 6-bit scale / min of
// sub-block s, from the 12 interleaved scale bytes at `s12` (types.h).
inline void decode_q4_k_scales16(const uint8_t* s12, __m128i sc[8], __m128i m[8]) {
  __m128i S[12];
  for (int j = 0; j < 12; ++j) S[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s12 + 16 * j));
  const __m128i low6 = _mm_set1_epi8(0x3f), nib = _mm_set1_epi8(0x0f), top2 = _mm_set1_epi8(0x30);
  for (int i = 0; i < 4; ++i) {
    sc[i] = _mm_and_si128(S[i], low6);
    m[i] = _mm_and_si128(S[i + 4], low6);
    // Bits 6-7 of the first bytes are bits 4-5 of the upper scales and mins.
    sc[i + 4] = _mm_or_si128(_mm_and_si128(S[i + 8], nib), _mm_and_si128(_mm_srli_epi16(S[i], 2), top2));
    m[i + 4] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(S[i + 8], 4), nib),
                            _mm_and_si128(_mm_srli_epi16(S[i + 4], 2), top2));
  }
}

// The column's q8 sums per sub-block of 32 (bsums paired), as 8 int16.
inline __m128i q8_k_pair_sums(const BlockQ8_K& y) {
  return _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums)),
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums + 8)));
}

}  // namespace
}  // namespace loom::cpu
