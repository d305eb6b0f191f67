// ByteTrie: built breadth first from the sorted keys, so that every node's
// edges are consecutive and sorted by byte.
#include <algorithm>
#include <deque>

#include "tokenizer_internal.h"

namespace loom::tok {

ByteTrie::ByteTrie(std::vector<std::pair<std::string_view, int32_t>> keys) {
  std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  // A node covers the keys [begin, end) that share its first `depth` bytes.
  struct Range {
    int32_t node;
    size_t begin, end, depth;
  };
  std::deque<Range> queue = {{kRoot, 0, keys.size(), 0}};
  while (!queue.empty()) {
    Range r = queue.front();
    queue.pop_front();
    for (; r.begin < r.end && keys[r.begin].first.size() == r.depth; ++r.begin)  // keys ending here
      nodes_[r.node].token = keys[r.begin].second;
    nodes_[r.node].first_edge = static_cast<uint32_t>(labels_.size());
    for (size_t i = r.begin; i < r.end;) {
      const auto byte = static_cast<uint8_t>(keys[i].first[r.depth]);
      size_t j = i + 1;
      while (j < r.end && static_cast<uint8_t>(keys[j].first[r.depth]) == byte) ++j;
      const auto child = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      labels_.push_back(byte);
      targets_.push_back(child);
      queue.push_back({child, i, j, r.depth + 1});
      i = j;
    }
    nodes_[r.node].n_edges = static_cast<uint32_t>(labels_.size()) - nodes_[r.node].first_edge;
  }
}

int32_t ByteTrie::child(int32_t node, unsigned char c) const {
  const Node& n = nodes_[node];
  const auto first = labels_.begin() + n.first_edge, last = first + n.n_edges;
  const auto it = std::lower_bound(first, last, c);
  return it != last && *it == c ? targets_[it - labels_.begin()] : -1;
}

}  // namespace loom::tok
