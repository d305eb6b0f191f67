// Generated vocabularies (`loom make-model`, `loom tokenize --write-vocab`,
// the tokenizer tests): deterministic, self-consistent vocabularies learned
// from a built-in English text, which llama.cpp loads and tokenizes exactly
// as Loom does. Test support, not part of libloom.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "loom/tokenizer.h"

namespace loom {

namespace gguf {
class Writer;
}  // namespace gguf

// Styles of generated vocabulary: SentencePiece ("llama", as Llama 2 or as
// Gemma) or BPE with any of llama.cpp's pre-tokenizers.
struct TokenizerStyle {
  enum class Model {
    Spm,       // "llama": <unk> <s> </s>, 256 byte tokens, scored pieces, "▁", space prefix
    SpmGemma,  // "llama" as Gemma writes it: <pad> <eos> <bos> <unk>, turn tokens, no space prefix
    Bpe,       // "gpt2" (byte-level symbols or, for gemma4-style pre-tokenizers, raw UTF-8)
  };
  Model model = Model::Spm;
  PreTokenizer pre = PreTokenizer::None;  // Bpe only

  static const TokenizerStyle Spm, SpmGemma, Bpe, BpeLlama3, BpeQwen2;
  friend bool operator==(const TokenizerStyle&, const TokenizerStyle&) = default;
};
inline const TokenizerStyle TokenizerStyle::Spm{TokenizerStyle::Model::Spm, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::SpmGemma{TokenizerStyle::Model::SpmGemma, PreTokenizer::None};
inline const TokenizerStyle TokenizerStyle::Bpe{TokenizerStyle::Model::Bpe, PreTokenizer::Gpt2};
inline const TokenizerStyle TokenizerStyle::BpeLlama3{TokenizerStyle::Model::Bpe, PreTokenizer::Llama3};
inline const TokenizerStyle TokenizerStyle::BpeQwen2{TokenizerStyle::Model::Bpe, PreTokenizer::Qwen2};

// "spm" (or "llama"), "spm-gemma" (or "gemma"), "bpe" (or "gpt2"), and
// "bpe-NAME" for any tokenizer.ggml.pre name llama.cpp knows (bpe-llama-bpe,
// bpe-deepseek-v3, bpe-gemma4, ...; bpe-llama3 and bpe-qwen2 too).
TokenizerStyle parse_tokenizer_style(std::string_view name);
// "spm", "spm-gemma", or "bpe-" and the canonical pre-tokenizer name.
std::string tokenizer_style_name(TokenizerStyle style);
// Every style: spm, spm-gemma, then one BPE style per pre-tokenizer.
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

// The built-in text the vocabularies are learned from.
std::string_view vocab_training_text();
// Text in many scripts, with digit runs, cased words, punctuation and
// whitespace runs: BPE vocabularies also learn from it, so that their merges
// cross the places where pre-tokenizers split differently.
std::string_view vocab_mixed_text();

}  // namespace loom
