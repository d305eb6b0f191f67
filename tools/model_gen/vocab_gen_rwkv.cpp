// Generated RWKV vocabularies ("rwkv"), laid out as RWKV "world" files
// converted by llama.cpp: <s> (control), the 256 single bytes, then byte
// strings learned from the built-in texts (words with their leading space,
// digit runs, punctuation runs, as GPT-2 splits them, so that some strings
// hold multi-byte characters and spaces). Each text is the string's bytes as
// Python's repr() writes them without the b'...': printable ASCII as is,
// \t \n \r, \\ and \', every other byte as \xNN.
#include <set>

#include <fmt/format.h>

#include "model_gen/vocab_gen.h"
#include "model_gen/vocab_learn.h"

namespace loom::vocab_gen {
namespace {

std::string python_bytes_repr(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    switch (c) {
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      default:
        if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
        else out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

}  // namespace

Vocab build_rwkv(int n_vocab) {
  Vocab v;
  const size_t capacity = static_cast<size_t>(n_vocab);
  v.add("<s>", TokenType::Control);
  std::set<std::string> seen;
  for (int b = 0; b < 256 && v.tokens.size() < capacity; ++b) {
    v.add(python_bytes_repr(std::string(1, static_cast<char>(b))), TokenType::Normal);
    seen.insert(std::string(1, static_cast<char>(b)));
  }
  const std::string text = std::string(vocab_training_text()) + std::string(vocab_mixed_text());
  learn_merges(count_words(tok::PreSplitter(PreTokenizer::Gpt2).split(text)), [&](const Merge& m) {
    if (v.tokens.size() >= capacity) return false;
    if (seen.insert(m.first + m.second).second) v.add(python_bytes_repr(m.first + m.second), TokenType::Normal);
    return true;
  });
  for (int i = 0; v.tokens.size() < capacity; ++i) v.add(fmt::format("<unused{}>", i), TokenType::Unused);
  return v;
}

}  // namespace loom::vocab_gen
