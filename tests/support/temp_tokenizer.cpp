#include "support/temp_tokenizer.h"

#include <unistd.h>

#include <filesystem>

#include "loom/error.h"

namespace loom::test {

std::unique_ptr<Tokenizer> load_tokenizer(const gguf::Writer& w, const std::string& name) {
  struct Removed {
    std::string path;
    ~Removed() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } file{(std::filesystem::temp_directory_path() / ("loom_tok_" + std::to_string(::getpid()) + "_" + name + ".gguf"))
             .string()};
  w.write(file.path);
  return Tokenizer::from_gguf(*gguf::File::open(file.path));
}

std::string tokenizer_load_error(const gguf::Writer& w, const std::string& name) {
  try {
    load_tokenizer(w, name);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace loom::test
