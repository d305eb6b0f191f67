// Tokenizers for GGUF models, producing the same token ids as llama.cpp on
// the same file: SentencePiece-style (tokenizer.ggml.model = "llama": bigram
// merges by score over the text with spaces escaped as U+2581, byte fallback
// to <0xXX> tokens) and byte-level BPE ("gpt2": a pre-tokenizer regex splits
// the text into words, each word's bytes map to printable code points and
// merge by rank), WordPiece ("bert": normalized words split at punctuation,
// each matched greedily longest-first, a word that cannot be matched becomes
// [UNK]) and Unigram ("t5": SentencePiece normalization, then the
// segmentation with the best sum of token scores). Control, unknown and
// user-defined tokens written in the text are matched first (control/unknown
// only when parse_special is on).
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

enum class TokenizerKind {
  Spm,  // "llama": SentencePiece BPE
  Bpe,  // "gpt2", "gemma4": byte-level BPE
  Wpm,  // "bert": WordPiece
  Ugm,  // "t5": SentencePiece Unigram
  Rwkv,  // "rwkv": greedy longest match over byte strings written with Python's escapes
};

// The BPE pre-tokenizer (tokenizer.ggml.pre): one value per distinct set of
// split rules in llama.cpp; every name llama.cpp accepts maps to one of them
// (e.g. "qwen2", "stablelm2", "megrez", "grok-2" all split as Qwen2).
enum class PreTokenizer {
  None,             // SPM has no pre-tokenizer
  Default,          // "default" or missing
  Gpt2,             // "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", ...
  Llama3,           // "llama-bpe", "llama3", "dbrx", "smaug-bpe", "glm4", ...
  Jais2,            // "jais-2": llama3 with cascading whitespace runs
  DeepseekLlm,      // "deepseek-llm"
  DeepseekCoder,    // "deepseek-coder"
  Deepseek3,        // "deepseek-v3", "hunyuan-dense", "joyai-llm"
  Youtu,            // "youtu"
  Falcon,           // "falcon"
  Starcoder,        // "starcoder", "refact", "command-r", "smollm", "exaone", "minerva-7b", ...
  Qwen2,            // "qwen2", "stablelm2", "megrez", "hunyuan", "grok-2", "solar-open", ...
  Qwen35,           // "qwen35": qwen2 with combining marks inside words
  Bloom,            // "bloom", "poro-chat", "gpt3-finnish"
  Viking,           // "viking"
  Tekken,           // "tekken"
  Chameleon,        // "chameleon"
  Gpt4o,            // "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"
  GraniteEmbMulti,  // "granite-embed-multi-97m"
  TinyAya,          // "tiny_aya", "cohere2moe"
  KimiK2,           // "kimi-k2"
  SuperBpe,         // "superbpe"
  BailingMoe,       // "bailingmoe", "bailingmoe2", "llada-moe"
  SeedCoder,        // "seed-coder"
  Afmoe,            // "afmoe"
  Laguna,           // "laguna"
  ExaoneMoe,        // "exaone-moe"
  Minicpm5,         // "minicpm5"
  Gemma4,           // "gemma4", "granite-embed-multi-311m": spaces as U+2581, raw UTF-8 symbols
  SarvamMoe,        // "sarvam-moe": as gemma4
  Whitespace,       // "whitespace": runs of non-space, raw UTF-8 symbols
};

// The canonical tokenizer.ggml.pre name of a pre-tokenizer ("" for None).
std::string_view pre_tokenizer_name(PreTokenizer pre);
// Every pre-tokenizer but None, in declaration order.
std::span<const PreTokenizer> all_pre_tokenizers();

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
  // (tokenizer.ggml.add_bos_token / add_eos_token); WordPiece always wraps
  // the text in BOS ([CLS]) and SEP ([SEP]), as llama.cpp. parse_special: text
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
  int32_t sep() const;  // WordPiece's [SEP]; kNoToken for the others
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
