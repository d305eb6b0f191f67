// The pre-tokenizer's split rules on code points that Unicode 15.0 and 15.1
// assigned: llama.cpp's tables (15.1) know their categories, Debian 12's
// PCRE2 (Unicode 14.0 tables) does not, and the splits must follow
// llama.cpp's (tok::PreSplitter adds them to its \p classes).
#include <gtest/gtest.h>

#include "tokenizer_internal.h"

namespace loom {
namespace {

using Pieces = std::vector<std::string>;

TEST(PreSplit, Unicode15LettersNumbersAndSymbolsKeepTheirCategories) {
  const tok::PreSplitter gpt2(PreTokenizer::Gpt2);
  // U+31350 (CJK extension H) and U+2EBF0 (extension I) are letters: one
  // \p{L}+ run with the ASCII letters around them.
  EXPECT_EQ(gpt2.split_raw("a\U00031350b \U0002EBF0x"), (Pieces{"a\U00031350b", " \U0002EBF0x"}));
  // Kaktovik numerals (U+1D2C0...) are numbers, U+1FA75 (an emoji of 15.0)
  // is a symbol: neither joins the letters.
  EXPECT_EQ(gpt2.split_raw("x\U0001D2C0\U0001D2C1y"), (Pieces{"x", "\U0001D2C0\U0001D2C1", "y"}));
  EXPECT_EQ(gpt2.split_raw("ab\U0001FA75\U0001FA76"), (Pieces{"ab", "\U0001FA75\U0001FA76"}));
  // Llama 3 splits numbers into groups of at most three.
  const tok::PreSplitter llama3(PreTokenizer::Llama3);
  EXPECT_EQ(llama3.split_raw("\U0001D2C0\U0001D2C1\U0001D2C2\U0001D2C3"),
            (Pieces{"\U0001D2C0\U0001D2C1\U0001D2C2", "\U0001D2C3"}));
}

}  // namespace
}  // namespace loom
