// Tokenizer tests: tiny hand-made vocabularies whose expected ids follow
// from the algorithms (SPM merge order by score, byte fallback, BPE merge
// ranks), pre-tokenizer splits, special tokens, decode round trips on the
// generated vocabularies, and errors for bad metadata.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/tokenizer.h"
#include "model_gen/vocab_gen.h"
#include "support/temp_tokenizer.h"

namespace loom {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("loom_tok_test_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Removes a temporary file when it goes out of scope.
struct TempFile {
  std::string path;
  ~TempFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

using test::load_tokenizer;
using test::tokenizer_load_error;

const std::string kSpace = "\xE2\x96\x81";  // U+2581

// An SPM vocabulary: <unk> <s> </s>, the 256 byte tokens (ids 3..258), then
// the given pieces with their scores.
gguf::Writer spm_vocab(const std::vector<std::pair<std::string, float>>& pieces) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<float> scores = {0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    scores.push_back(0);
    types.push_back(6);
  }
  for (const auto& [text, score] : pieces) {
    tokens.push_back(text);
    scores.push_back(score);
    types.push_back(1);
  }
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.model", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  w.set("tokenizer.ggml.scores", gguf::Value::f32s(scores));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(1));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(2));
  return w;
}

constexpr int32_t kFirstPiece = 259;

TEST(SpmTokenizer, HigherScoreMergesFirst) {
  // "abc" -> "▁abc": pairs ab and bc both exist; the higher score wins.
  {
    auto tok = load_tokenizer(spm_vocab({{kSpace, -5}, {"a", -9}, {"b", -9}, {"c", -9}, {"ab", -1}, {"bc", -2}}), "spm_ab");
    EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{kFirstPiece, kFirstPiece + 4, kFirstPiece + 3}));
  }
  {
    auto tok = load_tokenizer(spm_vocab({{kSpace, -5}, {"a", -9}, {"b", -9}, {"c", -9}, {"ab", -2}, {"bc", -1}}), "spm_bc");
    EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, kFirstPiece + 5}));
  }
}

TEST(SpmTokenizer, MergesChainAndTiesGoLeft) {
  // ▁ a b c, then "abc" from "a"+"bc", then "▁abc" from "▁"+"abc".
  auto tok = load_tokenizer(spm_vocab({{kSpace, -5}, {"a", -9}, {"bc", -1}, {"abc", -2}, {kSpace + "abc", -3}, {"aa", -4}}),
                  "spm_chain");
  EXPECT_EQ(tok->encode("abc", false, false), (std::vector<int32_t>{kFirstPiece + 4}));
  // "aaa": both "aa" pairs score the same; the left one merges.
  EXPECT_EQ(tok->encode("aaa", false, false), (std::vector<int32_t>{kFirstPiece, kFirstPiece + 5, kFirstPiece + 1}));
}

TEST(SpmTokenizer, ByteFallbackAndSpaces) {
  auto tok = load_tokenizer(spm_vocab({{kSpace, -5}, {"a", -9}}), "spm_bytes");
  // 'é' is not a piece: its two UTF-8 bytes become byte tokens (3 + byte).
  EXPECT_EQ(tok->encode("a\xC3\xA9", false, false),
            (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, 3 + 0xC3, 3 + 0xA9}));
  // Every space is escaped; the prefix space comes first. '\n' is a byte.
  EXPECT_EQ(tok->encode(" a\n", false, false),
            (std::vector<int32_t>{kFirstPiece, kFirstPiece, kFirstPiece + 1, 3 + '\n'}));
  EXPECT_EQ(tok->decode(tok->encode(" a\n", false, false)), " a\n");
  EXPECT_EQ(tok->token_to_piece(3 + 'x'), "x");
  EXPECT_EQ(tok->token_to_piece(kFirstPiece), " ");
}

TEST(SpmTokenizer, BosAndSpecialTokens) {
  auto tok = load_tokenizer(spm_vocab({{kSpace, -5}, {"a", -9}}), "spm_special");
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{1, kFirstPiece, kFirstPiece + 1}));
  EXPECT_EQ(tok->encode("", true, false), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok->encode("", false, false).empty());
  // With parse_special "<s>" is BOS and the text after it gets a new prefix
  // space; without, it is plain text ('<', 's', '>' as bytes).
  EXPECT_EQ(tok->encode("a<s>a", false, true),
            (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, 1, kFirstPiece, kFirstPiece + 1}));
  EXPECT_EQ(tok->encode("<s>", false, false), (std::vector<int32_t>{kFirstPiece, 3 + '<', 3 + 's', 3 + '>'}));
  // Control tokens render only on request.
  const std::vector<int32_t> ids = {1, kFirstPiece, kFirstPiece + 1, 2};
  EXPECT_EQ(tok->decode(ids), " a");
  EXPECT_EQ(tok->decode(ids, true), "<s> a</s>");
}

// An SPM vocabulary with special tokens of several types, as real files
// have them: <|user|>, <|end|>, <mask> and <|fim_pad|> user-defined,
// <|endoftext|> control, <|file_sep|> normal.
constexpr int32_t kUser = kFirstPiece + 3, kEnd = kFirstPiece + 4, kEndOfText = kFirstPiece + 5,
                  kMask = kFirstPiece + 6, kFimPad = kFirstPiece + 7, kFileSep = kFirstPiece + 8;
gguf::Writer special_vocab(const std::string& name, const std::string& arch) {
  gguf::Writer w = spm_vocab({{kSpace, -5}, {"a", -9}, {"b", -9}, {"<|user|>", 0}, {"<|end|>", 0},
                              {"<|endoftext|>", 0}, {"<mask>", 0}, {"<|fim_pad|>", 0}, {"<|file_sep|>", 0}});
  std::vector<int32_t> types = {2, 3, 3};
  types.resize(kFirstPiece, 6);
  for (int32_t type : {1, 1, 1, 4, 4, 3, 4, 4, 1}) types.push_back(type);
  w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  w.set("general.name", gguf::Value::string(name));
  w.set("general.architecture", gguf::Value::string(arch));
  return w;
}

TEST(SpecialTokens, Phi3TokensStripTheWhiteSpaceOnTheirRight) {
  // llama.cpp picks this by model name: "<|user|>\n a" is <|user|> then
  // "a" with SPM's space prefix, and nothing is left after "<|end|>\n".
  auto phi3 = load_tokenizer(special_vocab("Phi3 Mini", "phi3"), "phi3");
  EXPECT_EQ(phi3->encode("<|user|>\n a<|end|>\n", false, true),
            (std::vector<int32_t>{kUser, kFirstPiece, kFirstPiece + 1, kEnd}));
  // Except <|endoftext|>, <s> and <unk>.
  EXPECT_EQ(phi3->encode("<|endoftext|>\na", false, true),
            (std::vector<int32_t>{kEndOfText, kFirstPiece, 3 + '\n', kFirstPiece + 1}));
  EXPECT_EQ(phi3->encode("<s> a", false, true), (std::vector<int32_t>{1, kFirstPiece, kFirstPiece, kFirstPiece + 1}));
  // Another model name keeps the white space.
  auto other = load_tokenizer(special_vocab("Llama", "llama"), "not_phi3");
  EXPECT_EQ(other->encode("<|user|>\n a", false, true),
            (std::vector<int32_t>{kUser, kFirstPiece, 3 + '\n', kFirstPiece, kFirstPiece + 1}));
}

TEST(SpecialTokens, MaskStripsTheWhiteSpaceOnItsLeftForNomicBertMoe) {
  auto nomic = load_tokenizer(special_vocab("Nomic", "nomic-bert-moe"), "nomic");
  EXPECT_EQ(nomic->encode("a \t<mask>b", false, false),
            (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, kMask, kFirstPiece, kFirstPiece + 2}));
  auto other = load_tokenizer(special_vocab("Llama", "llama"), "no_lstrip");
  EXPECT_EQ(other->encode("a \t<mask>b", false, false),
            (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, kFirstPiece, 3 + '\t', kMask, kFirstPiece,
                                  kFirstPiece + 2}));
}

TEST(SpecialTokens, ControlLookingTokensBecomeControlTokens) {
  auto tok = load_tokenizer(special_vocab("Llama", "llama"), "control_looking");
  // <|end|> ends generation, so llama.cpp makes it a control token even
  // though the file says user-defined: plain text without parse_special.
  EXPECT_TRUE(tok->is_eog(kEnd));
  EXPECT_EQ(tok->encode("a<|end|>", false, true), (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, kEnd}));
  EXPECT_EQ(tok->encode("a<|end|>", false, false).size(), 2u + 7u);  // "<|end|>" as 7 byte tokens
  EXPECT_EQ(tok->token_to_piece(kEnd, false), "");
  // A user-defined token that is not control-looking splits either way.
  EXPECT_EQ(tok->encode("a<mask>", false, false), (std::vector<int32_t>{kFirstPiece, kFirstPiece + 1, kMask}));
  EXPECT_FALSE(tok->is_eog(kMask));
  // Fill-in-the-middle pad and file separator, found by text, end generation
  // and become control tokens (<|file_sep|> was a normal token).
  EXPECT_TRUE(tok->is_eog(kFimPad));
  EXPECT_TRUE(tok->is_eog(kFileSep));
  EXPECT_EQ(tok->token_to_piece(kFileSep, false), "");
  EXPECT_EQ(tok->token_to_piece(kFileSep), "<|file_sep|>");
}

TEST(SpecialTokens, FimIdsFromTheFileWinOverTheTexts) {
  gguf::Writer w = special_vocab("Llama", "llama");
  w.set("tokenizer.ggml.fim_pad_token_id", gguf::Value::u32(kFirstPiece + 2));  // "b"
  auto tok = load_tokenizer(w, "fim_ids");
  EXPECT_TRUE(tok->is_eog(kFirstPiece + 2));
  EXPECT_FALSE(tok->is_eog(kFimPad));
  EXPECT_EQ(tok->token_to_piece(kFirstPiece + 2, false), "b");  // its type stays normal
}

// A byte-level BPE vocabulary: the 256 byte symbols (id = byte value), the
// given merges' results in order, extra tokens, then <|endoftext|>.
gguf::Writer bpe_vocab(const std::vector<std::string>& merges, const std::string& pre = "gpt-2",
                       const std::vector<std::string>& extra = {}) {
  std::vector<std::string> tokens;
  uint32_t next = 256;  // GPT-2's mapping: printable bytes as themselves, the rest from U+0100
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cpt = printable ? b : next++;
    std::string s;
    if (cpt < 0x80) {
      s += static_cast<char>(cpt);
    } else {
      s += static_cast<char>(0xC0 | (cpt >> 6));
      s += static_cast<char>(0x80 | (cpt & 0x3F));
    }
    tokens.push_back(s);
  }
  for (const std::string& m : merges) {
    std::string joined = m;
    joined.erase(m.find(' '), 1);
    tokens.push_back(joined);
  }
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  tokens.push_back("<|endoftext|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", gguf::Value::string(pre));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  w.set("tokenizer.ggml.merges", gguf::Value::strings(merges));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(static_cast<uint32_t>(tokens.size() - 1)));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(static_cast<uint32_t>(tokens.size() - 1)));
  return w;
}

TEST(BpeTokenizer, LowestRankMergesFirst) {
  // "hello": ll (rank 0) before he (rank 1), then he+ll, then hell+o.
  auto tok = load_tokenizer(bpe_vocab({"l l", "h e", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "a a"}), "bpe_rank");
  EXPECT_EQ(tok->encode("hello", false, false), (std::vector<int32_t>{259}));
  // " world" is one pre-token: Ġw + or -> Ġwor, then l, d as bytes.
  EXPECT_EQ(tok->encode("hello world", false, false), (std::vector<int32_t>{259, 262, 'l', 'd'}));
  // Without "he ll" reachable: "help" -> he, l, p.
  EXPECT_EQ(tok->encode("help", false, false), (std::vector<int32_t>{257, 'l', 'p'}));
  // Equal ranks: the leftmost pair merges.
  EXPECT_EQ(tok->encode("aaa", false, false), (std::vector<int32_t>{263, 'a'}));
  EXPECT_EQ(tok->decode(tok->encode("hello world", false, false)), "hello world");
  EXPECT_FALSE(tok->add_bos());  // gpt-2 adds no BOS
}

TEST(BpeTokenizer, BytesMapToPrintableSymbols) {
  auto tok = load_tokenizer(bpe_vocab({}), "bpe_bytes");
  // Space is byte 0x20 -> 'Ġ' (U+0120); newline -> 'Ċ'; each maps back.
  EXPECT_EQ(tok->token_text(' '), "\xC4\xA0");
  EXPECT_EQ(tok->token_text('\n'), "\xC4\x8A");
  EXPECT_EQ(tok->token_to_piece(' '), " ");
  const std::string text = "caf\xC3\xA9 \xF0\x9F\xA7\xB5\n\t\x01";
  std::vector<int32_t> expected;
  for (unsigned char c : text) expected.push_back(c);
  EXPECT_EQ(tok->encode(text, false, false), expected);
  EXPECT_EQ(tok->decode(expected), text);
}

TEST(BpeTokenizer, SpecialTokensAndCleanUp) {
  auto tok = load_tokenizer(bpe_vocab({}), "bpe_special");
  const int32_t eot = 256;
  EXPECT_EQ(tok->encode("a<|endoftext|>b", false, true), (std::vector<int32_t>{'a', eot, 'b'}));
  EXPECT_EQ(tok->encode("<|endoftext|>", false, false).size(), 13u);  // as text
  EXPECT_TRUE(tok->is_eog(eot));
  // "gpt-2" vocabularies drop the space llama.cpp's detokenizer finds before
  // punctuation and contractions; "qwen2" ones keep the text as it is.
  const std::string text = "a . b , c ' d 's";
  EXPECT_EQ(tok->decode(tok->encode(text, false, false)), "a. b, c'd's");
  auto qwen = load_tokenizer(bpe_vocab({}, "qwen2"), "bpe_qwen");
  EXPECT_EQ(qwen->decode(qwen->encode(text, false, false)), text);
}

TEST(BpeTokenizer, Llama3TakesWholeWordsFromTheVocabulary) {
  // "abc" is a token that no merge reaches: gpt-2 merges a+b and stops,
  // llama-bpe finds the whole word in the vocabulary first.
  auto gpt2 = load_tokenizer(bpe_vocab({"a b"}, "gpt-2", {"abc"}), "bpe_gpt2_whole");
  auto llama3 = load_tokenizer(bpe_vocab({"a b"}, "llama-bpe", {"abc"}), "bpe_llama3_whole");
  EXPECT_EQ(gpt2->encode("abc", false, false), (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(llama3->encode("abc", false, false), (std::vector<int32_t>{257}));
  EXPECT_TRUE(llama3->add_bos());
  EXPECT_EQ(llama3->encode("abc", true, false), (std::vector<int32_t>{258, 257}));
}

TEST(PreTokenizer, Gpt2Splits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "Hello world's 123 4567!!  ok\n\nbye"),
            (V{"Hello", " world", "'s", " 123", " 4567", "!!", " ", " ok", "\n", "\n", "bye"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "I'M"), (V{"I", "'", "M"}));  // contractions are lower case only
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "na\xC3\xAFve caf\xC3\xA9"), (V{"na\xC3\xAFve", " caf\xC3\xA9"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Gpt2, "\tfoo   "), (V{"\t", "foo", "   "}));
}

TEST(PreTokenizer, Llama3AndQwen2Splits) {
  using V = std::vector<std::string>;
  const std::string text = "Hello world's 123 4567!!  ok\n\nbye";
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, text),
            (V{"Hello", " world", "'s", " ", "123", " ", "456", "7", "!!", " ", " ok", "\n\n", "bye"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Qwen2, text),
            (V{"Hello", " world", "'s", " ", "1", "2", "3", " ", "4", "5", "6", "7", "!!", " ", " ok", "\n\n", "bye"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, "I'M"), (V{"I", "'M"}));  // case-insensitive contractions
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, "ok!\n\nnext"), (V{"ok", "!\n\n", "next"}));
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, "\tfoo"), (V{"\tfoo"}));
  // Unicode whitespace (NBSP, ideographic space) counts as whitespace.
  EXPECT_EQ(pre_tokenize(PreTokenizer::Llama3, "a\xC2\xA0\xC2\xA0" "b\xE3\x80\x80"),
            (V{"a", "\xC2\xA0", "\xC2\xA0" "b", "\xE3\x80\x80"}));
}

// One case (or two) per remaining pre-tokenizer, worked out by hand from the
// split rules in llama.cpp's notation: each rule in turn splits the pieces
// the previous ones left, and unmatched text stays a piece of its own.
TEST(PreTokenizer, EveryRuleSetSplitsAsItsRegexes) {
  using V = std::vector<std::string>;
  using P = PreTokenizer;
  // default: punctuation runs, gpt-2 words, digit runs, then groups of three digits from the left.
  EXPECT_EQ(pre_tokenize(P::Default, "Hi, 12345!"), (V{"Hi", ",", " ", "123", "45", "!"}));
  // jais-2: whitespace runs cut in powers of two, the last space going to the word.
  EXPECT_EQ(pre_tokenize(P::Jais2, "a      b"), (V{"a", "    ", " ", " b"}));
  EXPECT_EQ(pre_tokenize(P::Llama3, "a      b"), (V{"a", "     ", " b"}));
  // deepseek-llm: newlines, Latin/Greek/... letter runs, ASCII and full-width punctuation, CJK, digits.
  EXPECT_EQ(pre_tokenize(P::DeepseekLlm, "Hello, \xE4\xB8\x96\xE7\x95\x8C 42!\n"),
            (V{"Hello", ",", " ", "\xE4\xB8\x96\xE7\x95\x8C", " ", "42", "!", "\n"}));
  // its trailing-whitespace rule: spaces at the end of a piece stand alone.
  EXPECT_EQ(pre_tokenize(P::DeepseekLlm, "ab  "), (V{"ab", "  "}));
  // deepseek-coder: letters and punctuation (not symbols such as '=') keep one leading space, digits one by one.
  EXPECT_EQ(pre_tokenize(P::DeepseekCoder, "x = 12;\n"), (V{"x", " = ", "1", "2", ";", "\n"}));
  // deepseek-v3: up to three digits, CJK and kana runs, punctuation glued to the ASCII word after it.
  EXPECT_EQ(pre_tokenize(P::Deepseek3, "abc12345\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xA7\xE3\x81\x99!"),
            (V{"abc", "123", "45", "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xA7\xE3\x81\x99", "!"}));
  EXPECT_EQ(pre_tokenize(P::Deepseek3, "a.Net"), (V{"a", ".Net"}));
  // youtu: Hangul runs first; case classes are plain letters, so no split inside HTTPServer; contractions stay on the word.
  EXPECT_EQ(pre_tokenize(P::Youtu, "\xED\x95\x9C\xEA\xB5\xAD" "abc don't HTTPServer"),
            (V{"\xED\x95\x9C\xEA\xB5\xAD", "abc", " don't", " HTTPServer"}));
  // falcon: punctuation and symbols alone, gpt-2 words, three-digit groups.
  EXPECT_EQ(pre_tokenize(P::Falcon, "a+b 12345"), (V{"a", "+", "b", " ", "123", "45"}));
  // starcoder: every digit alone, then gpt-2.
  EXPECT_EQ(pre_tokenize(P::Starcoder, "ab12 cd"), (V{"ab", "1", "2", " cd"}));
  // qwen35: combining marks belong to the word (qwen2 cuts at them).
  const std::string marks = "e\xCC\x81t\xCC\x88 a";
  EXPECT_EQ(pre_tokenize(P::Qwen35, marks), (V{"e\xCC\x81t\xCC\x88", " a"}));
  EXPECT_EQ(pre_tokenize(P::Qwen2, marks), (V{"e", "\xCC\x81t", "\xCC\x88", " a"}));
  // bloom: runs of anything but whitespace, parentheses, '|' and sentence punctuation, with one leading space.
  EXPECT_EQ(pre_tokenize(P::Bloom, "Hello, world. (x|y)"), (V{"Hello", ",", " world", ". (", "x", "|", "y", ")"}));
  // viking: bloom, then every digit alone.
  EXPECT_EQ(pre_tokenize(P::Viking, "ab12, c"), (V{"ab", "1", "2", ",", " c"}));
  // tekken: upper-then-lower words, no contractions.
  EXPECT_EQ(pre_tokenize(P::Tekken, "HTTPServer iPhone don't"), (V{"HTTPServer", " i", "Phone", " don", "'t"}));
  // chameleon: digits and punctuation isolated (even inside <sentinel:N>), two spaces as a unit.
  EXPECT_EQ(pre_tokenize(P::Chameleon, "<sentinel:7>ab  12"), (V{"<", "sentinel", ":", "7", ">", "ab", "  ", "1", "2"}));
  // gpt-4o: cased words with contractions, three-digit groups, '/' and newlines after punctuation.
  EXPECT_EQ(pre_tokenize(P::Gpt4o, "HTTPServer iPhone DON'T 12345"),
            (V{"HTTPServer", " i", "Phone", " DON'T", " ", "123", "45"}));
  EXPECT_EQ(pre_tokenize(P::Gpt4o, "a/\nb"), (V{"a", "/\n", "b"}));
  // granite-embed-multi-97m: as gpt-4o, but a combining mark continues the word.
  EXPECT_EQ(pre_tokenize(P::Gpt4o, "Cafe\xCC\x81s"), (V{"Cafe", "\xCC\x81s"}));
  EXPECT_EQ(pre_tokenize(P::GraniteEmbMulti, "Cafe\xCC\x81s"), (V{"Cafe\xCC\x81s"}));
  // tiny_aya: digits in threes from the right (the text before a run joins its first group, and is cut off again).
  EXPECT_EQ(pre_tokenize(P::TinyAya, "abc1234567 HTTPServer"), (V{"abc", "1", "234", "567", " HTTPServer"}));
  // kimi-k2: Han runs apart from other letters (kana), three-digit groups.
  EXPECT_EQ(pre_tokenize(P::KimiK2, "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC" "abc 1234"),
            (V{"\xE6\x9D\xB1\xE4\xBA\xAC", "\xE3\x81\xAF", "\xE6\x97\xA5\xE6\x9C\xAC", "abc", " ", "123", "4"}));
  // superbpe: digit runs, then cut where a multiple of three digits is left (an empty lookahead match splits).
  EXPECT_EQ(pre_tokenize(P::SuperBpe, "x1234567y"), (V{"x", "1", "234", "567", "y"}));
  EXPECT_EQ(pre_tokenize(P::SuperBpe, "123"), (V{"123"}));
  // bailingmoe: one digit at a time, case-insensitive contractions.
  EXPECT_EQ(pre_tokenize(P::BailingMoe, "I'M 123"), (V{"I", "'M", " ", "1", "2", "3"}));
  // seed-coder: punctuation does not take the newlines after it (llama3 does).
  EXPECT_EQ(pre_tokenize(P::SeedCoder, "ok!\n\nnext"), (V{"ok", "!", "\n\n", "next"}));
  // afmoe: digit groups from the right, CJK runs, punctuation glued to the ASCII word after it.
  EXPECT_EQ(pre_tokenize(P::Afmoe, "ab12345.Net \xE6\x9D\xB1\xE4\xBA\xAC"),
            (V{"ab", "12", "345", ".Net", " ", "\xE6\x9D\xB1\xE4\xBA\xAC"}));
  // laguna: lines first, so spaces before a newline do not join it (qwen2 joins them).
  EXPECT_EQ(pre_tokenize(P::Laguna, "a  \nb"), (V{"a", "  ", "\n", "b"}));
  EXPECT_EQ(pre_tokenize(P::Qwen2, "a  \nb"), (V{"a", "  \n", "b"}));
  // exaone-moe: letters joined across single spaces, single digits, one newline after punctuation.
  EXPECT_EQ(pre_tokenize(P::ExaoneMoe, "hello world 42"), (V{"hello world", " ", "4", "2"}));
  EXPECT_EQ(pre_tokenize(P::ExaoneMoe, "a/\n\n"), (V{"a", "/\n", "\n"}));
  // minicpm5: three-digit groups first.
  EXPECT_EQ(pre_tokenize(P::Minicpm5, "ab12345"), (V{"ab", "123", "45"}));
  // gemma4 and sarvam-moe: lines and newline runs only.
  EXPECT_EQ(pre_tokenize(P::Gemma4, "a b\n\nc"), (V{"a b", "\n\n", "c"}));
  EXPECT_EQ(pre_tokenize(P::SarvamMoe, "a b\n\nc"), (V{"a b", "\n\n", "c"}));
  // whitespace: runs of non-whitespace, the whitespace between stays.
  EXPECT_EQ(pre_tokenize(P::Whitespace, "a  b\tc"), (V{"a", "  ", "b", "\t", "c"}));
}

TEST(PreTokenizer, EveryLlamaCppNameLoads) {
  // A few names of each group, and the flags llama.cpp sets with them.
  struct Case {
    const char* name;
    PreTokenizer pre;
    bool add_bos;
  };
  for (const Case& c : {Case{"falcon3", PreTokenizer::Llama3, true}, Case{"dbrx", PreTokenizer::Llama3, false},
                        Case{"grok-2", PreTokenizer::Qwen2, false}, Case{"exaone4", PreTokenizer::Gpt2, false},
                        Case{"hunyuan-dense", PreTokenizer::Deepseek3, false},
                        Case{"command-r", PreTokenizer::Starcoder, false}, Case{"tekken", PreTokenizer::Tekken, true},
                        Case{"llama4", PreTokenizer::Gpt4o, false}, Case{"poro-chat", PreTokenizer::Bloom, false},
                        Case{"cohere2moe", PreTokenizer::TinyAya, false}, Case{"chameleon", PreTokenizer::Chameleon, true},
                        Case{"granite-embed-multi-311m", PreTokenizer::Gemma4, true}}) {
    SCOPED_TRACE(c.name);
    gguf::Writer w = bpe_vocab({});
    w.set("tokenizer.ggml.pre", gguf::Value::string(c.name));
    w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(0));
    auto tok = load_tokenizer(w, "pre_name");
    EXPECT_EQ(tok->pre_tokenizer(), c.pre);
    EXPECT_EQ(tok->add_bos(), c.add_bos);
  }
  for (PreTokenizer pre : all_pre_tokenizers()) {
    SCOPED_TRACE(pre_tokenizer_name(pre));
    EXPECT_EQ(parse_tokenizer_style(tokenizer_style_name({TokenizerStyle::Model::Bpe, pre})).pre, pre);
  }
}

TEST(GeneratedVocab, Gemma4StyleEscapesSpacesAndFallsBackToBytes) {
  gguf::Writer w;
  write_tokenizer_metadata(w, parse_tokenizer_style("bpe-gemma4"), 1000);
  auto tok = load_tokenizer(w, "gemma4");
  EXPECT_TRUE(tok->add_bos());
  // Spaces are U+2581 inside tokens; a character outside the vocabulary
  // becomes its UTF-8 bytes as <0xXX> tokens.
  const std::vector<int32_t> ids = tok->encode(" \xE2\x98\x83", false, false);  // U+2603, not in the text
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(tok->token_text(ids[0]), kSpace);
  EXPECT_EQ(tok->token_text(ids[1]), "<0xE2>");
  EXPECT_EQ(tok->token_text(ids[3]), "<0x83>");
  EXPECT_EQ(tok->decode(ids), " \xE2\x98\x83");
}

TEST(GeneratedVocab, GemmaSpmHasNoSpacePrefix) {
  gguf::Writer w;
  write_tokenizer_metadata(w, TokenizerStyle::SpmGemma, 1000);
  auto tok = load_tokenizer(w, "gemma_spm");
  EXPECT_FALSE(tok->add_space_prefix());
  EXPECT_EQ(tok->token_text(tok->bos()), "<bos>");
  EXPECT_EQ(tok->token_text(tok->eos()), "<eos>");
  EXPECT_TRUE(tok->is_eog(tok->find_token("<end_of_turn>")));
  // "the" at the start gets no U+2581: its first token does not start with one.
  EXPECT_FALSE(tok->token_text(tok->encode("the", false, false).front()).starts_with(kSpace));
  EXPECT_TRUE(tok->token_text(tok->encode(" the", false, false).front()).starts_with(kSpace));
}

const std::vector<std::string> kTricky = {
    "",
    "Hello world",
    " leading space",
    "   several leading spaces",
    "trailing spaces   ",
    "multiple    spaces\tand\ttabs",
    "line one\nline two\n\n\nline five\r\n",
    "\n",
    "caf\xC3\xA9 na\xC3\xAFve Z\xC3\xBCrich \xD0\x9C\xD0\xBE\xD1\x81\xD0\xBA\xD0\xB2\xD0\xB0",
    "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE6\x97\xA5\xE6\x9C\xAC",
    "emoji \xF0\x9F\xA7\xB5\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB and more",
    "numbers 1804 3.14159 2,048",
    "code: for (int i = 0; i < n; ++i) { x[i] = y; }",
    "The loom is one of the oldest machines people have built",
};

TEST(GeneratedVocab, RoundTripsAndIsExact) {
  for (TokenizerStyle style : all_tokenizer_styles()) {
    // The whitespace pre-tokenizer keeps raw spaces, which llama.cpp (and
    // so Loom) decodes as [UNK_BYTE_0x20 ]: no round trip by design.
    if (style.pre == PreTokenizer::Whitespace) continue;
    // WordPiece and Unigram normalize (lowercase, merge whitespace, [UNK]):
    // tokenizer_wordpiece_unigram_test.cpp covers them.
    if (style.model != TokenizerStyle::Model::Spm && style.model != TokenizerStyle::Model::SpmGemma &&
        style.model != TokenizerStyle::Model::Bpe)
      continue;
    const bool main_style = style == TokenizerStyle::Spm || style == TokenizerStyle::Bpe ||
                            style == TokenizerStyle::BpeLlama3 || style == TokenizerStyle::BpeQwen2;
    for (int n_vocab : main_style ? std::vector<int>{min_vocab_size(style), 300, 1200, 5000} : std::vector<int>{400}) {
      SCOPED_TRACE(fmt::format("{} {}", tokenizer_style_name(style), n_vocab));
      gguf::Writer w;
      write_tokenizer_metadata(w, style, n_vocab);
      auto tok = load_tokenizer(w, "gen");
      EXPECT_EQ(tok->n_vocab(), n_vocab);
      EXPECT_NE(tok->bos(), Tokenizer::kNoToken);
      EXPECT_NE(tok->eos(), Tokenizer::kNoToken);
      EXPECT_TRUE(tok->is_eog(tok->eos()));
      for (const std::string& s : kTricky) {
        const std::vector<int32_t> ids = tok->encode(s, false, false);
        EXPECT_EQ(tok->decode(ids), s) << "text: " << s;
        std::vector<int32_t> with_bos = tok->encode(s, true, false);
        if (tok->add_bos()) {
          ASSERT_FALSE(with_bos.empty());
          EXPECT_EQ(with_bos.front(), tok->bos());
        }
      }
    }
  }
}

TEST(GeneratedVocab, LearnsMultiCharacterPiecesDeterministically) {
  for (TokenizerStyle style : {TokenizerStyle::Spm, TokenizerStyle::BpeLlama3}) {
    const TempFile ta{temp_path("det_a.gguf")}, tb{temp_path("det_b.gguf")};
    const std::string& a = ta.path;
    const std::string& b = tb.path;
    for (const std::string& path : {a, b}) {
      gguf::Writer w;
      write_tokenizer_metadata(w, style, 2000);
      w.write(path);
    }
    std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
    const std::string ba((std::istreambuf_iterator<char>(fa)), {}), bb((std::istreambuf_iterator<char>(fb)), {});
    EXPECT_EQ(ba, bb);
    auto file = gguf::File::open(a);
    auto tok = Tokenizer::from_gguf(*file);
    // A common word of the training text is a single token (SPM adds the
    // space in front itself).
    EXPECT_EQ(tok->encode(style == TokenizerStyle::Spm ? "the" : " the", false, false).size(), 1u);
    EXPECT_LT(tok->encode("The loom is one of the oldest machines", false, false).size(), 12u);
  }
}

TEST(GeneratedVocab, RejectsTooSmallSizes) {
  gguf::Writer w;
  EXPECT_THROW(write_tokenizer_metadata(w, TokenizerStyle::Spm, 259), Error);
  EXPECT_THROW(write_tokenizer_metadata(w, TokenizerStyle::Bpe, 257), Error);
  EXPECT_THROW(parse_tokenizer_style("wordpiece"), Error);
  EXPECT_EQ(parse_tokenizer_style("bpe-qwen2"), TokenizerStyle::BpeQwen2);
}

TEST(TokenizerErrors, NameTheFileAndKey) {
  {
    gguf::Writer w = spm_vocab({});
    w.set("tokenizer.ggml.model", gguf::Value::string("plamo2"));
    const std::string e = tokenizer_load_error(w, "bad_model");
    EXPECT_NE(e.find("tokenizer.ggml.model = 'plamo2' is not supported (supported: llama, gpt2, gemma4, bert, t5, rwkv)"),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("loom_tok_"), std::string::npos) << e;  // the file
  }
  {
    gguf::Writer w = spm_vocab({{"a", -1}});
    w.set("tokenizer.ggml.scores", gguf::Value::f32s({0, 0, 0}));
    const std::string e = tokenizer_load_error(w, "bad_scores");
    EXPECT_NE(e.find("tokenizer.ggml.scores has 3 entries"), std::string::npos) << e;
  }
  {
    gguf::Writer w = spm_vocab({});
    w.set("tokenizer.ggml.token_type", gguf::Value::i32s({1}));
    EXPECT_NE(tokenizer_load_error(w, "bad_types").find("tokenizer.ggml.token_type"), std::string::npos);
  }
  {
    gguf::Writer w = spm_vocab({{"a", -1}, {"a", -2}});
    EXPECT_NE(tokenizer_load_error(w, "dup").find("appears twice"), std::string::npos);
  }
  {
    gguf::Writer w = spm_vocab({});
    w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(100000));
    EXPECT_NE(tokenizer_load_error(w, "bad_bos").find("tokenizer.ggml.bos_token_id = 100000"), std::string::npos);
  }
  {
    gguf::Writer w;
    w.set("general.architecture", gguf::Value::string("llama"));
    EXPECT_NE(tokenizer_load_error(w, "no_model").find("tokenizer.ggml.model"), std::string::npos);
  }
  {
    gguf::Writer w = bpe_vocab({});
    w.set("tokenizer.ggml.pre", gguf::Value::string("no-such-pre"));
    const std::string e = tokenizer_load_error(w, "bad_pre");
    EXPECT_NE(e.find("tokenizer.ggml.pre = 'no-such-pre'"), std::string::npos) << e;
    EXPECT_NE(e.find("loom_tok_"), std::string::npos) << e;  // the file
  }
  {
    gguf::Writer w = bpe_vocab({});
    w.set("tokenizer.ggml.merges", gguf::Value::i32s({1}));
    EXPECT_NE(tokenizer_load_error(w, "bad_merges").find("tokenizer.ggml.merges"), std::string::npos);
  }
  {
    // Regression (issue 18): a byte token <0xZZ> made piece() throw std::invalid_argument.
    gguf::Writer w = spm_vocab({{"<0xZZ>", -1}});
    std::vector<int32_t> types(kFirstPiece + 1, 6);
    types[0] = 2, types[1] = types[2] = 3;
    w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
    const std::string e = tokenizer_load_error(w, "bad_byte");
    EXPECT_NE(e.find("token 259 has type byte but its text '<0xZZ>' is not <0xHH>"), std::string::npos) << e;
  }
  auto tok = load_tokenizer(spm_vocab({}), "range");
  EXPECT_THROW(tok->token_to_piece(259), Error);
  EXPECT_THROW(tok->token_to_piece(-1), Error);
}

}  // namespace
}  // namespace loom
