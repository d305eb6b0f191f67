// What apply-template and run -cnv share: reading a chat template from a
// file or from a GGUF file's tokenizer.chat_template, and the BOS/EOS token
// texts a template may print.
#pragma once

#include <string>

namespace loom::gguf {
class File;
}

namespace loom::cli {

std::string read_text_file(const std::string& path);

struct GgufChatInfo {
  std::string chat_template;  // empty when the file has none
  std::string bos_token, eos_token;
};
GgufChatInfo chat_info_from_gguf(const gguf::File& file);

}  // namespace loom::cli
