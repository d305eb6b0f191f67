// The RWKV tokenizer ("rwkv") on hand-made vocabularies whose expected ids
// follow from greedy longest matching over bytes; token texts in Python's
// bytes repr() escapes; llama.cpp's defaults (no BOS/EOS); a byte without a
// token; the generated rwkv style. (Token for token parity with llama.cpp:
// tests/parity/run-tokenizer-parity, style rwkv.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/tokenizer.h"
#include "model_gen/vocab_gen.h"
#include "support/temp_tokenizer.h"
#include "tokenizer_internal.h"

namespace loom {
namespace {

using test::load_tokenizer;

// <s>, then the given texts (escaped as the file holds them), all normal.
gguf::Writer rwkv_vocab(const std::vector<std::string>& texts) {
  std::vector<std::string> tokens = {"<s>"};
  std::vector<int32_t> types = {3};
  for (const std::string& t : texts) {
    tokens.push_back(t);
    types.push_back(1);
  }
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("rwkv6"));
  w.set("tokenizer.ggml.model", gguf::Value::string("rwkv"));
  w.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  w.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  return w;
}

TEST(RwkvTokenizer, TokenTextsArePythonBytesEscapes) {
  EXPECT_EQ(tok::rwkv_unescape("plain"), "plain");
  EXPECT_EQ(tok::rwkv_unescape("\\xc3\\xa9"), "\xC3\xA9");
  EXPECT_EQ(tok::rwkv_unescape("\\t\\n\\r\\\\\\'\""), "\t\n\r\\'\"");
  EXPECT_EQ(tok::rwkv_unescape("\\x00"), std::string(1, '\0'));
  EXPECT_EQ(tok::rwkv_unescape("\\q"), "q");       // any other escaped character stands for itself
  EXPECT_EQ(tok::rwkv_unescape("a\\"), "a");       // a dangling backslash is dropped
  EXPECT_EQ(tok::rwkv_unescape("a\\x4"), "a");     // so is an unfinished \x
}

TEST(RwkvTokenizer, CutsTheLongestTokenAtEachPosition) {
  auto tok = load_tokenizer(rwkv_vocab({"a", "b", "c", "ab", "abc", "bc", " ", "\\n", "\\xc3\\xa9", "\\xc3"}), "greedy");
  EXPECT_EQ(tok->kind(), TokenizerKind::Rwkv);
  // "abc" beats "ab"; then "ab" (no "abca").
  EXPECT_EQ(tok->encode("abcab", false, false), (std::vector<int32_t>{5, 4}));
  // Greedy, not best: "ab" + "c" would never be picked over "abc", and
  // "b" + "c" loses to "bc".
  EXPECT_EQ(tok->encode("bcb", false, false), (std::vector<int32_t>{6, 2}));
  // Bytes, not characters: é is one token, a lone 0xC3 another.
  EXPECT_EQ(tok->encode("\xC3\xA9\n\xC3", false, false), (std::vector<int32_t>{9, 8, 10}));
  EXPECT_EQ(tok->decode(std::vector<int32_t>{9, 8, 7, 5}), "\xC3\xA9\n abc");
  EXPECT_EQ(tok->token_to_piece(10), "\xC3");
}

TEST(RwkvTokenizer, HasLlamaCppsDefaults) {
  auto tok = load_tokenizer(rwkv_vocab({"a"}), "defaults");
  EXPECT_FALSE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->bos(), Tokenizer::kNoToken);
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{1}));
  // <s> is a control token: matched in the text only with parse_special,
  // and rendered only on request.
  EXPECT_EQ(tok->encode("<s>a", false, true), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(tok->token_to_piece(0, false), "");
  EXPECT_EQ(tok->token_to_piece(0, true), "<s>");
}

TEST(RwkvTokenizer, AByteWithoutATokenIsAnErrorOrTheUnknownToken) {
  gguf::Writer w = rwkv_vocab({"a", "b"});
  try {
    load_tokenizer(w, "no_byte")->encode("abx", false, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("byte 0x78 at offset 2"), std::string::npos) << what;
    EXPECT_NE(what.find("loom_tok_"), std::string::npos) << what;  // the file
  }
  w.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(0));
  EXPECT_EQ(load_tokenizer(w, "unk")->encode("axb", false, false), (std::vector<int32_t>{1, 0, 2}));
}

TEST(GeneratedVocab, RwkvStyleRoundTrips) {
  for (int n_vocab : {min_vocab_size(TokenizerStyle::Rwkv), 2000}) {
    SCOPED_TRACE(n_vocab);
    gguf::Writer w;
    write_tokenizer_metadata(w, TokenizerStyle::Rwkv, n_vocab);
    auto tok = load_tokenizer(w, "gen");
    EXPECT_EQ(tok->n_vocab(), n_vocab);
    const std::string text = "Hello, world! \xC3\xA9t\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\t\\'\"\n12345 the loom";
    const std::vector<int32_t> ids = tok->encode(text, false, false);
    EXPECT_EQ(tok->decode(ids), text);
    if (n_vocab > min_vocab_size(TokenizerStyle::Rwkv)) EXPECT_LT(ids.size(), text.size());  // learned strings are used
  }
}

}  // namespace
}  // namespace loom
