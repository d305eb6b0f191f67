// Which split rules each tokenizer.ggml.pre name stands for, and the
// per-name flags llama.cpp sets with it (ignore_merges, add_bos,
// clean_up_tokenization_spaces, no default BOS). The rules are the regexes
// of each model family's tokenizer.json as llama.cpp runs them, written in
// that notation; tokenizer_pre.cpp translates them for PCRE2 so that they
// match what llama.cpp's matcher matches (see there).
#include <array>

#include "tokenizer_internal.h"

namespace loom::tok {
namespace {

// Contractions, case-insensitive.
#define LOOM_CONTRACTIONS R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"

constexpr std::string_view kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kLlama3 =
    LOOM_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    LOOM_CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kNewlineRuns = R"([^\n]+|[\n]+)";
constexpr std::string_view kCjkDeepseek = R"([一-龥ࠀ-一가-퟿]+)";
constexpr std::string_view kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
// Words as upper-then-lower or lower-only runs, as llama.cpp runs them
// (the case classes reduce to "a letter that is not a-z" and "a letter that
// is not A-Z").
#define LOOM_CASED_WORDS(L)                                                                           \
  R"([^\r\n\p{L}\p{N}]?((?=[)" L R"(])([^a-z]))*((?=[)" L R"(])([^A-Z]))+)" LOOM_CONTRACTIONS      \
  R"(?|[^\r\n\p{L}\p{N}]?((?=[)" L R"(])([^a-z]))+((?=[)" L R"(])([^A-Z]))*)" LOOM_CONTRACTIONS R"(?)"
constexpr std::string_view kGpt4o =
    LOOM_CASED_WORDS(R"(\p{L})") R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGraniteEmbMulti =
    LOOM_CASED_WORDS(R"(\p{L}\p{M})") R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Case classes that llama.cpp reduces to "any letter" (\p{Lu} etc. -> \p{L}).
#define LOOM_MIXED_CASE_WORDS                                                                      \
  R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)" LOOM_CONTRACTIONS \
  R"(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)" LOOM_CONTRACTIONS R"(?)"
constexpr std::string_view kPunctWords =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
#undef LOOM_CASED_WORDS

}  // namespace

std::vector<std::string_view> split_rules(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::None: return {};
    case PreTokenizer::Default: return {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
    case PreTokenizer::Gpt2: return {kGpt2};
    case PreTokenizer::Llama3: return {kLlama3};
    case PreTokenizer::Jais2:
      return {LOOM_CONTRACTIONS
              R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1})"};
    case PreTokenizer::DeepseekLlm:
      return {"[\r\n]",
              R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A})"
              R"(\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
              R"(\s?[!-/:-~！-／：-～‘-‟　-。]+)", R"(\s+$)", kCjkDeepseek, R"(\p{N}+)"};
    case PreTokenizer::DeepseekCoder: return {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkDeepseek, R"(\p{N})"};
    case PreTokenizer::Deepseek3: return {R"(\p{N}{1,3})", R"([一-龥぀-ゟ゠-ヿ]+)", kPunctWords};
    case PreTokenizer::Youtu:
      return {R"([가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+)",
              LOOM_MIXED_CASE_WORDS R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::Falcon: return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"};
    case PreTokenizer::Starcoder: return {R"(\p{N})", kGpt2};
    case PreTokenizer::Qwen2: return {kQwen2};
    case PreTokenizer::Qwen35:
      return {LOOM_CONTRACTIONS
              R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::Bloom: return {kBloom};
    case PreTokenizer::Viking: return {kBloom, R"(\p{N})"};
    case PreTokenizer::Tekken:
      return {R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::Chameleon:
      return {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\t\n]|    |  )", R"(\p{N})",
              R"([\p{P}!-/:-@\[-`{-~])", kGpt2};
    case PreTokenizer::Gpt4o: return {kGpt4o};
    case PreTokenizer::GraniteEmbMulti: return {kGraniteEmbMulti};
    case PreTokenizer::TinyAya:
      return {kDigitGroups,
              LOOM_MIXED_CASE_WORDS R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::KimiK2:
      return {R"(\p{Han}+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})\p{L})+)" LOOM_CONTRACTIONS
              R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::SuperBpe: return {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"};
    case PreTokenizer::BailingMoe:
      return {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"};
    case PreTokenizer::SeedCoder:
      return {LOOM_CONTRACTIONS
              R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::Afmoe:
      return {kDigitGroups, R"([一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+)", kPunctWords};
    case PreTokenizer::Laguna: return {kNewlineRuns, kQwen2};
    case PreTokenizer::ExaoneMoe:
      return {LOOM_CONTRACTIONS
              R"(|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+)"};
    case PreTokenizer::Minicpm5:
      return {R"(\p{N}{1,3})", LOOM_CONTRACTIONS
              R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"};
    case PreTokenizer::Gemma4:
    case PreTokenizer::SarvamMoe: return {kNewlineRuns};
    case PreTokenizer::Whitespace: return {R"(\S+)"};
  }
  return {};
}
#undef LOOM_MIXED_CASE_WORDS
#undef LOOM_CONTRACTIONS

bool byte_encoded(PreTokenizer pre) {
  return pre != PreTokenizer::Gemma4 && pre != PreTokenizer::SarvamMoe && pre != PreTokenizer::Whitespace;
}

bool escapes_spaces(PreTokenizer pre) { return pre == PreTokenizer::Gemma4 || pre == PreTokenizer::SarvamMoe; }

namespace {

struct NamedPre {
  std::string_view name;
  PreInfo info;
};

constexpr PreInfo info(PreTokenizer pre, bool clean_spaces = true, bool ignore_merges = false, bool add_bos = false,
                       bool no_bos = false) {
  return {pre, ignore_merges, add_bos, clean_spaces, no_bos};
}
using P = PreTokenizer;
constexpr bool kKeep = false;  // clean_spaces = false

// Every name llama.cpp accepts; the first name of each pre-tokenizer is its
// canonical name.
constexpr NamedPre kNames[] = {
    {"default", info(P::Default)},
    {"gpt-2", info(P::Gpt2)},
    {"phi-2", info(P::Gpt2)},
    {"jina-es", info(P::Gpt2)},
    {"jina-de", info(P::Gpt2)},
    {"gigachat", info(P::Gpt2)},
    {"jina-v2-es", info(P::Gpt2)},
    {"jina-v2-de", info(P::Gpt2)},
    {"a.x-4.0", info(P::Gpt2)},
    {"mellum", info(P::Gpt2)},
    {"modern-bert", info(P::Gpt2)},
    {"jina-v1-en", info(P::Gpt2)},
    {"jina-v2-code", info(P::Gpt2)},
    {"roberta-bpe", info(P::Gpt2)},
    {"mpt", info(P::Gpt2)},
    {"olmo", info(P::Gpt2)},
    {"jais", info(P::Gpt2)},
    {"exaone4", info(P::Gpt2)},
    {"trillion", info(P::Gpt2, kKeep)},
    {"granite-docling", info(P::Gpt2, kKeep)},
    {"llama-bpe", info(P::Llama3, true, true, true)},
    {"llama3", info(P::Llama3, true, true, true)},
    {"llama-v3", info(P::Llama3, true, true, true)},
    {"falcon3", info(P::Llama3, true, true, true)},
    {"falcon-h1", info(P::Llama3, true, true, true)},
    {"pixtral", info(P::Llama3, true, true, true)},
    {"midm-2.0", info(P::Llama3, true, true, true)},
    {"lfm2", info(P::Llama3, true, true, true)},
    {"jina-v5-nano", info(P::Llama3, true, true, true)},
    {"dbrx", info(P::Llama3)},
    {"smaug-bpe", info(P::Llama3)},
    {"glm4", info(P::Llama3, true, false, false, true)},
    {"chatglm-bpe", info(P::Llama3, true, false, false, true)},
    {"jais-2", info(P::Jais2)},
    {"deepseek-llm", info(P::DeepseekLlm, kKeep)},
    {"deepseek-coder", info(P::DeepseekCoder, kKeep)},
    {"deepseek-v3", info(P::Deepseek3, kKeep)},
    {"hunyuan-dense", info(P::Deepseek3, kKeep)},
    {"joyai-llm", info(P::Deepseek3, kKeep)},
    {"youtu", info(P::Youtu, kKeep, true)},
    {"falcon", info(P::Falcon)},
    {"starcoder", info(P::Starcoder)},
    {"refact", info(P::Starcoder)},
    {"command-r", info(P::Starcoder, kKeep)},
    {"smollm", info(P::Starcoder, kKeep)},
    {"codeshell", info(P::Starcoder)},
    {"exaone", info(P::Starcoder)},
    {"minerva-7b", info(P::Starcoder)},
    {"mellum2", info(P::Starcoder)},
    {"qwen2", info(P::Qwen2, kKeep)},
    {"deepseek-r1-qwen", info(P::Qwen2, kKeep)},
    {"kormo", info(P::Qwen2, kKeep)},
    {"f2llmv2", info(P::Qwen2, kKeep)},
    {"stablelm2", info(P::Qwen2)},
    {"megrez", info(P::Qwen2)},
    {"hunyuan", info(P::Qwen2, kKeep)},
    {"solar-open", info(P::Qwen2, kKeep)},
    {"grok-2", info(P::Qwen2, kKeep)},
    {"qwen35", info(P::Qwen35, kKeep)},
    {"bloom", info(P::Bloom)},
    {"poro-chat", info(P::Bloom, kKeep)},
    {"gpt3-finnish", info(P::Bloom)},
    {"viking", info(P::Viking, kKeep)},
    {"tekken", info(P::Tekken, kKeep, true, true)},
    {"chameleon", info(P::Chameleon, kKeep, false, true)},
    {"gpt-4o", info(P::Gpt4o, kKeep)},
    {"llama4", info(P::Gpt4o, kKeep)},
    {"kanana2", info(P::Gpt4o, kKeep)},
    {"talkie", info(P::Gpt4o, kKeep)},
    {"minimax-m2", info(P::Gpt4o, kKeep)},
    {"granite-embed-multi-97m", info(P::GraniteEmbMulti, kKeep, true)},
    {"tiny_aya", info(P::TinyAya, kKeep)},
    {"cohere2moe", info(P::TinyAya, kKeep)},
    {"kimi-k2", info(P::KimiK2, kKeep)},
    {"superbpe", info(P::SuperBpe, kKeep)},
    {"bailingmoe", info(P::BailingMoe, kKeep)},
    {"bailingmoe2", info(P::BailingMoe, kKeep)},
    {"llada-moe", info(P::BailingMoe, kKeep)},
    {"seed-coder", info(P::SeedCoder, kKeep)},
    {"afmoe", info(P::Afmoe, kKeep)},
    {"laguna", info(P::Laguna, kKeep)},
    {"exaone-moe", info(P::ExaoneMoe)},
    {"minicpm5", info(P::Minicpm5, true, true)},
    // Gemma 4 always adds BOS (llama.cpp overrides add_bos_token = false).
    {"gemma4", info(P::Gemma4, true, false, true)},
    {"granite-embed-multi-311m", info(P::Gemma4, true, false, true)},
    {"sarvam-moe", info(P::SarvamMoe, kKeep)},
    {"whitespace", info(P::Whitespace)},
};

constexpr std::array kAll = {
    P::Default,   P::Gpt2,       P::Llama3,  P::Jais2,    P::DeepseekLlm,     P::DeepseekCoder, P::Deepseek3,
    P::Youtu,     P::Falcon,     P::Starcoder, P::Qwen2,  P::Qwen35,          P::Bloom,         P::Viking,
    P::Tekken,    P::Chameleon,  P::Gpt4o,   P::GraniteEmbMulti, P::TinyAya,  P::KimiK2,        P::SuperBpe,
    P::BailingMoe, P::SeedCoder, P::Afmoe,   P::Laguna,   P::ExaoneMoe,       P::Minicpm5,      P::Gemma4,
    P::SarvamMoe, P::Whitespace,
};

}  // namespace

const PreInfo* find_pre(std::string_view name) {
  for (const NamedPre& e : kNames)
    if (e.name == name) return &e.info;
  return nullptr;
}

size_t pre_name_count() { return std::size(kNames); }

}  // namespace loom::tok

namespace loom {

std::string_view pre_tokenizer_name(PreTokenizer pre) {
  for (const tok::NamedPre& e : tok::kNames)
    if (e.info.pre == pre) return e.name;
  return "";
}

std::span<const PreTokenizer> all_pre_tokenizers() { return tok::kAll; }

}  // namespace loom
