// Element types and their storage traits. Quantized types store blocks of
// `block_size` elements in `type_size` bytes, laid out as in GGUF files:
//   Q8_0: fp16 scale d, then 32 int8 q;           value = q * d
//   Q4_0: fp16 scale d, then 16 bytes of nibbles;  low nibbles are elements
//         0..15, high nibbles elements 16..31;       value = (q - 8) * d
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
  Q8_0 = 8,
  I32 = 26,
  BF16 = 30,
};

inline constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16,
                                      DType::I32, DType::Q8_0, DType::Q4_0};

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;

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
