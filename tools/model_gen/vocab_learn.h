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
// updated only for the words that hold the merged pair.
template <class Keep>
std::vector<Merge> learn_merges(std::vector<Word> words, Keep keep) {
  std::map<Merge, int64_t> pairs;
  std::map<Merge, std::set<size_t>> holders;  // words that held the pair (some may no longer)
  auto count = [&](size_t index, int64_t sign) {
    const Word& w = words[index];
    for (size_t i = 1; i < w.symbols.size(); ++i) {
      const Merge pair{w.symbols[i - 1], w.symbols[i]};
      auto it = pairs.emplace(pair, 0).first;
      it->second += sign * w.count;
      if (it->second == 0) pairs.erase(it);
      if (sign > 0) holders[pair].insert(index);
    }
  };
  for (size_t i = 0; i < words.size(); ++i) count(i, +1);

  std::vector<Merge> merges;
  while (!pairs.empty()) {
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->second > best->second) best = it;
    if (!keep(best->first)) break;
    const Merge merge = best->first;
    merges.push_back(merge);
    const std::string joined = merge.first + merge.second;
    for (size_t index : std::set<size_t>(holders[merge])) {
      count(index, -1);
      Symbols next;
      Symbols& symbols = words[index].symbols;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == merge.first && symbols[i + 1] == merge.second) {
          next.push_back(joined);
          ++i;
        } else {
          next.push_back(symbols[i]);
        }
      }
      symbols = std::move(next);
      count(index, +1);
    }
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

}  // namespace loom::vocab_gen
