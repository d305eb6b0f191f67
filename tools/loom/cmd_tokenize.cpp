// loom tokenize: a GGUF file's tokenizer on a prompt (ids and pieces, or
// JSON), a batch of strings for the llama.cpp parity test, and
// --write-vocab, which writes a vocabulary-only GGUF file from the built-in
// generator.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/tokenizer.h"
#include "model_gen/vocab_gen.h"

namespace loom::cli {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A piece as readable text: control characters and bytes that are not
// UTF-8 are escaped.
std::string printable(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const auto c = static_cast<unsigned char>(piece[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    for (size_t k = 1; k < n; ++k)
      if (i + k >= piece.size() || (static_cast<unsigned char>(piece[i + k]) & 0xC0) != 0x80) n = 0;
    if (n == 1 && c == '\n') out += "\\n";
    else if (n == 1 && c == '\t') out += "\\t";
    else if (n == 1 && c == '\r') out += "\\r";
    else if (n == 1 && (c < 0x20 || c == 0x7F)) out += fmt::format("\\x{:02x}", c);
    else if (n == 0) out += fmt::format("\\x{:02x}", c);
    if (n == 0 || (n == 1 && (c < 0x20 || c == 0x7F))) {
      ++i;
      continue;
    }
    out.append(piece, i, n);
    i += n;
  }
  return out;
}

std::string dump(const nlohmann::json& j, int indent = 2) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

int write_vocab(const Args& args) {
  const std::string out = *args.get("--write-vocab");
  const TokenizerStyle style = parse_tokenizer_style(args.get_or("--style", "spm"));
  const int n_vocab = args.get_int("--n-vocab", 32000);
  gguf::Writer writer;
  writer.set("general.architecture", gguf::Value::string("llama"));
  writer.set("general.name", gguf::Value::string(fmt::format("loom {} vocabulary", tokenizer_style_name(style))));
  write_tokenizer_metadata(writer, style, n_vocab);
  writer.write(out);
  std::printf("wrote %s: %s vocabulary of %d tokens\n", out.c_str(), tokenizer_style_name(style).c_str(),
              n_vocab);
  return 0;
}

// For the parity test: every string of a JSON array, tokenized without and
// with special-token parsing, and decoded again.
int run_batch(const Tokenizer& tok, const std::string& path) {
  const nlohmann::json strings = nlohmann::json::parse(read_file(path));
  if (!strings.is_array()) fail("{}: expected a JSON array of strings", path);
  nlohmann::json results = nlohmann::json::array();
  for (const auto& s : strings) {
    const std::string text = s.get<std::string>();
    const std::vector<int32_t> ids = tok.encode(text, false, false);
    const std::vector<int32_t> ids_special = tok.encode(text, false, true);
    results.push_back({{"text", text}, {"ids", ids}, {"ids_special", ids_special}, {"decoded", tok.decode(ids)}});
  }
  // An id the vocabulary lacks is null, as node-llama-cpp reports it.
  auto id_or_null = [](int32_t id) { return id == Tokenizer::kNoToken ? nlohmann::json() : nlohmann::json(id); };
  nlohmann::json out = {{"n_vocab", tok.n_vocab()}, {"bos", id_or_null(tok.bos())}, {"eos", id_or_null(tok.eos())},
                        {"add_bos", tok.add_bos()}, {"results", results}};
  std::printf("%s\n", dump(out).c_str());
  return 0;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Args args("tokenize",
            "Tokenize a prompt with a GGUF file's vocabulary and print the token ids and pieces.\n"
            "usage: loom tokenize -m FILE -p TEXT [options]\n"
            "       loom tokenize --write-vocab OUT.gguf --style STYLE --n-vocab N\n"
            "       loom tokenize --list-styles",
            {{{"-m", "--model"}, "FILE", "GGUF file with tokenizer.ggml.* metadata"},
             {{"-p", "--prompt"}, "TEXT", "text to tokenize"},
             {{"-f", "--file"}, "FILE", "read the text from a file"},
             {{"--ids-only"}, "", "print only the ids, as a list"},
             {{"--no-bos"}, "", "do not add BOS/EOS even when the vocabulary asks for them"},
             {{"--parse-special"}, "", "text equal to a control token becomes that token"},
             {{"--json"}, "", "print JSON"},
             {{"--batch"}, "FILE", "tokenize each string of a JSON array (for the llama.cpp parity test)"},
             {{"--write-vocab"}, "OUT", "write a vocabulary-only GGUF file from the built-in generator"},
             {{"--style"}, "STYLE",
              "generated vocabulary style: spm, spm-gemma, bpe, bpe-NAME for any tokenizer.ggml.pre name "
              "llama.cpp knows (e.g. bpe-llama-bpe, bpe-qwen2, bpe-deepseek-v3, bpe-gemma4), wpm (WordPiece), ugm "
              "(Unigram), ugm-charsmap (Unigram with a precompiled character map) or rwkv (default spm)"},
             {{"--list-styles"}, "", "print every generated vocabulary style, one a line (one per BPE pre-tokenizer)"},
             {{"--n-vocab"}, "N", "generated vocabulary size (default 32000)"}});
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  if (args.has("--write-vocab")) return write_vocab(args);
  if (args.has("--list-styles")) {
    for (TokenizerStyle style : all_tokenizer_styles()) std::printf("%s\n", tokenizer_style_name(style).c_str());
    return 0;
  }
  const auto model = args.get("--model");
  if (!model) {
    std::fputs(args.help().c_str(), stderr);
    return 1;
  }
  auto file = gguf::File::open(*model);
  auto tok = Tokenizer::from_gguf(*file);
  if (const auto batch = args.get("--batch")) return run_batch(*tok, *batch);

  std::string text;
  if (const auto p = args.get("--prompt")) text = *p;
  else if (const auto f = args.get("--file")) text = read_file(*f);
  else fail("tokenize: give the text with -p TEXT or -f FILE");

  const std::vector<int32_t> ids = tok->encode(text, !args.has("--no-bos"), args.has("--parse-special"));
  if (args.has("--json")) {
    nlohmann::json tokens = nlohmann::json::array();
    for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", tok->token_to_piece(id)}});
    const nlohmann::json out = {{"model", tok->model_name()}, {"pre", tok->pre_name()}, {"n_vocab", tok->n_vocab()},
                                {"n_tokens", ids.size()},     {"ids", ids},             {"tokens", tokens}};
    std::printf("%s\n", dump(out).c_str());
    return 0;
  }
  if (args.has("--ids-only")) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += fmt::format("{}{}", i ? ", " : "", ids[i]);
    std::printf("%s]\n", line.c_str());
    return 0;
  }
  for (int32_t id : ids) std::printf("%6d -> '%s'\n", id, printable(tok->token_to_piece(id)).c_str());
  std::printf("%zu tokens\n", ids.size());
  return 0;
}

}  // namespace loom::cli
