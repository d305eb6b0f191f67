// flash_attn_ext on the CPU: attention with an online softmax over tiles of
// KV rows, so the logits of a query never exist as a whole (ops.h).
//
// Work unit: one KV head of one batch and a block of query rows. Its
// "vectors" are every query head sharing that KV head (grouped-query
// attention) times the block's rows (up to kVectorsPerUnit), so each K and V
// row is read once per unit however many query heads use it. Per tile of
// kTile KV rows (tiles every vector's mask closes are skipped):
//   1. scores s = q . K_j. On a level with an f32 gemm micro-kernel (AVX2,
//      AVX-512), float K and, for units of kDequantMinVectors or more,
//      block-quantized K are met as one small gemm: the tile's K rows (in
//      f32: read in place, or converted) are its rows, and the unit's q
//      vectors, packed into the kernel's panels once per unit, its columns.
//      Otherwise (the scalar level, single-token decode of quantized K)
//      each open row takes a dot: the float dots, or mul_mat's integer dots
//      with q quantized once per unit to q8 rows;
//   2. per vector, s = softcap(scale s) + slope mask; the running max m, sum
//      l and accumulator rescale when the max grows; p = exp(s - m);
//   3. acc += p V over the tile: a gemm of p with the tile's V rows in f32
//      (read in place by gemm_f32_rows, closed rows as zeros), or one axpy
//      per open row, V converted to f32 once for all vectors.
// The next tile's K and V rows are prefetched: a unit reads one head's
// slice of each cache row, a stride the hardware prefetchers do not follow.
// The output is acc / l (zeros where every row was masked). For few units
// (single-token decode), each unit's KV rows are split into chunks whose
// (m, l, acc) go to scratch, and a second phase merges them.
//
// QuantPath (vec.h) applies as in mul_mat: IntDot keeps quantized K on the
// integer dots, Dequant sends it to the tile gemm.
// The ISA follows mul_mat's level (mul_mat_isa(): LOOM_CPU_ISA, tests): the
// scalar tables are the reference the vector levels are tested against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "kernels.h"
#include "loom/align.h"
#include "loom/error.h"
#include "quant_dot.h"
#include "row_ops.h"
#include "vec.h"

namespace loom::cpu {
namespace {

constexpr int64_t kTile = 32;          // KV rows per tile
// Query vectors a unit aims for (heads of a group x rows): more amortize the
// conversion and packing of each K/V tile over more rows of the gemm.
constexpr int64_t kVectorsPerUnit = 64;
// Fewest vectors a unit needs before a block-quantized K is dequantized for
// the tile gemm rather than met by q8 rows on the integer dots: decode of a
// group of fewer than 8 heads stays on the dots. At 8 (TinyLlama's 32 over
// 4) the gemm is faster: loom-bench-attention, one token, 2 threads, q8_0
// 305 -> 196 us at depth 512 and 2368 -> 1297 us at depth 4096.
constexpr int64_t kDequantMinVectors = 8;
constexpr int64_t kMinChunkRows = 256;   // fewest KV rows per chunk when a unit's rows are split
constexpr size_t kAlign = 64;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// How q meets a K row.
enum class KDot {
  Float,    // kern.dot[F32/F16/BF16] with q in f32
  Q8,       // kern.dot[Q8_0/Q4_0] with q as a q8 row, m = -C * d * sum(q)
  Quant,    // quant_dot(isa, type) with q as a q8 row (Q8_32 activations)
  Dequant,  // the row to f32, then the f32 dot
};

struct Plan {
  const MulMatKernels* kern = nullptr;
  const RowOps* ops = nullptr;
  int64_t D = 0, Dv = 0, n_q = 0, H = 0, Hkv = 0, B = 0, Bk = 0, n_kv = 0, G = 0;
  int64_t qb = 1, n_qblocks = 0, units = 0, chunks = 1, nvec = 0;
  KDot kdot = KDot::Float;
  DotFn dot = nullptr;          // K row . q (q in the format kdot says)
  int c_offset = 0;             // KDot::Q8: the kind's C
  ToFloatFn k_to_f32 = nullptr; // KDot::Dequant
  ToFloatFn v_to_f32 = nullptr; // V rows that are not f32
  size_t q8_bytes = 0;          // one quantized q vector
  size_t k_row_bytes = 0, v_row_bytes = 0;  // one head's K row, V row
  // Per-thread scratch offsets (bytes) and size.
  size_t qf_off = 0, qq_off = 0, s_off = 0, acc_off = 0, ml_off = 0, krow_off = 0, vrow_off = 0, live_off = 0;
  size_t mrow_off = 0, slope_off = 0, merge_off = 0;
  size_t mtile_off = 0, mtptr_off = 0;  // each vector's mask over the tile, in f32
  // Tile gemm (float K on a level with an f32 micro-kernel): the unit's q
  // vectors packed into panels of P columns; K and V tiles as f32 rows.
  bool gemm = false;
  int P = 0;
  int64_t q_panels = 0;  // panels of the unit's vectors
  int64_t vf_stride = 0; // floats between the V tile's rows (a multiple of 2P)
  size_t kf_off = 0, qpanel_off = 0, vf_off = 0, c_off = 0;
  size_t thread_bytes = 0;
  size_t partial_floats = 0;  // one (unit, chunk): nvec * (Dv + 2)
  size_t partials_off = 0;    // after every thread's area
  size_t total_bytes = 0;
};

WKind float_kind(DType t) { return t == DType::F16 ? WKind::F16 : t == DType::BF16 ? WKind::BF16 : WKind::F32; }

Plan make_plan(const Tensor& dst, int n_threads) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  Plan p;
  p.kern = &mul_mat_kernels(mul_mat_isa());
  p.ops = &row_ops();
  p.D = q.ne[0];
  p.Dv = v.ne[0];
  p.n_q = q.ne[1];
  p.H = q.ne[2];
  p.B = q.ne[3];
  p.n_kv = k.ne[1];
  p.Hkv = k.ne[2];
  p.Bk = k.ne[3];
  p.G = p.H / p.Hkv;
  p.qb = std::clamp<int64_t>(kVectorsPerUnit / p.G, 1, std::max<int64_t>(p.n_q, 1));
  p.n_qblocks = (p.n_q + p.qb - 1) / p.qb;
  p.units = p.B * p.Hkv * p.n_qblocks;
  p.nvec = p.G * p.qb;
  // Too few units to keep every thread busy: split the KV rows too.
  if (p.units < 2 * n_threads && p.n_kv >= 2 * kMinChunkRows)
    p.chunks = std::clamp<int64_t>((2 * n_threads + p.units - 1) / p.units, 1, p.n_kv / kMinChunkRows);

  const DType kt = k.type;
  const bool level_gemm = p.kern->gemm_f32 && p.kern->panel > 0 && kTile % p.kern->panel == 0;
  const QuantPath path = mul_mat_quant_path();
  const bool dequant_k = traits(kt).is_quantized && level_gemm && path != QuantPath::IntDot &&
                         (path == QuantPath::Dequant || p.nvec >= kDequantMinVectors);
  if (kt == DType::F32 || kt == DType::F16 || kt == DType::BF16) {
    p.kdot = KDot::Float;
    p.dot = p.kern->dot[static_cast<int>(float_kind(kt))];
  } else if (dequant_k) {
    p.kdot = KDot::Dequant;
    p.dot = p.kern->dot[static_cast<int>(WKind::F32)];
    p.k_to_f32 = dequant_row_fn(kt);
  } else if (kt == DType::Q8_0 || kt == DType::Q4_0) {
    p.kdot = KDot::Q8;
    p.dot = p.kern->dot[static_cast<int>(kt == DType::Q8_0 ? WKind::Q8_0 : WKind::Q4_0)];
    p.c_offset = kt == DType::Q8_0 ? p.kern->q8_0_offset : p.kern->q4_0_offset;
  } else if (traits(kt).block_size == kQBlock && act_format(kt) == ActFormat::Q8_32 &&
             (p.dot = quant_dot(p.kern->isa, kt)) != nullptr) {
    p.kdot = KDot::Quant;
  } else {
    p.kdot = KDot::Dequant;
    p.dot = p.kern->dot[static_cast<int>(WKind::F32)];
    p.k_to_f32 = dequant_row_fn(kt);
  }
  if (v.type == DType::F16) p.v_to_f32 = p.kern->f16_to_f32;
  else if (v.type == DType::BF16) p.v_to_f32 = p.kern->bf16_to_f32;
  else if (v.type != DType::F32) p.v_to_f32 = dequant_row_fn(v.type);

  const auto floats = [](int64_t n) { return align_up(static_cast<size_t>(n) * sizeof(float), kAlign); };
  p.q8_bytes = align_up(q8_row_bytes(p.D), kAlign);
  p.k_row_bytes = row_size(kt, p.D);
  p.v_row_bytes = row_size(v.type, p.Dv);
  p.gemm = (p.kdot == KDot::Float || p.kdot == KDot::Dequant) && level_gemm && p.kern->gemm_f32_rows;
  size_t off = 0;
  p.qf_off = off, off += static_cast<size_t>(p.nvec) * floats(p.D);
  p.qq_off = off, off += p.kdot == KDot::Q8 || p.kdot == KDot::Quant ? p.nvec * p.q8_bytes : 0;
  p.s_off = off, off += static_cast<size_t>(p.nvec) * floats(kTile);
  p.acc_off = off, off += static_cast<size_t>(p.nvec) * floats(p.Dv);
  p.ml_off = off, off += floats(2 * p.nvec);
  // A K row in f32 and a V row in f32 for the row-at-a-time path (the gemm
  // path converts whole tiles).
  p.krow_off = off, off += !p.gemm && p.kdot == KDot::Dequant ? floats(p.D) : 0;
  p.vrow_off = off, off += !p.gemm && p.v_to_f32 ? floats(p.Dv) : 0;
  p.live_off = off, off += align_up(kTile, kAlign);
  p.mtile_off = off, off += dst.src[3] && dst.src[3]->type == DType::F16 ? static_cast<size_t>(p.nvec) * floats(kTile) : 0;
  p.mtptr_off = off, off += align_up(p.nvec * sizeof(const float*), kAlign);
  p.mrow_off = off, off += align_up(p.nvec * sizeof(const char*), kAlign);
  p.slope_off = off, off += floats(p.nvec);
  p.merge_off = off, off += floats(p.Dv);
  if (p.gemm) {
    p.P = p.kern->panel;
    p.q_panels = (p.nvec + p.P - 1) / p.P;
    p.vf_stride = (p.Dv + 2 * p.P - 1) / (2 * p.P) * (2 * p.P);
    p.kf_off = off, off += k.type == DType::F32 ? 0 : floats(kTile * p.D);
    p.qpanel_off = off, off += floats(p.q_panels * p.P * p.D);
    p.vf_off = off, off += floats(kTile * p.vf_stride);
    p.c_off = off, off += floats(p.kern->rows_f32 * 2 * p.P);
  }
  p.thread_bytes = off;
  p.partial_floats = static_cast<size_t>(p.nvec) * (p.Dv + 2);
  p.partials_off = n_threads * p.thread_bytes;
  // kAlign: room to align the start of the scratch (aligned_work).
  p.total_bytes = kAlign + p.partials_off + (p.chunks > 1 ? p.units * p.chunks * p.partial_floats * sizeof(float) : 0);
  return p;
}

// The vectors of one unit: query row i0 + vi / G, head hk * G + vi % G.
struct Unit {
  int64_t b, hk, i0, rows;
  int64_t nvec(const Plan& p) const { return rows * p.G; }
  int64_t row(const Plan& p, int64_t vi) const { return i0 + vi / p.G; }
  int64_t head(const Plan& p, int64_t vi) const { return hk * p.G + vi % p.G; }
};

Unit unit_of(const Plan& p, int64_t u) {
  const int64_t qblock = u % p.n_qblocks, hk = u / p.n_qblocks % p.Hkv, b = u / (p.n_qblocks * p.Hkv);
  const int64_t i0 = qblock * p.qb;
  return {b, hk, i0, std::min(p.qb, p.n_q - i0)};
}

// Columns [0, ncols) of a panel of P: out[i * P + l] = col(l)[i] for i < k
// (zeros past ncols), the layout of the level's gemm_f32.
void pack_panel(const Plan& p, const float* col0, size_t col_stride, int ncols, int64_t k, float* out) {
  if (p.kern->pack_f32_panel) return p.kern->pack_f32_panel(col0, col_stride, ncols, k, out);
  for (int64_t i = 0; i < k; ++i)
    for (int l = 0; l < p.P; ++l) out[i * p.P + l] = l < ncols ? col0[l * col_stride + i] : 0.0f;
}

// c = a x b, by blocks of the kernel's rows and pairs of panels: a has nv
// rows a_stride apart; mul(mr, a_rows, pi, nvp, c) runs the micro-kernel on
// mr rows and panels [pi, pi + nvp) of b. emit(row, col, values, n) takes
// each finished piece of a row (n <= 2P values starting at column col).
template <class Mul, class Emit>
void gemm_blocks(const Plan& p, const float* a, size_t a_stride, int64_t nv, int64_t n_panels, int64_t n_cols,
                 uint8_t* scratch, Mul mul, Emit emit) {
  auto* c = reinterpret_cast<float*>(scratch + p.c_off);
  const int64_t P = p.P;
  const int mr_max = p.kern->rows_f32;
  for (int64_t r0 = 0; r0 < nv; r0 += mr_max) {
    const int mr = static_cast<int>(std::min<int64_t>(mr_max, nv - r0));
    for (int64_t pi = 0; pi < n_panels; pi += 2) {
      const int nvp = static_cast<int>(std::min<int64_t>(2, n_panels - pi));
      mul(mr, a + r0 * a_stride, pi, nvp, c);
      const int64_t ncols = std::min(nvp * P, n_cols - pi * P);
      for (int r = 0; r < mr; ++r) emit(r0 + r, pi * P, c + r * 2 * P, ncols);
    }
  }
}

// The unit's q vectors (rows of qf) as the panels of the score gemm.
void pack_queries(const Plan& p, const float* qf, size_t qf_stride, int64_t nv, uint8_t* scratch) {
  auto* panels = reinterpret_cast<float*>(scratch + p.qpanel_off);
  for (int64_t pi = 0; pi * p.P < nv; ++pi)
    pack_panel(p, qf + pi * p.P * qf_stride, qf_stride, static_cast<int>(std::min<int64_t>(p.P, nv - pi * p.P)), p.D,
               panels + pi * p.D * p.P);
}

// s[vi][t] = q_vi . K_{j0+t} for t < nt: the tile's K rows (in f32) times
// the packed q vectors.
void gemm_scores(const Plan& p, const Tensor& k, const char* kbase, int64_t j0, int64_t nt, int64_t nv, float* s,
                 size_t s_stride, uint8_t* scratch) {
  const int64_t D = p.D, P = p.P;
  const float* rows = nullptr;
  size_t row_stride = 0;
  if (k.type == DType::F32) {
    rows = reinterpret_cast<const float*>(kbase + j0 * k.nb[1]);
    row_stride = k.nb[1] / sizeof(float);
  } else {
    auto* kf = reinterpret_cast<float*>(scratch + p.kf_off);
    for (int64_t t = 0; t < nt; ++t) {
      const char* row = kbase + (j0 + t) * k.nb[1];
      if (p.k_to_f32) p.k_to_f32(row, kf + t * D, D);
      else if (k.type == DType::F16) p.kern->f16_to_f32(row, kf + t * D, D);
      else p.kern->bf16_to_f32(row, kf + t * D, D);
    }
    rows = kf;
    row_stride = static_cast<size_t>(D);
  }
  const auto* panels = reinterpret_cast<const float*>(scratch + p.qpanel_off);
  gemm_blocks(
      p, rows, row_stride, nt, p.q_panels, nv, scratch,
      [&](int mr, const float* a, int64_t pi, int nvp, float* c) {
        p.kern->gemm_f32(mr, a, static_cast<int64_t>(row_stride), panels + pi * D * P, D, nvp, c);
      },
      [&](int64_t t, int64_t col, const float* c, int64_t n) {
        for (int64_t i = 0; i < n; ++i) s[(col + i) * s_stride + t] = c[i];
      });
}

// acc[vi] += sum_t p[vi][t] V_{j0+t}: the probabilities as the gemm's rows,
// the tile's V rows in f32 (closed ones as zeros, so that whatever a masked
// cell holds never meets a 0 weight) as its columns, read in place.
void gemm_accumulate(const Plan& p, const Tensor& v, const char* vbase, int64_t j0, int64_t nt, const uint8_t* live,
                     int64_t nv, const float* s, size_t s_stride, float* acc, size_t acc_stride, uint8_t* scratch) {
  const int64_t Dv = p.Dv, P = p.P, vs = p.vf_stride;
  auto* vf = reinterpret_cast<float*>(scratch + p.vf_off);
  for (int64_t t = 0; t < nt; ++t) {
    float* out = vf + t * vs;
    const char* vr = vbase + (j0 + t) * v.nb[1];
    if (!live[t]) std::fill(out, out + Dv, 0.0f);
    else if (p.v_to_f32) p.v_to_f32(vr, out, Dv);
    else std::memcpy(out, vr, Dv * sizeof(float));
    std::fill(out + Dv, out + vs, 0.0f);  // columns the gemm reads and nothing emits
  }
  gemm_blocks(
      p, s, s_stride, nv, (Dv + P - 1) / P, Dv, scratch,
      [&](int mr, const float* a, int64_t pi, int nvp, float* c) {
        p.kern->gemm_f32_rows(mr, a, static_cast<int64_t>(s_stride), vf + pi * P, vs, nt, nvp, c);
      },
      [&](int64_t row, int64_t col, const float* c, int64_t n) {
        float* a = acc + row * acc_stride + col;
        p.ops->add(a, c, a, n);
      });
}

// Asks for the bytes [0, row_bytes) of rows [j_begin, j_end) (stride apart).
// A unit reads one head's slice of each cache row, so its loads jump by the
// row stride; the hardware prefetchers do not follow that, and without this
// every row of a long cache waits for DRAM.
void prefetch_rows(const char* base, size_t stride, size_t row_bytes, int64_t j_begin, int64_t j_end) {
  constexpr size_t kLine = 64;
  for (int64_t j = j_begin; j < j_end; ++j) {
    const char* row = base + j * stride;
    const auto first = reinterpret_cast<uintptr_t>(row) & ~(kLine - 1);
    for (uintptr_t a = first; a < reinterpret_cast<uintptr_t>(row) + row_bytes; a += kLine)
      __builtin_prefetch(reinterpret_cast<const void*>(a), 0, 3);
  }
}

// Rows [j_begin, j_end) of one unit into m, l and acc (per vector).
void attend(const Plan& p, const Tensor& dst, const Unit& un, int64_t j_begin, int64_t j_end, uint8_t* scratch,
            float* m, float* l, float* acc) {
  const Tensor& q = *dst.src[0];
  const Tensor& k = *dst.src[1];
  const Tensor& v = *dst.src[2];
  const Tensor* mask = dst.src[3];
  const FlashAttnParams fp = flash_attn_params(dst);
  const MulMatKernels& kern = *p.kern;
  const RowOps& ops = *p.ops;
  const int64_t nv = un.nvec(p), D = p.D, Dv = p.Dv;
  const size_t qf_stride = align_up(D * sizeof(float), kAlign) / sizeof(float);
  const size_t acc_stride = align_up(Dv * sizeof(float), kAlign) / sizeof(float);
  const size_t s_stride = align_up(kTile * sizeof(float), kAlign) / sizeof(float);
  auto* qf = reinterpret_cast<float*>(scratch + p.qf_off);
  uint8_t* qq = scratch + p.qq_off;
  auto* s = reinterpret_cast<float*>(scratch + p.s_off);
  auto* krow = reinterpret_cast<float*>(scratch + p.krow_off);
  auto* vrow = reinterpret_cast<float*>(scratch + p.vrow_off);
  auto* live = reinterpret_cast<uint8_t*>(scratch + p.live_off);
  const int64_t bk = un.b / (p.B / p.Bk);

  // The unit's q vectors in f32 (and as q8 rows for the integer dots), and
  // each vector's mask row and ALiBi slope.
  auto* mrows = reinterpret_cast<const char**>(scratch + p.mrow_off);
  auto* slope = reinterpret_cast<float*>(scratch + p.slope_off);
  for (int64_t vi = 0; vi < nv; ++vi) {
    const int64_t r = un.row(p, vi), h = un.head(p, vi);
    const char* src = row_ptr(q, r, h, un.b);
    float* x = qf + vi * qf_stride;
    for (int64_t i = 0; i < D; ++i) x[i] = *reinterpret_cast<const float*>(src + i * q.nb[0]);
    if (p.kdot == KDot::Q8 || p.kdot == KDot::Quant) {
      uint8_t* row = qq + vi * p.q8_bytes;
      auto* qd = reinterpret_cast<float*>(row + D);
      float* qs = qd + D / kQBlock;
      kern.quantize_row(x, D, reinterpret_cast<int8_t*>(row), qd, qs);
      if (p.kdot == KDot::Q8)
        for (int64_t i = 0; i < D / kQBlock; ++i) qs[i] *= -static_cast<float>(p.c_offset);
    }
    mrows[vi] = mask ? row_ptr(*mask, r, h % mask->ne[2], un.b % mask->ne[3]) : nullptr;
    slope[vi] = alibi_slope(fp.max_bias, h, p.H);
    m[vi] = kNegInf;
    l[vi] = 0.0f;
    std::fill(acc + vi * acc_stride, acc + vi * acc_stride + Dv, 0.0f);
  }
  if (p.gemm) pack_queries(p, qf, qf_stride, nv, scratch);
  const bool capped = fp.softcap > 0.0f;
  const float scale = capped ? fp.scale / fp.softcap : fp.scale;
  const char* kbase = static_cast<const char*>(k.data) + un.hk * k.nb[2] + bk * k.nb[3];
  const char* vbase = static_cast<const char*>(v.data) + un.hk * v.nb[2] + bk * v.nb[3];

  auto* mtile = reinterpret_cast<float*>(scratch + p.mtile_off);
  auto* mt = reinterpret_cast<const float**>(scratch + p.mtptr_off);
  for (int64_t j0 = j_begin; j0 < j_end; j0 += kTile) {
    const int64_t nt = std::min(kTile, j_end - j0);
    prefetch_rows(kbase, k.nb[1], p.k_row_bytes, j0 + kTile, std::min(j0 + 2 * kTile, j_end));
    prefetch_rows(vbase, v.nb[1], p.v_row_bytes, j0 + kTile, std::min(j0 + 2 * kTile, j_end));
    // Each vector's mask over the tile in f32 (vectors of one query row
    // share theirs unless the mask differs per head), and the rows some
    // vector's mask leaves open.
    int64_t n_live = nt;
    if (mask) {
      for (int64_t vi = 0; vi < nv; ++vi) {
        if (vi > 0 && mrows[vi] == mrows[vi - 1]) {
          mt[vi] = mt[vi - 1];
        } else if (mask->type == DType::F32) {
          mt[vi] = reinterpret_cast<const float*>(mrows[vi]) + j0;
        } else {
          float* out = mtile + vi * s_stride;
          ops.f16_to_f32(reinterpret_cast<const uint16_t*>(mrows[vi]) + j0, out, nt);
          mt[vi] = out;
        }
      }
      std::fill(live, live + nt, uint8_t{0});
      for (int64_t vi = 0; vi < nv; ++vi) {
        if (vi > 0 && mt[vi] == mt[vi - 1]) continue;  // the same mask row
        for (int64_t t = 0; t < nt; ++t) live[t] |= mt[vi][t] != kNegInf;
      }
      n_live = 0;
      for (int64_t t = 0; t < nt; ++t) n_live += live[t];
      if (n_live == 0) continue;
    } else {
      std::fill(live, live + nt, uint8_t{1});
    }

    // 1. Scores.
    if (p.gemm) {
      gemm_scores(p, k, kbase, j0, nt, nv, s, s_stride, scratch);
    } else {
      for (int64_t t = 0; t < nt; ++t) {
        if (!live[t]) continue;
        const char* kr = kbase + (j0 + t) * k.nb[1];
        if (p.kdot == KDot::Dequant) {
          p.k_to_f32(kr, krow, D);
          kr = reinterpret_cast<const char*>(krow);
        }
        for (int64_t vi = 0; vi < nv; ++vi) {
          const void* qv = p.kdot == KDot::Q8 || p.kdot == KDot::Quant ? static_cast<const void*>(qq + vi * p.q8_bytes)
                                                                        : qf + vi * qf_stride;
          p.dot(D, kr, qv, s + vi * s_stride + t);
        }
      }
    }

    // 2. Online softmax per vector: s becomes p (rows the vector's mask
    // closes give 0, whatever their score).
    for (int64_t vi = 0; vi < nv; ++vi) {
      float* sv = s + vi * s_stride;
      if (capped)
        for (int64_t t = 0; t < nt; ++t) sv[t] = fp.softcap * std::tanh(sv[t] * scale);
      const float c = ops.softmax_tile(sv, mask ? mt[vi] : nullptr, capped ? 1.0f : scale, slope[vi], nt, &m[vi], &l[vi]);
      if (c != 1.0f) ops.scale(acc + vi * acc_stride, c, acc + vi * acc_stride, Dv);
    }

    // 3. acc += p V.
    if (p.gemm) {
      gemm_accumulate(p, v, vbase, j0, nt, live, nv, s, s_stride, acc, acc_stride, scratch);
      continue;
    }
    for (int64_t t = 0; t < nt; ++t) {
      if (!live[t]) continue;
      const char* vr = vbase + (j0 + t) * v.nb[1];
      const float* vf = reinterpret_cast<const float*>(vr);
      bool converted = false;
      for (int64_t vi = 0; vi < nv; ++vi) {
        const float pj = s[vi * s_stride + t];
        if (pj == 0.0f) continue;
        if (p.v_to_f32 && !converted) {
          p.v_to_f32(vr, vrow, Dv);
          vf = vrow;
          converted = true;
        }
        ops.axpy(pj, vf, acc + vi * acc_stride, Dv);
      }
    }
  }
}

void write_out(const Plan& p, Tensor& dst, const Unit& un, int64_t vi, const float* acc, float l) {
  auto* out = reinterpret_cast<float*>(row_ptr(dst, un.head(p, vi), un.row(p, vi), un.b));
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  for (int64_t i = 0; i < p.Dv; ++i) out[i] = acc[i] * inv;
}

uint8_t* aligned_work(const ComputeParams& cp) {
  return reinterpret_cast<uint8_t*>(align_up(reinterpret_cast<uintptr_t>(cp.wdata), kAlign));
}

}  // namespace

size_t flash_attn_work_size(const Tensor& dst, int n_threads) { return make_plan(dst, n_threads).total_bytes; }

int64_t flash_attn_tasks(const Tensor& dst, int phase, int n_threads) {
  const Plan p = make_plan(dst, n_threads);
  if (phase == 0) return p.units * p.chunks;
  return p.chunks > 1 ? p.units : 0;
}

void compute_flash_attn(const ComputeParams& cp, Tensor& dst, int phase) {
  const Plan p = make_plan(dst, cp.n_threads);
  uint8_t* work = aligned_work(cp);
  if (p.total_bytes > cp.wsize || (work - cp.wdata) + p.total_bytes - kAlign > cp.wsize) {
    cp.errors->report(fmt::format("flash_attn_ext '{}': scratch of {} bytes, {} needed", dst.name, cp.wsize,
                                  p.total_bytes));
    return;
  }
  auto* partials = reinterpret_cast<float*>(work + p.partials_off);
  const size_t acc_stride = align_up(p.Dv * sizeof(float), kAlign) / sizeof(float);
  if (phase == 0) {
    for (int64_t t = cp.ith; t < p.units * p.chunks; t += cp.nth) {
      const int64_t u = t / p.chunks, c = t % p.chunks;
      const Unit un = unit_of(p, u);
      uint8_t* scratch = work + cp.thread * p.thread_bytes;
      auto* acc = reinterpret_cast<float*>(scratch + p.acc_off);
      auto* ml = reinterpret_cast<float*>(scratch + p.ml_off);
      float *m = ml, *l = ml + p.nvec;
      const Range kv = split_range(p.n_kv, c, p.chunks);
      attend(p, dst, un, kv.begin, kv.end, scratch, m, l, acc);
      const int64_t nv = un.nvec(p);
      if (p.chunks == 1) {
        for (int64_t vi = 0; vi < nv; ++vi) write_out(p, dst, un, vi, acc + vi * acc_stride, l[vi]);
        continue;
      }
      float* part = partials + static_cast<size_t>(t) * p.partial_floats;
      for (int64_t vi = 0; vi < nv; ++vi) {
        float* pv = part + vi * (p.Dv + 2);
        pv[0] = m[vi];
        pv[1] = l[vi];
        std::memcpy(pv + 2, acc + vi * acc_stride, p.Dv * sizeof(float));
      }
    }
    return;
  }
  // Phase 1: merge the chunks of each unit.
  const std::span<float> acc(reinterpret_cast<float*>(work + cp.thread * p.thread_bytes + p.merge_off),
                             static_cast<size_t>(p.Dv));
  for (int64_t u = cp.ith; u < p.units; u += cp.nth) {
    const Unit un = unit_of(p, u);
    for (int64_t vi = 0; vi < un.nvec(p); ++vi) {
      float mmax = kNegInf;
      for (int64_t c = 0; c < p.chunks; ++c)
        mmax = std::max(mmax, partials[(u * p.chunks + c) * p.partial_floats + vi * (p.Dv + 2)]);
      std::fill(acc.begin(), acc.end(), 0.0f);
      float l = 0.0f;
      if (mmax != kNegInf) {
        for (int64_t c = 0; c < p.chunks; ++c) {
          const float* pv = partials + (u * p.chunks + c) * p.partial_floats + vi * (p.Dv + 2);
          if (pv[0] == kNegInf) continue;
          const float w = std::exp(pv[0] - mmax);
          l += w * pv[1];
          p.ops->axpy(w, pv + 2, acc.data(), p.Dv);
        }
      }
      write_out(p, dst, un, vi, acc.data(), l);
    }
  }
}

}  // namespace loom::cpu
