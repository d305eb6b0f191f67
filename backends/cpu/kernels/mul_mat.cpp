// mul_mat: dst[i, j] = dot(a row i, b row j) per matrix, a broadcast over b's
// dims 2-3 (a's rows are contiguous; mul_mat() checks). Phase 0 packs b (any
// strides) into scratch in the format of the chosen path (see vec.h), a task
// per group of columns or panels; phase 1 has a task per chunk of dst (rows x
// columns of one matrix), which threads claim one at a time, so a thread that
// is slowed down takes fewer chunks.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>

#include "../cpu_features.h"
#include "../repack.h"
#include "kernels.h"
#include "loom/align.h"
#include "loom/log.h"
#include "mul_mat_part.h"
#include "quant_dot.h"
#include "vec.h"

namespace loom::cpu {

// ---- ISA choice -----------------------------------------------------------

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

std::optional<Isa> isa_from_name(std::string_view name) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa_name(isa) == name) return isa;
  return std::nullopt;
}

Isa best_isa() {
  static const Isa best = [] {
    const CpuFeatures& f = cpu_features();
    if (f.has_avx512_vnni()) return Isa::Avx512;
    if (f.has_avx2_fma()) return Isa::Avx2;
    return Isa::Scalar;
  }();
  return best;
}

namespace {

std::atomic<int> g_forced_isa{-1};

Isa clamp_isa(Isa isa) { return std::min(isa, best_isa()); }

std::optional<Isa> env_isa() {
  static const std::optional<Isa> isa = []() -> std::optional<Isa> {
    const char* v = std::getenv("LOOM_CPU_ISA");
    if (!v || !*v) return std::nullopt;
    const auto parsed = isa_from_name(v);
    if (!parsed) log(LogLevel::Warn, "LOOM_CPU_ISA='{}' is not one of scalar, avx2, avx512; ignored", v);
    return parsed;
  }();
  return isa;
}

}  // namespace

Isa mul_mat_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return clamp_isa(static_cast<Isa>(forced));
  if (const auto env = env_isa()) return clamp_isa(*env);
  return best_isa();
}

void set_mul_mat_isa(std::optional<Isa> isa) { g_forced_isa.store(isa ? static_cast<int>(*isa) : -1); }

namespace {
std::atomic<QuantPath> g_quant_path{QuantPath::Auto};
}  // namespace

void set_mul_mat_quant_path(QuantPath path) { g_quant_path.store(path); }
QuantPath mul_mat_quant_path() { return g_quant_path.load(std::memory_order_relaxed); }

// Columns of b from which interleaved Q8_0 / Q4_0 rows go through AMX tiles
// (fewer: the AVX-512 VNNI kernels, which also serve a generated token).
constexpr int64_t kAmxMinColumns = 16;
// From here on the AMX gemm path beats the wide gemm16 on interleaved Q4_0
// rows (2048 x 5632, 2 threads: 6.98 against 7.79 ms at 256 columns, 12.8
// against 15.3 at 512; no better at 128). Not for Q8_0, whose rows cost more
// to unpack: even at 512 columns.
constexpr int64_t kAmxQ4GemmColumns = 256;

const MulMatKernels& mul_mat_kernels(Isa isa) {
  switch (clamp_isa(isa)) {
    case Isa::Avx512: {
      static const MulMatKernels table = [] {
        MulMatKernels t = mul_mat_kernels_avx512();
        if (cpu_features().avx512bf16) t.gemm_bf16 = gemm_bf16_avx512bf16;
        if (amx_int8_usable()) {
          for (WKind k : {WKind::Q8_0, WKind::Q4_0}) t.gemm16_wide[static_cast<int>(k)] = quant_gemm16_amx(k);
          t.gemm16_wide_min_n = kAmxMinColumns;
          t.gemm16_max_n[static_cast<int>(WKind::Q4_0)] = kAmxQ4GemmColumns;
          use_amx_int_gemm(t);
        }
        return t;
      }();
      return table;
    }
    case Isa::Avx2: return mul_mat_kernels_avx2();
    case Isa::Scalar: break;
  }
  return mul_mat_kernels_scalar();
}

// ---- plan -----------------------------------------------------------------

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kABlockBytes = 256 * 1024;  // prepared a rows a chunk reuses (L2)
// Dot path: rows per chunk, between these, aiming at kDotChunksPerThread
// chunks per thread (fewer claims for big matrices, balance for small ones).
constexpr int64_t kDotMinRows = 16, kDotMaxRows = 128, kDotChunksPerThread = 16;
// Dot path: b of at most this many elements is packed by every thread for
// itself (see Plan::private_b); above it, once in phase 0.
constexpr int64_t kPrivateBElements = 8192;
// Phase 0 tasks per thread (packing is short; a few tasks balance it).
constexpr int64_t kPackTasksPerThread = 4;
// Dot path with quantized activations: b columns per pass over a chunk's rows.
constexpr int64_t kDotColTile = 8;

WKind kind_of(DType type) {
  switch (type) {
    case DType::F16: return WKind::F16;
    case DType::BF16: return WKind::BF16;
    case DType::Q8_0: return WKind::Q8_0;
    case DType::Q4_0: return WKind::Q4_0;
    default: return WKind::F32;
  }
}

bool is_quant(WKind k) { return k == WKind::Q8_0 || k == WKind::Q4_0; }

// Fewest b columns for which the f32 gemm on dequantized rows beats the
// integer dots, for the types with no integer gemm (which load each weight
// block once per column): from 32 for Q2_K, measured with
// bench/mul_mat_bench on AVX2 (Zen 3, 2048 x 2048 weights). The types with
// an integer gemm at the level (has_int_gemm) stay integer
// (mul_mat_dequantizes): 1.2x the f32 gemm on dequantized rows for Q8_0 /
// Q4_0, 1.3-1.5x at 64-512 columns and 1.9-2.9x at 16 for Q4_K / Q6_K, and
// on AVX2 (Zen 3 EPYC, 2 threads) 1.1-5.8x the path each of the others
// had before (dequantized rows from 16 or 32 columns, the dots below that
// and for Q5_K at every width).
int64_t dequant_min_columns(DType type) {
  return type == DType::Q2_K ? 32 : INT64_MAX;
}

bool is_five_bit(DType type) { return type == DType::Q5_0 || type == DType::Q5_1 || type == DType::Q5_K; }

// The level's gemm for the unsigned expansion of `type` (gemm_u4, or gemm_u5
// for 5-bit values), or null.
GemmU4Fn gemm_unsigned(const MulMatKernels& kern, DType type) {
  return is_five_bit(type) ? kern.gemm_u5 : kern.gemm_u4;
}

// The expansion of 4- or 5-bit weights of `type` for gemm_unsigned, or null.
ExpandU4Fn expand_u4(const MulMatKernels& kern, DType type) {
  if (!gemm_unsigned(kern, type)) return nullptr;
  switch (type) {
    case DType::Q4_0: return kern.expand_u4_q4_0;
    case DType::Q4_1: return kern.expand_u4_q4_1;
    case DType::Q4_K: return kern.expand_u4_q4_k;
    case DType::Q5_0: return kern.expand_u5_q5_0;
    case DType::Q5_1: return kern.expand_u5_q5_1;
    case DType::Q5_K: return kern.expand_u5_q5_k;
    default: return nullptr;
  }
}

// The expansion of Q6_K / Q3_K weights for the level's gemm_s6, or null.
ExpandS6Fn expand_s6(const MulMatKernels& kern, DType type) {
  if (!kern.gemm_s6) return nullptr;
  switch (type) {
    case DType::Q3_K: return kern.expand_s6_q3_k;
    case DType::Q6_K: return kern.expand_s6_q6_k;
    default: return nullptr;
  }
}

// The expansion of table-valued weights to Q8_0 bytes for the level's
// gemm_q8, or null.
ExpandFn expand_table(const MulMatKernels& kern, DType type) {
  if (!kern.gemm_q8) return nullptr;
  switch (type) {
    case DType::IQ4_NL: return kern.expand_q8_iq4_nl;
    case DType::IQ4_XS: return kern.expand_q8_iq4_xs;
    case DType::MXFP4: return kern.expand_q8_mxfp4;
    default: return nullptr;
  }
}

bool has_int_gemm(const MulMatKernels& kern, DType type) {
  return expand_u4(kern, type) || expand_s6(kern, type) || expand_table(kern, type);
}

}  // namespace

bool mul_mat_int_gemm(Isa isa, DType type, int64_t n) {
  const MulMatKernels& kern = mul_mat_kernels(isa);
  return mul_mat_quant_path() != QuantPath::Dequant && has_int_gemm(kern, type) && n >= kern.panel;
}

bool mul_mat_dequantizes(Isa isa, DType type, int64_t n) {
  if (!traits(type).is_quantized) return false;
  switch (mul_mat_quant_path()) {
    case QuantPath::IntDot: return false;
    case QuantPath::Dequant: return true;
    case QuantPath::Auto: break;
  }
  const MulMatKernels& kern = mul_mat_kernels(isa);
  if (kern.panel == 0) return false;  // no gemm at this level: the integer dots win
  if (has_int_gemm(kern, type)) return false;  // its integer gemm wins
  return n >= dequant_min_columns(type);
}

namespace {

// How the gemm path reads a: straight from the tensor, converted to f32 per
// chunk, as bf16 pairs (vdpbf16ps), or expanded to bytes per chunk (signed
// for gemm_q8, 4-bit values with offsets for gemm_u4, Q6_K for gemm_s6).
enum class AMode { Direct, Convert, Bf16Pairs, Quant, QuantU4, QuantS6 };

struct Plan {
  const MulMatKernels* kern = nullptr;
  WKind kind = WKind::F32;
  int64_t K = 0, M = 0, N = 0, n_mat = 0;
  bool gemm = false;
  AMode amode = AMode::Direct;
  int P = 0, tile_rows = 0;
  size_t unit_bytes = 0;  // dot: one packed column; gemm: one panel
  size_t mat_bytes = 0;   // packed b of one matrix
  int64_t n_units = 0;    // columns (dot) or panels (gemm) per matrix
  int64_t row_block = 0, col_block = 0;
  // per-thread scratch
  size_t gather_off = 0, qtmp_off = 0, ablock_off = 0, ctile_off = 0, arow_off = 0, thread_bytes = 0;
  // Small b on the dot path: each thread packs its own copy in its first
  // chunk (no phase 0, so no wait between packing and multiplying).
  bool private_b = false;
  size_t private_off = 0;
  bool repacked = false;  // a is interleaved (CPU_Repack): rows come from unpack_row, expand_*_x16 or gemm16
  // Interleaved a's kernel for 16 rows (Q8_0 / Q4_0: b in q8 row format;
  // Q4_K / Q6_K: b in their activation format, for the N quant_gemm16 takes).
  Gemm16Fn gemm16 = nullptr;
  int gemm16_cols = kGemm16Cols;  // columns a gemm16 call takes
  // The other quantized types (Q4_1, Q5_x, K-quants, IQ4, MXFP4) take the
  // dot path with b in their activation format (quant_dot.h).
  DotFn qdot = nullptr;
  Dot4Fn qdot4 = nullptr;
  // Quantized weights on the f32 paths (mul_mat_dequantizes): rows are
  // converted with the type's to_float (per chunk on the gemm path, per row
  // on the dot path), b is packed as for F32.
  ToFloatFn dequant = nullptr;
  ExpandU4Fn expand_u4 = nullptr;  // 4- / 5-bit weights on gemm_u (C = -1)
  GemmU4Fn gemm_u = nullptr;       // gemm_u4 or gemm_u5
  ExpandU4x16Fn expand_u4_x16 = nullptr;  // the same 16 interleaved rows at a time
  ExpandS6Fn expand_s6 = nullptr;  // Q6_K / Q3_K on gemm_s6 (C = 0)
  ExpandS6x16Fn expand_s6_x16 = nullptr;  // the same 16 interleaved rows at a time
  ExpandFn expand_table = nullptr;  // IQ4_NL / IQ4_XS / MXFP4 as Q8_0 on gemm_q8
  ActFormat act = ActFormat::Q8_32;
  int c_offset = 0;  // C of the kind (see vec.h)

  // b packed as q8 panels (gemm_q8, gemm_u4, gemm_s6).
  bool quant_panels() const { return amode == AMode::Quant || amode == AMode::QuantU4 || amode == AMode::QuantS6; }
  int64_t n_row_blocks() const { return (M + row_block - 1) / row_block; }
  int64_t n_col_blocks() const { return gemm ? (N + col_block - 1) / col_block : 1; }
  int64_t n_chunks() const { return n_mat * n_row_blocks() * n_col_blocks(); }
  size_t total_bytes(int nth) const {
    return kAlign /* alignment */ + kAlign /* spare */ + (private_b ? 0 : n_mat * mat_bytes) + nth * thread_bytes;
  }
};

// allow_private_b: false for a part of a bigger node (mul_mat_part.h), whose
// caller always packs b first.
Plan make_plan(const Tensor& dst, const MulMatKernels& kern, int nth, bool allow_private_b = true) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  Plan p;
  p.kern = &kern;
  p.K = a.ne[0];
  p.M = a.ne[1];
  p.N = b.ne[1];
  p.n_mat = b.ne[2] * b.ne[3];
  p.repacked = is_repacked(a);
  if (!p.repacked && mul_mat_dequantizes(kern.isa, a.type, p.N)) p.dequant = dequant_row_fn(a.type);
  p.kind = p.dequant ? WKind::F32 : kind_of(a.type);
  p.c_offset = p.kind == WKind::Q8_0 ? kern.q8_0_offset : p.kind == WKind::Q4_0 ? kern.q4_0_offset : 0;
  p.P = kern.panel;
  // Interleaved weights with a gemm16 kernel take the dot path (b in row
  // format, 16 rows x up to 8 columns per call): Q4_0 / Q8_0 for every N,
  // K-quants for the N where quant_gemm16 beats their integer gemm.
  const int64_t gemm16_max_n = kern.gemm16_max_n[static_cast<int>(p.kind)];
  const bool gemm16 = p.repacked && ((kern.gemm16[static_cast<int>(p.kind)] && (gemm16_max_n == 0 || p.N < gemm16_max_n)) ||
                                     quant_gemm16(kern.isa, a.type, p.N));
  if (!gemm16 && mul_mat_int_gemm(kern.isa, a.type, p.N)) {
    p.expand_u4 = expand_u4(kern, a.type);
    p.gemm_u = gemm_unsigned(kern, a.type);
    if (p.repacked && p.expand_u4) p.expand_u4_x16 = interleaved_expand_u4(kern.isa, a.type);
    p.expand_s6 = expand_s6(kern, a.type);
    if (p.repacked && p.expand_s6) p.expand_s6_x16 = interleaved_expand_s6(kern.isa, a.type);
    p.c_offset = p.expand_u4 ? -1 : 0;
    // Table-valued weights become Q8_0 bytes: from here on they are Q8_0.
    p.expand_table = expand_table(kern, a.type);
    if (p.expand_table) {
      p.kind = WKind::Q8_0;
      p.c_offset = kern.q8_0_offset;
    }
  }
  const bool int_gemm = p.expand_u4 || p.expand_s6;
  if (traits(a.type).is_quantized && !is_quant(p.kind) && !p.dequant && !int_gemm) {
    p.qdot = quant_dot(kern.isa, a.type);
    p.qdot4 = quant_dot4(kern.isa, a.type);
    p.act = act_format(a.type);
    if (p.repacked) p.gemm16 = quant_gemm16(kern.isa, a.type, p.N);
  } else if (gemm16) {
    p.gemm16 = kern.gemm16[static_cast<int>(p.kind)];
    if (const Gemm16Fn wide = kern.gemm16_wide[static_cast<int>(p.kind)]; wide && p.N >= kern.gemm16_wide_min_n) {
      p.gemm16 = wide;
      p.gemm16_cols = kGemm16WideCols;
    }
  }
  p.gemm = kern.panel > 0 && p.N >= kern.panel && !gemm16 && !p.qdot;
  const int64_t K = p.K;
  const size_t row_f32 = align_up(K * sizeof(float), kAlign);
  const size_t q8_row = align_up(q8_row_bytes(K), kAlign);
  p.gather_off = 0;
  p.qtmp_off = p.gather_off + row_f32;
  size_t off = p.qtmp_off + (is_quant(p.kind) || int_gemm ? q8_row : 0);
  p.arow_off = off;
  if (p.repacked) off += align_up(a.nb[1], kAlign);
  if (p.dequant && !p.gemm) off += row_f32;

  if (!p.gemm) {
    p.n_units = p.N;
    p.unit_bytes = p.qdot ? align_up(act_row_bytes(p.act, K), kAlign) : is_quant(p.kind) ? q8_row : row_f32;
    p.mat_bytes = p.N * p.unit_bytes;
    if (p.n_mat == 1) {
      p.row_block = std::clamp<int64_t>(p.M / (kDotChunksPerThread * nth) / kDotMinRows * kDotMinRows, kDotMinRows,
                                        kDotMaxRows);
    } else {
      // Many small matrices (attention heads): the chunk count is shared
      // among them, so a head is one chunk or a few, not dozens of tiny ones.
      const int64_t per_mat = std::max<int64_t>(1, (kDotChunksPerThread * nth + p.n_mat - 1) / p.n_mat);
      const int64_t rows = (p.M + per_mat - 1) / per_mat;
      p.row_block = std::max(kDotMinRows, (rows + kDotMinRows - 1) / kDotMinRows * kDotMinRows);
    }
    p.col_block = p.N;
    p.ablock_off = p.ctile_off = off;
    p.private_b = allow_private_b && p.n_mat * p.N * p.K <= kPrivateBElements;
    if (p.private_b) {
      p.private_off = off = align_up(off, kAlign);
      off += p.n_mat * p.mat_bytes;
    }
    p.thread_bytes = align_up(off, kAlign);
    return p;
  }

  if (p.expand_u4) p.amode = AMode::QuantU4;
  else if (p.expand_s6) p.amode = AMode::QuantS6;
  else if (is_quant(p.kind)) p.amode = AMode::Quant;
  else if (p.kind == WKind::F16 || p.dequant) p.amode = AMode::Convert;
  else if (p.kind == WKind::BF16) p.amode = kern.gemm_bf16 && K % 2 == 0 ? AMode::Bf16Pairs : AMode::Convert;
  else p.amode = AMode::Direct;

  p.tile_rows = p.amode == AMode::Quant     ? kern.rows_q8
                : p.amode == AMode::QuantU4 ? kern.rows_u4
                : p.amode == AMode::QuantS6 ? kern.rows_s6
                                            : kern.rows_f32;
  p.n_units = (p.N + p.P - 1) / p.P;
  // Panels of one matrix lie back to back (micro-kernels find the second of a
  // pair by this size), so they are not padded.
  if (p.quant_panels()) p.unit_bytes = q8_panel_bytes(K, p.P);
  else if (p.amode == AMode::Bf16Pairs) p.unit_bytes = K * p.P * sizeof(uint16_t);
  else p.unit_bytes = K * p.P * sizeof(float);
  p.mat_bytes = align_up(p.n_units * p.unit_bytes, kAlign);

  // Rows per chunk: as many prepared a rows as fit kABlockBytes.
  const size_t a_row_bytes = p.amode == AMode::Quant     ? K + (K / kQBlock) * sizeof(float)
                             : p.amode == AMode::QuantU4 || p.amode == AMode::QuantS6
                                 ? K + 2 * (K / kQBlock) * sizeof(float)
                                                         : K * sizeof(float);
  const int64_t tr = p.tile_rows;
  // Interleaved rows expanded 16 at a time: chunks of whole groups.
  const int64_t step = p.expand_u4_x16 || p.expand_s6_x16 ? std::lcm(tr, kRepackRows) : tr;
  int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(kABlockBytes / std::max<size_t>(a_row_bytes, 1)) / step) * step;
  rows = std::min(rows, (p.M + step - 1) / step * step);
  // Columns per chunk: all of them unless that leaves too few chunks to share.
  const int64_t pair = 2 * p.P;
  int64_t cols = (p.N + pair - 1) / pair * pair;
  const int64_t want = 8 * static_cast<int64_t>(nth);
  auto chunks = [&](int64_t r, int64_t c) { return p.n_mat * ((p.M + r - 1) / r) * ((p.N + c - 1) / c); };
  while (chunks(rows, cols) < want && cols > pair) cols = std::max(pair, (cols / 2 + pair - 1) / pair * pair);
  while (chunks(rows, cols) < want && rows > step) rows = std::max(step, (rows / 2 + step - 1) / step * step);
  p.row_block = rows;
  p.col_block = cols;

  p.ablock_off = off;
  if (p.amode == AMode::Convert) off += align_up(rows * K * sizeof(float), kAlign);
  if (p.quant_panels())
    off += align_up(rows * K, kAlign) + align_up(rows * (K / kQBlock) * sizeof(float), kAlign);
  // gemm_u4's offsets, or the second half of gemm_s6's scales per 16.
  if (p.amode == AMode::QuantU4 || p.amode == AMode::QuantS6)
    off += align_up(rows * (K / kQBlock) * sizeof(float), kAlign);
  p.ctile_off = off;
  off += align_up(tr * pair * sizeof(float), kAlign);
  p.thread_bytes = align_up(off, kAlign);
  return p;
}

// ---- phase 1: pack b ------------------------------------------------------

struct Scratch {
  uint8_t* packed;  // n_mat * mat_bytes
  uint8_t* threads;
};

Scratch scratch_of(const ComputeParams& params, const Plan& p) {
  auto base = reinterpret_cast<uintptr_t>(params.wdata);
  base = align_up(base, kAlign);
  auto* bytes = reinterpret_cast<uint8_t*>(base);
  return {bytes + kAlign, bytes + kAlign + (p.private_b ? 0 : p.n_mat * p.mat_bytes)};
}

// b column j of matrix `mat` as contiguous floats (a pointer into b when it
// already is, else gathered into tmp).
const float* b_column(const Tensor& b, int64_t mat, int64_t j, float* tmp) {
  const char* src = row_ptr(b, j, mat % b.ne[2], mat / b.ne[2]);
  if (b.nb[0] == sizeof(float)) return reinterpret_cast<const float*>(src);
  for (int64_t k = 0; k < b.ne[0]; ++k) std::memcpy(&tmp[k], src + k * b.nb[0], sizeof(float));
  return tmp;
}

void pack_dot_column(const Plan& p, const Tensor& b, int64_t mat, int64_t j, uint8_t* dst, uint8_t* thread) {
  const int64_t K = p.K;
  auto* tmp = reinterpret_cast<float*>(thread + p.gather_off);
  if (p.qdot) {
    quantize_act(p.act, p.kern->quantize_row, b_column(b, mat, j, tmp), K, dst);
    return;
  }
  if (!is_quant(p.kind)) {
    auto* out = reinterpret_cast<float*>(dst);
    const float* x = b_column(b, mat, j, out);
    if (x != out) std::memcpy(out, x, K * sizeof(float));
    return;
  }
  const float* x = b_column(b, mat, j, tmp);
  auto* q = reinterpret_cast<int8_t*>(dst);
  auto* d = reinterpret_cast<float*>(dst + K);
  float* m = d + K / kQBlock;
  p.kern->quantize_row(x, K, q, d, m);
  for (int64_t i = 0; i < K / kQBlock; ++i) m[i] *= -static_cast<float>(p.c_offset);
}

void pack_panel(const Plan& p, const Tensor& b, int64_t mat, int64_t panel, uint8_t* dst, uint8_t* thread) {
  const int64_t K = p.K, P = p.P, nb = K / kQBlock;
  auto* tmp = reinterpret_cast<float*>(thread + p.gather_off);
  const int64_t j0 = panel * P, j1 = std::min(p.N, j0 + P);
  if ((p.amode == AMode::Direct || p.amode == AMode::Convert) && p.kern->pack_f32_panel &&
      b.nb[0] == sizeof(float) && b.nb[1] % sizeof(float) == 0) {
    // Columns with contiguous elements: transposed P x P at a time in registers.
    p.kern->pack_f32_panel(reinterpret_cast<const float*>(row_ptr(b, j0, mat % b.ne[2], mat / b.ne[2])), b.nb[1] / sizeof(float),
                           static_cast<int>(j1 - j0), K, reinterpret_cast<float*>(dst));
    return;
  }
  std::memset(dst, 0, p.unit_bytes);  // lanes past N stay zero
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t l = j - j0;
    const float* x = b_column(b, mat, j, tmp);
    if (p.quant_panels()) {
      uint8_t* qt = thread + p.qtmp_off;
      auto* q = reinterpret_cast<int8_t*>(qt);
      auto* d = reinterpret_cast<float*>(qt + K);
      float* s = d + nb;
      p.kern->quantize_row(x, K, q, d, s);
      for (int64_t k4 = 0; k4 < K / 4; ++k4) std::memcpy(dst + (k4 * P + l) * 4, q + k4 * 4, 4);
      auto* pd = reinterpret_cast<float*>(dst + K * P);
      float* pm = pd + nb * P;
      for (int64_t i = 0; i < nb; ++i) {
        pd[i * P + l] = d[i];
        pm[i * P + l] = -static_cast<float>(p.c_offset) * s[i];
      }
    } else if (p.amode == AMode::Bf16Pairs) {
      auto* out = reinterpret_cast<uint16_t*>(dst);
      for (int64_t k = 0; k < K; ++k) out[(k / 2) * 2 * P + 2 * l + (k & 1)] = fp32_to_bf16(x[k]);
    } else {
      auto* out = reinterpret_cast<float*>(dst);
      for (int64_t k = 0; k < K; ++k) out[k * P + l] = x[k];
    }
  }
}

// ---- phase 2 --------------------------------------------------------------

// Address of dst[0, j] of matrix `mat`.
char* dst_column(const Tensor& dst, int64_t mat, int64_t j) {
  return row_ptr(dst, j, mat % dst.ne[2], mat / dst.ne[2]);
}

// Row i of an interleaved a, unpacked into the thread's scratch.
const char* unpacked_row(const Plan& p, const Tensor& a, int64_t i, uint8_t* thread) {
  const auto* group = static_cast<const uint8_t*>(a.data) + (i / kRepackRows) * kRepackRows * a.nb[1];
  uint8_t* row = thread + p.arow_off;
  unpack_row(a.type, group, p.K / traits(a.type).block_size, static_cast<int>(i % kRepackRows), row);
  return reinterpret_cast<const char*>(row);
}

const char* a_row(const Tensor& a, const Tensor& b, int64_t mat, int64_t i) {
  const int64_t i2 = mat % b.ne[2], i3 = mat / b.ne[2];
  return row_ptr(a, i, i2 / (b.ne[2] / a.ne[2]), i3 / (b.ne[3] / a.ne[3]));
}

void dot_chunk(const Plan& p, const Tensor& a, const Tensor& b, Tensor& dst, const uint8_t* packed, uint8_t* thread,
               int64_t mat, int64_t r0, int64_t r1) {
  const DotFn dot = p.kern->dot[static_cast<int>(p.kind)];
  const uint8_t* bmat = packed + mat * p.mat_bytes;
  const Gemm16Fn gemm16 = p.gemm16;
  if (gemm16 && r0 % kRepackRows == 0 && (r1 - r0) % kRepackRows == 0) {
    alignas(64) float out[kRepackRows * kGemm16WideCols];
    for (int64_t g = r0; g < r1; g += kRepackRows) {
      const auto* group = static_cast<const uint8_t*>(a.data) + g * a.nb[1];
      for (int64_t j = 0; j < p.N; j += p.gemm16_cols) {
        const int nc = static_cast<int>(std::min<int64_t>(p.gemm16_cols, p.N - j));
        gemm16(p.K, group, bmat + j * p.unit_bytes, p.unit_bytes, nc, out);
        for (int c = 0; c < nc; ++c) {
          char* col = dst_column(dst, mat, j + c) + g * dst.nb[0];
          if (dst.nb[0] == sizeof(float)) {
            std::memcpy(col, out + c * kRepackRows, kRepackRows * sizeof(float));
          } else {
            for (int r = 0; r < kRepackRows; ++r) *reinterpret_cast<float*>(col + r * dst.nb[0]) = out[c * kRepackRows + r];
          }
        }
      }
    }
    return;
  }
  if (p.kind == WKind::F16 && p.kern->dot16_f16) {
    // Short F16 rows (attention's K cache) 16 at a time: one reduction each.
    alignas(64) float out[16];
    for (; r0 + 16 <= r1; r0 += 16) {
      const auto* ar = reinterpret_cast<const uint8_t*>(a_row(a, b, mat, r0));
      for (int64_t j = 0; j < p.N; ++j) {
        p.kern->dot16_f16(p.K, ar, a.nb[1], reinterpret_cast<const float*>(bmat + j * p.unit_bytes), out);
        char* col = dst_column(dst, mat, j) + r0 * dst.nb[0];
        for (int r = 0; r < 16; ++r) *reinterpret_cast<float*>(col + r * dst.nb[0]) = out[r];
      }
    }
  }
  if (p.qdot) {
    // Columns kDotColTile at a time, so that they stay in L1 while every row
    // of the chunk (in L2) passes over them.
    for (int64_t j0 = 0; j0 < p.N; j0 += kDotColTile) {
      const int64_t j1 = std::min(p.N, j0 + kDotColTile);
      for (int64_t i = r0; i < r1; ++i) {
        const char* ar = p.repacked ? unpacked_row(p, a, i, thread) : a_row(a, b, mat, i);
        auto out = [&](int64_t j) { return reinterpret_cast<float*>(dst_column(dst, mat, j) + i * dst.nb[0]); };
        int64_t j = j0;
        if (p.qdot4) {
          for (; j + 4 <= j1; j += 4) {
            float four[4];
            p.qdot4(p.K, ar, bmat + j * p.unit_bytes, p.unit_bytes, four);
            for (int c = 0; c < 4; ++c) *out(j + c) = four[c];
          }
        }
        for (; j < j1; ++j) p.qdot(p.K, ar, bmat + j * p.unit_bytes, out(j));
      }
    }
    return;
  }
  for (int64_t i = r0; i < r1; ++i) {
    const char* ar = p.repacked ? unpacked_row(p, a, i, thread) : a_row(a, b, mat, i);
    if (p.dequant) {
      auto* row = reinterpret_cast<float*>(thread + p.arow_off);
      p.dequant(ar, row, p.K);
      ar = reinterpret_cast<const char*>(row);
    }
    for (int64_t j = 0; j < p.N; ++j)
      dot(p.K, ar, bmat + j * p.unit_bytes, reinterpret_cast<float*>(dst_column(dst, mat, j) + i * dst.nb[0]));
  }
}

void gemm_chunk(const Plan& p, const Tensor& a, const Tensor& b, Tensor& dst, const uint8_t* packed, uint8_t* thread,
                int64_t mat, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const MulMatKernels& kern = *p.kern;
  const int64_t K = p.K, nb = K / kQBlock, P = p.P, ldc = 2 * P;
  const uint8_t* bmat = packed + mat * p.mat_bytes;
  auto* c = reinterpret_cast<float*>(thread + p.ctile_off);
  uint8_t* ablock = thread + p.ablock_off;

  // Prepare the chunk's a rows once; every panel pair reuses them.
  auto* af32 = reinterpret_cast<float*>(ablock);
  uint8_t* aq = ablock;
  auto* ad = reinterpret_cast<float*>(ablock + align_up(p.row_block * K, kAlign));
  float* am = ad + align_up(p.row_block * nb * sizeof(float), kAlign) / sizeof(float);  // QuantU4
  if (p.amode == AMode::Convert) {
    for (int64_t i = r0; i < r1; ++i) {
      const char* ar = a_row(a, b, mat, i);
      float* out = af32 + (i - r0) * K;
      if (p.dequant) p.dequant(ar, out, K);
      else if (p.kind == WKind::F16) kern.f16_to_f32(ar, out, K);
      else kern.bf16_to_f32(ar, out, K);
    }
  } else if (p.amode == AMode::Quant) {
    const ExpandFn expand = p.expand_table          ? p.expand_table
                            : p.kind == WKind::Q8_0 ? kern.expand_q8_0
                                                    : kern.expand_q4_0;
    for (int64_t i = r0; i < r1; ++i)
      expand(p.repacked ? unpacked_row(p, a, i, thread) : a_row(a, b, mat, i), K, aq + (i - r0) * K,
             ad + (i - r0) * nb);
  } else if (p.amode == AMode::QuantU4 && p.expand_u4_x16 && r0 % kRepackRows == 0 && r1 % kRepackRows == 0) {
    for (int64_t g = r0; g < r1; g += kRepackRows)
      p.expand_u4_x16(static_cast<const uint8_t*>(a.data) + g * a.nb[1], K, aq + (g - r0) * K, ad + (g - r0) * nb,
                      am + (g - r0) * nb);
  } else if (p.amode == AMode::QuantU4) {
    for (int64_t i = r0; i < r1; ++i)
      p.expand_u4(p.repacked ? unpacked_row(p, a, i, thread) : a_row(a, b, mat, i), K, aq + (i - r0) * K,
                  ad + (i - r0) * nb, am + (i - r0) * nb);
  } else if (p.amode == AMode::QuantS6 && p.expand_s6_x16 && r0 % kRepackRows == 0 && r1 % kRepackRows == 0) {
    for (int64_t g = r0; g < r1; g += kRepackRows)  // ad holds 2 * nb scales a row (its region and am's)
      p.expand_s6_x16(static_cast<const uint8_t*>(a.data) + g * a.nb[1], K, aq + (g - r0) * K, ad + (g - r0) * 2 * nb);
  } else if (p.amode == AMode::QuantS6) {
    for (int64_t i = r0; i < r1; ++i)
      p.expand_s6(p.repacked ? unpacked_row(p, a, i, thread) : a_row(a, b, mat, i), K, aq + (i - r0) * K,
                  ad + (i - r0) * 2 * nb);
  }

  for (int64_t cp = c0; cp < c1; cp += 2 * P) {
    const int nv = c1 - cp > P ? 2 : 1;
    const uint8_t* panels = bmat + (cp / P) * p.unit_bytes;
    const int64_t ncols = std::min<int64_t>(nv * P, c1 - cp);
    for (int64_t rt = r0; rt < r1; rt += p.tile_rows) {
      const int mr = static_cast<int>(std::min<int64_t>(p.tile_rows, r1 - rt));
      switch (p.amode) {
        case AMode::Direct: {
          const auto* ar = reinterpret_cast<const float*>(a_row(a, b, mat, rt));
          kern.gemm_f32(mr, ar, a.nb[1] / sizeof(float), reinterpret_cast<const float*>(panels), K, nv, c);
          break;
        }
        case AMode::Convert:
          kern.gemm_f32(mr, af32 + (rt - r0) * K, K, reinterpret_cast<const float*>(panels), K, nv, c);
          break;
        case AMode::Bf16Pairs: {
          const auto* ar = reinterpret_cast<const uint16_t*>(a_row(a, b, mat, rt));
          kern.gemm_bf16(mr, ar, a.nb[1] / sizeof(uint16_t), reinterpret_cast<const uint16_t*>(panels), K, nv, c);
          break;
        }
        case AMode::Quant:
          kern.gemm_q8(mr, aq + (rt - r0) * K, ad + (rt - r0) * nb, K, panels, nv, c);
          break;
        case AMode::QuantU4:
          p.gemm_u(mr, aq + (rt - r0) * K, ad + (rt - r0) * nb, am + (rt - r0) * nb, K, panels, nv, c);
          break;
        case AMode::QuantS6:
          kern.gemm_s6(mr, aq + (rt - r0) * K, ad + (rt - r0) * 2 * nb, K, panels, nv, c);
          break;
      }
      for (int64_t l = 0; l < ncols; ++l) {
        char* col = dst_column(dst, mat, cp + l) + rt * dst.nb[0];
        for (int r = 0; r < mr; ++r) *reinterpret_cast<float*>(col + r * dst.nb[0]) = c[r * ldc + l];
      }
    }
  }
}

}  // namespace

size_t mul_mat_work_size(const Tensor& dst, int n_threads) {
  // Enough for any level the dispatch may pick between now and compute.
  size_t need = 0;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa <= best_isa()) need = std::max(need, make_plan(dst, mul_mat_kernels(isa), n_threads).total_bytes(n_threads));
  return need;
}

int64_t mul_mat_tasks(const Tensor& dst, int phase, int n_threads) {
  const Plan p = make_plan(dst, mul_mat_kernels(mul_mat_isa()), n_threads);
  if (phase == 0) return p.private_b ? 0 : std::min<int64_t>(p.n_mat * p.n_units, kPackTasksPerThread * n_threads);
  return p.n_chunks();
}

void compute_mul_mat(const ComputeParams& params, Tensor& dst, int phase) {
  const Tensor& a = *dst.src[0];
  const Tensor& b = *dst.src[1];
  const Plan p = make_plan(dst, mul_mat_kernels(mul_mat_isa()), params.n_threads);
  if (p.total_bytes(params.n_threads) > params.wsize) {
    params.errors->report(fmt::format("CPU mul_mat '{}': scratch of {} bytes is smaller than the {} needed", dst.name,
                                      params.wsize, p.total_bytes(params.n_threads)));
    return;
  }
  const Scratch s = scratch_of(params, p);
  uint8_t* thread = s.threads + params.thread * p.thread_bytes;

  if (phase == 0) {
    const Range units = split_range(p.n_mat * p.n_units, params.ith, params.nth);
    for (int64_t u = units.begin; u < units.end; ++u) {
      const int64_t mat = u / p.n_units, g = u % p.n_units;
      uint8_t* out = s.packed + mat * p.mat_bytes + g * p.unit_bytes;
      if (p.gemm) pack_panel(p, b, mat, g, out, thread);
      else pack_dot_column(p, b, mat, g, out, thread);
    }
    return;
  }

  const uint8_t* packed = s.packed;
  if (p.private_b) {
    uint8_t* own = thread + p.private_off;
    if (*params.thread_tag != params.serial) {  // this thread's first chunk of the node
      for (int64_t u = 0; u < p.n_mat * p.n_units; ++u)
        pack_dot_column(p, b, u / p.n_units, u % p.n_units, own + u * p.unit_bytes, thread);
      *params.thread_tag = params.serial;
    }
    packed = own;
  }
  const int64_t nrb = p.n_row_blocks(), ncb = p.n_col_blocks(), ch = params.ith;
  const int64_t mat = ch / (nrb * ncb), rb = ch / ncb % nrb, cb = ch % ncb;
  const int64_t r0 = rb * p.row_block, r1 = std::min(p.M, r0 + p.row_block);
  if (p.gemm) {
    const int64_t c0 = cb * p.col_block, c1 = std::min(p.N, c0 + p.col_block);
    gemm_chunk(p, a, b, dst, packed, thread, mat, r0, r1, c0, c1);
  } else {
    dot_chunk(p, a, b, dst, packed, thread, mat, r0, r1);
  }
}

// ---- parts (mul_mat_part.h) -----------------------------------------------

struct MulMatPlan {
  Plan p;
};

MulMatPart::MulMatPart(const Tensor& dst, int n_threads)
    : dst_(dst),
      plan_(std::make_shared<MulMatPlan>(MulMatPlan{make_plan(dst, mul_mat_kernels(mul_mat_isa()), n_threads, false)})) {}

size_t MulMatPart::packed_bytes() const { return plan_->p.n_mat * plan_->p.mat_bytes; }
size_t MulMatPart::thread_bytes() const { return plan_->p.thread_bytes; }
int64_t MulMatPart::pack_units() const { return plan_->p.n_mat * plan_->p.n_units; }
int64_t MulMatPart::chunks() const { return plan_->p.n_chunks(); }

void MulMatPart::pack(int64_t u, uint8_t* packed, uint8_t* thread) const {
  const Plan& p = plan_->p;
  const int64_t mat = u / p.n_units, g = u % p.n_units;
  uint8_t* out = packed + mat * p.mat_bytes + g * p.unit_bytes;
  if (p.gemm) pack_panel(p, *dst_.src[1], mat, g, out, thread);
  else pack_dot_column(p, *dst_.src[1], mat, g, out, thread);
}

void MulMatPart::chunk(int64_t ch, const uint8_t* packed, uint8_t* thread) const {
  const Plan& p = plan_->p;
  const Tensor& a = *dst_.src[0];
  const Tensor& b = *dst_.src[1];
  auto& dst = const_cast<Tensor&>(dst_);
  const int64_t nrb = p.n_row_blocks(), ncb = p.n_col_blocks();
  const int64_t mat = ch / (nrb * ncb), rb = ch / ncb % nrb, cb = ch % ncb;
  const int64_t r0 = rb * p.row_block, r1 = std::min(p.M, r0 + p.row_block);
  if (p.gemm) gemm_chunk(p, a, b, dst, packed, thread, mat, r0, r1, cb * p.col_block, std::min(p.N, (cb + 1) * p.col_block));
  else dot_chunk(p, a, b, dst, packed, thread, mat, r0, r1);
}

MulMatPartBounds mul_mat_part_bounds(const Tensor& a, int64_t max_n, int n_threads) {
  MulMatPartBounds bounds;
  Tensor a2, b, dst;  // parts never read interleaved weights (no buffer)
  a2.type = a.type;
  a2.ne = {a.ne[0], a.ne[1], 1, 1};
  set_contiguous_strides(a2);
  b.ne = {a.ne[0], 1, 1, 1};
  dst.ne = {a.ne[1], 1, 1, 1};
  dst.src[0] = &a2;
  dst.src[1] = &b;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    if (isa > best_isa()) continue;
    const MulMatKernels& kern = mul_mat_kernels(isa);
    for (int64_t n : {int64_t{1}, std::max<int64_t>(max_n, 1)}) {
      b.ne[1] = dst.ne[1] = n;
      set_contiguous_strides(b);
      set_contiguous_strides(dst);
      const Plan p = make_plan(dst, kern, n_threads, false);
      bounds.thread_bytes = std::max(bounds.thread_bytes, p.thread_bytes);
      // Per column: the dot path's aligned column, or a gemm panel's share
      // (quantized weights on the f32 gemm pack b as f32, more than their
      // dot path's column).
      bounds.column_bytes =
          std::max(bounds.column_bytes, p.gemm ? align_up(p.unit_bytes / p.P, kAlign) : p.unit_bytes);
      bounds.spare_columns = std::max<int64_t>(bounds.spare_columns, kern.panel);
    }
  }
  return bounds;
}

}  // namespace loom::cpu
