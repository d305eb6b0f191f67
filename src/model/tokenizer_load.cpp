// Tokenizer::from_gguf: reads and checks tokenizer.ggml.* and applies the
// per-model defaults llama.cpp applies (special ids, add_bos, space prefix,
// space clean-up, normalizer options, end-of-generation tokens found by their
// text).
#include <algorithm>
#include <cctype>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/log.h"
#include "tokenizer_internal.h"

namespace loom {
namespace {

constexpr std::string_view kTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kScores = "tokenizer.ggml.scores";
constexpr std::string_view kTypes = "tokenizer.ggml.token_type";
constexpr std::string_view kMerges = "tokenizer.ggml.merges";
constexpr std::string_view kCharsmap = "tokenizer.ggml.precompiled_charsmap";

// Token texts llama.cpp treats as end of generation (and as control tokens).
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "[e~[",
};
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "<end_of_utterance>",
};

const gguf::Array& get_array(const gguf::File& file, std::string_view key, gguf::ValueType element) {
  const gguf::Value& v = file.get(key);
  if (v.type != gguf::ValueType::Array || v.array_type != element)
    fail("{}: {} must be an array of {}, found {}", file.path(), key, gguf::value_type_name(element),
         v.type == gguf::ValueType::Array ? fmt::format("an array of {}", gguf::value_type_name(v.array_type))
                                          : std::string(gguf::value_type_name(v.type)));
  return v.as_array();
}

bool get_bool_or(const gguf::File& file, std::string_view key, bool fallback) {
  const gguf::Value* v = file.find(key);
  if (!v) return fallback;
  if (v->type != gguf::ValueType::Bool) fail("{}: {} must be a bool", file.path(), key);
  return v->as_bool();
}

void read_tokens(const gguf::File& file, Tokenizer::Impl& t) {
  const auto& tokens = get_array(file, kTokens, gguf::ValueType::String);
  if (tokens.empty()) fail("{}: {} is empty", file.path(), kTokens);
  const size_t n = tokens.size();
  t.texts.reserve(n);
  t.text_to_id.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::string text(tokens.string_at(i));
    if (text.empty()) text = fmt::format("[EMPTY_{}]", i);  // as llama.cpp names them
    auto [it, inserted] = t.text_to_id.emplace(text, static_cast<int32_t>(i));
    if (!inserted) fail("{}: {}: token '{}' appears twice (ids {} and {})", file.path(), kTokens, text, it->second, i);
    t.texts.push_back(std::move(text));
  }

  t.scores.assign(n, 0.0f);
  if (const gguf::Value* v = file.find(kScores)) {
    if (v->type != gguf::ValueType::Array || (v->array_type != gguf::ValueType::F32 && v->array_type != gguf::ValueType::I32))
      fail("{}: {} must be an array of f32", file.path(), kScores);
    const auto& scores = v->as_array();
    if (scores.size() != n)
      fail("{}: {} has {} entries but {} has {}", file.path(), kScores, scores.size(), kTokens, n);
    for (size_t i = 0; i < n; ++i) t.scores[i] = static_cast<float>(scores[i].as_float());
  }

  t.types.assign(n, TokenType::Normal);
  if (file.find(kTypes)) {
    const auto& types = get_array(file, kTypes, gguf::ValueType::I32);
    if (types.size() != n) fail("{}: {} has {} entries but {} has {}", file.path(), kTypes, types.size(), kTokens, n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t type = types[i].as_int();
      t.types[i] = type >= 0 && type <= 6 ? static_cast<TokenType>(type) : TokenType::Undefined;
    }
  }
  // A byte token stands for the byte its text <0xHH> names (piece() decodes
  // it); llama.cpp reads any text there with strtol, so a corrupt vocabulary
  // silently yields byte 0. Refuse it instead, naming the token.
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  for (size_t i = 0; i < n; ++i) {
    if (t.types[i] != TokenType::Byte) continue;
    const std::string& text = t.texts[i];
    if (text.size() != 6 || !text.starts_with("<0x") || !hex(text[3]) || !hex(text[4]) || text[5] != '>')
      fail("{}: {}: token {} has type byte but its text '{}' is not <0xHH> (two hex digits)", file.path(), kTypes, i,
           text);
  }
}

// tokenizer.ggml.NAME_token_id into id, which keeps its default when the key
// is absent (or becomes kNoToken when that default does not fit).
void read_token_id(const gguf::File& file, const Tokenizer::Impl& t, std::string_view name, int32_t& id) {
  const int32_t n = static_cast<int32_t>(t.texts.size());
  if (id >= n) id = Tokenizer::kNoToken;
  const std::string key = fmt::format("tokenizer.ggml.{}_token_id", name);
  const gguf::Value* v = file.find(key);
  if (!v) return;
  if (!v->is_integer()) fail("{}: {} must be an integer", file.path(), key);
  const int64_t value = v->as_int();
  if (value < 0 || value >= n) fail("{}: {} = {} is outside the vocabulary of {} tokens", file.path(), key, value, n);
  id = static_cast<int32_t>(value);
}

void read_special_ids(const gguf::File& file, Tokenizer::Impl& t) {
  auto read = [&](std::string_view name, int32_t& id) { read_token_id(file, t, name, id); };
  read("bos", t.bos);
  read("eos", t.eos);
  read("eot", t.eot);
  read("eom", t.eom);
  read("unknown", t.unk);
  read("seperator", t.sep);  // sic: llama.cpp's key
  read("padding", t.pad);
}

// llama.cpp adds the control attribute to tokens it finds by text (end of
// generation, fill-in-the-middle): a normal or user-defined token becomes
// one that text matches only with parse_special and that renders only on
// request.
void make_control(Tokenizer::Impl& t, int32_t id) {
  const TokenType type = t.types[id];
  if (type == TokenType::Normal || type == TokenType::Undefined || type == TokenType::UserDefined)
    t.types[id] = TokenType::Control;
}

void find_end_of_generation(Tokenizer::Impl& t) {
  for (std::string_view text : kEotTexts) {
    if (t.eot != Tokenizer::kNoToken) break;
    t.eot = t.lookup(text);
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = t.lookup(text);
    if (id == Tokenizer::kNoToken) continue;
    t.eog.insert(id);
    make_control(t, id);
  }
  if (t.eot != Tokenizer::kNoToken) make_control(t, t.eot);
  for (int32_t id : {t.eos, t.eot, t.eom})
    if (id != Tokenizer::kNoToken) t.eog.insert(id);
}

// Fill-in-the-middle tokens: tokenizer.ggml.fim_*_token_id, or else the
// first of llama.cpp's texts the vocabulary has, which becomes a control
// token. Pad, repository and file-separator tokens end generation (Qwen
// 2.5 Coder's <|fim_pad|>, <|repo_name|>, <|file_sep|>).
struct FimToken {
  std::string_view name;
  std::initializer_list<std::string_view> texts;
  bool ends_generation;
};
// (DeepSeek's are <｜fim▁begin｜> and so on, U+FF5C and U+2581 in UTF-8.)
const FimToken kFimTokens[] = {
    {"fim_pre",
     {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
      "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
     false},
    {"fim_suf",
     {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
      "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
     false},
    {"fim_mid",
     {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
      "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
     false},
    {"fim_pad", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}, true},
    {"fim_rep", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}, true},
    {"fim_sep", {"<|file_sep|>"}, true},
};

void find_fill_in_the_middle(const gguf::File& file, Tokenizer::Impl& t) {
  for (const FimToken& fim : kFimTokens) {
    int32_t id = Tokenizer::kNoToken;
    read_token_id(file, t, fim.name, id);
    if (id == Tokenizer::kNoToken) {
      for (std::string_view text : fim.texts)
        if ((id = t.lookup(text)) != Tokenizer::kNoToken) break;
      if (id != Tokenizer::kNoToken) make_control(t, id);
    }
    if (id != Tokenizer::kNoToken && fim.ends_generation) t.eog.insert(id);
  }
}

void index_special_tokens(Tokenizer::Impl& t) {
  for (int32_t id = 0; id < static_cast<int32_t>(t.texts.size()); ++id) {
    const TokenType type = t.types[id];
    if (type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown)
      t.special_tokens.push_back(id);
  }
  std::stable_sort(t.special_tokens.begin(), t.special_tokens.end(),
                   [&](int32_t a, int32_t b) { return t.texts[a].size() > t.texts[b].size(); });
  std::vector<std::pair<std::string_view, int32_t>> keys;
  for (int32_t id : t.special_tokens) keys.emplace_back(t.texts[id], id);
  t.special_trie = tok::ByteTrie(std::move(keys));
}

std::string string_or_empty(const gguf::File& file, std::string_view key) {
  const gguf::Value* v = file.find(key);
  return v && v->type == gguf::ValueType::String ? std::string(v->as_string()) : std::string();
}

bool contains_any(std::string_view text, std::initializer_list<std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](std::string_view p) { return text.find(p) != text.npos; });
}

// Special tokens that swallow the white space beside them, chosen as llama.cpp
// chooses them (by tokenizer, architecture or model name; GGUF has no key for
// it): a mask token strips on its left; Phi-3's special tokens, except <unk>,
// <s> and <|endoftext|>, strip on their right, so that "<|user|>\nHi" is
// "<|user|>" then "Hi" with SPM's space prefix.
void set_strip_attributes(const gguf::File& file, Tokenizer::Impl& t) {
  const std::string pre = string_or_empty(file, "tokenizer.ggml.pre");
  const std::string arch = string_or_empty(file, "general.architecture");
  std::string name = string_or_empty(file, "general.name");
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  t.strip.assign(t.texts.size(), 0);
  auto set = [&](std::string_view text, uint8_t bit, bool on) {
    const int32_t id = t.lookup(text);
    if (id == Tokenizer::kNoToken) return false;
    t.strip[id] = on ? t.strip[id] | bit : t.strip[id] & ~bit;
    return true;
  };
  if (contains_any(pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    if (!set("<mask>", Tokenizer::Impl::kStripLeft, true))
      log(LogLevel::Warn, "{}: the vocabulary has no <mask> token (llama.cpp asks to reconvert such a model)",
          file.path());
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    for (int32_t id : t.special_tokens) t.strip[id] |= Tokenizer::Impl::kStripRight;
    set("</s>", Tokenizer::Impl::kStripRight, true);
    for (std::string_view text : {"<unk>", "<s>", "<|endoftext|>"}) set(text, Tokenizer::Impl::kStripRight, false);
  } else if (contains_any(name, {"modern-bert"})) {
    if (!set("[MASK]", Tokenizer::Impl::kStripLeft, true))
      log(LogLevel::Warn, "{}: the vocabulary has no [MASK] token", file.path());
  }
}

// WordPiece: BERT's normalizer options (lowercase, and strip_accents
// following it unless set), and the ids encode must have at hand.
void read_wordpiece_options(const gguf::File& file, Tokenizer::Impl& t) {
  t.lowercase = get_bool_or(file, "tokenizer.ggml.normalizer.lowercase", true);
  t.strip_accents = get_bool_or(file, "tokenizer.ggml.normalizer.strip_accents", t.lowercase);
  for (const auto& [id, name] : {std::pair{t.bos, "bos ([CLS])"}, {t.sep, "seperator ([SEP])"}, {t.unk, "unknown"}})
    if (id == Tokenizer::kNoToken)
      fail("{}: a WordPiece vocabulary needs a {} token, but its default id is outside the vocabulary of {} tokens "
           "and tokenizer.ggml does not name one",
           file.path(), name, t.texts.size());
  for (const std::string& text : t.texts) t.max_token_bytes = std::max(t.max_token_bytes, text.size());
}

void read_unigram_options(const gguf::File& file, Tokenizer::Impl& t) {
  if (t.unk == Tokenizer::kNoToken)
    fail("{}: a Unigram vocabulary needs an unknown token, but tokenizer.ggml.unknown_token_id is not set and the "
         "default id 2 is outside the vocabulary",
         file.path());
  std::string charsmap;
  if (const gguf::Value* v = file.find(kCharsmap)) {
    if (v->type != gguf::ValueType::Array || (v->array_type != gguf::ValueType::U8 && v->array_type != gguf::ValueType::I8))
      fail("{}: {} must be an array of u8", file.path(), kCharsmap);
    const std::vector<uint8_t>& bytes = v->as_array().scalar_bytes();
    charsmap.assign(bytes.begin(), bytes.end());
  }
  tok::Unigram::Options options;
  options.add_space_prefix = t.add_space_prefix;
  options.remove_extra_whitespaces = get_bool_or(file, "tokenizer.ggml.remove_extra_whitespaces", false);
  t.unigram = std::make_unique<tok::Unigram>(t, std::move(charsmap), options, file.path());
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  auto t = std::make_unique<Impl>();
  t->path = file.path();
  t->model = file.get_string("tokenizer.ggml.model");
  if (t->model == "llama") {
    t->kind = TokenizerKind::Spm;
    t->bos = 1;
    t->eos = 2;
    t->unk = 0;
    t->add_bos = true;
    t->add_space_prefix = true;
  } else if (t->model == "gpt2" || t->model == "gemma4") {
    t->kind = TokenizerKind::Bpe;
    if (t->model == "gemma4") {
      t->pre_name = "gemma4";  // as llama.cpp: the model name decides the pre-tokenizer
    } else {
      t->bos = 11;  // llama.cpp's defaults for BPE vocabularies
      t->eos = 11;
      if (const gguf::Value* v = file.find("tokenizer.ggml.pre")) {
        if (v->type != gguf::ValueType::String) fail("{}: tokenizer.ggml.pre must be a string", file.path());
        t->pre_name = v->as_string();
      }
    }
    const tok::PreInfo* info = tok::find_pre(t->pre_name.empty() ? "default" : t->pre_name);
    if (!info)
      fail("{}: tokenizer.ggml.pre = '{}' is not a pre-tokenizer llama.cpp knows, so its split rules are unknown "
           "(llama.cpp refuses it too: 'unknown pre-tokenizer type')",
           file.path(), t->pre_name);
    if (t->pre_name.empty()) log(LogLevel::Warn, "{}: tokenizer.ggml.pre is missing, using 'default'", file.path());
    t->pre = info->pre;
    t->ignore_merges = info->ignore_merges;
    t->add_bos = info->add_bos;
    t->clean_spaces = info->clean_spaces;
    t->escape_spaces = tok::escapes_spaces(info->pre);
    if (info->no_bos) t->bos = kNoToken;
  } else if (t->model == "bert") {
    t->kind = TokenizerKind::Wpm;
    t->bos = 101;  // [CLS]
    t->unk = 100;
    t->sep = 102;
    t->pad = 0;
    t->add_bos = true;
    t->clean_spaces = true;
  } else if (t->model == "t5") {
    t->kind = TokenizerKind::Ugm;
    t->eos = 1;
    t->unk = 2;
    t->pad = 0;
    t->add_eos = true;
  } else if (t->model == "rwkv") {
    t->kind = TokenizerKind::Rwkv;  // llama.cpp's defaults: no special ids, no BOS/EOS, no space prefix
  } else {
    fail("{}: tokenizer.ggml.model = '{}' is not supported (supported: llama, gpt2, gemma4, bert, t5, rwkv)",
         file.path(), t->model);
  }

  read_tokens(file, *t);
  if (t->kind == TokenizerKind::Bpe) {
    // Kimi-K2 vocabularies may come without merges (symbols then never merge).
    if (file.find(kMerges) || t->pre != PreTokenizer::KimiK2) {
      const auto& merges = get_array(file, kMerges, gguf::ValueType::String);
      t->merge_ranks.reserve(merges.size());
      for (size_t i = 0; i < merges.size(); ++i) {
        const std::string merge(merges.string_at(i));
        const size_t space = merge.find(' ', 1);
        if (space == std::string::npos)
          fail("{}: {}[{}] = '{}' is not two symbols separated by a space", file.path(), kMerges, i, merge);
        t->merge_ranks.emplace(merge, static_cast<int32_t>(i));  // the first rank of a repeated merge wins
      }
    }
    t->splitter = std::make_unique<tok::PreSplitter>(t->pre);
  }

  read_special_ids(file, *t);
  t->add_space_prefix = get_bool_or(file, "tokenizer.ggml.add_space_prefix", t->add_space_prefix);
  t->add_bos = get_bool_or(file, "tokenizer.ggml.add_bos_token", t->add_bos);
  t->add_eos = get_bool_or(file, "tokenizer.ggml.add_eos_token", t->add_eos);
  if (t->kind == TokenizerKind::Wpm) read_wordpiece_options(file, *t);
  if (t->pre == PreTokenizer::Gemma4) t->add_bos = true;  // llama.cpp overrides add_bos_token = false for Gemma 4
  if (t->add_bos && t->bos == kNoToken)
    fail("{}: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is not set", file.path());
  if (t->add_eos && t->eos == kNoToken && t->kind != TokenizerKind::Wpm)  // WordPiece ends with [SEP] instead
    fail("{}: tokenizer.ggml.add_eos_token is true but tokenizer.ggml.eos_token_id is not set", file.path());

  // Before the end-of-generation texts turn into control tokens: llama.cpp
  // builds the Unigram's token trie from the types as the file has them.
  if (t->kind == TokenizerKind::Ugm) read_unigram_options(file, *t);

  find_end_of_generation(*t);
  find_fill_in_the_middle(file, *t);
  index_special_tokens(*t);
  set_strip_attributes(file, *t);
  t->pieces.reserve(t->texts.size());
  for (int32_t id = 0; id < static_cast<int32_t>(t->texts.size()); ++id) t->pieces.push_back(t->piece(id, true));
  if (t->kind == TokenizerKind::Rwkv) {  // every token, control ones too, as llama.cpp's matcher has them
    std::vector<std::pair<std::string_view, int32_t>> keys;
    for (int32_t id = 0; id < static_cast<int32_t>(t->pieces.size()); ++id) keys.emplace_back(t->pieces[id], id);
    t->byte_strings = tok::ByteTrie(std::move(keys));
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(t)));
}

}  // namespace loom
