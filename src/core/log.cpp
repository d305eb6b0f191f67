#include "loom/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace loom {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("LOOM_LOG_LEVEL");
  if (!env) return LogLevel::Info;
  std::string v(env);
  if (v == "error" || v == "0") return LogLevel::Error;
  if (v == "warn" || v == "1") return LogLevel::Warn;
  if (v == "debug" || v == "3") return LogLevel::Debug;
  return LogLevel::Info;
}

std::atomic<LogLevel>& current_level() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

}  // namespace

LogLevel log_level() { return current_level().load(std::memory_order_relaxed); }
void set_log_level(LogLevel level) { current_level().store(level); }

void log_write(LogLevel level, std::string_view message) {
  static constexpr const char* kPrefix[] = {"error: ", "warning: ", "", "debug: "};
  std::fprintf(stderr, "%s%.*s\n", kPrefix[static_cast<int>(level)], static_cast<int>(message.size()),
               message.data());
}

}  // namespace loom
