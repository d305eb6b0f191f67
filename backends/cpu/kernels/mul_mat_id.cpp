// mul_mat_id on the CPU. The (slot, token) columns that use each expert are
// gathered into one b matrix per expert, so mul_mat's kernels (through
// mul_mat_part.h) read each expert's weights once per batch, however many
// tokens chose it. Five phases, all tasks of one finishing before the next:
//  0 route:    lists each expert's columns, sizes and offsets (one task)
//  1 gather:   copies every column of b into its expert's matrix
//  2 pack:     packs each expert's b as mul_mat does (one list of units)
//  3 multiply: mul_mat's chunks of every expert (one list of chunks)
//  4 scatter:  copies each result column to dst[:, slot, token]
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "loom/align.h"
#include "loom/error.h"
#include "mul_mat_part.h"

namespace loom::cpu {
namespace {

constexpr size_t kAlign = 64;
constexpr int64_t kTasksPerThread = 4, kChunkTasksPerThread = 16;

struct Dims {
  int64_t K, M, n_expert, n_used, n_tokens, total;  // total = n_used * n_tokens columns
};

Dims dims_of(const Tensor& node) {
  const Tensor& as = *node.src[0];
  const Tensor& ids = *node.src[2];
  return {as.ne[0], as.ne[1], as.ne[2], ids.ne[0], ids.ne[1], ids.ne[0] * ids.ne[1]};
}

// Per expert, in the route area of the scratch.
struct ExpertInfo {
  int64_t count;       // columns that use it
  int64_t start;       // its first column in the expert-sorted order
  int64_t units_end;   // running sums over experts: pack units, chunks
  int64_t chunks_end;
  size_t packed_off;   // its packed b, from the packed area
};

struct RouteHeader {
  int32_t bad;  // an id was out of range: later phases do nothing
  int32_t pad;
  int64_t total_units, total_chunks;
};

// Where everything lives in the scratch (wdata aligned up to 64).
struct Layout {
  size_t header = 0, experts = 0, columns = 0, gathered = 0, out = 0, packed = 0, threads = 0;
  size_t thread_bytes = 0, total = 0;
};

Layout layout_of(const Tensor& node, int nth) {
  const Dims d = dims_of(node);
  const MulMatPartBounds bounds = mul_mat_part_bounds(*node.src[0], d.total, nth);
  const int64_t n_active = std::min(d.n_expert, d.total);
  Layout l;
  size_t off = 0;
  auto take = [&off](size_t bytes) {
    const size_t at = off;
    off = align_up(off + bytes, kAlign);
    return at;
  };
  l.header = take(sizeof(RouteHeader));
  l.experts = take(d.n_expert * sizeof(ExpertInfo));
  l.columns = take(d.total * sizeof(int64_t));
  l.gathered = take(d.total * d.K * sizeof(float));
  l.out = take(d.total * d.M * sizeof(float));
  l.packed = take((d.total + n_active * bounds.spare_columns) * bounds.column_bytes + n_active * kAlign);
  l.thread_bytes = align_up(bounds.thread_bytes, kAlign);
  l.threads = take(nth * l.thread_bytes);
  l.total = off + kAlign;  // room to align wdata
  return l;
}

uint8_t* base_of(const ComputeParams& p) {
  return reinterpret_cast<uint8_t*>(align_up(reinterpret_cast<uintptr_t>(p.wdata), kAlign));
}

// Expert e's weights, gathered b and result as 2-D tensors for MulMatPart.
struct ExpertTensors {
  Tensor a, b, dst;
  ExpertTensors(const Tensor& node, const Dims& d, uint8_t* base, const Layout& l, int64_t e,
                const ExpertInfo& info) {
    const Tensor& as = *node.src[0];
    a.type = as.type;
    a.ne = {d.K, d.M, 1, 1};
    a.nb = {as.nb[0], as.nb[1], as.nb[1] * d.M, as.nb[1] * d.M};
    a.data = static_cast<char*>(as.data) + e * as.nb[2];
    b.ne = {d.K, info.count, 1, 1};
    set_contiguous_strides(b);
    b.data = base + l.gathered + info.start * d.K * sizeof(float);
    dst.ne = {d.M, info.count, 1, 1};
    set_contiguous_strides(dst);
    dst.data = base + l.out + info.start * d.M * sizeof(float);
    dst.src[0] = &a;
    dst.src[1] = &b;
  }
};

int32_t id_at(const Tensor& ids, int64_t slot, int64_t token) {
  return *reinterpret_cast<const int32_t*>(static_cast<const char*>(ids.data) + slot * ids.nb[0] + token * ids.nb[1]);
}

void route(const ComputeParams& p, const Tensor& node, const Dims& d, uint8_t* base, const Layout& l) {
  auto* h = reinterpret_cast<RouteHeader*>(base + l.header);
  auto* ex = reinterpret_cast<ExpertInfo*>(base + l.experts);
  auto* cols = reinterpret_cast<int64_t*>(base + l.columns);
  const Tensor& ids = *node.src[2];
  *h = {};
  for (int64_t e = 0; e < d.n_expert; ++e) ex[e] = {};
  for (int64_t t = 0; t < d.n_tokens; ++t) {
    for (int64_t s = 0; s < d.n_used; ++s) {
      const int32_t e = id_at(ids, s, t);
      if (e < 0 || e >= d.n_expert) {
        h->bad = 1;
        p.errors->report(fmt::format("CPU mul_mat_id '{}': expert id {} (slot {}, token {}) of '{}' is outside [0, {})",
                                     node.name, e, s, t, ids.name, d.n_expert));
        return;
      }
      ++ex[e].count;
    }
  }
  int64_t start = 0, units = 0, chunks = 0;
  size_t packed = 0;
  for (int64_t e = 0; e < d.n_expert; ++e) {
    ex[e].start = start;
    start += ex[e].count;
    if (ex[e].count > 0) {
      const ExpertTensors et(node, d, base, l, e, ex[e]);
      const MulMatPart part(et.dst, p.n_threads);
      ex[e].packed_off = packed;
      packed += align_up(part.packed_bytes(), kAlign);
      units += part.pack_units();
      chunks += part.chunks();
    }
    ex[e].units_end = units;
    ex[e].chunks_end = chunks;
  }
  h->total_units = units;
  h->total_chunks = chunks;
  std::vector<int64_t> next(d.n_expert);
  for (int64_t e = 0; e < d.n_expert; ++e) next[e] = ex[e].start;
  for (int64_t t = 0; t < d.n_tokens; ++t)
    for (int64_t s = 0; s < d.n_used; ++s) cols[next[id_at(ids, s, t)]++] = t * d.n_used + s;
}

// Runs fn(part, index within the expert, packed area of the expert) for items
// [begin, end) of the list of every expert's units (or chunks) in order.
template <class Fn>
void for_each_item(const Tensor& node, const Dims& d, uint8_t* base, const Layout& l, int n_threads, bool chunks,
                   int64_t begin, int64_t end, Fn fn) {
  const auto* ex = reinterpret_cast<const ExpertInfo*>(base + l.experts);
  int64_t prev_end = 0;
  for (int64_t e = 0; e < d.n_expert && begin < end; ++e) {
    const int64_t e_end = chunks ? ex[e].chunks_end : ex[e].units_end;
    if (e_end > begin) {
      const ExpertTensors et(node, d, base, l, e, ex[e]);
      const MulMatPart part(et.dst, n_threads);
      for (int64_t i = begin; i < std::min(end, e_end); ++i) fn(part, i - prev_end, base + l.packed + ex[e].packed_off);
      begin = std::min(end, e_end);
    }
    prev_end = e_end;
  }
}

}  // namespace

size_t mul_mat_id_work_size(const Tensor& node, int n_threads) { return layout_of(node, n_threads).total; }

int64_t mul_mat_id_tasks(const Tensor& node, int phase, int n_threads) {
  const int64_t total = dims_of(node).total;
  switch (phase) {
    case 0: return 1;
    case 2: return kTasksPerThread * n_threads;
    case 3: return kChunkTasksPerThread * n_threads;
    default: return std::min<int64_t>(total, kTasksPerThread * n_threads);  // gather, scatter
  }
}

void compute_mul_mat_id(const ComputeParams& p, Tensor& node, int phase) {
  const Dims d = dims_of(node);
  const Layout l = layout_of(node, p.n_threads);
  if (l.total > p.wsize) {
    p.errors->report(fmt::format("CPU mul_mat_id '{}': scratch of {} bytes is smaller than the {} needed", node.name,
                                 p.wsize, l.total));
    return;
  }
  uint8_t* base = base_of(p);
  if (phase == 0) return route(p, node, d, base, l);
  const auto* h = reinterpret_cast<const RouteHeader*>(base + l.header);
  if (h->bad) return;
  const auto* cols = reinterpret_cast<const int64_t*>(base + l.columns);
  const Tensor& b = *node.src[1];
  uint8_t* thread = base + l.threads + p.thread * l.thread_bytes;
  switch (phase) {
    case 1: {  // gather
      const Range r = split_range(d.total, p.ith, p.nth);
      for (int64_t c = r.begin; c < r.end; ++c) {
        const int64_t s = cols[c] % d.n_used, t = cols[c] / d.n_used;
        const char* src = row_ptr(b, s % b.ne[1], t, 0);
        auto* out = reinterpret_cast<float*>(base + l.gathered) + c * d.K;
        if (b.nb[0] == sizeof(float)) std::memcpy(out, src, d.K * sizeof(float));
        else for (int64_t k = 0; k < d.K; ++k) std::memcpy(&out[k], src + k * b.nb[0], sizeof(float));
      }
      return;
    }
    case 2: {  // pack
      const Range r = split_range(h->total_units, p.ith, p.nth);
      for_each_item(node, d, base, l, p.n_threads, false, r.begin, r.end,
                    [thread](const MulMatPart& part, int64_t u, uint8_t* packed) { part.pack(u, packed, thread); });
      return;
    }
    case 3: {  // multiply
      const Range r = split_range(h->total_chunks, p.ith, p.nth);
      for_each_item(node, d, base, l, p.n_threads, true, r.begin, r.end,
                    [thread](const MulMatPart& part, int64_t c, uint8_t* packed) { part.chunk(c, packed, thread); });
      return;
    }
    default: {  // scatter
      const Range r = split_range(d.total, p.ith, p.nth);
      for (int64_t c = r.begin; c < r.end; ++c) {
        const int64_t s = cols[c] % d.n_used, t = cols[c] / d.n_used;
        const auto* in = reinterpret_cast<const float*>(base + l.out) + c * d.M;
        char* dst = row_ptr(node, s, t, 0);
        if (node.nb[0] == sizeof(float)) std::memcpy(dst, in, d.M * sizeof(float));
        else for (int64_t i = 0; i < d.M; ++i) std::memcpy(dst + i * node.nb[0], &in[i], sizeof(float));
      }
      return;
    }
  }
}

}  // namespace loom::cpu
