#include "chat_args.h"

#include <fstream>
#include <sstream>

#include "loom/error.h"
#include "loom/gguf.h"

namespace loom::cli {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {
std::string token_text(const gguf::File& file, const char* id_key) {
  const gguf::Value* id = file.find(id_key);
  const gguf::Value* tokens = file.find("tokenizer.ggml.tokens");
  if (!id || !tokens) return "";
  const uint64_t i = id->as_uint();
  const auto& list = tokens->as_array();
  if (i >= list.size()) fail("{}: {} = {} is not a token id (the vocabulary has {})", file.path(), id_key, i, list.size());
  return std::string(list.string_at(i));
}
}  // namespace

GgufChatInfo chat_info_from_gguf(const gguf::File& file) {
  GgufChatInfo info;
  if (const gguf::Value* t = file.find("tokenizer.chat_template")) info.chat_template = t->as_string();
  info.bos_token = token_text(file, "tokenizer.ggml.bos_token_id");
  info.eos_token = token_text(file, "tokenizer.ggml.eos_token_id");
  return info;
}

}  // namespace loom::cli
