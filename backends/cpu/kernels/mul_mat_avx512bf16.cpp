// BF16 weights on CPUs with AVX512_BF16: vdpbf16ps multiplies pairs of bf16
// (a row's elements 2i, 2i+1, broadcast) with 16 columns of b packed as bf16
// pairs, accumulating in f32: twice the work of an f32 FMA per instruction
// and half the bytes of a. b is rounded to bf16 when it is packed.
// GCC 12 reports the deliberately undefined lanes inside its own AVX-512
// intrinsics as uninitialized (GCC bug 105593); that says nothing about this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstring>

#include "gemm_rows.h"
#include "vec.h"

namespace loom::cpu {
namespace {

constexpr int kP = 16;

template <int MR, int NV>
void gemm_bf16_tile(const uint16_t* a, int64_t lda, const uint16_t* panels, int64_t k, float* c) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  const uint16_t* b0 = panels;
  const uint16_t* b1 = panels + k * kP;
  for (int64_t i = 0; i < k / 2; ++i) {
    __m512bh bv[NV];
    bv[0] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b0 + i * 2 * kP));
    if constexpr (NV == 2) bv[1] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(b1 + i * 2 * kP));
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, a + r * lda + 2 * i, sizeof pair);
      const auto av = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(c + r * 2 * kP + v * kP, acc[r][v]);
}

}  // namespace

// Rows per call: the AVX-512 table's rows_f32 (8).
void gemm_bf16_avx512bf16(int mr, const uint16_t* a, int64_t lda, const uint16_t* panels, int64_t k, int nv,
                          float* c) {
  gemm_rows<8>(mr, nv, [&]<int MR, int NV>() __attribute__((always_inline)) {
    gemm_bf16_tile<MR, NV>(a, lda, panels, k, c);
  });
}

}  // namespace loom::cpu
