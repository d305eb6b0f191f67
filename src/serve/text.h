// Text helpers for streaming generated text: where a stop string ends the
// answer, and how much of the text can be sent now without cutting a UTF-8
// character or the start of a stop string in two.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::serve {

// The position of the earliest stop string in text, or npos.
size_t find_stop(std::string_view text, const std::vector<std::string>& stops);

// The length of the longest prefix of text that is safe to send: it ends on
// a whole UTF-8 character and no suffix of it after that could still grow
// into a stop string.
size_t sendable_length(std::string_view text, const std::vector<std::string>& stops);

}  // namespace loom::serve
