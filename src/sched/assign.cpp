// Assignment of graph tensors to backends (see scheduler.h for the rules).
// Pinned nodes (user, weight location, offload) are decided first; the free
// nodes are then chosen by dynamic programming over the graph order so that
// the number of backend changes is the minimum the pinned nodes and the
// devices' op support allow.
#include <algorithm>
#include <cstring>

#include "loom/error.h"
#include "sched_plan.h"

namespace loom::sched_detail {
namespace {

class Assigner {
 public:
  Assigner(Scheduler::Plan& plan, const AssignContext& ctx) : p_(plan), ctx_(ctx) {}

  void run() {
    const size_t n = p_.tensors.size();
    p_.backend.assign(n, kNone);
    p_.why.assign(n, Placement::Unassigned);
    p_.because.assign(n, kNone);
    p_.computes.assign(n, false);
    follows_root_.assign(n, false);
    for (size_t i = 0; i < p_.n_leafs; ++i) assign_leaf(i);
    for (size_t i = p_.n_leafs; i < n; ++i) {
      const Tensor& t = *p_.tensors[i];
      p_.computes[i] = !op_is_view(t.op);
      if (p_.computes[i]) pin_node(i);
    }
    choose_free_nodes();
    for (size_t i = p_.n_leafs; i < n; ++i) {
      if (p_.computes[i] && !follows_root_[i]) continue;
      const size_t r = root_index(i);
      p_.backend[i] = p_.backend[r];
      p_.why[i] = Placement::View;
      p_.because[i] = r;
      if (p_.computes[i] && (p_.backend[i] == kNone || !supports(p_.backend[i], *p_.tensors[i])))
        fail("scheduler: op {} of tensor {} {} writes into the memory of {}, but {} cannot run it",
             op_name(p_.tensors[i]->op), tensor_label(*p_.tensors[i]), p_.tensors[i]->shape_string(),
             tensor_label(*p_.tensors[r]), backend_name(p_.backend[i]));
    }
  }

 private:
  size_t root_index(size_t i) const {
    const Tensor* t = p_.tensors[i];
    if (!t->view_src) return i;
    auto it = p_.index.find(t->view_src);
    if (it == p_.index.end())
      fail("scheduler: view {} has a source {} that is not part of the graph", tensor_label(*t),
           tensor_label(*t->view_src));
    return it->second;
  }
  std::string_view backend_name(size_t b) const { return b == kNone ? "no backend" : ctx_.backends[b]->name(); }
  Device& device(size_t b) const { return ctx_.backends[b]->device(); }
  bool preplaced(const Tensor* t) const {
    auto it = p_.index.find(root_of(t));
    return it != p_.index.end() ? p_.preplaced[it->second] != 0 : ctx_.preplaced(*root_of(t));
  }

  // Whether backend b can run `node`: it has the kernel (Device::supports_op),
  // and every operand placed by someone else either is in memory b cannot use
  // at all (it is copied into b's memory, see splits.cpp) or b can read it
  // there for this use (Device::supports_operand). Memory b can use but not
  // for this operand (CPU_Repack outside mul_mat's src0) rules b out: its
  // bytes are in b's own layout, which a plain copy would not undo. A node
  // that writes into placed memory (set_rows, cpy) has that memory as an
  // operand too, so the same rule covers its destination.
  bool supports(size_t b, const Tensor& node) const {
    const Device& d = device(b);
    if (!d.supports_op(node)) return false;
    for (int j = 0; j < kMaxSrc; ++j) {
      const Tensor* s = node.src[j];
      if (!s || !preplaced(s)) continue;
      const BufferType& type = root_of(s)->buffer->type();
      if (d.supports_buffer_type(type) && !d.supports_operand(node, j, type)) return false;
    }
    return true;
  }

  // First backend (priority order) whose kernels can use memory of `type`.
  size_t backend_for(const BufferType& type) const {
    for (size_t b = 0; b < ctx_.backends.size(); ++b)
      if (device(b).supports_buffer_type(type)) return b;
    return kNone;
  }

  void assign_leaf(size_t i) {
    const Tensor& t = *p_.tensors[i];
    if (auto it = ctx_.user->find(&t); it != ctx_.user->end()) {
      p_.backend[i] = it->second;
      p_.why[i] = Placement::User;
    } else if (p_.preplaced[i]) {
      p_.backend[i] = backend_for(root_of(&t)->buffer->type());
      p_.why[i] = Placement::Weight;
    } else {
      p_.backend[i] = ctx_.cpu;  // the caller sets inputs in host memory
      p_.why[i] = Placement::Input;
    }
  }

  // mul_mat by its columns, mul_mat_id by its tokens.
  bool offload_wanted(size_t b, const Tensor& node) const {
    if ((node.op != Op::MulMat && node.op != Op::MulMatId) || !node.src[1]) return false;
    const int threshold = ctx_.offload_threshold[b];
    if (threshold == 0) return false;
    if (threshold < 0) return device(b).offload_op(node);
    return node.src[1]->ne[node.op == Op::MulMatId ? 2 : 1] >= threshold;
  }

  void pin_node(size_t i) {
    const Tensor& t = *p_.tensors[i];
    if (auto it = ctx_.user->find(&t); it != ctx_.user->end()) {
      if (!supports(it->second, t))
        fail("scheduler: tensor {} (op {}, {}) is assigned to {}, which cannot run it", tensor_label(t), op_name(t.op),
             t.shape_string(), backend_name(it->second));
      pin(i, it->second, Placement::User, kNone);
      return;
    }
    if (t.view_src) {  // set_rows, cpy: writes into its destination's memory
      if (!preplaced(&t)) {
        follows_root_[i] = true;
        return;
      }
      const BufferType& type = t.view_src->buffer->type();
      for (size_t b = 0; b < ctx_.backends.size(); ++b)
        if (device(b).supports_buffer_type(type) && supports(b, t)) return pin(i, b, Placement::Weight, root_index(i));
      fail("scheduler: no backend can run op {} of tensor {} {}: it writes into {} memory ({}), and no backend that "
           "can use that memory supports the op",
           op_name(t.op), tensor_label(t), t.shape_string(), type.name(), tensor_label(*t.view_src));
    }
    // The first operand whose memory was placed by someone else decides.
    for (const Tensor* s : t.src) {
      if (!s || !preplaced(s)) continue;
      const Tensor& root = *root_of(s);
      const BufferType& type = root.buffer->type();
      size_t home = kNone;
      for (size_t b = 0; b < ctx_.backends.size() && home == kNone; ++b)
        if (device(b).supports_buffer_type(type) && supports(b, t)) home = b;
      if (home == kNone) return;  // nobody runs it there: a free node, the operand is copied
      const size_t cause = p_.index.at(&root);
      if (type.is_host() && is_weight_memory(root))
        for (size_t b = 0; b < home; ++b)
          if (offload_wanted(b, t) && supports(b, t)) return pin(i, b, Placement::Offload, cause);
      return pin(i, home, Placement::Weight, cause);
    }
  }

  void pin(size_t i, size_t b, Placement why, size_t because) {
    p_.backend[i] = b;
    p_.why[i] = why;
    p_.because[i] = because;
  }

  // Minimum number of backend changes along the computing nodes; among
  // equal ones, free nodes prefer higher-priority backends.
  void choose_free_nodes() {
    std::vector<size_t> order;
    for (size_t i = p_.n_leafs; i < p_.tensors.size(); ++i)
      if (p_.computes[i]) order.push_back(i);
    if (order.empty()) return;
    const size_t nb = ctx_.backends.size();
    using Cost = std::pair<size_t, size_t>;
    const Cost inf{SIZE_MAX, SIZE_MAX};
    std::vector<Cost> cost(nb, inf), next(nb);
    std::vector<uint32_t> from(order.size() * nb, UINT32_MAX);
    std::vector<size_t> allowed;
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t i = order[k];
      const bool free = p_.backend[i] == kNone;
      allowed.clear();
      if (!free) {
        allowed.push_back(p_.backend[i]);
      } else {
        for (size_t b = 0; b < nb; ++b)
          if (supports(b, *p_.tensors[i])) allowed.push_back(b);
        if (allowed.empty()) no_backend(i);
      }
      std::fill(next.begin(), next.end(), inf);
      for (size_t b : allowed) {
        const size_t prio = free ? b : 0;
        if (k == 0) {
          next[b] = {0, prio};
          continue;
        }
        // Staying on b first, so that ties keep the run going.
        for (size_t step = 0; step < nb; ++step) {
          const size_t b2 = (b + step) % nb;
          if (cost[b2] == inf) continue;
          const Cost c{cost[b2].first + (b2 != b), cost[b2].second + prio};
          if (c < next[b]) {
            next[b] = c;
            from[k * nb + b] = static_cast<uint32_t>(b2);
          }
        }
      }
      cost.swap(next);
    }
    size_t b = static_cast<size_t>(std::min_element(cost.begin(), cost.end()) - cost.begin());
    std::vector<bool> was_free(order.size());
    for (size_t k = order.size(); k-- > 0;) {
      const size_t i = order[k];
      was_free[k] = p_.backend[i] == kNone;
      if (was_free[k]) p_.backend[i] = b;
      if (k > 0) b = from[k * nb + b];
    }
    place_cuts(order, was_free);
    // A free node joined a run that holds a pinned node (neighbour) or a run
    // of free nodes only (fallback: the first backend that runs them all).
    for (size_t k = 0; k < order.size();) {
      size_t end = k;
      bool pinned = false;
      while (end < order.size() && p_.backend[order[end]] == p_.backend[order[k]]) {
        pinned = pinned || (!was_free[end] && !follows_root_[order[end]]);
        ++end;
      }
      for (size_t m = k; m < end; ++m)
        if (was_free[m]) p_.why[order[m]] = pinned ? Placement::Neighbour : Placement::Fallback;
      k = end;
    }
  }

  // Backend whose memory tensor i lives in, by the current assignment.
  const BufferType* memory_of(size_t i) const {
    const Tensor* t = p_.tensors[i];
    if (p_.preplaced[i]) return &root_of(t)->buffer->type();
    const size_t b = p_.backend[t->view_src ? p_.index.at(t->view_src) : i];
    return b == kNone ? nullptr : ctx_.compute_type[b];
  }

  // Bytes copied into backend b for the readers order[from, to) that run on b.
  // Tensors that readers before order[from] already copied into b are free.
  size_t crossing_bytes(const std::vector<size_t>& order, size_t before, size_t from, size_t to, size_t b) {
    seen_.clear();
    size_t bytes = 0;
    for (size_t k = from; k < to; ++k)
      for (int j = 0; j < kMaxSrc; ++j) {
        const Tensor* s = p_.tensors[order[k]]->src[j];
        if (!s) continue;
        const size_t si = p_.index.at(s);
        const BufferType* type = memory_of(si);
        if (type && device(b).supports_operand(*p_.tensors[order[k]], j, *type)) continue;
        if (std::find(seen_.begin(), seen_.end(), si) != seen_.end()) continue;
        seen_.push_back(si);
        bool copied = false;
        for (size_t pos : readers_[si]) copied = copied || (pos < before && p_.backend[order[pos]] == b);
        if (!copied) bytes += s->nbytes();
      }
    return bytes;
  }

  // The DP fixes how many changes there are, not where a run of free nodes
  // between backends A and B switches. Choose the switch that copies the
  // fewest bytes (readers: the run, and the B nodes after it), the earliest
  // among equals.
  void place_cuts(const std::vector<size_t>& order, const std::vector<bool>& was_free) {
    constexpr size_t kWindow = 64;
    readers_.assign(p_.tensors.size(), {});
    for (size_t k = 0; k < order.size(); ++k)
      for (const Tensor* s : p_.tensors[order[k]]->src)
        if (s) readers_[p_.index.at(s)].push_back(k);
    for (size_t k = 1; k < order.size();) {
      if (!was_free[k] || follows_root_[order[k]]) {
        ++k;
        continue;
      }
      size_t end = k;
      while (end < order.size() && was_free[end] && !follows_root_[order[end]]) ++end;
      if (end == order.size()) break;
      const size_t a = p_.backend[order[k - 1]], b = p_.backend[order[end]];
      const size_t run_begin = k;
      k = end;
      if (a == b || end - run_begin > kWindow) continue;
      bool two_sided = true;
      for (size_t m = run_begin; m < end; ++m)
        two_sided = two_sided && (p_.backend[order[m]] == a || p_.backend[order[m]] == b);
      if (!two_sided) continue;
      size_t window_end = end;
      while (window_end < order.size() && window_end - end < kWindow && p_.backend[order[window_end]] == b) ++window_end;
      // Valid cuts: A runs order[run_begin, cut), B runs order[cut, end).
      size_t best_cut = kNone, best_bytes = SIZE_MAX;
      for (size_t cut = run_begin; cut <= end; ++cut) {
        bool ok = true;
        for (size_t m = run_begin; m < end && ok; ++m) {
          const size_t want = m < cut ? a : b;
          ok = want == p_.backend[order[m]] || supports(want, *p_.tensors[order[m]]);
        }
        if (!ok) continue;
        for (size_t m = run_begin; m < end; ++m) p_.backend[order[m]] = m < cut ? a : b;
        const size_t bytes = crossing_bytes(order, run_begin, run_begin, cut, a) +
                             crossing_bytes(order, run_begin, cut, window_end, b);
        if (bytes < best_bytes) best_bytes = bytes, best_cut = cut;
      }
      if (best_cut == kNone) continue;  // cannot happen: the DP's own cut is valid
      for (size_t m = run_begin; m < end; ++m) p_.backend[order[m]] = m < best_cut ? a : b;
    }
  }

  [[noreturn]] void no_backend(size_t i) const {
    const Tensor& t = *p_.tensors[i];
    std::string tried, operands;
    for (size_t b = 0; b < ctx_.backends.size(); ++b) tried += fmt::format("{}{}", b ? ", " : "", backend_name(b));
    for (const Tensor* s : t.src)
      if (s) operands += fmt::format(" {} {}", tensor_label(*s), s->shape_string());
    fail("scheduler: no backend supports op {} of tensor {} {} (tried {}; operands:{})", op_name(t.op), tensor_label(t),
         t.shape_string(), tried, operands);
  }

  Scheduler::Plan& p_;
  const AssignContext& ctx_;
  std::vector<bool> follows_root_;
  std::vector<size_t> seen_;
  std::vector<std::vector<size_t>> readers_;  // per tensor: positions in the computing order
};

void push(std::vector<uint64_t>& sig, uint64_t v) { sig.push_back(v); }

}  // namespace

void describe_graph(Scheduler::Plan& plan, const Graph& graph, const AssignContext& ctx) {
  plan.graph = &graph;
  plan.tensors.clear();
  plan.tensors.reserve(graph.leafs().size() + graph.nodes().size());
  plan.tensors.insert(plan.tensors.end(), graph.leafs().begin(), graph.leafs().end());
  plan.tensors.insert(plan.tensors.end(), graph.nodes().begin(), graph.nodes().end());
  plan.n_leafs = graph.leafs().size();
  plan.index.clear();
  plan.index.reserve(plan.tensors.size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) plan.index.emplace(plan.tensors[i], i);
  plan.preplaced.assign(plan.tensors.size(), 0);
  auto& sig = plan.signature;
  sig.clear();
  sig.reserve(plan.tensors.size() * 24);
  push(sig, plan.n_leafs);
  auto index_of = [&](const Tensor* t) -> uint64_t {
    if (!t) return kNone;
    auto it = plan.index.find(t);
    if (it == plan.index.end()) fail("scheduler: tensor {} is read but is not part of the graph", tensor_label(*t));
    return it->second;
  };
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const Tensor& t = *plan.tensors[i];
    push(sig, static_cast<uint64_t>(t.op) | static_cast<uint64_t>(t.type) << 8 | uint64_t{t.flags} << 16);
    for (int d = 0; d < kMaxDims; ++d) {
      push(sig, static_cast<uint64_t>(t.ne[d]));
      push(sig, t.nb[d]);
    }
    for (int k = 0; k < kMaxOpParams; k += 2)
      push(sig, static_cast<uint32_t>(t.op_params[k]) | uint64_t{static_cast<uint32_t>(t.op_params[k + 1])} << 32);
    for (const Tensor* s : t.src) push(sig, index_of(s));
    push(sig, index_of(t.view_src));
    push(sig, t.view_offs);
    const size_t r = t.view_src ? index_of(t.view_src) : i;
    if (r == i) plan.preplaced[i] = t.buffer && ctx.preplaced(t);
    else plan.preplaced[i] = plan.preplaced[r];
    if (r == i && plan.preplaced[i]) {
      push(sig, reinterpret_cast<uintptr_t>(&t.buffer->type()));
      push(sig, static_cast<uint64_t>(t.buffer->usage()));
    }
    auto it = ctx.user->find(&t);
    push(sig, it == ctx.user->end() ? kNone : it->second);
  }
}

void assign_backends(Scheduler::Plan& plan, const AssignContext& ctx) { Assigner(plan, ctx).run(); }

BufferType* memory_type(const Scheduler::Plan& plan, const AssignContext& ctx, size_t i) {
  const Tensor* t = plan.tensors[i];
  const Tensor* r = root_of(t);
  if (plan.preplaced[i]) return &r->buffer->type();
  const size_t ri = t->view_src ? plan.index.at(r) : i;
  const size_t b = plan.backend[ri];
  return b == kNone ? nullptr : ctx.compute_type[b];
}

}  // namespace loom::sched_detail
