// Generated Unigram vocabularies ("t5"), laid out as T5's: <pad> = 0,
// </s> = 1, <unk> = 2 (llama.cpp's defaults), one user-defined token, then
// pieces learned from the built-in texts, each scored by the log of how
// often it occurs (longer pieces of common words score above their parts).
// And the precompiled character map: a Darts-clone double array over the
// keys, as SentencePiece writes it.
#include <cmath>
#include <cstring>
#include <deque>
#include <map>

#include "loom/error.h"
#include "model_gen/vocab_gen.h"
#include "model_gen/vocab_learn.h"

namespace loom::vocab_gen {

Vocab build_unigram(int n_vocab) {
  Vocab v;
  v.add("<pad>", TokenType::Control);
  v.add("</s>", TokenType::Control);
  v.add("<unk>", TokenType::Unknown);
  v.add("<br>", TokenType::UserDefined);

  // Words as the normalizer leaves them: each after a U+2581.
  std::vector<std::string> marked;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) marked.push_back(std::string(kEscapedSpace) + current);
    current.clear();
  };
  for (std::string_view text : {vocab_training_text(), vocab_mixed_text()})
    for (char c : text) {
      if (c == ' ' || c == '\n' || c == '\t' || c == '\r') flush();
      else current += c;
    }
  flush();
  const std::vector<Word> words = count_words(marked);

  // Pieces: single characters, most frequent first, then merged pairs.
  std::map<std::string, int64_t> char_count;
  int64_t total = 0;
  for (const Word& w : words)
    for (const std::string& s : w.symbols) {
      char_count[s] += w.count;
      total += w.count;
    }
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::stable_sort(chars.begin(), chars.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const size_t capacity = static_cast<size_t>(n_vocab);
  std::vector<std::string> pieces;
  std::set<std::string> seen;
  for (const auto& [c, count] : chars) {
    if (v.tokens.size() + pieces.size() >= capacity) break;
    pieces.push_back(c);
    seen.insert(c);
  }
  learn_merges(words, [&](const Merge& m) {
    if (v.tokens.size() + pieces.size() >= capacity) return false;
    if (seen.insert(m.first + m.second).second) pieces.push_back(m.first + m.second);
    return true;
  });

  // Score: log of the piece's share of the text, counted in the words
  // (each occurrence weighs as much as the characters it covers).
  for (const std::string& piece : pieces) {
    int64_t occurrences = 0;
    for (const Word& w : words) {
      std::string joined;
      for (const std::string& s : w.symbols) joined += s;
      for (size_t at = joined.find(piece); at != std::string::npos; at = joined.find(piece, at + 1))
        occurrences += w.count;
    }
    const double share = static_cast<double>(std::max<int64_t>(occurrences, 1)) * static_cast<double>(piece.size()) /
                         static_cast<double>(total * 4);
    v.add(piece, TokenType::Normal, static_cast<float>(std::log(share)));
  }
  for (int i = 0; v.tokens.size() < capacity; ++i) v.add(fmt::format("<extra_id_{}>", i), TokenType::Unused);
  return v;
}

}  // namespace loom::vocab_gen

namespace loom {

std::vector<uint8_t> build_precompiled_charsmap(const std::vector<std::pair<std::string, std::string>>& map) {
  // A trie over the keys; a key's node holds its replacement's offset.
  struct Node {
    std::map<uint8_t, int> next;
    int64_t value = -1;
  };
  std::vector<Node> trie(1);
  std::string replacements;
  for (const auto& [key, replacement] : map) {
    if (key.empty() || key.find('\0') != std::string::npos)
      fail("precompiled charsmap: key '{}' is empty or holds a NUL byte", key);
    int node = 0;
    for (unsigned char c : key) {
      auto it = trie[node].next.find(c);
      if (it == trie[node].next.end()) {
        it = trie[node].next.emplace(c, static_cast<int>(trie.size())).first;
        trie.emplace_back();
      }
      node = it->second;
    }
    trie[node].value = static_cast<int64_t>(replacements.size());
    replacements.append(replacement).push_back('\0');
  }

  // Each node at unit p gets an offset o: its children sit at p^o^label and
  // its value unit at p^o. Every p^o differs, so a label never matches a
  // unit that belongs to another node.
  std::vector<uint32_t> units(1, 0);
  std::vector<bool> used(1, true);
  std::set<uint32_t> bases;
  auto is_free = [&](uint32_t p) { return p >= used.size() || !used[p]; };
  auto take = [&](uint32_t p, uint32_t unit) {
    if (p >= units.size()) {
      units.resize(p + 1, 0);
      used.resize(p + 1, false);
    }
    units[p] = unit;
    used[p] = true;
  };
  std::deque<std::pair<int, uint32_t>> queue = {{0, 0}};  // trie node, unit
  while (!queue.empty()) {
    const auto [node, p] = queue.front();
    queue.pop_front();
    const Node& n = trie[node];
    uint32_t offset = 1;
    for (;; ++offset) {
      const uint32_t base = p ^ offset;
      if (bases.count(base) || (n.value >= 0 && !is_free(base))) continue;
      bool fits = true;
      for (const auto& [c, child] : n.next) fits = fits && is_free(base ^ c);
      if (fits) break;
    }
    if (offset >= (1u << 21)) fail("precompiled charsmap: the double array outgrew 21-bit offsets");
    const uint32_t base = p ^ offset;
    bases.insert(base);
    const uint32_t label = p == 0 ? 0 : units[p] & 0xFF;
    take(p, label | (n.value >= 0 ? 1u << 8 : 0) | (offset << 10));
    if (n.value >= 0) take(base, (1u << 31) | static_cast<uint32_t>(n.value));
    for (const auto& [c, child] : n.next) {
      take(base ^ c, c);  // the label now, the rest when the child is placed
      queue.emplace_back(child, base ^ c);
    }
  }

  // Whole blocks of 256 units: a walk looks at base^c for any byte c, and
  // a unit past the end would be an error, not a mismatch.
  units.resize((units.size() + 255) / 256 * 256, 0);
  std::vector<uint8_t> out(sizeof(uint32_t) + units.size() * sizeof(uint32_t));
  const uint32_t array_bytes = static_cast<uint32_t>(units.size() * sizeof(uint32_t));
  std::memcpy(out.data(), &array_bytes, sizeof(array_bytes));
  std::memcpy(out.data() + sizeof(array_bytes), units.data(), array_bytes);
  out.insert(out.end(), replacements.begin(), replacements.end());
  return out;
}

const std::vector<std::pair<std::string, std::string>>& test_charsmap_entries() {
  static const std::vector<std::pair<std::string, std::string>> entries = [] {
    std::vector<std::pair<std::string, std::string>> e = {
        {"\t", " "},                         // whitespace as a space, as T5's map has it
        {"\n", " "},
        {"\r", ""},                          // dropped
        {"\xC2\xA0", " "},                   // NBSP
        {"\xE3\x80\x80", " "},               // ideographic space
        {"\xEF\xAC\x81", "fi"},              // U+FB01 ligature
        {"\xE2\x80\xA6", "..."},             // U+2026 ellipsis
        {"e\xCC\x81", "\xC3\xA9"},           // e + combining acute: composed (a two-character key)
        {"\xE2\x80\x9C", "\""},              // curly quotes
        {"\xE2\x80\x9D", "\""},
    };
    for (int i = 0; i < 26; ++i) {  // full-width Latin letters and digits to ASCII
      std::string upper, lower;
      tok::append_utf8(upper, 0xFF21 + i);
      tok::append_utf8(lower, 0xFF41 + i);
      e.push_back({upper, std::string(1, static_cast<char>('A' + i))});
      e.push_back({lower, std::string(1, static_cast<char>('a' + i))});
    }
    for (int i = 0; i < 10; ++i) {
      std::string digit;
      tok::append_utf8(digit, 0xFF10 + i);
      e.push_back({digit, std::string(1, static_cast<char>('0' + i))});
    }
    return e;
  }();
  return entries;
}

}  // namespace loom
