// UTF-8 helpers, the byte-level BPE symbol mapping and the pre-tokenizer
// matcher. The split rules (tokenizer_pre_table.cpp) are written in the
// notation of llama.cpp, which runs most of them with std::regex
// (ECMAScript) over text whose non-ASCII whitespace has become U+000B and,
// where a rule uses \p{..}, whose non-ASCII code points have become one
// marker per Unicode category. Loom runs them with PCRE2 in UTF + UCP mode
// after a translation that gives the same matches:
//   \s, \S      -> the ASCII whitespace class (the subject gets U+000B for
//                  every non-ASCII whitespace code point, as in llama.cpp)
//   \d           -> [0-9] (ECMAScript digits are ASCII)
//   \p{Lu} etc.  -> \p{L} (llama.cpp's markers know no letter case)
//   \p{L}, \p{N}, \p{M}, \p{P}, \p{S} -> with the code points Unicode 15.0
//                  and 15.1 assigned to them (kUnicode15), which llama.cpp's
//                  tables (15.1) have and Debian 12's PCRE2 (10.42, Unicode
//                  14.0 tables) leaves unassigned
//   \p{Han}      -> llama.cpp's Han ranges
//   $            -> \z (ECMAScript $ is the end of the piece only)
// An empty match splits the piece where it occurs, as std::regex_iterator
// does (superbpe's digit grouping is a bare lookahead).
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

// ASCII whitespace, as a character class body.
constexpr std::string_view kWs = R"(\t\n\x0B\f\r\x20)";
// llama.cpp's Han code points (unicode_cpt_is_han), as a class body.
constexpr std::string_view kHan =
    R"(\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F})"
    R"(\x{2B820}-\x{2CEAF}\x{2CEB0}-\x{2EBEF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F})";

// Per category, the code points Unicode 15.0 and 15.1 assigned: CJK
// extensions H and I, Kawi, Nag Mundari, Kaktovik numerals, Cyrillic
// extension D, new symbols and emoji, ... Found by comparing every code point
// of llama.cpp's unicode-data tables with PCRE2's \p classes; none differs
// the other way, and no other category (\p{Z}, whitespace) differs. With a
// PCRE2 whose tables already hold them they change nothing.
struct Unicode15 {
  std::string_view category, ranges;
};
constexpr Unicode15 kUnicode15[] = {
    {"L", R"(\x{1123F}-\x{11240}\x{11F02}\x{11F04}-\x{11F10}\x{11F12}-\x{11F33}\x{1342F}\x{13441}-\x{13446})"
          R"(\x{1B132}\x{1B155}\x{1DF25}-\x{1DF2A}\x{1E030}-\x{1E06D}\x{1E4D0}-\x{1E4EB}\x{2B739})"
          R"(\x{2EBF0}-\x{2EE5D}\x{31350}-\x{323AF})"},
    {"N", R"(\x{11F50}-\x{11F59}\x{1D2C0}-\x{1D2D3}\x{1E4F0}-\x{1E4F9})"},
    {"M", R"(\x{CF3}\x{ECE}\x{10EFD}-\x{10EFF}\x{11241}\x{11F00}-\x{11F01}\x{11F03}\x{11F34}-\x{11F3A})"
          R"(\x{11F3E}-\x{11F42}\x{13440}\x{13447}-\x{13455}\x{1E08F}\x{1E4EC}-\x{1E4EF})"},
    {"P", R"(\x{11B00}-\x{11B09}\x{11F43}-\x{11F4F})"},
    {"S", R"(\x{2FFC}-\x{2FFF}\x{31EF}\x{1F6DC}\x{1F774}-\x{1F776}\x{1F77B}-\x{1F77F}\x{1F7D9})"
          R"(\x{1FA75}-\x{1FA77}\x{1FA87}-\x{1FA88}\x{1FAAD}-\x{1FAAF}\x{1FABB}-\x{1FABD}\x{1FABF})"
          R"(\x{1FACE}-\x{1FACF}\x{1FADA}-\x{1FADB}\x{1FAE8}\x{1FAF7}-\x{1FAF8})"},
};

// The class body for \p{category}, with its Unicode 15 code points.
std::string category_class(std::string_view category) {
  std::string body = "\\p{";
  body += category;
  body += '}';
  for (const Unicode15& u : kUnicode15)
    if (u.category == category) body += u.ranges;
  return body;
}

bool is_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A split rule in llama.cpp's notation as a PCRE2 pattern (see the top).
std::string to_pcre2(std::string_view rule) {
  std::string out;
  bool in_class = false;
  auto cls = [&](std::string_view body, bool negate) {
    if (in_class) {
      if (negate) fail("tokenizer: split rule '{}': a negated class inside [] is not supported", rule);
      out += body;
    } else {
      out += negate ? "[^" : "[";
      out += body;
      out += ']';
    }
  };
  for (size_t i = 0; i < rule.size(); ++i) {
    const char c = rule[i];
    if (c == '\\' && i + 1 < rule.size()) {
      const char d = rule[++i];
      if (d == 's' || d == 'S') {
        cls(kWs, d == 'S');
      } else if (d == 'd') {
        cls("0-9", false);
      } else if (d == 'p' && i + 1 < rule.size() && rule[i + 1] == '{') {
        const size_t close = rule.find('}', i);
        const std::string_view name = rule.substr(i + 2, close - i - 2);
        if (name == "Han") cls(kHan, false);
        else if (name.size() == 2 && name[0] == 'L') cls(category_class("L"), false);
        else cls(category_class(name), false);
        i = close;
      } else {
        out += c;
        out += d;
      }
    } else if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < rule.size() && rule[i + 1] == '^') out += rule[++i];
    } else if (c == ']' && in_class) {
      in_class = false;
      out += c;
    } else if (c == '$' && !in_class) {
      out += R"(\z)";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) { return byte_symbols().symbol[byte]; }

int symbol_to_byte(std::string_view symbol) {
  const auto& map = byte_symbols().byte_of;
  auto it = map.find(symbol);
  return it == map.end() ? -1 : it->second;
}

struct PreSplitter::Rule {
  pcre2_code* code = nullptr;
  bool digit_groups = false;
  ~Rule() { pcre2_code_free(code); }
};

PreSplitter::PreSplitter(PreTokenizer pre) : byte_encode_(byte_encoded(pre)) {
  for (std::string_view source : split_rules(pre)) {
    auto rule = std::make_unique<Rule>();
    rule->digit_groups = source == kDigitGroups;
    const std::string pattern = rule->digit_groups ? "[" + category_class("N") + "]+" : to_pcre2(source);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    rule->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                               &error, &error_offset, nullptr);
    if (!rule->code) {
      std::array<PCRE2_UCHAR, 256> message{};
      pcre2_get_error_message(error, message.data(), message.size());
      fail("tokenizer: cannot compile the '{}' split rule '{}' at offset {}: {}", pre_tokenizer_name(pre), pattern,
           error_offset, reinterpret_cast<const char*>(message.data()));
    }
    pcre2_jit_compile(rule->code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
    rules_.push_back(std::move(rule));
  }
}

PreSplitter::~PreSplitter() = default;

std::vector<std::string> PreSplitter::split_raw(std::string_view text) const {
  // Match on well-formed UTF-8 (malformed input became U+FFFD, code points
  // PCRE2 rejects become U+FFFD too; non-ASCII whitespace becomes U+000B),
  // but emit the original code points.
  const std::vector<uint32_t> cpts = decode_utf8(text);
  std::string subject;
  std::vector<size_t> cpt_start;  // byte offset of each code point in subject
  std::vector<uint32_t> cpt_index;  // code point index at each byte offset
  subject.reserve(text.size());
  for (uint32_t c : cpts) {
    cpt_start.push_back(subject.size());
    const bool valid = c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
    append_utf8(subject, !valid ? 0xFFFD : c > 0x7F && is_whitespace(c) ? 0x0B : c);
  }
  cpt_start.push_back(subject.size());
  cpt_index.assign(subject.size() + 1, 0);
  for (size_t i = 0; i < cpts.size(); ++i) cpt_index[cpt_start[i]] = static_cast<uint32_t>(i);
  cpt_index[subject.size()] = static_cast<uint32_t>(cpts.size());

  std::vector<std::pair<size_t, size_t>> pieces;  // [begin, end) in code points
  if (!cpts.empty()) pieces.emplace_back(0, cpts.size());
  pcre2_match_data* match = pcre2_match_data_create(1, nullptr);
  for (const auto& rule : rules_) {
    std::vector<std::pair<size_t, size_t>> next;
    auto cut = [&](size_t from, size_t to) {  // code points
      if (to > from) next.emplace_back(from, to);
    };
    for (const auto& [begin, end] : pieces) {
      const size_t base = cpt_start[begin];
      const auto* piece = reinterpret_cast<PCRE2_SPTR>(subject.data() + base);
      const size_t length = cpt_start[end] - base;
      auto cpt_at = [&](size_t byte) { return static_cast<size_t>(cpt_index[base + byte]); };
      size_t offset = 0, emitted = 0;  // bytes in the piece
      uint32_t options = 0;
      size_t digits_from = begin;  // digit groups: where the next group starts
      while (offset < length) {
        const int rc = pcre2_match(rule->code, piece, length, offset, PCRE2_NO_UTF_CHECK | options, match, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH && options != 0) {  // no longer match where an empty one was: step on
          options = 0;
          offset = cpt_start[cpt_at(offset) + 1] - base;
          continue;
        }
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
        if (rule->digit_groups) {
          const size_t first = cpt_at(ov[0]), last = cpt_at(ov[1]);
          size_t at = first + (last - first) % 3;  // the short group comes first
          if (at > first) {
            cut(digits_from, at);
            digits_from = at;
          }
          for (; at < last; at += 3) {
            cut(digits_from, at + 3);
            digits_from = at + 3;
          }
          offset = ov[1];
          continue;
        }
        if (ov[0] > emitted) cut(cpt_at(emitted), cpt_at(ov[0]));
        if (ov[1] > ov[0]) {
          cut(cpt_at(ov[0]), cpt_at(ov[1]));
          emitted = offset = ov[1];
          options = 0;
        } else {  // an empty match splits here; then a longer match is tried at the same place
          emitted = offset = ov[0];
          options = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        }
      }
      if (rule->digit_groups) cut(digits_from, end);
      else if (emitted < length) cut(cpt_at(emitted), end);
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
  if (!byte_encode_) return words;
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
