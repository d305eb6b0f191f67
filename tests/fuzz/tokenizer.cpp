// Fuzz target: every tokenizer style on arbitrary bytes (encode, then decode
// of the result) and decode of arbitrary ids, with generated vocabularies.
// Byte 0 picks the style (SPM, three BPE, WordPiece, Unigram with and
// without a character map, RWKV) and the flags; the rest is the text, or the ids.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/tokenizer.h"
#include "model_gen/vocab_gen.h"

namespace {

const loom::TokenizerStyle kStyles[] = {loom::TokenizerStyle::Spm,       loom::TokenizerStyle::Bpe,
                                        loom::TokenizerStyle::BpeLlama3, loom::TokenizerStyle::BpeQwen2,
                                        loom::TokenizerStyle::Wpm,       loom::TokenizerStyle::Ugm,
                                        loom::TokenizerStyle::UgmCharsmap, loom::TokenizerStyle::Rwkv};

std::unique_ptr<loom::Tokenizer> make_tokenizer(loom::TokenizerStyle style) {
  loom::gguf::Writer w;
  w.set("general.architecture", loom::gguf::Value::string("llama"));
  loom::write_tokenizer_metadata(w, style, loom::min_vocab_size(style) + 64);
  const auto path = std::filesystem::temp_directory_path() /
                    ("loom-fuzz-vocab-" + std::to_string(getpid()) + "-" +
                     std::string(loom::tokenizer_style_name(style)) + ".gguf");
  w.write(path.string());
  auto file = loom::gguf::File::open(path.string(), false);
  auto tok = loom::Tokenizer::from_gguf(*file);
  std::filesystem::remove(path);
  return tok;
}

const std::vector<std::unique_ptr<loom::Tokenizer>>& tokenizers() {
  static const auto all = [] {
    std::vector<std::unique_ptr<loom::Tokenizer>> t;
    for (auto s : kStyles) t.push_back(make_tokenizer(s));
    return t;
  }();
  return all;
}

}  // namespace

// Learning the vocabularies takes seconds under ASan: before the first input,
// outside libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  // Bits 0-1 and 6-7 pick the style (inputs with bits 6-7 clear keep the
  // first four), bits 2-5 the flags.
  const auto& tok = *tokenizers()[((control & 3) | (control >> 6) << 2) % std::size(kStyles)];
  const bool add_special = control & 4, parse_special = control & 8, render_special = control & 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (control & 32) {
    // Arbitrary ids, in range or not: out-of-range ids must be refused, not read.
    std::vector<int32_t> ids((size - 1) / 4);
    if (!ids.empty()) std::memcpy(ids.data(), data + 1, ids.size() * 4);
    try {
      (void)tok.decode(ids, render_special);
    } catch (const loom::Error&) {
    }
    for (int32_t id : ids) {
      try {
        (void)tok.token_to_piece(id, render_special);
      } catch (const loom::Error&) {
      }
    }
    return 0;
  }
  const std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
  (void)tok.decode(ids, render_special);
  if (tok.kind() == loom::TokenizerKind::Bpe) (void)loom::pre_tokenize(tok.pre_tokenizer(), text);
  return 0;
}
