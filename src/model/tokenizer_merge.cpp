// The two merge algorithms, on one fragment of raw text each.
//
// SPM: the text (spaces already escaped as U+2581) starts as one symbol per
// UTF-8 character; the adjacent pair whose concatenation is the vocabulary
// token with the highest score merges first (leftmost on ties), until no
// pair forms a token. Symbols that are not tokens fall back to byte tokens.
//
// BPE: each pre-tokenized word (byte-level symbols) starts as one symbol per
// character; the adjacent pair with the lowest merge rank merges first
// (leftmost on ties).
#include <queue>

#include "loom/error.h"
#include "tokenizer_internal.h"

namespace loom {
namespace {

struct Symbol {
  int prev, next;
  size_t begin, length;  // bytes in the fragment
};

// Splits `text` into one symbol per UTF-8 character, linked in order.
std::vector<Symbol> split_symbols(std::string_view text) {
  std::vector<Symbol> symbols;
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t length = std::min(tok::utf8_len(text[offset]), text.size() - offset);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, offset + length == text.size() ? -1 : index + 1, offset, length});
    offset += length;
  }
  return symbols;
}

// "<0xXX>", the text of an SPM-style byte token.
std::string byte_token_text(uint8_t byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return {'<', '0', 'x', kHex[byte >> 4], kHex[byte & 15], '>'};
}

}  // namespace

int32_t Tokenizer::Impl::merge_rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + 1 + right.size());
  key.append(left).append(" ").append(right);
  auto it = merge_ranks.find(key);
  return it == merge_ranks.end() ? -1 : it->second;
}

int32_t Tokenizer::Impl::byte_token(uint8_t byte) const {
  int32_t id = lookup(byte_token_text(byte));
  if (id == kNoToken) id = lookup(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  if (id == kNoToken) id = unk;
  if (id == kNoToken)
    fail("{}: tokenizer: no token for byte 0x{:02X} (neither <0x{:02X}> nor an unknown token)", path, byte, byte);
  return id;
}

void Tokenizer::Impl::spm_tokenize(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols = split_symbols(text);
  struct Bigram {
    int left, right;
    float score;
    size_t size;
  };
  auto lower = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> queue(lower);
  // Which pair of symbols formed a text, for re-splitting a symbol that is
  // not itself a token (only with malformed UTF-8).
  std::unordered_map<std::string_view, std::pair<int, int>> formed_by;

  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::string_view pair = text.substr(symbols[left].begin, symbols[left].length + symbols[right].length);
    const int32_t id = lookup(pair);
    if (id == kNoToken) return;
    queue.push({left, right, scores[id], pair.size()});
    formed_by[pair] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.size) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_pair(left.prev, bigram.left);
    try_pair(bigram.left, left.next);
  }

  auto emit = [&](auto&& self, const Symbol& symbol) -> void {
    const std::string_view piece = text.substr(symbol.begin, symbol.length);
    if (const int32_t id = lookup(piece); id != kNoToken) {
      out.push_back(id);
      return;
    }
    auto it = formed_by.find(piece);
    if (it == formed_by.end()) {
      for (char c : piece) out.push_back(byte_token(static_cast<uint8_t>(c)));
      return;
    }
    self(self, symbols[it->second.first]);
    self(self, symbols[it->second.second]);
  };
  if (symbols.empty()) return;
  for (int i = 0; i != -1; i = symbols[i].next) emit(emit, symbols[i]);
}

void Tokenizer::Impl::bpe_tokenize(std::string_view text, std::vector<int32_t>& out) const {
  struct Bigram {
    int left, right;
    int32_t rank;
    std::string text;
  };
  auto later = [](const Bigram& a, const Bigram& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); };
  const bool byte_level = tok::byte_encoded(pre);

  for (const std::string& word : splitter->split(text)) {
    // ignore_merges: a word that is a token is that token. Gemma 4 does the
    // same for runs of newlines.
    if (ignore_merges || (pre == PreTokenizer::Gemma4 && word.find_first_not_of('\n') == std::string::npos)) {
      if (const int32_t id = lookup(word); id != kNoToken) {
        out.push_back(id);
        continue;
      }
    }
    std::vector<Symbol> symbols = split_symbols(word);
    std::priority_queue<Bigram, std::vector<Bigram>, decltype(later)> queue(later);
    auto view = [&](const Symbol& s) { return std::string_view(word).substr(s.begin, s.length); };
    auto try_pair = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const int32_t rank = merge_rank(view(symbols[left]), view(symbols[right]));
      if (rank < 0) return;
      queue.push({left, right, rank, std::string(view(symbols[left])) + std::string(view(symbols[right]))});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_pair(i - 1, i);

    while (!queue.empty()) {
      const Bigram bigram = queue.top();
      queue.pop();
      Symbol& left = symbols[bigram.left];
      Symbol& right = symbols[bigram.right];
      if (left.length == 0 || right.length == 0) continue;
      if (left.length + right.length != bigram.text.size() ||
          word.compare(left.begin, bigram.text.size(), bigram.text) != 0)
        continue;  // outdated: one side merged since
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = bigram.left;
      try_pair(left.prev, bigram.left);
      try_pair(bigram.left, left.next);
    }

    for (const Symbol& symbol : symbols) {
      if (symbol.length == 0) continue;
      const std::string_view piece = view(symbol);
      if (const int32_t id = lookup(piece); id != kNoToken) {
        out.push_back(id);
        continue;
      }
      // Not a token (a character outside the vocabulary, or merges that
      // make non-tokens): one token per byte where such a token exists, the
      // byte itself for byte-level vocabularies, else <0xXX>.
      for (char c : piece) {
        const int32_t id = byte_level ? lookup(std::string_view(&c, 1)) : lookup(byte_token_text(static_cast<uint8_t>(c)));
        if (id != kNoToken) out.push_back(id);
      }
    }
  }
}

}  // namespace loom
