// UTF-8 helpers, the byte-level BPE symbol mapping and the pre-tokenizer
// regexes. The regexes are llama.cpp's (which follow the Hugging Face
// tokenizer.json of each model family), run with PCRE2 in UTF + UCP mode.
// `\s` is spelled out as the Unicode White_Space set, which is what
// llama.cpp's tables (and Python's `regex` module) call whitespace.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>

#include "loom/error.h"
#include "tokenizer_internal.h"

namespace loom::tok {

size_t utf8_len(char lead) {
  static constexpr std::array<uint8_t, 16> kLen = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  auto cont = [&](size_t i) { return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t b = static_cast<uint8_t>(s[i]);
    if (b < 0x80) {
      out.push_back(b);
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
      out.push_back(((b & 0x1Fu) << 6) | (s[i + 1] & 0x3F));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      out.push_back(((b & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3F));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      out.push_back(((b & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3F));
      i += 4;
    } else {
      out.push_back(0xFFFD);
      i += 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, uint32_t c) {
  if (c <= 0x7F) {
    out += static_cast<char>(c);
  } else if (c <= 0x7FF) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c <= 0xFFFF) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | ((c >> 18) & 0x07));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

namespace {

// Printable bytes keep their code point; the others (controls, space, DEL,
// NBSP, soft hyphen) take U+0100 upwards in byte order.
struct ByteSymbols {
  std::array<std::string, 256> symbol;
  TokenMap byte_of;
  ByteSymbols() {
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      append_utf8(symbol[b], printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++));
      byte_of.emplace(symbol[b], b);
    }
  }
};

const ByteSymbols& byte_symbols() {
  static const ByteSymbols table;
  return table;
}

// The Unicode White_Space code points, for use inside a character class.
constexpr std::string_view kWs =
    R"(\t\n\x0B\f\r\x20\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// Replaces the placeholders {s} (a whitespace class body) in a pattern.
std::string expand(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.substr(i, 3) == "{s}") {
      out += kWs;
      i += 2;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

#define LOOM_WS "{s}"
// gpt-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^)" LOOM_WS R"(\p{L}\p{N}]+|[)" LOOM_WS R"(]+(?![^)" LOOM_WS R"(]))";
// llama3 (qwen2 takes digits one at a time: \p{N} instead of \p{N}{1,3}).
constexpr std::string_view kLlama3Head = R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|)";
constexpr std::string_view kLlama3Tail =
    R"(| ?[^)" LOOM_WS R"(\p{L}\p{N}]+[\r\n]*|[)" LOOM_WS R"(]*[\r\n]+|[)" LOOM_WS R"(]+(?![^)" LOOM_WS R"(])|[)" LOOM_WS R"(]+)";
#undef LOOM_WS

std::vector<std::string> patterns_for(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::Gpt2: return {expand(kGpt2)};
    case PreTokenizer::Llama3: return {expand(std::string(kLlama3Head) + R"(\p{N}{1,3})" + std::string(kLlama3Tail))};
    case PreTokenizer::Qwen2: return {expand(std::string(kLlama3Head) + R"(\p{N})" + std::string(kLlama3Tail))};
    case PreTokenizer::Default:
      return {R"([\p{P}\$\+<=>\^~\|]+)", expand(kGpt2), R"(\p{N}+)", "[0-9][0-9][0-9]"};
    case PreTokenizer::None: break;
  }
  return {};
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) { return byte_symbols().symbol[byte]; }

int symbol_to_byte(std::string_view symbol) {
  const auto& map = byte_symbols().byte_of;
  auto it = map.find(symbol);
  return it == map.end() ? -1 : it->second;
}

struct PreSplitter::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

PreSplitter::PreSplitter(PreTokenizer pre) {
  for (const std::string& pattern : patterns_for(pre)) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    auto regex = std::make_unique<Regex>();
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                &error, &error_offset, nullptr);
    if (!regex->code) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      fail("tokenizer: cannot compile pre-tokenizer regex at offset {}: {}", error_offset,
           reinterpret_cast<const char*>(message.data()));
    }
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
    regexes_.push_back(std::move(regex));
  }
}

PreSplitter::~PreSplitter() = default;

std::vector<std::string> PreSplitter::split_raw(std::string_view text) const {
  // Match on well-formed UTF-8 (malformed input became U+FFFD, code points
  // PCRE2 rejects become U+FFFD too), but emit the original code points.
  const std::vector<uint32_t> cpts = decode_utf8(text);
  std::string subject;
  std::vector<size_t> cpt_start;  // byte offset of each code point in subject
  std::vector<uint32_t> cpt_index;  // code point index at each byte offset
  subject.reserve(text.size());
  for (uint32_t c : cpts) {
    cpt_start.push_back(subject.size());
    const bool valid = c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
    append_utf8(subject, valid ? c : 0xFFFD);
  }
  cpt_start.push_back(subject.size());
  cpt_index.assign(subject.size() + 1, 0);
  for (size_t i = 0; i < cpts.size(); ++i) cpt_index[cpt_start[i]] = static_cast<uint32_t>(i);
  cpt_index[subject.size()] = static_cast<uint32_t>(cpts.size());

  std::vector<std::pair<size_t, size_t>> pieces;  // [begin, end) in code points
  if (!cpts.empty()) pieces.emplace_back(0, cpts.size());
  pcre2_match_data* match = nullptr;
  for (const auto& regex : regexes_) {
    if (!match) match = pcre2_match_data_create(1, nullptr);
    std::vector<std::pair<size_t, size_t>> next;
    for (const auto& [begin, end] : pieces) {
      const size_t base = cpt_start[begin];
      const auto* piece = reinterpret_cast<PCRE2_SPTR>(subject.data() + base);
      const size_t length = cpt_start[end] - base;
      size_t offset = 0, emitted = 0;
      while (offset < length) {
        const int rc = pcre2_match(regex->code, piece, length, offset, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
        if (ov[1] == ov[0]) {  // empty match: step one code point
          offset = cpt_start[cpt_index[base + ov[0]] + 1] - base;
          continue;
        }
        if (ov[0] > emitted) next.emplace_back(cpt_index[base + emitted], cpt_index[base + ov[0]]);
        next.emplace_back(cpt_index[base + ov[0]], cpt_index[base + ov[1]]);
        emitted = offset = ov[1];
      }
      if (emitted < length) next.emplace_back(cpt_index[base + emitted], end);
    }
    pieces = std::move(next);
  }
  pcre2_match_data_free(match);

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const auto& [begin, end] : pieces) {
    std::string word;
    for (size_t i = begin; i < end; ++i) append_utf8(word, cpts[i]);
    words.push_back(std::move(word));
  }
  return words;
}

std::vector<std::string> PreSplitter::split(std::string_view text) const {
  std::vector<std::string> words = split_raw(text);
  for (std::string& word : words) {
    std::string encoded;
    for (char c : word) encoded += byte_to_symbol(static_cast<uint8_t>(c));
    word = std::move(encoded);
  }
  return words;
}

}  // namespace loom::tok

namespace loom {

std::vector<std::string> pre_tokenize(PreTokenizer pre, std::string_view text) {
  if (pre == PreTokenizer::None) return {std::string(text)};
  return tok::PreSplitter(pre).split_raw(text);
}

}  // namespace loom
