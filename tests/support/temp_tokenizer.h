// Tokenizers of hand-made vocabularies for the tokenizer tests: the
// metadata is written to "<temp dir>/loom_tok_<pid>_<name>.gguf" (the pid
// keeps concurrent test processes apart), loaded, and the file removed,
// whether the load succeeded or threw.
#pragma once

#include <memory>
#include <string>

#include "loom/gguf.h"
#include "loom/tokenizer.h"

namespace loom::test {

std::unique_ptr<Tokenizer> load_tokenizer(const gguf::Writer& w, const std::string& name);
// The error message loading it gives, or "no error".
std::string tokenizer_load_error(const gguf::Writer& w, const std::string& name);

}  // namespace loom::test
