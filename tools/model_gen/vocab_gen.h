// Generated vocabularies (`loom make-model`, `loom tokenize --write-vocab`,
// the tokenizer tests): deterministic, self-consistent vocabularies learned
// from a built-in English text, which llama.cpp loads and tokenizes exactly
// as Loom does. Test support, not part of libloom.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/tokenizer.h"

namespace loom {

namespace gguf {
class Writer;
}  // namespace gguf

// Styles of generated vocabulary: SentencePiece ("llama", as Llama 2 or as
// Gemma), BPE with any of llama.cpp's pre-tokenizers, WordPiece ("bert"),
// Unigram ("t5", with or without a precompiled character map) or RWKV.
struct TokenizerStyle {
  enum class Model {
    Spm,          // "llama": <unk> <s> </s>, 256 byte tokens, scored pieces, "▁", space prefix
    SpmGemma,     // "llama" as Gemma writes it: <pad> <eos> <bos> <unk>, turn tokens, no space prefix
    Bpe,          // "gpt2" (byte-level symbols or, for gemma4-style pre-tokenizers, raw UTF-8)
    Wpm,          // "bert": BERT's special ids, "▁"-initial and continuation pieces
    Ugm,          // "t5": <pad> </s> <unk>, scored pieces, space prefix
    UgmCharsmap,  // "t5" with test_charsmap_entries() as its map and extra whitespace removed
    Rwkv,         // "rwkv": <s>, the 256 bytes, learned byte strings, written as Python's repr() writes bytes
  };
  Model model = Model::Spm;
  PreTokenizer pre = PreTokenizer::None;  // Bpe only

  static const TokenizerStyle Spm, SpmGemma, Bpe, BpeLlama3, BpeQwen2, Wpm, Ugm, UgmCharsmap, Rwkv;
  friend bool operator==(const TokenizerStyle&, const TokenizerStyle&) = default;
};
inline const TokenizerStyle TokenizerStyle::Spm{TokenizerStyle::Model::Spm, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::SpmGemma{TokenizerStyle::Model::SpmGemma, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::Bpe{TokenizerStyle::Model::Bpe, PreTokenizer::Gpt2};
inline const TokenizerStyle TokenizerStyle::BpeLlama3{TokenizerStyle::Model::Bpe, PreTokenizer::Llama3};
inline const TokenizerStyle TokenizerStyle::BpeQwen2{TokenizerStyle::Model::Bpe, PreTokenizer::Qwen2};
inline const TokenizerStyle TokenizerStyle::Wpm{TokenizerStyle::Model::Wpm, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::Ugm{TokenizerStyle::Model::Ugm, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::UgmCharsmap{TokenizerStyle::Model::UgmCharsmap, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::Rwkv{TokenizerStyle::Model::Rwkv, PreTokenizer::None};

// "spm" (or "llama"), "spm-gemma" (or "gemma"), "bpe" (or "gpt2"),
// "bpe-NAME" for any tokenizer.ggml.pre name llama.cpp knows (bpe-llama-bpe,
// bpe-deepseek-v3, bpe-gemma4, ...; bpe-llama3 and bpe-qwen2 too), "wpm" (or
// "bert"), "ugm" (or "t5"), "ugm-charsmap" and "rwkv".
TokenizerStyle parse_tokenizer_style(std::string_view name);
// "spm", "spm-gemma", "bpe-" and the canonical pre-tokenizer name, "wpm",
// "ugm", "ugm-charsmap" or "rwkv".
std::string tokenizer_style_name(TokenizerStyle style);
// Every style: spm, spm-gemma, one BPE style per pre-tokenizer, wpm, ugm, ugm-charsmap, rwkv.
std::vector<TokenizerStyle> all_tokenizer_styles();
// The smallest n_vocab a style can be generated with.
int min_vocab_size(TokenizerStyle style);

// Writes tokenizer.ggml.* keys for a complete vocabulary of exactly n_vocab
// tokens, learned from a built-in English text (deterministic: the same
// arguments always give the same vocabulary). SPM: special tokens,
// <0x00>..<0xFF>, then pieces; BPE: the 256 byte symbols (or, without
// byte-level symbols, <0x00>..<0xFF> and the text's characters), learned
// merges, <|begin_of_text|> and <|end_of_text|>. Left-over slots become
// unused tokens. Throws when n_vocab is too small.
void write_tokenizer_metadata(gguf::Writer& writer, TokenizerStyle style, int n_vocab);

// A SentencePiece precompiled character map (tokenizer.ggml.precompiled_charsmap)
// that replaces each key by its value: the double array's size, a Darts-clone
// double array over the keys, then the NUL-terminated replacements.
std::vector<uint8_t> build_precompiled_charsmap(const std::vector<std::pair<std::string, std::string>>& map);
// The map of the ugm-charsmap style: tabs and newlines to spaces, \r
// dropped, NBSP and U+3000 to spaces, full-width letters and digits to
// ASCII, the "fi" ligature, the ellipsis and curly quotes spelt out, and
// "e" + U+0301 composed (a key of two characters).
const std::vector<std::pair<std::string, std::string>>& test_charsmap_entries();

// The built-in text the vocabularies are learned from.
std::string_view vocab_training_text();
// Text in many scripts, with digit runs, cased words, punctuation and
// whitespace runs: BPE vocabularies also learn from it, so that their merges
// cross the places where pre-tokenizers split differently.
std::string_view vocab_mixed_text();

}  // namespace loom
