// WordPiece ("bert") and Unigram ("t5") tokenizers on tiny hand-made
// vocabularies whose expected ids follow from the algorithms (greedy
// longest match and whole-word [UNK]; best score sum, unknown runs merged),
// their normalizers, special ids and decoding; the generated wpm, ugm and
// ugm-charsmap vocabularies; errors for bad metadata (an unsupported model
// name: tokenizer_test.cpp).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/tokenizer.h"
#include "model_gen/vocab_gen.h"
#include "support/temp_tokenizer.h"

namespace loom {
namespace {

const std::string kSpace = "\xE2\x96\x81";  // U+2581

using test::load_tokenizer;
using test::tokenizer_load_error;

// BERT's layout: [PAD], [unused0..98], [UNK] 100, [CLS] 101, [SEP] 102,
// [MASK] 103, then the pieces from id 104 on. No special ids are written:
// llama.cpp's defaults apply.
constexpr int32_t kWpmFirst = 104;
gguf::Writer wpm_vocab(const std::vector<std::string>& pieces) {
  std::vector<std::string> tokens = {"[PAD]"};
  std::vector<int32_t> types = {3};
  for (int i = 0; i < 99; ++i) {
    tokens.push_back(fmt::format("[unused{}]", i));
    types.push_back(5);
  }
  for (const char* special : {"[UNK]", "[CLS]", "[SEP]", "[MASK]"}) {
    tokens.push_back(special);
    types.push_back(std::string_view(special) == "[UNK]" ? 2 : 3);
  }
  for (const std::string& p : pieces) {
    tokens.push_back(p);
    types.push_back(1);
  }
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("bert"));
  w.set("tokenizer.ggml.model", gguf::Value::string("bert"));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  return w;
}

// ▁un ▁unaff aff able ▁able ▁, ▁! ▁東 ▁京 ▁$ ▁ab le
const std::vector<std::string> kWpmPieces = {kSpace + "un", kSpace + "unaff", "aff",          "able",
                                             kSpace + "able", kSpace + ",",    kSpace + "!",   kSpace + "\xE6\x9D\xB1",
                                             kSpace + "\xE4\xBA\xAC", kSpace + "$", kSpace + "ab", "le"};
enum : int32_t {
  kUn = kWpmFirst, kUnaff, kAff, kAble, kWordAble, kComma, kBang, kTokyo1, kTokyo2, kDollar, kWordAb, kLe,
};
constexpr int32_t kUnk = 100, kCls = 101, kSep = 102;

TEST(WordPieceTokenizer, DefaultsAreBerts) {
  auto tok = load_tokenizer(wpm_vocab(kWpmPieces), "wpm_defaults");
  EXPECT_EQ(tok->kind(), TokenizerKind::Wpm);
  EXPECT_EQ(tok->bos(), kCls);
  EXPECT_EQ(tok->sep(), kSep);
  EXPECT_EQ(tok->unk(), kUnk);
  EXPECT_EQ(tok->pad(), 0);
  EXPECT_EQ(tok->eos(), Tokenizer::kNoToken);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("able", true, false), (std::vector<int32_t>{kCls, kWordAble, kSep}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{kCls, kSep}));
}

TEST(WordPieceTokenizer, GreedyLongestMatchFromTheLeft) {
  auto tok = load_tokenizer(wpm_vocab(kWpmPieces), "wpm_greedy");
  // ▁unaff is longer than ▁un, then "able" (not "aff"...).
  EXPECT_EQ(tok->encode("unaffable", false, false), (std::vector<int32_t>{kUnaff, kAble}));
  // ▁able is a whole-word piece; after ▁ab the rest is "le".
  EXPECT_EQ(tok->encode("able", false, false), (std::vector<int32_t>{kWordAble}));
  EXPECT_EQ(tok->encode("unable", false, false), (std::vector<int32_t>{kUn, kAble}));
}

TEST(WordPieceTokenizer, AWordThatCannotBeCoveredIsOneUnknown) {
  auto tok = load_tokenizer(wpm_vocab(kWpmPieces), "wpm_unk");
  // "▁unaff" + "able" leave "z": the whole word becomes [UNK], not a part of it.
  EXPECT_EQ(tok->encode("unaffablez able", false, false), (std::vector<int32_t>{kUnk, kWordAble}));
  EXPECT_EQ(tok->encode("xyz", false, false), (std::vector<int32_t>{kUnk}));
  // The longest piece first (▁able, not ▁ab), then the rest.
  EXPECT_EQ(tok->encode("ablele", false, false), (std::vector<int32_t>{kWordAble, kLe}));
}

TEST(WordPieceTokenizer, NormalizesCaseAccentsAndControls) {
  auto tok = load_tokenizer(wpm_vocab(kWpmPieces), "wpm_norm");
  const std::vector<int32_t> unaffable = {kUnaff, kAble};
  EXPECT_EQ(tok->encode("UnAffABLE", false, false), unaffable);
  // Ü -> U (first of its decomposition) -> u; ä -> a; a combining mark is dropped.
  EXPECT_EQ(tok->encode("\xC3\x9Cna\xCC\x88" "ff\xC3\xA4" "ble", false, false), unaffable);
  // Control and format characters vanish (U+0001, DEL, soft hyphen U+00AD).
  EXPECT_EQ(tok->encode("\x01unaff\x7f" "ab\xC2\xADle", false, false), unaffable);
}

TEST(WordPieceTokenizer, SplitsAtWhitespacePunctuationAsciiSymbolsAndIdeographs) {
  auto tok = load_tokenizer(wpm_vocab(kWpmPieces), "wpm_split");
  EXPECT_EQ(tok->encode("able,able!", false, false), (std::vector<int32_t>{kWordAble, kComma, kWordAble, kBang}));
  // NBSP, the ideographic space and a newline separate words.
  EXPECT_EQ(tok->encode("able\xC2\xA0" "able\xE3\x80\x80" "able\n", false, false),
            (std::vector<int32_t>{kWordAble, kWordAble, kWordAble}));
  // Each CJK ideograph is a word of its own.
  EXPECT_EQ(tok->encode("\xE6\x9D\xB1\xE4\xBA\xAC", false, false), (std::vector<int32_t>{kTokyo1, kTokyo2}));
  // An ASCII symbol splits; a non-ASCII symbol (the euro sign) stays inside the word.
  EXPECT_EQ(tok->encode("able$able", false, false), (std::vector<int32_t>{kWordAble, kDollar, kWordAble}));
  EXPECT_EQ(tok->encode("able\xE2\x82\xAC" "able", false, false), (std::vector<int32_t>{kUnk}));
}

TEST(WordPieceTokenizer, NormalizerOptionsFromTheFile) {
  gguf::Writer w = wpm_vocab(kWpmPieces);
  w.set("tokenizer.ggml.normalizer.lowercase", gguf::Value::boolean(false));
  auto tok = load_tokenizer(w, "wpm_cased");
  // Neither lowercased nor stripped (strip_accents follows lowercase).
  EXPECT_EQ(tok->encode("ABLE", false, false), (std::vector<int32_t>{kUnk}));
  EXPECT_EQ(tok->encode("\xC3\xA4" "ble", false, false), (std::vector<int32_t>{kUnk}));
  w.set("tokenizer.ggml.normalizer.strip_accents", gguf::Value::boolean(true));
  tok = load_tokenizer(w, "wpm_stripped");
  EXPECT_EQ(tok->encode("\xC3\xA4" "ble", false, false), (std::vector<int32_t>{kWordAble}));
}

TEST(WordPieceTokenizer, DecodesPiecesWithSpacesAndCleansPunctuation) {
  auto tok = load_tokenizer(wpm_vocab(kWpmPieces), "wpm_decode");
  EXPECT_EQ(tok->token_to_piece(kWordAble), " able");
  EXPECT_EQ(tok->token_to_piece(kAble), "able");
  // Word pieces start with a space (kept: WordPiece adds no space prefix);
  // a space before , ! . ? goes.
  EXPECT_EQ(tok->decode(tok->encode("unaffable, able!", false, false)), " unaffable, able!");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kCls, kWordAble, kSep}), " able");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{kCls, kWordAble, kSep}, true), "[CLS] able[SEP]");
}

TEST(WordPieceTokenizer, MissingSpecialIdsAreAnError) {
  // 50 tokens: the default [CLS] id 101 does not exist.
  gguf::Writer w;
  std::vector<std::string> tokens;
  for (int i = 0; i < 50; ++i) tokens.push_back(fmt::format("t{}", i));
  w.set("tokenizer.ggml.model", gguf::Value::string("bert"));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  const std::string error = tokenizer_load_error(w, "wpm_small");
  EXPECT_NE(error.find("WordPiece vocabulary needs a bos ([CLS]) token"), std::string::npos) << error;
}

// T5's layout: <pad> </s> <unk>, then the scored pieces from id 3 on.
constexpr int32_t kUgmFirst = 3;
gguf::Writer ugm_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  std::vector<std::string> tokens = {"<pad>", "</s>", "<unk>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {3, 3, 2};
  for (const auto& [text, score] : pieces) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(1);
  }
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("t5"));
  w.set("tokenizer.ggml.model", gguf::Value::string("t5"));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::f32s(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  return w;
}

TEST(UnigramTokenizer, DefaultsAreT5s) {
  auto tok = load_tokenizer(ugm_vocab({{kSpace, -1}, {"a", -1}}), "ugm_defaults");
  EXPECT_EQ(tok->kind(), TokenizerKind::Ugm);
  EXPECT_EQ(tok->eos(), 1);
  EXPECT_EQ(tok->unk(), 2);
  EXPECT_EQ(tok->pad(), 0);
  EXPECT_EQ(tok->bos(), Tokenizer::kNoToken);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->add_eos());
  EXPECT_TRUE(tok->is_eog(1));
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{kUgmFirst + 1, 1}));
}

TEST(UnigramTokenizer, PicksTheSegmentationWithTheBestScoreSum) {
  // "▁ab": ▁ab alone (-3) loses to ▁a + b (-1 + -1); ▁ + a + b is -4.
  auto tok = load_tokenizer(ugm_vocab({{kSpace, -2}, {"a", -1}, {"b", -1}, {kSpace + "a", -1}, {kSpace + "ab", -3}}), "ugm_sum");
  EXPECT_EQ(tok->encode(" ab", false, false), (std::vector<int32_t>{kUgmFirst + 3, kUgmFirst + 2}));
  // ▁ab at -1.5 beats the pair.
  tok = load_tokenizer(ugm_vocab({{kSpace, -2}, {"a", -1}, {"b", -1}, {kSpace + "a", -1}, {kSpace + "ab", -1.5f}}), "ugm_sum2");
  EXPECT_EQ(tok->encode(" ab", false, false), (std::vector<int32_t>{kUgmFirst + 4}));
}

TEST(UnigramTokenizer, UnknownRunsBecomeOneUnknown) {
  // Unknown code points cost the lowest score minus 10 each, and a run of
  // them is one <unk>: "a€€b" -> a <unk> b.
  auto tok = load_tokenizer(ugm_vocab({{"a", -1}, {"b", -2}}), "ugm_unk");
  EXPECT_EQ(tok->encode("a\xE2\x82\xAC\xE2\x82\xAC" "b", false, false),
            (std::vector<int32_t>{kUgmFirst, 2, kUgmFirst + 1}));
  EXPECT_EQ(tok->encode("\xC3\xA9", false, false), (std::vector<int32_t>{2}));
  EXPECT_EQ(tok->decode(tok->encode("a\xE2\x82\xAC", false, false)), "a");

  // The unknown score is the lowest score minus 10. With "a€" the lowest
  // at -20, a + <unk> scores score(a) - 30: below -20 with "a" at +5 (a
  // penalty under 5 would flip it), above with "a" at +12 (one over 12 would).
  tok = load_tokenizer(ugm_vocab({{"a", 5}, {"a\xE2\x82\xAC", -20}}), "ugm_penalty");
  EXPECT_EQ(tok->encode("a\xE2\x82\xAC", false, false), (std::vector<int32_t>{kUgmFirst + 1}));
  tok = load_tokenizer(ugm_vocab({{"a", 12}, {"a\xE2\x82\xAC", -20}}), "ugm_penalty2");
  EXPECT_EQ(tok->encode("a\xE2\x82\xAC", false, false), (std::vector<int32_t>{kUgmFirst, 2}));
}

TEST(UnigramTokenizer, EscapesSpacesAndHonoursWhitespaceFlags) {
  const std::vector<std::pair<std::string, float>> pieces = {{kSpace, -2}, {"a", -1}, {"b", -1}};
  const int32_t space = kUgmFirst, a = kUgmFirst + 1, b = kUgmFirst + 2;
  auto tok = load_tokenizer(ugm_vocab(pieces), "ugm_plain");  // no prefix, spaces kept
  EXPECT_EQ(tok->encode(" a  b", false, false), (std::vector<int32_t>{space, a, space, space, b}));
  EXPECT_EQ(tok->decode(tok->encode(" a  b", false, false)), " a  b");

  gguf::Writer w = ugm_vocab(pieces);
  w.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(true));
  tok = load_tokenizer(w, "ugm_prefix");
  EXPECT_EQ(tok->encode("a b", false, false), (std::vector<int32_t>{space, a, space, b}));
  EXPECT_EQ(tok->decode(tok->encode("a b", false, false)), "a b");  // the prefix space goes again

  w.set("tokenizer.ggml.remove_extra_whitespaces", gguf::Value::boolean(true));
  tok = load_tokenizer(w, "ugm_merge");
  EXPECT_EQ(tok->encode("   a    b  ", false, false), (std::vector<int32_t>{space, a, space, b}));
}

TEST(UnigramTokenizer, PrecompiledCharsmapReplacesLongestPrefixes) {
  const std::vector<std::pair<std::string, float>> pieces = {
      {kSpace, -5}, {"f", -3}, {"i", -3}, {"n", -3}, {"e", -3}, {"\xC3\xA9", -3}, {"x", -3}};
  const int32_t space = kUgmFirst, f = kUgmFirst + 1, i = kUgmFirst + 2, n = kUgmFirst + 3, e = kUgmFirst + 4,
                e_acute = kUgmFirst + 5;
  gguf::Writer w = ugm_vocab(pieces);
  const std::vector<uint8_t> charsmap = build_precompiled_charsmap({
      {"\xEF\xAC\x81", "fi"},        // the ligature U+FB01
      {"e\xCC\x81", "\xC3\xA9"},     // e + U+0301 composed: longer than any other key at 'e'
      {"\t", " "},
      {"x", ""},                     // dropped
  });
  gguf::Array bytes(gguf::ValueType::U8);
  bytes.append_scalars(charsmap.data(), charsmap.size());
  w.set("tokenizer.ggml.precompiled_charsmap", gguf::Value::array(std::move(bytes)));
  auto tok = load_tokenizer(w, "ugm_charsmap");
  EXPECT_EQ(tok->encode("\xEF\xAC\x81ne", false, false), (std::vector<int32_t>{f, i, n, e}));
  EXPECT_EQ(tok->encode("ne\xCC\x81", false, false), (std::vector<int32_t>{n, e_acute}));
  EXPECT_EQ(tok->encode("e\tx", false, false), (std::vector<int32_t>{e, space}));

  // A header that promises more bytes than there are is refused, naming the key.
  gguf::Array truncated(gguf::ValueType::U8);
  truncated.append_scalars(charsmap.data(), 16);
  w.set("tokenizer.ggml.precompiled_charsmap", gguf::Value::array(std::move(truncated)));
  const std::string error = tokenizer_load_error(w, "ugm_bad_charsmap");
  EXPECT_NE(error.find("tokenizer.ggml.precompiled_charsmap"), std::string::npos) << error;
}

TEST(GeneratedVocab, WordPieceAndUnigramStyles) {
  for (TokenizerStyle style : {TokenizerStyle::Wpm, TokenizerStyle::Ugm, TokenizerStyle::UgmCharsmap}) {
    SCOPED_TRACE(tokenizer_style_name(style));
    EXPECT_EQ(parse_tokenizer_style(tokenizer_style_name(style)), style);
    for (int n_vocab : {min_vocab_size(style), 300, 2000}) {
      gguf::Writer w;
      write_tokenizer_metadata(w, style, n_vocab);
      auto tok = load_tokenizer(w, "gen_" + tokenizer_style_name(style));
      EXPECT_EQ(tok->n_vocab(), n_vocab);
      if (n_vocab < 2000) continue;
      // A common word of the training text is one token, and decodes back.
      const std::vector<int32_t> ids = tok->encode("the loom", false, false);
      EXPECT_EQ(ids.size(), 2u);
      EXPECT_EQ(tok->decode(ids), style == TokenizerStyle::Wpm ? " the loom" : "the loom");
    }
  }
  gguf::Writer w;
  write_tokenizer_metadata(w, TokenizerStyle::UgmCharsmap, 2000);
  auto tok = load_tokenizer(w, "gen_charsmap");
  // The style's map: full-width letters are ASCII, tabs are spaces.
  EXPECT_EQ(tok->encode("\xEF\xBD\x94\xEF\xBD\x88\xEF\xBD\x85\tloom", false, false), tok->encode("the loom", false, false));
  EXPECT_THROW(write_tokenizer_metadata(w, TokenizerStyle::Wpm, 104), Error);
}

}  // namespace
}  // namespace loom
