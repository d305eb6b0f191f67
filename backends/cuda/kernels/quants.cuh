// Block formats of the quantized types on the device (layouts: the block
// structs in include/loom/types.h, bit for bit as in GGUF files; the same
// arithmetic as backends/opencl/kernels/quants.cl).
//
// Ways in:
// - dequant_elem(type, block, i): element i of one block, any type id
//   (get_rows, cpy, flash attention, the generic paths);
// - dequant_chunk32<T>(block, chunk, out): the 32 elements of chunk `chunk`
//   of one block (chunk 0 for 32-element types, 0..7 for 256-element
//   super-blocks), with the type a template argument (mul_mat's kernels);
// - dequant_row_chunk32<T>(row, c, out): chunk c of a row of blocks.
// Blocks are read byte by byte where a field may be unaligned, so any block
// address works (MXFP4 blocks are 17 bytes).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "loom/types.h"

// Full unrolling on the device (out[] stays in registers); nothing on the
// host, where these functions are only checked.
#ifdef __CUDA_ARCH__
#define LOOM_CUDA_UNROLL _Pragma("unroll")
#else
#define LOOM_CUDA_UNROLL
#endif

namespace loom::cuda {

// ---- sizes --------------------------------------------------------------------

// Elements per block of a quantized type id (1 for plain types).
__host__ __device__ constexpr int quant_block_elems(int type) {
  switch (static_cast<DType>(type)) {
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::IQ4_NL:
    case DType::MXFP4:
      return 32;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::IQ4_XS:
      return 256;
    default:
      return 1;
  }
}

// Bytes per block of a quantized type id (0 for plain types).
__host__ __device__ constexpr int quant_block_bytes(int type) {
  switch (static_cast<DType>(type)) {
    case DType::Q4_0: return 18;
    case DType::Q4_1: return 20;
    case DType::Q5_0: return 22;
    case DType::Q5_1: return 24;
    case DType::Q8_0: return 34;
    case DType::IQ4_NL: return 18;
    case DType::MXFP4: return 17;
    case DType::Q2_K: return 84;
    case DType::Q3_K: return 110;
    case DType::Q4_K: return 144;
    case DType::Q5_K: return 176;
    case DType::Q6_K: return 210;
    case DType::IQ4_XS: return 136;
    default: return 0;
  }
}

__host__ __device__ constexpr bool is_quant_type(int type) { return quant_block_bytes(type) != 0; }

static_assert(quant_block_bytes(static_cast<int>(DType::Q4_0)) == sizeof(BlockQ4_0));
static_assert(quant_block_bytes(static_cast<int>(DType::Q4_1)) == sizeof(BlockQ4_1));
static_assert(quant_block_bytes(static_cast<int>(DType::Q5_0)) == sizeof(BlockQ5_0));
static_assert(quant_block_bytes(static_cast<int>(DType::Q5_1)) == sizeof(BlockQ5_1));
static_assert(quant_block_bytes(static_cast<int>(DType::Q8_0)) == sizeof(BlockQ8_0));
static_assert(quant_block_bytes(static_cast<int>(DType::IQ4_NL)) == sizeof(BlockIQ4_NL));
static_assert(quant_block_bytes(static_cast<int>(DType::MXFP4)) == sizeof(BlockMXFP4));
static_assert(quant_block_bytes(static_cast<int>(DType::Q2_K)) == sizeof(BlockQ2_K));
static_assert(quant_block_bytes(static_cast<int>(DType::Q3_K)) == sizeof(BlockQ3_K));
static_assert(quant_block_bytes(static_cast<int>(DType::Q4_K)) == sizeof(BlockQ4_K));
static_assert(quant_block_bytes(static_cast<int>(DType::Q5_K)) == sizeof(BlockQ5_K));
static_assert(quant_block_bytes(static_cast<int>(DType::Q6_K)) == sizeof(BlockQ6_K));
static_assert(quant_block_bytes(static_cast<int>(DType::IQ4_XS)) == sizeof(BlockIQ4_XS));

// ---- field readers --------------------------------------------------------------

namespace qdetail {

// An fp16 field stored as two bytes (little-endian), at any alignment.
__host__ __device__ __forceinline__ float f16_at(const uint8_t* p) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(p[0] | (p[1] << 8))));
}
__host__ __device__ __forceinline__ uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

__host__ __device__ __forceinline__ float bits_to_float(uint32_t x) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(x);
#else
  float f;
  __builtin_memcpy(&f, &x, sizeof f);
  return f;
#endif
}

__host__ __device__ constexpr uint32_t pack4(int a, int b, int c, int d) {
  return static_cast<uint32_t>(static_cast<uint8_t>(a)) | static_cast<uint32_t>(static_cast<uint8_t>(b)) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(c)) << 16 | static_cast<uint32_t>(static_cast<uint8_t>(d)) << 24;
}

// Entry n (0..15) of a table of 16 int8 values packed into four words, in
// registers (no memory lookups that would diverge across a warp).
__host__ __device__ __forceinline__ int lut16(int n, uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
  const uint32_t lo = (n & 4) ? w1 : w0;
  const uint32_t hi = (n & 4) ? w3 : w2;
  const uint32_t w = (n & 8) ? hi : lo;
  return static_cast<int8_t>(static_cast<uint8_t>(w >> (8 * (n & 3))));
}

// loom::kIq4nlValues[n]
__host__ __device__ __forceinline__ float iq4nl_value(int n) {
  return static_cast<float>(lut16(n, pack4(-127, -104, -83, -65), pack4(-49, -35, -22, -10), pack4(1, 13, 25, 38),
                                  pack4(53, 69, 89, 113)));
}
// loom::kMxfp4Values[n]: e2m1 doubled.
__host__ __device__ __forceinline__ float mxfp4_value(int n) {
  return static_cast<float>(
      lut16(n, pack4(0, 1, 2, 3), pack4(4, 6, 8, 12), pack4(0, -1, -2, -3), pack4(-4, -6, -8, -12)));
}
// 2^(e - 128), the scale of kMxfp4Values (loom::mxfp4_half_scale), exactly.
__host__ __device__ __forceinline__ float mxfp4_scale(int e) {
  return e >= 2 ? bits_to_float(static_cast<uint32_t>(e - 1) << 23) : bits_to_float(0x00200000u << e);
}

// 6-bit scale and min of sub-block s (0..7) of Q4_K / Q5_K.
__host__ __device__ __forceinline__ void scale_min6(const uint8_t* scales, int s, int* sc, int* m) {
  if (s < 4) {
    *sc = scales[s] & 63;
    *m = scales[s + 4] & 63;
  } else {
    *sc = (scales[s + 4] & 15) | (scales[s - 4] >> 6) << 4;
    *m = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
  }
}
// 6-bit scale (stored + 32) of sub-block s (0..15) of Q3_K.
__host__ __device__ __forceinline__ int scale_q3(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 15 : scales[s - 8] >> 4;
  return low | ((scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
}
// 6-bit scale (stored + 32) of sub-block s (0..7) of IQ4_XS.
__host__ __device__ __forceinline__ int scale_iq4_xs(const uint8_t* b, int s) {
  const int high = ((b[2] | b[3] << 8) >> (2 * s)) & 3;
  return ((b[4 + s / 2] >> (4 * (s % 2))) & 15) | high << 4;
}

}  // namespace qdetail

// ---- one element -----------------------------------------------------------------

// Element i of the block at `block` of quantized type `type` (a DType id).
__host__ __device__ inline float dequant_elem(int type, const char* block, int i) {
  using namespace qdetail;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(block);
  const auto nib = [](const uint8_t* qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; };
  switch (static_cast<DType>(type)) {
    case DType::Q8_0:
      return f16_at(b) * static_cast<float>(static_cast<int8_t>(b[2 + i]));
    case DType::Q4_0:
      return f16_at(b) * static_cast<float>(nib(b + 2, i) - 8);
    case DType::Q4_1:
      return f16_at(b) * static_cast<float>(nib(b + 4, i)) + f16_at(b + 2);
    case DType::Q5_0: {
      const int h = (b[2 + i / 8] >> (i % 8)) & 1;
      return f16_at(b) * static_cast<float>((nib(b + 6, i) | h << 4) - 16);
    }
    case DType::Q5_1: {
      const int h = (b[4 + i / 8] >> (i % 8)) & 1;
      return f16_at(b) * static_cast<float>(nib(b + 8, i) | h << 4) + f16_at(b + 2);
    }
    case DType::IQ4_NL:
      return f16_at(b) * iq4nl_value(nib(b + 2, i));
    case DType::MXFP4:
      return mxfp4_value(nib(b + 1, i)) * mxfp4_scale(b[0]);
    case DType::Q2_K: {  // scales[16], qs[64], d, dmin
      const int q = (b[16 + 32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
      const int sc = b[i / 16];
      return f16_at(b + 80) * static_cast<float>(sc & 15) * static_cast<float>(q) -
             f16_at(b + 82) * static_cast<float>(sc >> 4);
    }
    case DType::Q3_K: {  // hmask[32], qs[64], scales[12], d
      const int h = i / 128, k = i % 128 / 32, r = i % 32;
      const int low = (b[32 + 32 * h + r] >> (2 * k)) & 3;
      const int high = (b[r] >> (4 * h + k)) & 1;
      return f16_at(b + 108) * static_cast<float>(scale_q3(b + 96, i / 16) - 32) *
             static_cast<float>(low + 4 * high - 4);
    }
    case DType::Q4_K:    // d, dmin, scales[12], qs[128]
    case DType::Q5_K: {  // d, dmin, scales[12], qh[32], qs[128]
      const bool five = static_cast<DType>(type) == DType::Q5_K;
      const int c = i / 64, r = i % 64;
      const uint8_t* qs = b + (five ? 48 : 16);
      int q = r < 32 ? qs[32 * c + r] & 15 : qs[32 * c + r - 32] >> 4;
      if (five) q |= ((b[16 + i % 32] >> (i / 32)) & 1) << 4;
      int sc, m;
      scale_min6(b + 4, i / 32, &sc, &m);
      return f16_at(b) * static_cast<float>(sc) * static_cast<float>(q) - f16_at(b + 2) * static_cast<float>(m);
    }
    case DType::Q6_K: {  // ql[128], qh[64], scales[16] (int8), d
      const int h = i / 128, k = i % 128 / 32, r = i % 32;
      const int l = b[64 * h + 32 * (k % 2) + r];
      const int q = (k < 2 ? l & 15 : l >> 4) | ((b[128 + 32 * h + r] >> (2 * k)) & 3) << 4;
      return f16_at(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + i / 16])) * static_cast<float>(q - 32);
    }
    case DType::IQ4_XS: {  // d, scales_h, scales_l[4], qs[128]
      const int s = i / 32;
      return f16_at(b) * static_cast<float>(scale_iq4_xs(b, s) - 32) * iq4nl_value(nib(b + 8 + 16 * s, i % 32));
    }
    default:
      return 0.0f;
  }
}

// ---- 32 elements ---------------------------------------------------------------------

// The 32 elements of chunk `chunk` of the block at `block` of type T: chunk
// 0 for 32-element types, 0..7 (elements 32 chunk ..) for super-blocks.
template <DType T>
__host__ __device__ __forceinline__ void dequant_chunk32(const char* block, int chunk, float* out) {
  using namespace qdetail;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(block);
  const int s = chunk;
  if constexpr (T == DType::Q8_0) {
    const float d = f16_at(b);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
  } else if constexpr (T == DType::Q4_0) {
    const float d = f16_at(b);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>((b[2 + j] & 15) - 8);
      out[j + 16] = d * static_cast<float>((b[2 + j] >> 4) - 8);
    }
  } else if constexpr (T == DType::Q4_1) {
    const float d = f16_at(b), m = f16_at(b + 2);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(b[4 + j] & 15) + m;
      out[j + 16] = d * static_cast<float>(b[4 + j] >> 4) + m;
    }
  } else if constexpr (T == DType::Q5_0) {
    const float d = f16_at(b);
    const int h = static_cast<int>(u32_at(b + 2));  // signed: q - 16 below
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(((b[6 + j] & 15) | ((h >> j) & 1) << 4) - 16);
      out[j + 16] = d * static_cast<float>(((b[6 + j] >> 4) | ((h >> (j + 16)) & 1) << 4) - 16);
    }
  } else if constexpr (T == DType::Q5_1) {
    const float d = f16_at(b), m = f16_at(b + 2);
    const int h = static_cast<int>(u32_at(b + 4));
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>((b[8 + j] & 15) | ((h >> j) & 1) << 4) + m;
      out[j + 16] = d * static_cast<float>((b[8 + j] >> 4) | ((h >> (j + 16)) & 1) << 4) + m;
    }
  } else if constexpr (T == DType::IQ4_NL) {
    const float d = f16_at(b);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = d * iq4nl_value(b[2 + j] & 15);
      out[j + 16] = d * iq4nl_value(b[2 + j] >> 4);
    }
  } else if constexpr (T == DType::MXFP4) {
    const float d = mxfp4_scale(b[0]);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = mxfp4_value(b[1 + j] & 15) * d;
      out[j + 16] = mxfp4_value(b[1 + j] >> 4) * d;
    }
  } else if constexpr (T == DType::Q2_K) {  // scales[16], qs[64], d, dmin
    const int shift = 2 * (s % 4);
    const uint8_t* qs = b + 16 + 32 * (s / 4);
    const float d = f16_at(b + 80), dmin = f16_at(b + 82);
LOOM_CUDA_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int sc = b[2 * s + half];
      const float dl = d * static_cast<float>(sc & 15), ml = dmin * static_cast<float>(sc >> 4);
LOOM_CUDA_UNROLL
      for (int j = 0; j < 16; ++j) out[16 * half + j] = dl * static_cast<float>((qs[16 * half + j] >> shift) & 3) - ml;
    }
  } else if constexpr (T == DType::Q3_K) {  // hmask[32], qs[64], scales[12], d
    const int shift = 2 * (s % 4);
    const uint8_t* qs = b + 32 + 32 * (s / 4);
    const float d = f16_at(b + 108);
LOOM_CUDA_UNROLL
    for (int half = 0; half < 2; ++half) {
      const float dl = d * static_cast<float>(scale_q3(b + 96, 2 * s + half) - 32);
LOOM_CUDA_UNROLL
      for (int j = 0; j < 16; ++j) {
        const int r = 16 * half + j;
        const int q = ((qs[r] >> shift) & 3) + 4 * ((b[r] >> s) & 1) - 4;
        out[r] = dl * static_cast<float>(q);
      }
    }
  } else if constexpr (T == DType::Q4_K || T == DType::Q5_K) {  // d, dmin, scales[12], (qh[32],) qs[128]
    constexpr bool five = T == DType::Q5_K;
    const uint8_t* qs = b + (five ? 48 : 16) + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    int sc, mn;
    scale_min6(b + 4, s, &sc, &mn);
    const float d = f16_at(b) * static_cast<float>(sc), m = f16_at(b + 2) * static_cast<float>(mn);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 32; ++j) {
      int q = (qs[j] >> shift) & 15;
      if constexpr (five) q |= ((b[16 + j] >> s) & 1) << 4;
      out[j] = d * static_cast<float>(q) - m;
    }
  } else if constexpr (T == DType::Q6_K) {  // ql[128], qh[64], scales[16] (int8), d
    const int h = s / 4, k = s % 4;
    const uint8_t* ql = b + 64 * h + 32 * (k % 2);
    const uint8_t* qh = b + 128 + 32 * h;
    const int lshift = k < 2 ? 0 : 4, hshift = 2 * k;
    const float d = f16_at(b + 208);
LOOM_CUDA_UNROLL
    for (int half = 0; half < 2; ++half) {
      const float dl = d * static_cast<float>(static_cast<int8_t>(b[192 + 2 * s + half]));
LOOM_CUDA_UNROLL
      for (int j = 0; j < 16; ++j) {
        const int r = 16 * half + j;
        const int q = ((ql[r] >> lshift) & 15) | ((qh[r] >> hshift) & 3) << 4;
        out[r] = dl * static_cast<float>(q - 32);
      }
    }
  } else if constexpr (T == DType::IQ4_XS) {  // d, scales_h, scales_l[4], qs[128]
    const uint8_t* qs = b + 8 + 16 * s;
    const float d = f16_at(b) * static_cast<float>(scale_iq4_xs(b, s) - 32);
LOOM_CUDA_UNROLL
    for (int j = 0; j < 16; ++j) {
      out[j] = d * iq4nl_value(qs[j] & 15);
      out[j + 16] = d * iq4nl_value(qs[j] >> 4);
    }
  } else {
    static_assert(T == DType::Q8_0, "dequant_chunk32: not a quantized type");
  }
}

// Chunk c (elements 32c .. 32c + 31) of a row of blocks of type T.
template <DType T>
__host__ __device__ __forceinline__ void dequant_row_chunk32(const char* row, int64_t c, float* out) {
  constexpr int kChunks = quant_block_elems(static_cast<int>(T)) / 32;
  constexpr int kBytes = quant_block_bytes(static_cast<int>(T));
  dequant_chunk32<T>(row + (c / kChunks) * kBytes, static_cast<int>(c % kChunks), out);
}

// Calls f(std::integral_constant<DType, T>{}) for the quantized type id
// `type`; returns false (calling nothing) for other types. For launchers:
// one template instantiation per quantized type.
template <class F>
inline bool dispatch_quant_type(int type, F&& f) {
  switch (static_cast<DType>(type)) {
#define LOOM_CUDA_QCASE(T) \
  case DType::T: f(std::integral_constant<DType, DType::T>{}); return true;
    LOOM_CUDA_QCASE(Q4_0)
    LOOM_CUDA_QCASE(Q4_1)
    LOOM_CUDA_QCASE(Q5_0)
    LOOM_CUDA_QCASE(Q5_1)
    LOOM_CUDA_QCASE(Q8_0)
    LOOM_CUDA_QCASE(Q2_K)
    LOOM_CUDA_QCASE(Q3_K)
    LOOM_CUDA_QCASE(Q4_K)
    LOOM_CUDA_QCASE(Q5_K)
    LOOM_CUDA_QCASE(Q6_K)
    LOOM_CUDA_QCASE(IQ4_NL)
    LOOM_CUDA_QCASE(IQ4_XS)
    LOOM_CUDA_QCASE(MXFP4)
#undef LOOM_CUDA_QCASE
    default:
      return false;
  }
}

}  // namespace loom::cuda
