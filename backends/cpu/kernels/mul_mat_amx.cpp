// AMX int8 tiles (TDPBSSD / TDPBSUD / TDPBUSD) for the AVX-512 level's
// integer kernels, on CPUs that have them.
//
// 1. gemm16 for Q8_0 and Q4_0 rows interleaved in CPU_Repack (repack.h), up
// to 16 b columns a call. A group's block, v[t][r] = row r's bytes
// 4t..4t+3, is the B-tile layout of the int8 tile products: K/4 rows of 16
// columns x 4 bytes. So a Q8_0 block is one B tile (8 rows of 64 bytes)
// loaded where it lies; Q4_0's nibbles are split into one first (low nibbles
// are elements 4t.., high ones 16 + 4t..). The A tile is the block's 32 int8
// of each b column (row format, vec.h), loaded b_stride apart. Q8_0 is
// signed x signed (no offset, so the columns' m term is not added); Q4_0 is
// signed activations x unsigned nibbles, corrected by m = -8 * d * sum(q) as
// on every level.
//
// 2. The gemm path's micro-kernels gemm_q8, gemm_u4 (and u5) and gemm_s6
// (vec.h), 16 rows a call: the expanded a rows are the A tile (16 rows of a
// block's 32 bytes, k apart; gemm_s6: of each 16-element half), and a q8
// panel's block is already a B tile (int8[k/4][16][4]). q8 and u4 weights
// are unsigned (TDPBUSD), s6 ones signed (TDPBSSD).
//
// Each block's (or half block's) C tile goes to memory and is scaled in
// AVX-512 float as the VNNI kernels scale their integer sums; two C tiles
// alternate so that one block's product runs while the one before is scaled.
//
// Linux hands out the tile data state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM); amx_int8_usable() asks once. Each thread loads a
// tile configuration when the shape it needs changes: no other code here
// touches the tiles.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <type_traits>
#include <utility>

#include "../cpu_features.h"
#include "quant_dot.h"

namespace loom::cpu {
namespace {

constexpr int kAmxRows = 16;  // a rows per gemm micro-kernel call: one tile
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0 and 1: C (rows x 16 int32), for even and odd blocks; 2 and 3: A
// (rows x a_bytes int8); 4 and 5: B (a_bytes / 4 rows of 64 bytes).
void configure(int rows, int a_bytes) {
  thread_local int configured = 0;
  const int key = rows | a_bytes << 8;
  if (configured == key) return;
  TileConfig c;
  for (int t : {0, 1}) c.rows[t] = static_cast<uint8_t>(rows), c.colsb[t] = 64;
  for (int t : {2, 3}) c.rows[t] = static_cast<uint8_t>(rows), c.colsb[t] = static_cast<uint16_t>(a_bytes);
  for (int t : {4, 5}) c.rows[t] = static_cast<uint8_t>(a_bytes / 4), c.colsb[t] = 64;
  // GCC 12 does not see that ldtilecfg reads all 64 bytes and drops the
  // stores above without a compiler barrier.
  __asm__ __volatile__("" : : "r"(&c) : "memory");
  _tile_loadconfig(&c);
  configured = key;
}

// Which operands of a tile product are signed: both, A only, B only.
enum class Signs { Both, A, B };

// C tile tc = A tile ta (rows a_stride bytes apart from a_ptr) times B tile
// tb (64-byte rows from b_ptr). A macro: GCC's tile intrinsics paste the
// tile number into the instruction's text, so it must be a literal.
#define LOOM_AMX_PRODUCT(signs, tc, ta, tb, a_ptr, a_stride, b_ptr) \
  do {                                                              \
    _tile_zero(tc);                                                 \
    _tile_loadd(ta, (a_ptr), static_cast<long>(a_stride));          \
    _tile_loadd(tb, (b_ptr), 64);                                   \
    if constexpr ((signs) == Signs::Both) _tile_dpbssd(tc, ta, tb); \
    else if constexpr ((signs) == Signs::A) _tile_dpbsud(tc, ta, tb); \
    else _tile_dpbusd(tc, ta, tb);                                  \
  } while (0)

template <bool Q4>
struct Block {
  static constexpr int kNV = Q4 ? 4 : 8;
  static constexpr size_t kBytes = 16 * sizeof(uint16_t) + kNV * 64;
};

// Q4_0's B tiles of blocks [b, b + n), nibbles split (low nibbles are
// elements 4t.., high ones 16 + 4t..), 512 bytes each. The kernel splits a
// pair of blocks one step ahead: a tile load right after the stores of its
// bytes would wait for them to retire.
void split_nibbles(const uint8_t* group, int64_t b, int64_t n, uint8_t* out) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* v = group + (b + i) * Block<true>::kBytes + 32;
    uint8_t* o = out + i * 512;
    for (int t = 0; t < 4; ++t) {
      const __m512i w = _mm512_loadu_si512(v + t * 64);
      _mm512_store_si512(o + t * 64, _mm512_and_si512(w, low));
      _mm512_store_si512(o + (t + 4) * 64, _mm512_and_si512(_mm512_srli_epi16(w, 4), low));
    }
  }
}

template <int NC, bool Q4>
inline void scale_block(const int32_t* c, const uint8_t* group, int64_t b, int64_t nb, const uint8_t* b_cols,
                        size_t b_stride, int64_t k, __m512* acc) {
  const __m512 da = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + b * Block<Q4>::kBytes)));
#pragma GCC unroll 16
  for (int col = 0; col < NC; ++col) {
    const auto* d = reinterpret_cast<const float*>(b_cols + col * b_stride + k);
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(c + col * 16));
    const __m512 t = Q4 ? _mm512_fmadd_ps(isum, _mm512_set1_ps(d[b]), _mm512_set1_ps(d[nb + b]))
                        : _mm512_mul_ps(isum, _mm512_set1_ps(d[b]));
    acc[col] = _mm512_fmadd_ps(t, da, acc[col]);
  }
}

template <int NC, bool Q4>
void gemm16_amx_cols(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, float* out) {
  const int64_t nb = k / kQBlock;
  configure(NC, 32);
  alignas(64) int32_t c[2][16 * 16];
  alignas(64) uint8_t split[2][2 * 512];  // Q4_0: the B tiles of block pairs, alternately
  if constexpr (Q4) split_nibbles(group, 0, std::min<int64_t>(nb, 2), split[0]);
  // Activations are signed; Q4_0 nibbles unsigned, Q8_0 bytes signed.
  constexpr Signs kSigns = Q4 ? Signs::A : Signs::Both;
  const auto b_tile = [&](int64_t b) -> const uint8_t* {
    return Q4 ? split[(b >> 1) & 1] + (b & 1) * 512 : group + b * Block<Q4>::kBytes + 32;
  };
  __m512 acc[NC];
#pragma GCC unroll 16
  for (int col = 0; col < NC; ++col) acc[col] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    LOOM_AMX_PRODUCT(kSigns, 0, 2, 4, b_cols + b * kQBlock, b_stride, b_tile(b));
    LOOM_AMX_PRODUCT(kSigns, 1, 3, 5, b_cols + (b + 1) * kQBlock, b_stride, b_tile(b + 1));
    if constexpr (Q4)
      if (b + 2 < nb) split_nibbles(group, b + 2, std::min<int64_t>(nb - b - 2, 2), split[((b >> 1) + 1) & 1]);
    _tile_stored(0, c[0], 64);
    scale_block<NC, Q4>(c[0], group, b, nb, b_cols, b_stride, k, acc);
    _tile_stored(1, c[1], 64);
    scale_block<NC, Q4>(c[1], group, b + 1, nb, b_cols, b_stride, k, acc);
  }
  if (b < nb) {
    LOOM_AMX_PRODUCT(kSigns, 0, 2, 4, b_cols + b * kQBlock, b_stride, b_tile(b));
    _tile_stored(0, c[0], 64);
    scale_block<NC, Q4>(c[0], group, b, nb, b_cols, b_stride, k, acc);
  }
#pragma GCC unroll 16
  for (int col = 0; col < NC; ++col) _mm512_storeu_ps(out + col * 16, acc[col]);
}
template <bool Q4, int... NC>
void gemm16_amx(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out,
                std::integer_sequence<int, NC...>) {
  using Fn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, float*);
  static constexpr Fn kByCols[] = {gemm16_amx_cols<NC + 1, Q4>...};
  kByCols[ncols - 1](k, group, b_cols, b_stride, out);
}

void gemm16_q8_0_amx(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  gemm16_amx<false>(k, group, b_cols, b_stride, ncols, out, std::make_integer_sequence<int, kGemm16WideCols>{});
}
void gemm16_q4_0_amx(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, int ncols, float* out) {
  gemm16_amx<true>(k, group, b_cols, b_stride, ncols, out, std::make_integer_sequence<int, kGemm16WideCols>{});
}

// ---- 2. gemm path micro-kernels ----------------------------------------------

enum class IntGemm { Q8, U4, S6 };

// acc[r] += the C tile's row r (16 columns of one panel) scaled: q8 as
// ad * (d * dot + m), u4 as ad * d * dot + am * m, s6 as ad16 * d * dot.
template <int MR, IntGemm G>
inline void scale_rows(const int32_t* ct, __m512 dv, __m512 mv, const float* ad, const float* am, int64_t stride,
                       __m512* acc) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(ct + r * 16));
    if constexpr (G == IntGemm::Q8) {
      acc[r] = _mm512_fmadd_ps(_mm512_fmadd_ps(dot, dv, mv), _mm512_set1_ps(ad[r * stride]), acc[r]);
    } else if constexpr (G == IntGemm::U4) {
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dot, dv), _mm512_set1_ps(ad[r * stride]), acc[r]);
      acc[r] = _mm512_fmadd_ps(mv, _mm512_set1_ps(am[r * stride]), acc[r]);
    } else {
      acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dot, dv), _mm512_set1_ps(ad[r * stride]), acc[r]);
    }
  }
}

// c[r][v * 16 + l] for MR rows and nv panels, one panel at a time (its MR
// accumulators in registers).
template <int MR, IntGemm G>
void gemm_amx_tile(const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels, int nv,
                   float* c) {
  const int64_t nb = k / kQBlock;
  configure(MR, G == IntGemm::S6 ? 16 : 32);
  // Activations are signed; s6 weights signed, q8 and u4 ones unsigned.
  constexpr Signs kSigns = G == IntGemm::S6 ? Signs::Both : Signs::B;
  alignas(64) int32_t ct[2][16 * 16];
  for (int v = 0; v < nv; ++v) {
    const uint8_t* bq = panels + v * q8_panel_bytes(k, 16);
    const float* bd = reinterpret_cast<const float*>(bq + k * 16);
    const float* bm = bd + nb * 16;
    __m512 acc[MR];
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_ps();
    if constexpr (G == IntGemm::S6) {
      // Each block as its two halves of 16 (a scale each): tiles 0 and 1.
      for (int64_t b = 0; b < nb; ++b) {
        LOOM_AMX_PRODUCT(kSigns, 0, 2, 4, aq + b * 32, k, bq + b * 512);
        LOOM_AMX_PRODUCT(kSigns, 1, 3, 5, aq + b * 32 + 16, k, bq + b * 512 + 256);
        const __m512 dv = _mm512_loadu_ps(bd + b * 16);
        _tile_stored(0, ct[0], 64);
        scale_rows<MR, G>(ct[0], dv, dv, ad + 2 * b, nullptr, 2 * nb, acc);
        _tile_stored(1, ct[1], 64);
        scale_rows<MR, G>(ct[1], dv, dv, ad + 2 * b + 1, nullptr, 2 * nb, acc);
      }
    } else {
      int64_t b = 0;
      for (; b + 2 <= nb; b += 2) {
        LOOM_AMX_PRODUCT(kSigns, 0, 2, 4, aq + b * 32, k, bq + b * 512);
        LOOM_AMX_PRODUCT(kSigns, 1, 3, 5, aq + (b + 1) * 32, k, bq + (b + 1) * 512);
        _tile_stored(0, ct[0], 64);
        scale_rows<MR, G>(ct[0], _mm512_loadu_ps(bd + b * 16), _mm512_loadu_ps(bm + b * 16), ad + b, am + b, nb,
                          acc);
        _tile_stored(1, ct[1], 64);
        scale_rows<MR, G>(ct[1], _mm512_loadu_ps(bd + (b + 1) * 16), _mm512_loadu_ps(bm + (b + 1) * 16),
                          ad + b + 1, am + b + 1, nb, acc);
      }
      if (b < nb) {
        LOOM_AMX_PRODUCT(kSigns, 0, 2, 4, aq + b * 32, k, bq + b * 512);
        _tile_stored(0, ct[0], 64);
        scale_rows<MR, G>(ct[0], _mm512_loadu_ps(bd + b * 16), _mm512_loadu_ps(bm + b * 16), ad + b, am + b, nb,
                          acc);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) _mm512_storeu_ps(c + r * 32 + v * 16, acc[r]);
  }
}

template <IntGemm G, int... MR>
void gemm_amx(int mr, const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels, int nv,
              float* c, std::integer_sequence<int, MR...>) {
  using Fn = void (*)(const uint8_t*, const float*, const float*, int64_t, const uint8_t*, int, float*);
  static constexpr Fn kByRows[] = {gemm_amx_tile<MR + 1, G>...};
  kByRows[mr - 1](aq, ad, am, k, panels, nv == 2 ? 2 : 1, c);
}

void gemm_q8_amx(int mr, const uint8_t* aq, const float* ad, int64_t k, const uint8_t* panels, int nv, float* c) {
  // am is read only by U4; ad stands in for it so that no offset is added to null.
  gemm_amx<IntGemm::Q8>(mr, aq, ad, ad, k, panels, nv, c, std::make_integer_sequence<int, kAmxRows>{});
}
void gemm_u4_amx(int mr, const uint8_t* aq, const float* ad, const float* am, int64_t k, const uint8_t* panels,
                 int nv, float* c) {
  gemm_amx<IntGemm::U4>(mr, aq, ad, am, k, panels, nv, c, std::make_integer_sequence<int, kAmxRows>{});
}
void gemm_s6_amx(int mr, const uint8_t* aq, const float* ad16, int64_t k, const uint8_t* panels, int nv, float* c) {
  gemm_amx<IntGemm::S6>(mr, aq, ad16, ad16, k, panels, nv, c, std::make_integer_sequence<int, kAmxRows>{});
}

#undef LOOM_AMX_PRODUCT

}  // namespace

void use_amx_int_gemm(MulMatKernels& t) {
  t.rows_q8 = t.rows_u4 = t.rows_s6 = kAmxRows;
  t.gemm_q8 = gemm_q8_amx;
  t.gemm_u4 = t.gemm_u5 = gemm_u4_amx;  // 5-bit a cannot overflow the int32 sums either
  t.gemm_s6 = gemm_s6_amx;
}

bool amx_int8_usable() {
  static const bool usable = [] {
    const char* v = std::getenv("LOOM_CPU_AMX");
    if (v && std::strcmp(v, "0") == 0) return false;
    return cpu_features().amx_int8 && syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

Gemm16Fn quant_gemm16_amx(WKind kind) {
  return kind == WKind::Q8_0 ? gemm16_q8_0_amx : kind == WKind::Q4_0 ? gemm16_q4_0_amx : nullptr;
}

}  // namespace loom::cpu
