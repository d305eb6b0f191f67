// The bookkeeping of a unified KV cache shared by many sequences: which
// sequences each cache cell (one row of every layer's K and V) belongs to,
// and at what position. A cell holding several sequences is a shared prefix
// (seq_cp copies a sequence's cells by tagging them, not by copying data).
// The Session places each token of a batch in a free cell and builds the
// attention mask from these tags (fill_kq_mask).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace loom {

class KvCells {
 public:
  explicit KvCells(int64_t size = 0);

  int64_t size() const { return static_cast<int64_t>(cells_.size()); }
  // Cells holding at least one sequence.
  int64_t used() const { return used_; }
  // One past the highest used cell: the cells a graph must attend to.
  int64_t n_kv() const;
  // The indices of n free cells, lowest first; throws loom::Error naming the
  // cache (`what`) and the sizes when fewer than n are free.
  std::vector<int32_t> find_free(int64_t n, std::string_view what = "KV cache") const;
  // Puts token (seq, pos) in a free cell.
  void occupy(int32_t cell, int32_t seq, int32_t pos);
  // Adds seq to a cell: a free one is occupied at pos, a used one must hold
  // pos already (undoing a drop_older).
  void tag(int32_t cell, int32_t seq, int32_t pos);
  // Removes seq from its cells at positions below pos; returns those cells
  // and their positions.
  struct Dropped {
    int32_t cell, pos;
  };
  std::vector<Dropped> drop_older(int32_t seq, int32_t pos);

  // Removes seq's cells with positions in [p0, p1) (p1 < 0: no upper end;
  // seq < 0: every sequence). A cell left with no sequence is free.
  void seq_rm(int32_t seq, int32_t p0 = 0, int32_t p1 = -1);
  // Adds dst to the cells of src with positions in [p0, p1): dst shares them.
  void seq_cp(int32_t src, int32_t dst, int32_t p0 = 0, int32_t p1 = -1);
  // Frees a cell whatever it holds (undoing an occupy).
  void vacate(int32_t cell);
  // Removes every sequence but seq.
  void seq_keep(int32_t seq);
  // The highest position of seq, -1 when it has no cell.
  int32_t seq_pos_max(int32_t seq) const;
  void clear();

  bool has(int64_t cell, int32_t seq) const;
  int32_t pos(int64_t cell) const { return cells_[cell].pos; }

 private:
  struct Cell {
    int32_t pos = -1;
    std::vector<int32_t> seqs;  // sorted; empty: free
  };
  void drop(Cell& c, int32_t seq);
  std::vector<Cell> cells_;
  int64_t used_ = 0;
};

// Fills the attention mask `out` ([n_kv, n] row-major: row i for token i):
// 0 where cell j holds token i's sequence at a position <= the token's,
// -inf elsewhere. With window > 0 (sliding-window attention), cells whose
// position is window or more before the token's are masked too.
void fill_kq_mask(const KvCells& cells, std::span<const int32_t> seq_ids, std::span<const int32_t> positions,
                  int64_t n_kv, int32_t window, std::span<float> out);

}  // namespace loom
