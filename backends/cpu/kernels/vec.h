// Internal interface of the CPU mul_mat kernels: the ISA levels and how one is
// chosen, the packed formats of the b operand, and the table of kernels each
// ISA level provides. mul_mat.cpp drives them (packing, chunking, threads);
// mul_mat_scalar.cpp, mul_mat_avx2.cpp, mul_mat_avx512.cpp and
// mul_mat_avx512bf16.cpp fill the tables, each compiled with its own flags.
//
// Two paths:
//  - dot path (few b columns, e.g. mat-vec): b is packed per column in a "row
//    format" and each dst element is one dot product of an a row with it.
//  - gemm path (many columns): b is packed in panels of P columns, k-major, and
//    a micro-kernel computes a tile of rows x 2 panels in registers.
// Quantized weights (Q8_0, Q4_0) multiply integer activations: b is quantized
// to blocks of 32 int8 q with a float scale d (d = amax/127, q = rint(x/d)),
// and per block m = -C * d * sum(q), where C is the offset the kernel adds to
// the weights to make them unsigned (8 for Q4_0 nibbles, 128 for biased
// Q8_0, 0 where the kernel handles signs itself). A block then contributes
//   d_a * (d_b * dot(w + C, q) + m).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom::cpu {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };
std::string_view isa_name(Isa isa);
std::optional<Isa> isa_from_name(std::string_view name);  // "scalar", "avx2", "avx512"
// Highest level this CPU can run.
Isa best_isa();
// Level mul_mat uses: best_isa(), lowered by LOOM_CPU_ISA or set_mul_mat_isa.
Isa mul_mat_isa();
// Forces a level (tests, comparisons); a level above best_isa() is clamped,
// so no kernel the CPU cannot run is ever called. nullopt restores the default.
void set_mul_mat_isa(std::optional<Isa> isa);

// How quantized weights multiply b. Auto (the default) picks per type, level
// and N (mul_mat_dequantizes); IntDot always quantizes b and runs the integer
// kernels (dot, gemm_q8, quant_dot.h); Dequant always converts a's rows to f32
// with the type's to_float and runs the f32 kernels. The forced paths are for
// comparisons (bench/mul_mat_bench) and tests.
enum class QuantPath { Auto, IntDot, Dequant };
void set_mul_mat_quant_path(QuantPath path);
QuantPath mul_mat_quant_path();

inline constexpr int kQBlock = 32;  // elements per quantization block

// Weight kinds, the index of per-kind table entries.
enum class WKind { F32, F16, BF16, Q8_0, Q4_0 };
inline constexpr int kWKinds = 5;

// Row format of a quantized b column of k elements: int8 q[k], then float
// d[k/32], then float m[k/32].
inline size_t q8_row_bytes(int64_t k) { return static_cast<size_t>(k) + static_cast<size_t>(k / kQBlock) * 8; }

// x[k] -> q[k], d[k/32], s[k/32] with s = d * sum(q). Same result on every ISA.
using QuantizeRowFn = void (*)(const float* x, int64_t k, int8_t* q, float* d, float* s);
// out = dot(a row, b column in row format); a row of the kernel's weight kind.
using DotFn = void (*)(int64_t k, const void* a_row, const void* b_row, float* out);
// out[c * 16 + r] = dot of row r of 16 interleaved rows (one CPU_Repack
// group, see repack.h) with b column c (row format, b_stride bytes apart),
// for c < ncols (1..kGemm16Cols).
inline constexpr int kGemm16Cols = 8;
// Columns a call of a wide gemm16 kernel (MulMatKernels::gemm16_wide) takes.
inline constexpr int kGemm16WideCols = 16;
using Gemm16Fn = void (*)(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols,
                          float* out);
// out[r] = dot(a row r, b) for 16 F16 rows lda bytes apart and an f32 b
// column (short rows, e.g. attention's K cache: one reduction for 16 rows).
using Dot16F16Fn = void (*)(int64_t k, const uint8_t* a, size_t lda, const float* b, float* out);
// Converts a row of F16 / BF16 to f32.
using ToF32Fn = void (*)(const void* src, float* dst, int64_t n);
// Expands a quantized a row into one byte per element (in the encoding the
// ISA's gemm_q8 expects) and its block scales as floats.
using ExpandFn = void (*)(const void* a_row, int64_t k, uint8_t* q, float* d);

// Micro-kernels compute c[r][l] (r < mr, l < nv * P, row stride 2P) for rows
// of a and nv (1 or 2) consecutive b panels.
//   f32:  a rows of f32 `lda` elements apart; panel = float[k][P].
//   bf16: a rows of bf16 pairs; panel = bf16[k/2][P][2] (k even).
//   q8:   a rows expanded (lda bytes apart) with scales ad (k/32 per row);
//         panel = int8[k/4][P][4], float d[k/32][P], float m[k/32][P].
using GemmF32Fn = void (*)(int mr, const float* a, int64_t lda, const float* panels, int64_t k, int nv, float* c);
// gemm_f32 with b a plain row-major matrix of k rows ldb floats apart: panel
// v is columns [v P, v P + P) of every row, read in place.
using GemmF32RowsFn = void (*)(int mr, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k, int nv,
                               float* c);
using GemmBf16Fn = void (*)(int mr, const uint16_t* a, int64_t lda, const uint16_t* panels, int64_t k, int nv,
                            float* c);
using GemmQ8Fn = void (*)(int mr, const uint8_t* aq, const float* ad, int64_t k, const uint8_t* panels, int nv,
                          float* c);
// u4:   4-bit weights (Q4_0, Q4_1, Q4_K) as a row of bytes 0..15 (u5: 5-bit
//       weights, Q5_0, Q5_1, Q5_K, as bytes 0..31) with a scale ad
//       and an offset am per 32 elements (weight = ad * q + am), in a
//       q8 panel packed with C = -1, so that its m is the column block's
//       d * sum(q): a block adds ad * d * dot(q_a, q_b) + am * m.
using GemmU4Fn = void (*)(int mr, const uint8_t* aq, const float* ad, const float* am, int64_t k,
                          const uint8_t* panels, int nv, float* c);
// A row of 4- or 5-bit weights (its type's blocks) -> bytes 0..15 / 0..31,
// scales d and offsets m per 32 elements, for gemm_u4 / gemm_u5.
using ExpandU4Fn = void (*)(const void* a_row, int64_t k, uint8_t* q, float* d, float* m);
// The same for the 16 rows of an interleaved group (CPU_Repack, repack.h),
// read where they lie: row r's bytes at q + r * k, its scales and offsets
// at d + r * (k / 32) and m + r * (k / 32).
using ExpandU4x16Fn = void (*)(const uint8_t* group, int64_t k, uint8_t* q, float* d, float* m);
// s6:   Q6_K weights as a row of int8 q - 32 (-32..31), Q3_K as q - 4
//       (-4..3), with a scale per 16 elements (ad16, k/16 floats), in a q8
//       panel packed with C = 0.
using GemmS6Fn = void (*)(int mr, const uint8_t* aq, const float* ad16, int64_t k, const uint8_t* panels, int nv,
                          float* c);
// A Q6_K / Q3_K row -> its int8 values and the scale of each 16 elements,
// for gemm_s6.
using ExpandS6Fn = void (*)(const void* a_row, int64_t k, uint8_t* q, float* d16);
// The same for the 16 rows of an interleaved group, as ExpandU4x16Fn: row
// r's bytes at q + r * k, its scales at d16 + r * (k / 16).
using ExpandS6x16Fn = void (*)(const uint8_t* group, int64_t k, uint8_t* q, float* d16);

// out[k][l] = col0[l * col_stride + k] for l < ncols (<= P), 0 for ncols <= l < P:
// one f32 gemm panel from b columns with contiguous elements.
using PackF32PanelFn = void (*)(const float* col0, size_t col_stride, int ncols, int64_t k, float* out);

struct MulMatKernels {
  Isa isa = Isa::Scalar;
  QuantizeRowFn quantize_row = nullptr;
  std::array<DotFn, kWKinds> dot{};  // b row format: f32 for float kinds, q8 row for quantized
  Dot16F16Fn dot16_f16 = nullptr;  // null: one dot per row
  std::array<Gemm16Fn, kWKinds> gemm16{};  // interleaved Q8_0 / Q4_0 rows (null: unpack rows instead)
  // The same for up to kGemm16WideCols columns a call (AMX tiles), used from
  // gemm16_wide_min_n columns of b on; null: gemm16.
  std::array<Gemm16Fn, kWKinds> gemm16_wide{};
  int64_t gemm16_wide_min_n = 0;
  // From this many columns on, interleaved rows of the kind take the gemm
  // path (unpacked per chunk) instead of gemm16; 0: never.
  std::array<int64_t, kWKinds> gemm16_max_n{};
  ToF32Fn f16_to_f32 = nullptr;
  ToF32Fn bf16_to_f32 = nullptr;
  int q8_0_offset = 0;  // C for Q8_0 weights (see top)
  int q4_0_offset = 0;  // C for Q4_0 weights
  // gemm path; panel == 0 means this level has none (dot path only).
  int panel = 0;
  int rows_f32 = 0;  // rows per micro-kernel call (gemm_f32, gemm_bf16)
  int rows_q8 = 0;   // rows per micro-kernel call (gemm_q8)
  GemmF32Fn gemm_f32 = nullptr;
  GemmF32RowsFn gemm_f32_rows = nullptr;  // set wherever gemm_f32 is
  GemmBf16Fn gemm_bf16 = nullptr;  // null: BF16 converts to f32
  GemmQ8Fn gemm_q8 = nullptr;
  PackF32PanelFn pack_f32_panel = nullptr;  // null: packed element by element
  ExpandFn expand_q8_0 = nullptr;
  ExpandFn expand_q4_0 = nullptr;
  // Table-valued types as Q8_0 bytes for gemm_q8 (null: the dots or the f32
  // gemm on dequantized rows).
  ExpandFn expand_q8_iq4_nl = nullptr;
  ExpandFn expand_q8_iq4_xs = nullptr;
  ExpandFn expand_q8_mxfp4 = nullptr;
  // 4-bit weights on the integer gemm (null: Q4_0 takes gemm_q8, the others
  // the dots or the f32 gemm on dequantized rows).
  int rows_u4 = 0;
  GemmU4Fn gemm_u4 = nullptr;
  ExpandU4Fn expand_u4_q4_0 = nullptr;
  ExpandU4Fn expand_u4_q4_1 = nullptr;
  ExpandU4Fn expand_u4_q4_k = nullptr;
  // 5-bit weights (0..31) the same way: gemm_u5 is gemm_u4 where its sums
  // cannot overflow with 5-bit values (rows_u4 rows per call).
  GemmU4Fn gemm_u5 = nullptr;
  ExpandU4Fn expand_u5_q5_0 = nullptr;
  ExpandU4Fn expand_u5_q5_1 = nullptr;
  ExpandU4Fn expand_u5_q5_k = nullptr;
  // Q6_K and Q3_K on the integer gemm (null: the dots).
  int rows_s6 = 0;
  GemmS6Fn gemm_s6 = nullptr;
  ExpandS6Fn expand_s6_q3_k = nullptr;
  ExpandS6Fn expand_s6_q6_k = nullptr;
};

// Bytes of one gemm panel of P columns and k elements for a quantized kind.
inline size_t q8_panel_bytes(int64_t k, int p) {
  return static_cast<size_t>(k) * p + static_cast<size_t>(k / kQBlock) * p * 8;
}

const MulMatKernels& mul_mat_kernels_scalar();
const MulMatKernels& mul_mat_kernels_avx2();    // only if best_isa() >= Avx2
const MulMatKernels& mul_mat_kernels_avx512();  // only if best_isa() >= Avx512
// vdpbf16ps micro-kernel (mul_mat_avx512bf16.cpp); call only with AVX512_BF16.
void gemm_bf16_avx512bf16(int mr, const uint16_t* a, int64_t lda, const uint16_t* panels, int64_t k, int nv,
                          float* c);
// The table for a level (clamped to best_isa()).
const MulMatKernels& mul_mat_kernels(Isa isa);

}  // namespace loom::cpu
