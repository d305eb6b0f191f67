// Generated vocabularies for `loom make-model`: byte-pair merges learned
// from the built-in text, written as a complete SPM or byte-level BPE
// vocabulary (WordPiece and Unigram: vocab_gen_wordpiece.cpp,
// vocab_gen_unigram.cpp) that llama.cpp loads and tokenizes exactly as Loom
// does.
#include "model_gen/vocab_gen.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>
#include <unordered_map>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/tokenizer.h"
#include "model_gen/vocab_learn.h"
#include "tokenizer_internal.h"

namespace loom {
namespace {

using namespace vocab_gen;

constexpr std::string_view kBos = "<|begin_of_text|>";
constexpr std::string_view kEos = "<|end_of_text|>";

// Gemma's special tokens come first, in its order.
constexpr std::string_view kGemmaSpecial[] = {"<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"};

Vocab build_spm(bool gemma, int n_vocab) {
  Vocab v;
  if (gemma) {
    for (std::string_view text : kGemmaSpecial)
      v.add(std::string(text), text == "<unk>" ? TokenType::Unknown : TokenType::Control);
  } else {
    v.add("<unk>", TokenType::Unknown);
    v.add("<s>", TokenType::Control);
    v.add("</s>", TokenType::Control);
  }
  for (int b = 0; b < 256; ++b) v.add(fmt::format("<0x{:02X}>", b), TokenType::Byte);

  // Words as SentencePiece sees them: split at whitespace, each with a
  // leading U+2581 (the escaped space the tokenizer adds before a word).
  std::vector<std::string> words;
  std::string current;
  auto flush = [&] {
    if (!current.empty()) words.push_back(std::string(kEscapedSpace) + current);
    current.clear();
  };
  for (char c : vocab_training_text()) {
    if (c == ' ' || c == '\n' || c == '\t') flush();
    else current += c;
  }
  flush();
  const std::vector<Word> counted = count_words(words);

  // One slot stays for "▁" itself: without it every space would fall back
  // to three byte tokens and decode as "▁" instead of " ".
  const size_t capacity = static_cast<size_t>(n_vocab) - v.tokens.size() - 1;
  std::vector<std::string> pieces;
  std::unordered_map<std::string, bool> seen;
  learn_merges(counted, [&](const Merge& m) {
    if (pieces.size() >= capacity) return false;
    if (seen.emplace(m.first + m.second, true).second) pieces.push_back(m.first + m.second);
    return true;
  });
  // Merged pieces score by merge order; single characters come after them
  // ("▁" first, then the most frequent), as in SentencePiece BPE models.
  for (size_t i = 0; i < pieces.size(); ++i) v.add(pieces[i], TokenType::Normal, -static_cast<float>(i));
  std::map<std::string, int64_t> char_count;
  for (const Word& w : counted)
    for (const std::string& s : w.symbols) char_count[s] += w.count;
  char_count[std::string(kEscapedSpace)] = INT64_MAX;
  std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
  std::stable_sort(chars.begin(), chars.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [text, count] : chars) {
    if (v.tokens.size() >= static_cast<size_t>(n_vocab)) break;
    if (seen.count(text)) continue;
    v.add(text, TokenType::Normal, -static_cast<float>(v.tokens.size()));
  }
  for (int i = 0; v.tokens.size() < static_cast<size_t>(n_vocab); ++i) v.add(fmt::format("<unused{}>", i), TokenType::Unused);
  return v;
}

Vocab build_bpe(PreTokenizer pre, int n_vocab) {
  Vocab v;
  const bool byte_level = tok::byte_encoded(pre);
  const size_t capacity = static_cast<size_t>(n_vocab) - 2;  // room left for BOS and EOS
  std::string text = std::string(vocab_training_text()) + std::string(vocab_mixed_text());
  if (tok::escapes_spaces(pre)) text = replace_all(text, " ", kEscapedSpace);
  const tok::PreSplitter splitter(pre);
  const std::vector<Word> counted = count_words(splitter.split(text));
  std::unordered_map<std::string, bool> seen;
  if (byte_level) {
    for (int b = 0; b < 256; ++b) v.add(tok::byte_to_symbol(static_cast<uint8_t>(b)), TokenType::Normal);
  } else {
    // Byte fallback tokens, then the text's characters, most frequent first.
    for (int b = 0; b < 256; ++b) v.add(fmt::format("<0x{:02X}>", b), TokenType::Byte);
    std::map<std::string, int64_t> char_count;
    for (const Word& w : counted)
      for (const std::string& c : w.symbols) char_count[c] += w.count;
    std::vector<std::pair<std::string, int64_t>> chars(char_count.begin(), char_count.end());
    std::stable_sort(chars.begin(), chars.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [c, count] : chars)
      if (v.tokens.size() < capacity) v.add(c, TokenType::Normal);
  }
  for (const std::string& t : v.tokens) seen.emplace(t, true);

  // Merges are learned from the pre-tokenizer's words and from whole lines,
  // so that some cross word boundaries: a tokenizer that splits a text
  // differently from llama.cpp then gives different tokens. A merge is
  // written as "left right", so raw symbols with spaces (the whitespace
  // pre-tokenizer keeps runs of spaces raw) cannot merge: that style learns
  // from its own words without them.
  std::vector<Word> mergeable;
  for (const Word& w : counted)
    if (byte_level || std::none_of(w.symbols.begin(), w.symbols.end(), [](const std::string& c) { return c == " "; }))
      mergeable.push_back(w);
  if (pre != PreTokenizer::Whitespace) {
    std::vector<std::string> lines;
    for (const std::string& line : tok::PreSplitter(PreTokenizer::Gemma4).split(text)) {
      std::string symbols;
      for (char c : line) symbols += byte_level ? tok::byte_to_symbol(static_cast<uint8_t>(c)) : std::string(1, c);
      lines.push_back(std::move(symbols));
    }
    for (Word& w : count_words(lines)) mergeable.push_back(std::move(w));
  }
  const std::vector<Merge> merges = learn_merges(mergeable, [&](const Merge& m) {
    const bool is_new = !seen.count(m.first + m.second);
    if (is_new && v.tokens.size() >= capacity) return false;
    if (is_new) {
      seen.emplace(m.first + m.second, true);
      v.add(m.first + m.second, TokenType::Normal);
    }
    return true;
  });
  for (const Merge& m : merges) v.merges.push_back(m.first + " " + m.second);
  v.add(std::string(kBos), TokenType::Control);
  v.add(std::string(kEos), TokenType::Control);
  for (int i = 0; v.tokens.size() < static_cast<size_t>(n_vocab); ++i)
    v.add(fmt::format("<|reserved_special_token_{}|>", i), TokenType::Unused);
  return v;
}

// WordPiece and Unigram leave the special ids (and BOS/EOS flags) to
// llama.cpp's defaults for them, naming only the separator and padding.
void write_wordpiece_or_unigram(gguf::Writer& writer, TokenizerStyle style, int n_vocab) {
  if (style.model == TokenizerStyle::Model::Wpm) {
    const Vocab v = build_wordpiece(n_vocab);
    writer.set("tokenizer.ggml.model", gguf::Value::string("bert"));
    writer.set("tokenizer.ggml.tokens", gguf::Value::strings(v.tokens));
    writer.set("tokenizer.ggml.token_type", gguf::Value::i32s(v.types));
    writer.set("tokenizer.ggml.seperator_token_id", gguf::Value::u32(102));
    writer.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(0));
    return;
  }
  const bool charsmap = style.model == TokenizerStyle::Model::UgmCharsmap;
  const Vocab v = build_unigram(n_vocab);
  writer.set("tokenizer.ggml.model", gguf::Value::string("t5"));
  writer.set("tokenizer.ggml.tokens", gguf::Value::strings(v.tokens));
  writer.set("tokenizer.ggml.scores", gguf::Value::f32s(v.scores));
  writer.set("tokenizer.ggml.token_type", gguf::Value::i32s(v.types));
  writer.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(0));
  writer.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(true));
  writer.set("tokenizer.ggml.remove_extra_whitespaces", gguf::Value::boolean(charsmap));
  if (charsmap) {
    const std::vector<uint8_t> bytes = build_precompiled_charsmap(test_charsmap_entries());
    gguf::Array array(gguf::ValueType::U8);
    array.append_scalars(bytes.data(), bytes.size());
    writer.set("tokenizer.ggml.precompiled_charsmap", gguf::Value::array(std::move(array)));
  }
}

}  // namespace

TokenizerStyle parse_tokenizer_style(std::string_view name) {
  if (name == "spm" || name == "llama") return TokenizerStyle::Spm;
  if (name == "spm-gemma" || name == "gemma") return TokenizerStyle::SpmGemma;
  if (name == "bpe" || name == "gpt2") return TokenizerStyle::Bpe;
  if (name == "llama3" || name == "bpe-llama3") return TokenizerStyle::BpeLlama3;
  if (name == "qwen2") return TokenizerStyle::BpeQwen2;
  if (name == "wpm" || name == "bert") return TokenizerStyle::Wpm;
  if (name == "ugm" || name == "t5") return TokenizerStyle::Ugm;
  if (name == "ugm-charsmap") return TokenizerStyle::UgmCharsmap;
  if (name == "rwkv") return TokenizerStyle::Rwkv;
  if (name.starts_with("bpe-"))
    if (const tok::PreInfo* info = tok::find_pre(name.substr(4)))
      return {TokenizerStyle::Model::Bpe, info->pre};
  fail("unknown tokenizer style '{}' (expected spm, spm-gemma, bpe, bpe-NAME for a tokenizer.ggml.pre name such "
       "as bpe-llama-bpe, bpe-qwen2, bpe-deepseek-v3, bpe-gemma4, wpm, ugm, ugm-charsmap or rwkv)",
       name);
}

std::string tokenizer_style_name(TokenizerStyle style) {
  switch (style.model) {
    case TokenizerStyle::Model::Spm: return "spm";
    case TokenizerStyle::Model::SpmGemma: return "spm-gemma";
    case TokenizerStyle::Model::Wpm: return "wpm";
    case TokenizerStyle::Model::Ugm: return "ugm";
    case TokenizerStyle::Model::UgmCharsmap: return "ugm-charsmap";
    case TokenizerStyle::Model::Rwkv: return "rwkv";
    case TokenizerStyle::Model::Bpe: break;
  }
  return fmt::format("bpe-{}", pre_tokenizer_name(style.pre));
}

std::vector<TokenizerStyle> all_tokenizer_styles() {
  std::vector<TokenizerStyle> styles = {TokenizerStyle::Spm, TokenizerStyle::SpmGemma};
  for (PreTokenizer pre : all_pre_tokenizers()) styles.push_back({TokenizerStyle::Model::Bpe, pre});
  styles.insert(styles.end(), {TokenizerStyle::Wpm, TokenizerStyle::Ugm, TokenizerStyle::UgmCharsmap, TokenizerStyle::Rwkv});
  return styles;
}

int min_vocab_size(TokenizerStyle style) {
  switch (style.model) {
    case TokenizerStyle::Model::Spm: return 3 + 256 + 1;
    case TokenizerStyle::Model::SpmGemma: return static_cast<int>(std::size(kGemmaSpecial)) + 256 + 1;
    case TokenizerStyle::Model::Wpm: return 104 + 1;  // BERT's special ids, one piece
    case TokenizerStyle::Model::Ugm:
    case TokenizerStyle::Model::UgmCharsmap: return 4 + 1;  // <pad> </s> <unk> <br>, one piece
    case TokenizerStyle::Model::Rwkv: return 1 + 256 + 1;   // <s>, the bytes, one byte string
    case TokenizerStyle::Model::Bpe: break;
  }
  return 256 + 2;
}

void write_tokenizer_metadata(gguf::Writer& writer, TokenizerStyle style, int n_vocab) {
  if (n_vocab < min_vocab_size(style))
    fail("a '{}' vocabulary needs at least {} tokens, asked for {}", tokenizer_style_name(style), min_vocab_size(style),
         n_vocab);
  if (style.model == TokenizerStyle::Model::Wpm || style.model == TokenizerStyle::Model::Ugm ||
      style.model == TokenizerStyle::Model::UgmCharsmap)
    return write_wordpiece_or_unigram(writer, style, n_vocab);
  if (style.model == TokenizerStyle::Model::Rwkv) {  // no special ids or flags: llama.cpp's defaults
    const Vocab v = build_rwkv(n_vocab);
    writer.set("tokenizer.ggml.model", gguf::Value::string("rwkv"));
    writer.set("tokenizer.ggml.tokens", gguf::Value::strings(v.tokens));
    writer.set("tokenizer.ggml.token_type", gguf::Value::i32s(v.types));
    return;
  }
  const bool spm = style.model != TokenizerStyle::Model::Bpe;
  const bool gemma = style.model == TokenizerStyle::Model::SpmGemma;
  const Vocab v = spm ? build_spm(gemma, n_vocab) : build_bpe(style.pre, n_vocab);
  writer.set("tokenizer.ggml.model", gguf::Value::string(spm ? "llama" : "gpt2"));
  if (!spm) writer.set("tokenizer.ggml.pre", gguf::Value::string(std::string(pre_tokenizer_name(style.pre))));
  writer.set("tokenizer.ggml.tokens", gguf::Value::strings(v.tokens));
  if (spm) writer.set("tokenizer.ggml.scores", gguf::Value::f32s(v.scores));
  writer.set("tokenizer.ggml.token_type", gguf::Value::i32s(v.types));
  if (!spm) writer.set("tokenizer.ggml.merges", gguf::Value::strings(v.merges));
  auto id_of = [&](std::string_view text) {
    return static_cast<uint32_t>(std::find(v.tokens.begin(), v.tokens.end(), text) - v.tokens.begin());
  };
  const uint32_t bos = spm ? id_of(gemma ? "<bos>" : "<s>") : id_of(kBos);
  const uint32_t eos = spm ? id_of(gemma ? "<eos>" : "</s>") : id_of(kEos);
  writer.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(bos));
  writer.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(eos));
  if (spm) writer.set("tokenizer.ggml.unknown_token_id", gguf::Value::u32(id_of("<unk>")));
  writer.set("tokenizer.ggml.padding_token_id", gguf::Value::u32(gemma ? id_of("<pad>") : spm ? 0 : eos));
  // BOS as the model families do: SPM models add it; BPE ones as llama.cpp's
  // default for the pre-tokenizer name (llama3 and tekken add it, gpt-2 and
  // qwen2 do not).
  const bool add_bos = spm || tok::find_pre(pre_tokenizer_name(style.pre))->add_bos;
  writer.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(add_bos));
  writer.set("tokenizer.ggml.add_eos_token", gguf::Value::boolean(false));
  if (spm) writer.set("tokenizer.ggml.add_space_prefix", gguf::Value::boolean(!gemma));
}

}  // namespace loom
