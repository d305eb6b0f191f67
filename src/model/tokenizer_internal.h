// Internals shared by the tokenizer sources: the loaded vocabulary (Impl),
// UTF-8 helpers that treat malformed input the way llama.cpp does, the
// byte-level BPE symbol mapping, the pre-tokenizer regexes (PCRE2), the
// WordPiece normalizer (ICU) and the Unigram model.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "loom/tokenizer.h"

namespace loom::tok {

// U+2581, which SentencePiece-style vocabularies write for a space.
inline constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";

// Bytes in a UTF-8 sequence judged by its first byte only (1 for stray
// continuation bytes), as llama.cpp splits text into symbols.
size_t utf8_len(char lead);
// Code points of `text`; a malformed sequence gives U+FFFD and skips one byte.
std::vector<uint32_t> decode_utf8(std::string_view text);
void append_utf8(std::string& out, uint32_t cpt);

// GPT-2's byte-level mapping: every byte to a printable code point (UTF-8).
const std::string& byte_to_symbol(uint8_t byte);
// The byte a symbol stands for, or -1.
int symbol_to_byte(std::string_view symbol);

// What a tokenizer.ggml.pre name stands for: its split rules and the flags
// llama.cpp sets with it.
struct PreInfo {
  PreTokenizer pre;
  bool ignore_merges;  // a whole word that is a token is taken as is
  bool add_bos;        // default of tokenizer.ggml.add_bos_token
  bool clean_spaces;   // decode removes spaces before punctuation
  bool no_bos;         // no default BOS id
};
// nullptr for a name llama.cpp does not know.
const PreInfo* find_pre(std::string_view name);

// The split rules of a pre-tokenizer, applied one after the other to every
// piece the previous rules left: regexes in llama.cpp's notation, or
// kDigitGroups. Whatever a rule does not match stays a piece of its own.
std::vector<std::string_view> split_rules(PreTokenizer pre);
// Runs of digits cut into groups of three from the right (llama.cpp's
// "afmoe" digit splitter; the text before a run joins its first group).
inline constexpr std::string_view kDigitGroups = "<digit groups>";
// Whether words map to GPT-2's byte-level symbols (false: raw UTF-8 with
// <0xXX> byte fallback tokens).
bool byte_encoded(PreTokenizer pre);
// Whether spaces become U+2581 before splitting (SentencePiece-style BPE).
bool escapes_spaces(PreTokenizer pre);

// The pre-tokenizer for a vocabulary: splits text into words (each already
// mapped to byte-level symbols where the vocabulary uses them). The regexes
// are compiled once.
class PreSplitter {
 public:
  explicit PreSplitter(PreTokenizer pre);
  ~PreSplitter();
  PreSplitter(const PreSplitter&) = delete;
  PreSplitter& operator=(const PreSplitter&) = delete;
  std::vector<std::string> split(std::string_view text) const;
  // Without the byte-level mapping (for tests and the vocabulary generator).
  std::vector<std::string> split_raw(std::string_view text) const;

 private:
  struct Rule;
  std::vector<std::unique_ptr<Rule>> rules_;
  bool byte_encode_ = true;
};

// A trie over byte strings, each key ending at a node that holds its token,
// stored flat (each node's edges sorted by byte, side by side), so that a
// vocabulary of 250k tokens takes a few bytes per node.
class ByteTrie {
 public:
  static constexpr int32_t kRoot = 0;
  ByteTrie() = default;
  // Keys may repeat: the last one's token wins.
  explicit ByteTrie(std::vector<std::pair<std::string_view, int32_t>> keys);
  // The child of `node` along byte c, or -1.
  int32_t child(int32_t node, unsigned char c) const;
  // The token whose key ends at `node`, or Tokenizer::kNoToken.
  int32_t token(int32_t node) const { return nodes_[node].token; }
  bool empty() const { return nodes_.size() <= 1; }

 private:
  struct Node {
    uint32_t first_edge = 0;
    uint32_t n_edges = 0;
    int32_t token = Tokenizer::kNoToken;
  };
  std::vector<Node> nodes_{1};
  std::vector<uint8_t> labels_;   // edge byte
  std::vector<int32_t> targets_;  // edge target node
};

// An RWKV token's bytes: its text is Python's repr() of them without the
// b'...' (\xNN with lowercase hex digits, \t \n \r, and a backslash before
// any other character that stands for itself), read as llama.cpp reads it.
std::string rwkv_unescape(std::string_view text);

// WordPiece's words (BERT, "bert"): llama.cpp's normalization (optionally
// each code point to the first of its NFD decomposition, marks dropped, and
// lowercase), split at whitespace, with punctuation, ASCII symbols and CJK
// ideographs as words of their own; control characters, U+0000 and U+FFFD
// are dropped.
std::vector<std::string> wordpiece_words(std::string_view text, bool lowercase, bool strip_accents);

// The Unigram model ("t5"): SentencePiece's normalizer (a precompiled
// character map, spaces as U+2581) and a Viterbi search for the segmentation
// with the best sum of token scores, unknown code points costing the lowest
// score minus 10.
class Unigram {
 public:
  struct Options {
    bool add_space_prefix = false;          // a U+2581 before the text
    bool remove_extra_whitespaces = false;  // runs of spaces become one, leading/trailing ones go
  };
  // charsmap: tokenizer.ggml.precompiled_charsmap (may be empty); throws
  // loom::Error naming `path` when it is malformed.
  Unigram(const Tokenizer::Impl& vocab, std::string charsmap, Options options, const std::string& path);
  // The text as the model sees it (spaces escaped as U+2581).
  std::string normalize(std::string_view text) const;
  void tokenize(std::string_view text, std::vector<int32_t>& out) const;

 private:
  // The replacement for the longest prefix of `text` the character map
  // holds, and that prefix's length (0 when none).
  std::pair<std::string_view, size_t> map_prefix(std::string_view text) const;

  const Tokenizer::Impl& vocab_;
  Options options_;
  std::string charsmap_;  // 4-byte size of the double array, the array, replacement strings
  std::vector<uint32_t> units_;  // the double array (XCDA units)
  std::string_view replacements_;
  ByteTrie tokens_;        // normal, user-defined and unused tokens
  ByteTrie user_defined_;  // passed through the normalizer as they are
  double unknown_score_ = 0.0;
};

// Hash that lets std::unordered_map<std::string, ...> be probed with a
// string_view without allocating.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

}  // namespace loom::tok

namespace loom {

struct Tokenizer::Impl {
  std::string path;  // for messages
  TokenizerKind kind = TokenizerKind::Spm;
  PreTokenizer pre = PreTokenizer::None;
  std::string model, pre_name;

  std::vector<std::string> texts;
  std::vector<float> scores;
  std::vector<TokenType> types;
  tok::TokenMap text_to_id;
  tok::TokenMap merge_ranks;  // "left right" -> rank

  int32_t bos = kNoToken, eos = kNoToken, unk = kNoToken, pad = kNoToken;
  int32_t eot = kNoToken, eom = kNoToken, sep = kNoToken;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  bool ignore_merges = false, clean_spaces = false;
  bool escape_spaces = false;  // BPE over text with spaces as U+2581 (Gemma 4)
  std::set<int32_t> eog;
  std::vector<uint8_t> unused_flag;  // control tokens named *unused*

  // Control, unknown and user-defined tokens, longest first, and a trie over
  // their texts to find which of them occur in a text.
  std::vector<int32_t> special_tokens;
  tok::ByteTrie special_trie;
  // Per token: kStripLeft / kStripRight drop the white space next to the
  // special token when the text is split at it (llama.cpp's LSTRIP/RSTRIP).
  static constexpr uint8_t kStripLeft = 1, kStripRight = 2;
  std::vector<uint8_t> strip;

  std::unique_ptr<tok::PreSplitter> splitter;  // BPE
  std::unique_ptr<tok::Unigram> unigram;       // UGM
  tok::ByteTrie byte_strings;                  // RWKV: every token's bytes
  bool lowercase = true, strip_accents = true;  // WPM normalizer
  size_t max_token_bytes = 0;                   // WPM: the longest token text
  std::vector<std::string> pieces;  // token_to_piece with render_special

  int32_t lookup(std::string_view text) const {
    auto it = text_to_id.find(text);
    return it == text_to_id.end() ? kNoToken : it->second;
  }
  int32_t merge_rank(std::string_view left, std::string_view right) const;
  int32_t byte_token(uint8_t byte) const;  // SPM byte fallback

  void spm_tokenize(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_tokenize(std::string_view text, std::vector<int32_t>& out) const;
  void wpm_tokenize(std::string_view text, std::vector<int32_t>& out) const;
  void rwkv_tokenize(std::string_view text, std::vector<int32_t>& out) const;
  std::string piece(int32_t token, bool render_special) const;
};

}  // namespace loom
