// Generated WordPiece vocabularies ("bert"), laid out as BERT's: [PAD],
// [unused0..98], [UNK] = 100, [CLS] = 101, [SEP] = 102, [MASK] = 103 (the ids
// llama.cpp assumes when the file names none), then word-initial pieces
// ("▁" and a character) and continuation pieces learned from the built-in
// texts as normalized by the tokenizer itself. Characters that do not fit
// in n_vocab are left out, so words holding them become [UNK].
#include <map>

#include "loom/error.h"
#include "model_gen/vocab_gen.h"
#include "model_gen/vocab_learn.h"

namespace loom::vocab_gen {
namespace {

constexpr int kUnusedSlots = 99;

}  // namespace

Vocab build_wordpiece(int n_vocab) {
  Vocab v;
  v.add("[PAD]", TokenType::Control);
  for (int i = 0; i < kUnusedSlots; ++i) v.add(fmt::format("[unused{}]", i), TokenType::Unused);
  v.add("[UNK]", TokenType::Unknown);
  v.add("[CLS]", TokenType::Control);
  v.add("[SEP]", TokenType::Control);
  v.add("[MASK]", TokenType::Control);

  // Words as the tokenizer sees them, the first character carrying U+2581.
  const std::string text = std::string(vocab_training_text()) + std::string(vocab_mixed_text());
  std::vector<std::string> marked;
  for (const std::string& word : tok::wordpiece_words(text, true, true))
    marked.push_back(std::string(kEscapedSpace) + word);
  std::vector<Word> words = count_words(marked);
  for (Word& w : words) {  // "▁" and the first character form one symbol
    w.symbols[1] = w.symbols[0] + w.symbols[1];
    w.symbols.erase(w.symbols.begin());
  }

  // Characters (initial and continuation), most frequent first, then merges.
  std::map<std::string, int64_t> symbol_count;
  for (const Word& w : words)
    for (const std::string& s : w.symbols) symbol_count[s] += w.count;
  std::vector<std::pair<std::string, int64_t>> symbols(symbol_count.begin(), symbol_count.end());
  std::stable_sort(symbols.begin(), symbols.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  const size_t capacity = static_cast<size_t>(n_vocab);
  std::set<std::string> seen;
  for (const auto& [symbol, count] : symbols) {
    if (v.tokens.size() >= capacity) break;
    v.add(symbol, TokenType::Normal);
    seen.insert(symbol);
  }
  learn_merges(words, [&](const Merge& m) {
    if (v.tokens.size() >= capacity) return false;
    if (seen.insert(m.first + m.second).second) v.add(m.first + m.second, TokenType::Normal);
    return true;
  });
  for (int i = kUnusedSlots; v.tokens.size() < capacity; ++i) v.add(fmt::format("[unused{}]", i), TokenType::Unused);
  return v;
}

}  // namespace loom::vocab_gen
