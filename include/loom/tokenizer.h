// Tokenizers for GGUF models, producing the same token ids as llama.cpp on
// the same file: SentencePiece-style (tokenizer.ggml.model = "llama": bigram
// merges by score over the text with spaces escaped as U+2581, byte fallback
// to <0xXX> tokens) and byte-level BPE ("gpt2": a pre-tokenizer regex splits
// the text into words, each word's bytes map to printable code points and
// merge by rank). Control, unknown and user-defined tokens written in the
// text are matched first (control/unknown only when parse_special is on).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

namespace gguf {
class File;
}  // namespace gguf

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class TokenizerKind { Spm, Bpe };

// The BPE pre-tokenizer (tokenizer.ggml.pre), grouped as llama.cpp does.
enum class PreTokenizer {
  None,     // SPM has no pre-tokenizer
  Default,  // "default" or missing
  Gpt2,     // "gpt-2", "phi-2", ...
  Llama3,   // "llama-bpe", "llama3", ...
  Qwen2,    // "qwen2", "deepseek-r1-qwen", ...
};

class Tokenizer {
 public:
  static constexpr int32_t kNoToken = -1;

  // Reads tokenizer.ggml.* from a GGUF file; throws loom::Error naming the
  // file and the key when metadata is missing or inconsistent.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special: prepend BOS (append EOS) as the vocabulary asks
  // (tokenizer.ggml.add_bos_token / add_eos_token). parse_special: text
  // equal to a control or unknown token becomes that token.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // The text of a token sequence, as llama_detokenize(remove_special=false)
  // gives it: SPM drops the prefix space of the first token; "gpt-2" and
  // "llama-bpe" vocabularies clean up spaces before punctuation. Control and
  // unknown tokens render as their text only with render_special.
  std::string decode(std::span<const int32_t> tokens, bool render_special = false) const;

  // The bytes one token stands for: byte tokens give their byte, U+2581
  // gives a space, byte-level BPE symbols give their bytes; control and
  // unknown tokens give their text when render_special, else nothing.
  std::string token_to_piece(int32_t token, bool render_special = true) const;

  TokenizerKind kind() const;
  PreTokenizer pre_tokenizer() const;
  const std::string& model_name() const;  // tokenizer.ggml.model
  const std::string& pre_name() const;    // tokenizer.ggml.pre ("" for SPM)
  int32_t n_vocab() const;
  int32_t bos() const;  // kNoToken when the vocabulary has none
  int32_t eos() const;
  int32_t unk() const;
  int32_t pad() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  bool is_eog(int32_t token) const;  // ends generation: EOS, EOT, EOM, ...
  const std::string& token_text(int32_t token) const;
  TokenType token_type(int32_t token) const;
  float token_score(int32_t token) const;
  int32_t find_token(std::string_view text) const;  // kNoToken when absent

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The words a BPE pre-tokenizer splits text into (before the byte-level
// mapping); each word is then merged on its own.
std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text);

}  // namespace loom
