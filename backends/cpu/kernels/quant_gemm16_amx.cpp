// AMX (TDPBSSD / TDPBSUD) for Q8_0 and Q4_0 rows interleaved in CPU_Repack
// (repack.h), up to 16 b columns a call. A group's block, v[t][r] = row r's
// bytes 4t..4t+3, is the B-tile layout of the int8 tile products: K/4 rows
// of 16 columns x 4 bytes. So a Q8_0 block is one B tile (8 rows of 64
// bytes) loaded where it lies; Q4_0's nibbles are split into one first (low
// nibbles are elements 4t.., high ones 16 + 4t..). The A tile is the block's
// 32 int8 of each b column (row format, vec.h), loaded b_stride apart. Per
// block the C tile (ncols x 16 int32) goes to memory and is scaled in float
// as the AVX-512 kernel scales its integer sums: Q8_0 is signed x signed
// (no offset, so the columns' m term is not added); Q4_0 is signed
// activations x unsigned nibbles, corrected by m = -8 * d * sum(q) as on
// every level. Two C tiles alternate so that a block's product runs while the
// block before is scaled.
//
// Linux hands out the tile data state only on request (arch_prctl
// ARCH_REQ_XCOMP_PERM); amx_int8_usable() asks once. Each thread loads its
// tile configuration on first use and keeps it: no other code here touches
// the tiles.
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

constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0 and 1: C (ncols x 16 int32) of even and odd blocks; 2 and 3: A
// (ncols x 32 int8); 4 and 5: B (8 x 64 bytes).
void configure(int ncols) {
  thread_local int configured = 0;
  if (configured == ncols) return;
  TileConfig c;
  for (int t : {0, 1}) c.rows[t] = static_cast<uint8_t>(ncols), c.colsb[t] = 64;
  for (int t : {2, 3}) c.rows[t] = static_cast<uint8_t>(ncols), c.colsb[t] = 32;
  for (int t : {4, 5}) c.rows[t] = 8, c.colsb[t] = 64;
  // GCC 12 does not see that ldtilecfg reads all 64 bytes and drops the
  // stores above without a compiler barrier.
  __asm__ __volatile__("" : : "r"(&c) : "memory");
  _tile_loadconfig(&c);
  configured = ncols;
}

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

// C tile tc = the A tile ta (block b of the columns) times the B tile tb
// (block b of the rows). A macro: GCC's tile intrinsics paste the tile
// number into the instruction's text, so it must be a literal.
#define LOOM_AMX_PRODUCT(tc, ta, tb, b)                                                \
  do {                                                                                 \
    _tile_zero(tc);                                                                    \
    _tile_loadd(ta, b_cols + (b) * kQBlock, static_cast<long>(b_stride));              \
    _tile_loadd(tb, Q4 ? split[((b) >> 1) & 1] + ((b) & 1) * 512 : group + (b) * Block<Q4>::kBytes + 32, 64); \
    if constexpr (Q4) _tile_dpbsud(tc, ta, tb);                                        \
    else _tile_dpbssd(tc, ta, tb);                                                     \
  } while (0)

template <int NC, bool Q4>
void gemm16_amx_cols(int64_t k, const uint8_t* group, const uint8_t* b_cols, size_t b_stride, float* out) {
  const int64_t nb = k / kQBlock;
  configure(NC);
  alignas(64) int32_t c[2][16 * 16];
  alignas(64) uint8_t split[2][2 * 512];  // Q4_0: the B tiles of block pairs, alternately
  if constexpr (Q4) split_nibbles(group, 0, std::min<int64_t>(nb, 2), split[0]);
  __m512 acc[NC];
#pragma GCC unroll 16
  for (int col = 0; col < NC; ++col) acc[col] = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    LOOM_AMX_PRODUCT(0, 2, 4, b);
    LOOM_AMX_PRODUCT(1, 3, 5, b + 1);
    if constexpr (Q4)
      if (b + 2 < nb) split_nibbles(group, b + 2, std::min<int64_t>(nb - b - 2, 2), split[((b >> 1) + 1) & 1]);
    _tile_stored(0, c[0], 64);
    scale_block<NC, Q4>(c[0], group, b, nb, b_cols, b_stride, k, acc);
    _tile_stored(1, c[1], 64);
    scale_block<NC, Q4>(c[1], group, b + 1, nb, b_cols, b_stride, k, acc);
  }
  if (b < nb) {
    LOOM_AMX_PRODUCT(0, 2, 4, b);
    _tile_stored(0, c[0], 64);
    scale_block<NC, Q4>(c[0], group, b, nb, b_cols, b_stride, k, acc);
  }
#pragma GCC unroll 16
  for (int col = 0; col < NC; ++col) _mm512_storeu_ps(out + col * 16, acc[col]);
}
#undef LOOM_AMX_PRODUCT

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

}  // namespace

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
