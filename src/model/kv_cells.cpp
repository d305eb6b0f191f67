#include "loom/kv_cells.h"

#include <algorithm>
#include <limits>

#include "loom/error.h"

namespace loom {

KvCells::KvCells(int64_t size) : cells_(static_cast<size_t>(size)) {}

int64_t KvCells::n_kv() const {
  for (int64_t i = size(); i > 0; --i)
    if (!cells_[i - 1].seqs.empty()) return i;
  return 0;
}

std::vector<int32_t> KvCells::find_free(int64_t n, std::string_view what) const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < size() && static_cast<int64_t>(out.size()) < n; ++i)
    if (cells_[i].seqs.empty()) out.push_back(static_cast<int32_t>(i));
  if (static_cast<int64_t>(out.size()) < n)
    fail("{} full: {} tokens need cells, {} of {} are free (raise -c or remove sequences)", what, n, out.size(),
         size());
  return out;
}

void KvCells::occupy(int32_t cell, int32_t seq, int32_t pos) {
  Cell& c = cells_[cell];
  if (!c.seqs.empty()) fail("KV cell {} is not free", cell);
  c.pos = pos;
  c.seqs = {seq};
  ++used_;
}

void KvCells::tag(int32_t cell, int32_t seq, int32_t pos) {
  Cell& c = cells_.at(static_cast<size_t>(cell));
  if (c.seqs.empty()) return occupy(cell, seq, pos);
  if (c.pos != pos) fail("KV cell {} holds position {}, not {}", cell, c.pos, pos);
  auto it = std::lower_bound(c.seqs.begin(), c.seqs.end(), seq);
  if (it == c.seqs.end() || *it != seq) c.seqs.insert(it, seq);
}

std::vector<KvCells::Dropped> KvCells::drop_older(int32_t seq, int32_t pos) {
  std::vector<Dropped> dropped;
  for (size_t i = 0; i < cells_.size(); ++i) {
    Cell& c = cells_[i];
    if (c.seqs.empty() || c.pos >= pos || !std::binary_search(c.seqs.begin(), c.seqs.end(), seq)) continue;
    dropped.push_back({static_cast<int32_t>(i), c.pos});
    drop(c, seq);
  }
  return dropped;
}

void KvCells::vacate(int32_t cell) {
  Cell& c = cells_.at(static_cast<size_t>(cell));
  if (c.seqs.empty()) return;
  c.seqs.clear();
  c.pos = -1;
  --used_;
}

void KvCells::drop(Cell& c, int32_t seq) {
  auto it = std::find(c.seqs.begin(), c.seqs.end(), seq);
  if (it == c.seqs.end()) return;
  c.seqs.erase(it);
  if (c.seqs.empty()) {
    c.pos = -1;
    --used_;
  }
}

namespace {
bool in_range(int32_t pos, int32_t p0, int32_t p1) { return pos >= p0 && (p1 < 0 || pos < p1); }
}  // namespace

void KvCells::seq_rm(int32_t seq, int32_t p0, int32_t p1) {
  for (Cell& c : cells_) {
    if (c.seqs.empty() || !in_range(c.pos, p0, p1)) continue;
    if (seq < 0) {
      c.seqs.clear();
      c.pos = -1;
      --used_;
    } else {
      drop(c, seq);
    }
  }
}

void KvCells::seq_cp(int32_t src, int32_t dst, int32_t p0, int32_t p1) {
  if (src == dst) return;
  for (Cell& c : cells_) {
    if (!in_range(c.pos, p0, p1) || !std::binary_search(c.seqs.begin(), c.seqs.end(), src)) continue;
    auto it = std::lower_bound(c.seqs.begin(), c.seqs.end(), dst);
    if (it == c.seqs.end() || *it != dst) c.seqs.insert(it, dst);
  }
}

void KvCells::seq_keep(int32_t seq) {
  for (Cell& c : cells_) {
    if (c.seqs.empty()) continue;
    if (std::binary_search(c.seqs.begin(), c.seqs.end(), seq)) {
      c.seqs = {seq};
    } else {
      c.seqs.clear();
      c.pos = -1;
      --used_;
    }
  }
}

int32_t KvCells::seq_pos_max(int32_t seq) const {
  int32_t m = -1;
  for (const Cell& c : cells_)
    if (std::binary_search(c.seqs.begin(), c.seqs.end(), seq)) m = std::max(m, c.pos);
  return m;
}

void KvCells::clear() {
  for (Cell& c : cells_) {
    c.seqs.clear();
    c.pos = -1;
  }
  used_ = 0;
}

bool KvCells::has(int64_t cell, int32_t seq) const {
  const auto& s = cells_[cell].seqs;
  return std::binary_search(s.begin(), s.end(), seq);
}

void fill_kq_mask(const KvCells& cells, std::span<const int32_t> seq_ids, std::span<const int32_t> positions,
                  int64_t n_kv, int32_t window, std::span<float> out) {
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n = seq_ids.size();
  for (size_t i = 0; i < n; ++i) {
    float* row = out.data() + i * static_cast<size_t>(n_kv);
    const int32_t seq = seq_ids[i], pos = positions[i];
    for (int64_t j = 0; j < n_kv; ++j) {
      const int32_t p = cells.pos(j);
      const bool visible = cells.has(j, seq) && p <= pos && (window <= 0 || pos - p < window);
      row[j] = visible ? 0.0f : kMasked;
    }
  }
}

}  // namespace loom
