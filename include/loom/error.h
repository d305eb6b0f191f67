// Errors that reach the user: bad input, unsupported ops, failed allocations.
// Every message names what failed (file, tensor, device) and the sizes involved;
// asserts are reserved for programmer errors inside the library.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace loom {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Throws loom::Error with a fmt-style message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace loom
