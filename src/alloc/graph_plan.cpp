#include "graph_plan.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

#include "loom/align.h"
#include "loom/error.h"

namespace loom::alloc_detail {
namespace {

Tensor* root_of(Tensor* t) { return t->view_src ? t->view_src : t; }

struct Interval {
  size_t first = 0, last = 0;
  bool input = false, output = false;
};

class Analyzer {
 public:
  Analyzer(const Graph& graph, const Schedule& schedule, const BufferTypeAssignment& assign,
           std::span<BufferType* const> types, const std::function<bool(const Tensor&)>& is_ours)
      : graph_(graph), schedule_(schedule), assign_(assign), types_(types), is_ours_(is_ours) {}

  Analysis run() {
    check_schedule();
    out_.n_steps = std::max<size_t>(schedule_.groups.size(), 1);
    out_.n_inplace.assign(types_.size(), 0);
    collect_intervals();
    build_blocks();
    return std::move(out_);
  }

 private:
  size_t type_of(const Tensor& t) const {
    const size_t type = assign_ ? assign_(t) : 0;
    if (type >= types_.size())
      fail("graph allocator: tensor {} is assigned buffer type {}, but only {} types were given", tensor_label(t), type,
           types_.size());
    return type;
  }

  // Whether the allocator gives this root memory.
  bool planned(const Tensor* r) {
    auto it = planned_.find(r);
    if (it != planned_.end()) return it->second;
    bool p = !(r->flags & kFlagWeight) && (!r->buffer || is_ours_(*r)) && r->nbytes() > 0;
    planned_.emplace(r, p);
    return p;
  }

  void check_schedule() {
    for (size_t g = 0; g < schedule_.groups.size(); ++g)
      for (Tensor* n : schedule_.groups[g]) {
        if (!n) fail("graph allocator: group {} of the schedule holds a null node", g);
        if (!step_of_.emplace(n, g).second)
          fail("graph allocator: node {} appears twice in the schedule (group {})", tensor_label(*n), g);
      }
    for (Tensor* n : graph_.nodes())
      if (!step_of_.count(n))
        fail("graph allocator: node {} of the graph is missing from the schedule", tensor_label(*n));
    if (step_of_.size() != graph_.nodes().size())
      fail("graph allocator: the schedule has {} nodes, the graph {}", step_of_.size(), graph_.nodes().size());
    for (size_t g = 0; g < schedule_.groups.size(); ++g)
      for (Tensor* n : schedule_.groups[g])
        for (Tensor* s : n->src) {
          if (!s || s->op == Op::None) continue;
          auto it = step_of_.find(s);
          if (it != step_of_.end() && it->second >= g)
            fail("graph allocator: node {} (group {}) reads {} which runs in group {}; a node must come after its "
                 "operands",
                 tensor_label(*n), g, tensor_label(*s), it->second);
        }
  }

  Interval& add_root(Tensor* r, size_t first, bool input) {
    auto [it, added] = intervals_.try_emplace(r);
    if (added) {
      order_.push_back(r);
      it->second.first = it->second.last = first;
      it->second.input = input;
    }
    return it->second;
  }

  void use(Tensor* t, size_t step, Tensor* reader) {
    Tensor* r = root_of(t);
    if (!planned(r)) return;
    auto it = intervals_.find(r);
    if (it == intervals_.end())
      fail("graph allocator: {} reads {} whose memory {} is neither placed nor produced by the graph",
           tensor_label(*reader), tensor_label(*t), tensor_label(*r));
    it->second.last = std::max(it->second.last, step);
  }

  void collect_intervals() {
    for (Tensor* leaf : graph_.leafs()) {
      Tensor* r = root_of(leaf);
      if (planned(r)) add_root(r, 0, true);
    }
    for (Tensor* n : graph_.nodes())
      if ((n->flags & kFlagInput) && !n->view_src && planned(n)) add_root(n, 0, true);
    for (size_t g = 0; g < schedule_.groups.size(); ++g)
      for (Tensor* n : schedule_.groups[g]) {
        Tensor* r = root_of(n);
        std::vector<Tensor*>& roots = reads_[n];  // distinct roots this node touches
        if (r == n) {
          if (planned(n)) add_root(n, g, false);
        } else {
          use(n, g, n);  // a view node (cpy/set_rows write through it) keeps its source alive
          if (planned(r)) roots.push_back(r);
        }
        for (Tensor* s : n->src) {
          if (!s) continue;
          use(s, g, n);
          Tensor* sr = root_of(s);
          if (planned(sr) && std::find(roots.begin(), roots.end(), sr) == roots.end()) roots.push_back(sr);
        }
        for (Tensor* sr : roots) ++remaining_[sr];
      }
    auto mark_output = [&](Tensor* t) {
      if (!(t->flags & kFlagOutput)) return;
      Tensor* r = root_of(t);
      if (!planned(r)) return;
      auto it = intervals_.find(r);
      if (it == intervals_.end()) return;
      it->second.output = true;
      it->second.last = out_.n_steps - 1;
    };
    for (Tensor* t : graph_.leafs()) mark_output(t);
    for (Tensor* t : graph_.nodes()) mark_output(t);
  }

  size_t aligned_size(const Tensor& t, size_t type) const {
    BufferType& bt = *types_[type];
    const size_t size = align_up(bt.alloc_size(t), bt.alignment());
    if (size > bt.max_size())
      fail("graph allocator: tensor {} {} needs {} bytes, more than the largest {} allocation ({} bytes)",
           tensor_label(t), t.shape_string(), size, bt.name(), bt.max_size());
    return size;
  }

  size_t new_block(Tensor* r) {
    const Interval& iv = intervals_.at(r);
    Block b;
    b.members.push_back(r);
    b.starts.push_back(iv.first);
    b.type = type_of(*r);
    b.size = aligned_size(*r, b.type);
    b.first = iv.first;
    b.last = iv.last;
    b.input = iv.input;
    b.output = iv.output;
    out_.blocks.push_back(std::move(b));
    block_of_[r] = out_.blocks.size() - 1;
    return out_.blocks.size() - 1;
  }

  // The block node `n` can take over in place, if any. The operand may be a
  // view (a reshape) that covers all of its source's memory.
  std::optional<size_t> in_place_parent(Tensor* n) {
    const Interval& iv = intervals_.at(n);
    if (iv.input) return std::nullopt;
    const size_t type = type_of(*n);
    for (int i = 0; i < kMaxSrc; ++i) {
      Tensor* p = n->src[i];
      if (!p || !op_supports_in_place(n->op, i)) continue;
      Tensor* r = root_of(p);
      auto bit = block_of_.find(r);
      if (bit == block_of_.end()) continue;
      if (p != r && (p->view_offs != 0 || p->type != r->type || p->nbytes() != r->nbytes())) continue;
      const Block& b = out_.blocks[bit->second];
      if (b.input || b.output || intervals_.at(r).output || remaining_[r] != 1 || b.type != type) continue;
      if (p->type != n->type || p->ne != n->ne || p->nb != n->nb || !p->is_contiguous()) continue;
      if (aligned_size(*n, type) > b.size) continue;
      bool aliased = false;  // another operand reads the same memory through a different tensor
      for (int j = 0; j < kMaxSrc; ++j)
        if (j != i && n->src[j] && n->src[j] != p && root_of(n->src[j]) == r) aliased = true;
      if (!aliased) return bit->second;
    }
    return std::nullopt;
  }

  void build_blocks() {
    for (Tensor* r : order_)
      if (intervals_.at(r).input) new_block(r);
    for (const auto& group : schedule_.groups) {
      for (Tensor* n : group) {
        if (n->view_src || !intervals_.count(n) || block_of_.count(n)) continue;
        if (auto parent = in_place_parent(n)) {
          Block& b = out_.blocks[*parent];
          const Interval& iv = intervals_.at(n);
          b.members.push_back(n);
          b.starts.push_back(iv.first);
          b.last = std::max(b.last, iv.last);
          b.output = b.output || iv.output;
          block_of_[n] = *parent;
          ++out_.n_inplace[b.type];
        } else {
          new_block(n);
        }
      }
      for (Tensor* n : group)  // the group is done: its reads are no longer pending
        for (Tensor* r : reads_[n]) --remaining_[r];
    }
    out_.n_nodes = graph_.nodes().size();
  }

  const Graph& graph_;
  const Schedule& schedule_;
  const BufferTypeAssignment& assign_;
  std::span<BufferType* const> types_;
  const std::function<bool(const Tensor&)>& is_ours_;
  Analysis out_;
  std::unordered_map<const Tensor*, size_t> step_of_;
  std::unordered_map<const Tensor*, bool> planned_;
  std::unordered_map<const Tensor*, Interval> intervals_;
  std::vector<Tensor*> order_;  // roots in the order first seen
  std::unordered_map<const Tensor*, std::vector<Tensor*>> reads_;
  std::unordered_map<const Tensor*, size_t> remaining_;  // nodes still to read a root
  std::unordered_map<const Tensor*, size_t> block_of_;
};

}  // namespace

Analysis analyze(const Graph& graph, const Schedule& schedule, const BufferTypeAssignment& assign,
                 std::span<BufferType* const> types, const std::function<bool(const Tensor&)>& is_ours) {
  return Analyzer(graph, schedule, assign, types, is_ours).run();
}

std::vector<size_t> lower_bounds(const Analysis& a, size_t n_types) {
  std::vector<size_t> bound(n_types, 0);
  for (size_t type = 0; type < n_types; ++type) {
    std::vector<int64_t> delta(a.n_steps + 1, 0);
    for (const Block& b : a.blocks)
      if (b.type == type) {
        delta[b.first] += static_cast<int64_t>(b.size);
        delta[b.last + 1] -= static_cast<int64_t>(b.size);
      }
    int64_t live = 0;
    for (size_t s = 0; s < a.n_steps; ++s) {
      live += delta[s];
      bound[type] = std::max(bound[type], static_cast<size_t>(live));
    }
  }
  return bound;
}

std::vector<size_t> place_best_fit(Analysis& a, size_t type, size_t alignment, size_t max_size) {
  std::vector<std::vector<size_t>> starts(a.n_steps), ends(a.n_steps);
  for (size_t i = 0; i < a.blocks.size(); ++i)
    if (a.blocks[i].type == type) {
      starts[a.blocks[i].first].push_back(i);
      ends[a.blocks[i].last].push_back(i);
    }
  FreeBlockAllocator fa(alignment, max_size);
  for (size_t s = 0; s < a.n_steps; ++s) {
    for (size_t i : starts[s]) {
      const auto addr = fa.alloc(a.blocks[i].size);
      a.blocks[i].chunk = addr.chunk;
      a.blocks[i].offset = addr.offset;
    }
    for (size_t i : ends[s]) fa.free({a.blocks[i].chunk, a.blocks[i].offset}, a.blocks[i].size);
  }
  std::vector<size_t> sizes(fa.n_chunks());
  for (size_t c = 0; c < sizes.size(); ++c) sizes[c] = fa.chunk_size(c);
  return sizes;
}

std::vector<size_t> place_greedy_by_size(Analysis& a, size_t type, size_t alignment, size_t max_size) {
  (void)alignment;  // block sizes are aligned already, so every offset is
  std::vector<size_t> order;
  for (size_t i = 0; i < a.blocks.size(); ++i)
    if (a.blocks[i].type == type) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const Block &bx = a.blocks[x], &by = a.blocks[y];
    if (bx.size != by.size) return bx.size > by.size;
    return bx.first < by.first;
  });
  std::vector<std::vector<size_t>> chunks;  // blocks placed in each chunk
  std::vector<size_t> sizes;
  std::vector<size_t> conflicts;
  for (size_t i : order) {
    Block& b = a.blocks[i];
    for (size_t c = 0;; ++c) {
      if (c == chunks.size()) {
        chunks.emplace_back();
        sizes.push_back(0);
      }
      conflicts.clear();
      for (size_t j : chunks[c])
        if (a.blocks[j].first <= b.last && b.first <= a.blocks[j].last) conflicts.push_back(j);
      std::sort(conflicts.begin(), conflicts.end(),
                [&](size_t x, size_t y) { return a.blocks[x].offset < a.blocks[y].offset; });
      size_t end = 0, best = std::numeric_limits<size_t>::max(), best_gap = best;
      for (size_t j : conflicts) {
        const Block& o = a.blocks[j];
        if (o.offset > end && o.offset - end >= b.size && o.offset - end < best_gap) {
          best_gap = o.offset - end;
          best = end;
        }
        end = std::max(end, o.offset + o.size);
      }
      if (best == std::numeric_limits<size_t>::max()) best = end;
      if (best <= max_size && b.size <= max_size - best) {
        b.chunk = c;
        b.offset = best;
        chunks[c].push_back(i);
        sizes[c] = std::max(sizes[c], best + b.size);
        break;
      }
    }
  }
  return sizes;
}

}  // namespace loom::alloc_detail
