// WordPiece (tokenizer.ggml.model = "bert"), as llama.cpp's WPM tokenizer:
// BERT's normalizer with llama.cpp's own Unicode rules, then each word,
// prefixed with U+2581, is covered greedily by the longest token that fits;
// a word that cannot be covered becomes a single [UNK].
//
// llama.cpp's rules differ from a full BERT normalizer on purpose-built
// tables: "NFD" maps every code point to the first code point of its
// canonical decomposition only (é -> e, 가 -> ᄀ), lowercasing is Unicode's
// simple lowercase mapping, and its whitespace set is Unicode's White_Space.
// ICU answers each of these per code point.
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/utf16.h>

#include <algorithm>

#include "loom/error.h"
#include "tokenizer_internal.h"

namespace loom {
namespace {

using tok::kEscapedSpace;

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Unicode's White_Space property (llama.cpp's list of it).
bool is_whitespace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x2000 && c <= 0x200A) || c == 0x20 || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The CJK ideograph blocks BERT splits into single-character words
// (0x2B920, not 0x2B820, as Hugging Face's Rust code and llama.cpp have it).
bool is_cjk_ideograph(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

// The Unicode general category of a code point, by major class.
enum class Category { Other, Control, Mark, Punctuation, Symbol };

Category category_of(uint32_t c) {
  if (c > kMaxCodepoint) return Category::Other;  // llama.cpp: undefined
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_PRIVATE_USE_CHAR:
    case U_SURROGATE: return Category::Control;
    case U_NON_SPACING_MARK:
    case U_ENCLOSING_MARK:
    case U_COMBINING_SPACING_MARK: return Category::Mark;
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION: return Category::Punctuation;
    case U_MATH_SYMBOL:
    case U_CURRENCY_SYMBOL:
    case U_MODIFIER_SYMBOL:
    case U_OTHER_SYMBOL: return Category::Symbol;
    default: return Category::Other;
  }
}

uint32_t simple_lowercase(uint32_t c) {
  return c > kMaxCodepoint ? c : static_cast<uint32_t>(u_tolower(static_cast<UChar32>(c)));
}

// The first code point of c's canonical (NFD) decomposition, or c.
uint32_t first_of_decomposition(uint32_t c) {
  if (c > kMaxCodepoint) return c;
  UErrorCode status = U_ZERO_ERROR;
  static const UNormalizer2* nfd = unorm2_getNFDInstance(&status);
  if (U_FAILURE(status) || !nfd) fail("tokenizer: ICU has no NFD normalizer ({})", u_errorName(status));
  UChar buffer[32];
  const int32_t n = unorm2_getDecomposition(nfd, static_cast<UChar32>(c), buffer, 32, &status);
  if (U_FAILURE(status) || n <= 0) return c;
  UChar32 first;
  int32_t i = 0;
  U16_NEXT(buffer, i, n, first);
  return static_cast<uint32_t>(first);
}

}  // namespace

std::vector<std::string> tok::wordpiece_words(std::string_view text, bool lowercase, bool strip_accents) {
  std::vector<std::string> words(1);
  auto end_word = [&words] {
    if (!words.back().empty()) words.emplace_back();
  };
  for (uint32_t c : decode_utf8(text)) {
    if (strip_accents) c = first_of_decomposition(c);
    if (is_whitespace(c)) {
      end_word();
      continue;
    }
    const Category category = category_of(c);
    if (c == 0 || c == 0xFFFD || category == Category::Control) continue;
    if (strip_accents && category == Category::Mark) continue;
    std::string utf8;
    append_utf8(utf8, lowercase ? simple_lowercase(c) : c);
    if (category == Category::Punctuation || (c < 0x7F && category == Category::Symbol) || is_cjk_ideograph(c)) {
      end_word();
      words.back() = std::move(utf8);
      words.emplace_back();
    } else {
      words.back() += utf8;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

void Tokenizer::Impl::wpm_tokenize(std::string_view text, std::vector<int32_t>& out) const {
  for (const std::string& word : tok::wordpiece_words(text, lowercase, strip_accents)) {
    const std::string marked = std::string(kEscapedSpace) + word;
    const size_t start = out.size();
    // Longest token first from each position, in bytes (llama.cpp's rule).
    for (size_t i = 0; i < marked.size();) {
      int32_t id = kNoToken;
      size_t length = std::min(marked.size() - i, max_token_bytes);
      for (; length > 0; --length) {
        id = lookup(std::string_view(marked).substr(i, length));
        if (id != kNoToken) break;
      }
      if (id == kNoToken) {  // the word cannot be covered: all of it is unknown
        out.resize(start);
        break;
      }
      out.push_back(id);
      i += length;
    }
    if (out.size() == start) out.push_back(unk);
  }
}

}  // namespace loom
