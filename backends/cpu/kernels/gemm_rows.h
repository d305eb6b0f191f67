// The row dispatch every ISA's gemm shares. A micro-kernel is a template on
// its row count MR and panel count NV (1 or 2), so that its MR x NV
// accumulators stay in registers; a call covers mr <= kRows rows of a and nv
// panels of b, known only at run time, and this picks the instance compiled
// for them.
//
// Each ISA file passes a lambda of its own, so every instance belongs to that
// file alone (a lambda's type is unique) and is compiled with that file's
// target flags: the linker cannot pick an AVX-512 copy for an AVX2 caller.
// This function and the lambdas are always inlined, so the dispatch leaves
// no trace and the compiler inlines or calls each micro-kernel exactly as it
// would for a hand-written chain of ifs.
#pragma once

namespace loom::cpu {

// Calls tile.template operator()<mr, nv>() for 1 <= mr <= kRows and nv 1 or
// 2 (any other nv counts as 1); mr outside 1..kRows does nothing.
template <int kRows, class Tile>
[[gnu::always_inline]] inline void gemm_rows(int mr, int nv, const Tile& tile) {
  if constexpr (kRows > 0) {
    if (mr != kRows) return gemm_rows<kRows - 1>(mr, nv, tile);
    if (nv == 2) tile.template operator()<kRows, 2>();
    else tile.template operator()<kRows, 1>();
  }
}

}  // namespace loom::cpu
