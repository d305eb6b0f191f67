// One logger for the whole library. The level comes from LOOM_LOG_LEVEL
// (error, warn, info, debug; default info) and messages go to stderr.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace loom {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, std::string_view message);

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (level <= log_level()) log_write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace loom
