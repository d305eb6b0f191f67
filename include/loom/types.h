// Element types and their storage traits. Quantized types store blocks of
// `block_size` elements in `type_size` bytes, laid out bit for bit as in
// GGUF files written by llama.cpp (ggml-common.h):
//   Q8_0: fp16 scale d, then 32 int8 q;           value = q * d
//   Q4_0: fp16 scale d, then 16 bytes of nibbles;  low nibbles are elements
//         0..15, high nibbles elements 16..31;       value = (q - 8) * d
// The other types are described at their block structs below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace loom {

// Numbering follows GGUF's ggml_type ids so files map directly.
enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I32 = 26,
  BF16 = 30,
  MXFP4 = 39,
};

inline constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16,  DType::I32,   DType::Q8_0,
                                      DType::Q4_0, DType::Q4_1, DType::Q5_0,  DType::Q5_1,  DType::Q2_K,
                                      DType::Q3_K, DType::Q4_K, DType::Q5_K,  DType::Q6_K,  DType::IQ4_NL,
                                      DType::IQ4_XS, DType::MXFP4};
// The quantized types, in the order of their GGUF ids.
inline constexpr DType kQuantizedTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0,   DType::Q5_1,   DType::Q8_0,
                                            DType::Q2_K, DType::Q3_K, DType::Q4_K,   DType::Q5_K,   DType::Q6_K,
                                            DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4};

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;
inline constexpr int kQK_K = 256;  // elements of a K-quant super-block (and IQ4_XS, Q8_K)

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: value = q * d + m, q the 4-bit nibble (same nibble order as Q4_0).
struct BlockQ4_1 {
  uint16_t d;  // fp16 scale
  uint16_t m;  // fp16 minimum
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: value = (q - 16) * d. q's low 4 bits are nibbles as in Q4_0; its
// 5th bit for element j is bit j of qh (read as a little-endian uint32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: value = q * d + m, q packed as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q2_K: 16 sub-blocks of 16. scales[s] = scale (low nibble) | min << 4;
// value = d * scale * q - dmin * min, q 2 bits. Element e = 128h + 32j + r
// (r < 32) is bits 2j..2j+1 of qs[32h + r]; its sub-block is e / 16.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;     // fp16 scale of the scales
  uint16_t dmin;  // fp16 scale of the mins
};
static_assert(sizeof(BlockQ2_K) == 84);

// Q3_K: 16 sub-blocks of 16, value = d * (sc - 32) * (q - 4), q 3 bits. For
// element e = 128h + 32j + r: q's low 2 bits are bits 2j..2j+1 of qs[32h + r],
// its high bit is bit 4h + j of hmask[r]. The 6-bit scale of sub-block s:
// low 4 bits in scales[s] (s < 8, low nibble) or scales[s - 8] (high nibble),
// high 2 bits at bits 2(s / 4).. of scales[8 + s % 4].
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Q4_K: 8 sub-blocks of 32, value = d * sc * q - dmin * m, q 4 bits. Element
// e = 64c + r: the low nibble of qs[32c + r] (r < 32) or the high nibble of
// qs[32c + r - 32]. 6-bit sc and m of sub-block s (scales, 12 bytes): s < 4:
// sc = scales[s] & 63, m = scales[s + 4] & 63; s >= 4: sc = low nibble of
// scales[s + 4] | (scales[s - 4] >> 6) << 4, m = high nibble of scales[s + 4] |
// (scales[s] >> 6) << 4.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: as Q4_K with a 5th bit: bit e / 32 of qh[e % 32].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: 16 sub-blocks of 16, value = d * scales[e / 16] * (q - 32), q 6 bits.
// Element e = 128h + 32k + r: low 4 bits in ql[64h + 32(k % 2) + r] (low
// nibble for k < 2, high for k >= 2), high 2 bits at bits 2k.. of qh[32h + r].
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// IQ4_NL: value = d * kIq4nlValues[q], q nibbles as in Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

// IQ4_XS: 8 sub-blocks of 32, value = d * (ls - 32) * kIq4nlValues[q]. The
// 6-bit ls of sub-block s: nibble s % 2 of scales_l[s / 2], high 2 bits at
// bits 2s.. of scales_h. Sub-block s's nibbles are qs[16s..16s+15] (low:
// elements 32s + j, high: 32s + 16 + j).
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// MXFP4 (OCP microscaling): value = 2^(e - 127) * e2m1(q), with e2m1 the
// 4-bit float (sign, 2 exponent bits, 1 mantissa bit); nibbles as in Q4_0.
struct BlockMXFP4 {
  uint8_t e;  // E8M0 shared exponent
  uint8_t qs[16];
};
static_assert(sizeof(BlockMXFP4) == 17);

// Q8_K: the 256-element activation block that K-quant dot products use
// (not a tensor type). value = d * q; bsums[i] = sum of q[16i..16i+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

// The 16 values of IQ4_NL / IQ4_XS nibbles, and of MXFP4 nibbles (e2m1
// values doubled, so that 2^(e - 128) scales them).
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// The scale an MXFP4 exponent byte stands for, halved: 2^(e - 128).
float mxfp4_half_scale(uint8_t e);

// Q8_K rows (n a multiple of 256): the element of largest magnitude maps to
// q = -127 (d = -max / 127, as llama.cpp), q = round(x / d) up to 127.
void quantize_row_q8_k(const float* x, BlockQ8_K* y, int64_t n);
void dequantize_row_q8_k(const BlockQ8_K* x, float* y, int64_t n);

// Converts `n` elements of a row between this type and float.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeTraits {
  std::string_view name;
  int block_size;    // elements per block (1 for plain types)
  size_t type_size;  // bytes per block
  bool is_quantized;
  ToFloatFn to_float;      // null for I32
  FromFloatFn from_float;  // null for I32
};

const TypeTraits& traits(DType type);
std::string_view type_name(DType type);
// Case-insensitive lookup by name ("f16", "Q4_0").
std::optional<DType> type_from_name(std::string_view name);
// Whether `id` is a GGUF type id Loom knows.
bool is_known_type(uint32_t id);

// Bytes for `n` elements in one row; n must be a multiple of the block size.
size_t row_size(DType type, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);  // round to nearest even

}  // namespace loom
