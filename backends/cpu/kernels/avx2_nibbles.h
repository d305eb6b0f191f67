// AVX2 pieces that unpack quantized blocks into bytes, shared by the integer
// dots (quant_dot_avx2.cpp) and the gemm expansions (expand_rows_avx2.h).
// Internal linkage on purpose, as in expand_rows_avx2.h: each ISA's file
// compiles its own copy with its own flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace loom::cpu {
namespace {  // internal linkage: see above

// F16C: one instruction, where types.h's fp16_to_fp32 is a call.
inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// The 16 bytes of a 32-element nibble block -> 32 bytes 0..15: the low
// nibbles are elements 0..15, the high ones 16..31 (Q4_0, Q4_1, Q5_x, IQ4).
inline __m256i expand_nibbles32(const uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), _mm256_set1_epi8(0x0f));
}

// Bit j of the little-endian uint32 at qh as 0x10 in byte j (Q5_0 / Q5_1's
// 5th bits).
inline __m256i expand_fifth_bits32(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof h);
  // Byte j takes byte j / 8 of h, then keeps bit j % 8.
  const __m256i spread = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)), spread);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

}  // namespace
}  // namespace loom::cpu
