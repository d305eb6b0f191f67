// What the vocabulary generators share: words counted from a text, classic
// BPE merge learning, and the vocabulary being built. Test support.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/tokenizer.h"
#include "tokenizer_internal.h"

namespace loom::vocab_gen {

using Symbols = std::vector<std::string>;
using Merge = std::pair<std::string, std::string>;

struct Word {
  Symbols symbols;
  int64_t count;
};

// Counts distinct words in first-seen order, each split into UTF-8 characters.
inline std::vector<Word> count_words(const std::vector<std::string>& words) {
  std::vector<Word> out;
  std::unordered_map<std::string, size_t> index;
  for (const std::string& w : words) {
    if (w.empty()) continue;
    auto [it, inserted] = index.emplace(w, out.size());
    if (!inserted) {
      ++out[it->second].count;
      continue;
    }
    Symbols symbols;
    for (size_t i = 0; i < w.size();) {
      const size_t n = std::min(tok::utf8_len(w[i]), w.size() - i);
      symbols.push_back(w.substr(i, n));
      i += n;
    }
    out.push_back({std::move(symbols), 1});
  }
  return out;
}

// Classic BPE training: merge the most frequent adjacent pair (ties: the
// smallest pair), until `keep` says stop or no pair is left. Pair counts are
// updated only for the words that hold the merged pair. Symbols are interned
// as ids and pairs kept ordered by count, so that a vocabulary of 5000
// tokens costs milliseconds, not the seconds that string-keyed maps and a
// scan of every pair per merge took (most under ASan).
template <class Keep>
std::vector<Merge> learn_merges(const std::vector<Word>& words, Keep keep) {
  std::vector<std::string> text;  // symbol id -> its text
  std::unordered_map<std::string, uint32_t> ids;
  auto intern = [&](const std::string& s) {
    const auto [it, inserted] = ids.emplace(s, static_cast<uint32_t>(text.size()));
    if (inserted) text.push_back(s);
    return it->second;
  };
  std::vector<std::vector<uint32_t>> seqs(words.size());
  for (size_t w = 0; w < words.size(); ++w)
    for (const std::string& sym : words[w].symbols) seqs[w].push_back(intern(sym));

  using Key = uint64_t;  // first id << 32 | second id
  auto key = [](uint32_t a, uint32_t b) { return static_cast<Key>(a) << 32 | b; };
  // The order of merging: the higher count first, then the smaller pair of texts.
  auto before = [&text](const std::pair<int64_t, Key>& x, const std::pair<int64_t, Key>& y) {
    if (x.first != y.first) return x.first > y.first;
    const int c = text[x.second >> 32].compare(text[y.second >> 32]);
    if (c != 0) return c < 0;
    return text[x.second & 0xffffffffu] < text[y.second & 0xffffffffu];
  };
  std::unordered_map<Key, int64_t> pairs;
  std::unordered_map<Key, std::vector<size_t>> holders;  // words that held the pair (some may no longer)
  std::unordered_map<Key, int64_t> touched;              // pairs whose count changed, with their count before
  auto count = [&](size_t w, int64_t sign) {
    const std::vector<uint32_t>& seq = seqs[w];
    for (size_t i = 1; i < seq.size(); ++i) {
      const Key k = key(seq[i - 1], seq[i]);
      int64_t& n = pairs[k];
      touched.emplace(k, n);
      n += sign * words[w].count;
      if (n == 0) pairs.erase(k);
      if (sign > 0) holders[k].push_back(w);
    }
  };
  for (size_t w = 0; w < words.size(); ++w) count(w, +1);
  std::set<std::pair<int64_t, Key>, decltype(before)> queue(before);
  for (const auto& [k, n] : pairs) queue.emplace(n, k);
  touched.clear();

  std::vector<Merge> merges;
  while (!queue.empty()) {
    const Key best = queue.begin()->second;
    const uint32_t a = static_cast<uint32_t>(best >> 32), b = static_cast<uint32_t>(best & 0xffffffffu);
    Merge merge{text[a], text[b]};
    if (!keep(merge)) break;
    merges.push_back(std::move(merge));
    const uint32_t joined = intern(text[a] + text[b]);
    std::vector<size_t> held = std::move(holders[best]);
    holders.erase(best);  // the pair is gone; a merge that makes it again adds its words anew
    std::sort(held.begin(), held.end());
    held.erase(std::unique(held.begin(), held.end()), held.end());
    for (size_t w : held) {
      count(w, -1);
      std::vector<uint32_t>& seq = seqs[w];
      size_t out = 0;
      for (size_t i = 0; i < seq.size(); ++i) {
        if (i + 1 < seq.size() && seq[i] == a && seq[i + 1] == b) {
          seq[out++] = joined;
          ++i;
        } else {
          seq[out++] = seq[i];
        }
      }
      seq.resize(out);
      count(w, +1);
    }
    for (const auto& [k, n_before] : touched) {
      const auto it = pairs.find(k);
      const int64_t n_after = it == pairs.end() ? 0 : it->second;
      if (n_after == n_before) continue;
      if (n_before != 0) queue.erase({n_before, k});
      if (n_after != 0) queue.emplace(n_after, k);
    }
    touched.clear();
  }
  return merges;
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<std::string> merges;
  void add(std::string text, TokenType type, float score = 0.0f) {
    tokens.push_back(std::move(text));
    types.push_back(static_cast<int32_t>(type));
    scores.push_back(score);
  }
};

inline constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";

inline std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  for (size_t pos = 0;;) {
    const size_t hit = text.find(from, pos);
    out.append(text.substr(pos, hit == std::string_view::npos ? std::string_view::npos : hit - pos));
    if (hit == std::string_view::npos) return out;
    out.append(to);
    pos = hit + from.size();
  }
}

// The vocabularies of the WordPiece and Unigram styles (vocab_gen_wordpiece.cpp, vocab_gen_unigram.cpp).
Vocab build_wordpiece(int n_vocab);
Vocab build_unigram(int n_vocab);
// The RWKV style's vocabulary (vocab_gen_rwkv.cpp).
Vocab build_rwkv(int n_vocab);

}  // namespace loom::vocab_gen
