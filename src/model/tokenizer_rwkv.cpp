// The RWKV tokenizer ("rwkv"): token texts are byte strings written as
// Python's repr() writes them; a text is cut greedily, each time into the
// longest token that matches at the cursor, as llama.cpp cuts it.
#include "loom/error.h"
#include "tokenizer_internal.h"

namespace loom {

std::string tok::rwkv_unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool escaped = false;
  int hex_left = 0;
  uint8_t hex = 0;
  for (char c : text) {
    if (hex_left > 0) {
      // llama.cpp's reading of a hex digit: lowercase letters and digits
      // (other characters give what the same arithmetic gives).
      const auto digit = static_cast<uint8_t>(c >= 'a' ? c - 'a' + 10 : c - '0');
      hex = static_cast<uint8_t>((hex << 4) + digit);
      if (--hex_left == 0) out += static_cast<char>(hex);
      continue;
    }
    if (escaped) {
      escaped = false;
      switch (c) {
        case 't': out += '\t'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 'x':
          hex_left = 2;
          hex = 0;
          break;
        default: out += c;
      }
      continue;
    }
    if (c == '\\') escaped = true;
    else out += c;
  }
  return out;
}

void Tokenizer::Impl::rwkv_tokenize(std::string_view text, std::vector<int32_t>& out) const {
  for (size_t pos = 0; pos < text.size();) {
    int32_t best = kNoToken;
    size_t end = pos;
    int32_t node = 0;
    for (size_t i = pos; i < text.size() && (node = byte_strings.child(node, static_cast<unsigned char>(text[i]))) >= 0;
         ++i)
      if (const int32_t id = byte_strings.token(node); id != kNoToken) {
        best = id;
        end = i + 1;
      }
    if (best != kNoToken) {
      out.push_back(best);
      pos = end;
      continue;
    }
    // No token starts with this byte (RWKV vocabularies have all 256, so a
    // file without them is broken; llama.cpp emits its unknown id, -1).
    if (unk == kNoToken)
      fail("{}: byte 0x{:02x} at offset {} of the text has no token in this RWKV vocabulary, and "
           "tokenizer.ggml.unknown_token_id is not set",
           path, static_cast<unsigned char>(text[pos]), pos);
    out.push_back(unk);
    ++pos;
  }
}

}  // namespace loom
