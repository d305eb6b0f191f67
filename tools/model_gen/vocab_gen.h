// Generated vocabularies (`loom make-model`, `loom tokenize --write-vocab`,
// the tokenizer tests): deterministic, self-consistent vocabularies learned
// from a built-in English text, which llama.cpp loads and tokenizes exactly
// as Loom does. Test support, not part of libloom.
#pragma once

#include <string_view>

namespace loom {

namespace gguf {
class Writer;
}  // namespace gguf

// Styles of generated vocabulary.
enum class TokenizerStyle {
  Spm,        // "llama": <unk> <s> </s>, 256 byte tokens, scored pieces, "▁"
  Bpe,        // "gpt2" with pre-tokenizer "gpt-2"
  BpeLlama3,  // "gpt2" with pre-tokenizer "llama-bpe"
  BpeQwen2,   // "gpt2" with pre-tokenizer "qwen2"
};

// "spm" (or "llama"), "bpe" (or "gpt2", "bpe-gpt2"), "bpe-llama3", "bpe-qwen2".
TokenizerStyle parse_tokenizer_style(std::string_view name);
std::string_view tokenizer_style_name(TokenizerStyle style);
// The smallest n_vocab a style can be generated with.
int min_vocab_size(TokenizerStyle style);

// Writes tokenizer.ggml.* keys for a complete vocabulary of exactly n_vocab
// tokens, learned from a built-in English text (deterministic: the same
// arguments always give the same vocabulary). SPM: <unk>, <s>, </s>,
// <0x00>..<0xFF>, then pieces; BPE: the 256 byte symbols, learned merges,
// <|begin_of_text|> and <|end_of_text|>. Left-over slots become unused
// (SPM) or reserved control (BPE) tokens. Throws when n_vocab is too small.
void write_tokenizer_metadata(gguf::Writer& writer, TokenizerStyle style, int n_vocab);

// The built-in text the vocabularies are learned from.
std::string_view vocab_training_text();

}  // namespace loom
