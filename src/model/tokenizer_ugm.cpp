// Unigram (tokenizer.ggml.model = "t5"), as llama.cpp's UGM tokenizer:
// SentencePiece's normalizer, then a Viterbi search over the normalized text
// for the segmentation whose token scores sum highest.
//
// The normalizer replaces the longest prefix found in the precompiled
// character map (tokenizer.ggml.precompiled_charsmap: a 4-byte size, a
// Darts-clone double array of that many bytes, then NUL-terminated
// replacement strings) by its replacement, passes user-defined tokens and
// other valid UTF-8 through, turns malformed bytes into U+FFFD, and writes
// spaces as U+2581 (one before the text with add_space_prefix; runs merged,
// and one before every word, with remove_extra_whitespaces).
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <tuple>

#include "loom/error.h"
#include "tokenizer_internal.h"

namespace loom::tok {
namespace {

constexpr double kUnknownPenalty = 10.0;

// Bytes of the valid UTF-8 sequence at the start of `text` (by llama.cpp's
// test: the lead byte and continuation bytes only), or 0.
size_t valid_utf8_length(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  const size_t n = lead < 0x80 ? 1 : (lead & 0xE0) == 0xC0 ? 2 : (lead & 0xF0) == 0xE0 ? 3 : (lead & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || n > text.size()) return 0;
  for (size_t i = 1; i < n; ++i)
    if ((byte(i) & 0xC0) != 0x80) return 0;
  return n;
}

// One unit of the double array: a node's label (bits 0-7, bit 31 set on
// value units so that no label matches them), whether a key ends at the node
// (bit 8), and the XOR offset to its children (bits 10-30, times 256 when
// bit 9 is set); a value unit holds its value in bits 0-30.
uint32_t unit_offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
uint32_t unit_label(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
bool unit_has_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t unit_value(uint32_t unit) { return unit & ((1u << 31) - 1); }

}  // namespace

Unigram::Unigram(const Tokenizer::Impl& vocab, std::string charsmap, Options options, const std::string& path)
    : vocab_(vocab), options_(options), charsmap_(std::move(charsmap)) {
  if (!charsmap_.empty()) {
    uint32_t array_bytes = 0;
    if (charsmap_.size() < sizeof(array_bytes))
      fail("{}: tokenizer.ggml.precompiled_charsmap has {} bytes, too few for its 4-byte header", path,
           charsmap_.size());
    std::memcpy(&array_bytes, charsmap_.data(), sizeof(array_bytes));
    if (size_t{array_bytes} + sizeof(array_bytes) >= charsmap_.size())
      fail("{}: tokenizer.ggml.precompiled_charsmap: its double array of {} bytes does not fit in {} bytes with the "
           "replacement strings after it",
           path, array_bytes, charsmap_.size());
    units_.resize(array_bytes / sizeof(uint32_t));
    std::memcpy(units_.data(), charsmap_.data() + sizeof(array_bytes), units_.size() * sizeof(uint32_t));
    replacements_ = std::string_view(charsmap_).substr(sizeof(array_bytes) + array_bytes);
  }

  float min_score = FLT_MAX;
  std::vector<std::pair<std::string_view, int32_t>> tokens, user_defined;
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.texts.size()); ++id) {
    const TokenType type = vocab.types[id];
    if (type == TokenType::Normal) min_score = std::min(min_score, vocab.scores[id]);
    if (type == TokenType::Normal || type == TokenType::UserDefined || type == TokenType::Unused)
      tokens.emplace_back(vocab.texts[id], id);
    if (type == TokenType::UserDefined) user_defined.emplace_back(vocab.texts[id], id);
  }
  tokens_ = ByteTrie(std::move(tokens));
  user_defined_ = ByteTrie(std::move(user_defined));
  unknown_score_ = static_cast<double>(min_score - static_cast<float>(kUnknownPenalty));
}

std::pair<std::string_view, size_t> Unigram::map_prefix(std::string_view text) const {
  if (units_.empty()) return {{}, 0};
  auto unit = [&](size_t index) {
    if (index >= units_.size())
      fail("tokenizer: precompiled_charsmap: double array index {} is outside its {} units", index, units_.size());
    return units_[index];
  };
  size_t longest = 0;
  uint32_t value = 0;
  size_t node = unit_offset(unit(0));
  for (size_t i = 0; i < text.size() && text[i] != '\0'; ++i) {
    const auto c = static_cast<uint8_t>(text[i]);
    node ^= c;
    const uint32_t child = unit(node);
    if (unit_label(child) != c) break;
    node ^= unit_offset(child);
    if (unit_has_leaf(child)) {
      longest = i + 1;
      value = unit_value(unit(node));
    }
  }
  if (longest == 0) return {{}, 0};
  if (value >= replacements_.size())
    fail("tokenizer: precompiled_charsmap: replacement offset {} is outside its {} bytes", value, replacements_.size());
  const size_t end = replacements_.find('\0', value);
  if (end == std::string_view::npos)
    fail("tokenizer: precompiled_charsmap: the replacement at offset {} has no terminating NUL", value);
  return {replacements_.substr(value, end - value), longest};
}

std::string Unigram::normalize(std::string_view text) const {
  std::string out;
  out.reserve(text.size() * 3);
  const bool merge_spaces = options_.remove_extra_whitespaces;
  bool prefix_written = false;
  bool in_word = false;
  for (size_t offset = 0; offset < text.size();) {
    // A user-defined token passes as it is: as far as the text follows that
    // trie (a prefix of such a token too, as llama.cpp walks it).
    size_t consumed = 0;
    for (int32_t node = ByteTrie::kRoot; offset + consumed < text.size(); ++consumed) {
      node = user_defined_.child(node, static_cast<uint8_t>(text[offset + consumed]));
      if (node < 0) break;
    }
    std::string_view piece = text.substr(offset, consumed);
    if (consumed == 0) {
      std::tie(piece, consumed) = map_prefix(text.substr(offset));
      if (consumed == 0) {
        consumed = valid_utf8_length(text.substr(offset));
        piece = consumed ? text.substr(offset, consumed) : std::string_view("\xEF\xBF\xBD");  // U+FFFD
        consumed = std::max<size_t>(consumed, 1);
      }
    }
    for (char c : piece) {
      if (c == ' ') {
        in_word = false;
        if (!merge_spaces) out += kEscapedSpace;
        continue;
      }
      if (!in_word) {
        in_word = true;
        if ((options_.add_space_prefix && !prefix_written) || merge_spaces) {
          out += kEscapedSpace;
          prefix_written = true;
        }
      }
      out += c;
    }
    offset += consumed;
  }
  return out;
}

void Unigram::tokenize(std::string_view text, std::vector<int32_t>& out) const {
  const std::string normalized = normalize(text);
  const size_t n = normalized.size();
  if (n == 0) return;

  // best[i]: the best segmentation of the first i bytes, by its last token.
  struct Best {
    int32_t token;
    size_t start;  // where that token starts
    double score;
  };
  std::vector<Best> best(n + 1, {vocab_.unk, 0, -DBL_MAX});
  best[0] = {vocab_.unk, 0, 0.0};
  for (size_t start = 0; start < n;) {
    const size_t codepoint_bytes = std::min(utf8_len(normalized[start]), n - start);
    const double base = best[start].score;
    bool whole_codepoint = false;
    int32_t node = ByteTrie::kRoot;
    for (size_t end = start; end < n;) {
      node = tokens_.child(node, static_cast<uint8_t>(normalized[end++]));
      if (node < 0) break;
      const int32_t id = tokens_.token(node);
      if (id == Tokenizer::kNoToken) continue;
      if (end - start == codepoint_bytes) whole_codepoint = true;
      // User-defined tokens score 0, above every log probability.
      const double score = base + (vocab_.types[id] == TokenType::UserDefined ? 0.0 : double{vocab_.scores[id]});
      if (score > best[end].score) best[end] = {id, start, score};
    }
    if (!whole_codepoint) {
      const size_t end = start + codepoint_bytes;
      if (base + unknown_score_ > best[end].score) best[end] = {vocab_.unk, start, base + unknown_score_};
    }
    start += codepoint_bytes;
  }

  // Back from the end; a run of unknown tokens becomes one.
  const size_t first = out.size();
  bool previous_unknown = false;
  for (size_t end = n;;) {
    const Best& b = best[end];
    const bool unknown = b.token == vocab_.unk;
    if (!(previous_unknown && unknown)) out.push_back(b.token);
    if (b.start == 0) break;
    previous_unknown = unknown;
    end = b.start;
  }
  std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

}  // namespace loom::tok
