#include "profile_args.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "loom/error.h"

namespace loom::cli {

std::vector<OptionSpec> profile_option_specs() {
  return {{{"--profile"}, "FILE",
           "profile every graph: write a Chrome trace (Perfetto, chrome://tracing) to FILE and a table of time per op "
           "to FILE with .txt (LOOM_PROFILE=1: the table to stderr; scripts/plot-profile draws the trace)"}};
}

ProfileOutput::ProfileOutput(const Args& args) {
  if (auto f = args.get("--profile")) {
    if (f->empty()) fail("--profile: the file name is empty");
    trace_path_ = *f;
  } else {
    const char* env = std::getenv("LOOM_PROFILE");
    if (!env || !*env || std::string(env) == "0") return;
    if (std::string(env) != "1") trace_path_ = env;
  }
  profiler_ = std::make_unique<Profiler>();
}

std::string ProfileOutput::table_path(const std::string& trace) {
  std::filesystem::path p(trace);
  if (p.extension() == ".txt") return p.replace_extension(".table.txt").string();
  return p.replace_extension(".txt").string();
}

void ProfileOutput::finish() {
  if (!profiler_ || done_) return;
  done_ = true;
  const std::string table = profiler_->table();
  if (trace_path_.empty()) {
    std::fprintf(stderr, "\n%s", table.c_str());
    return;
  }
  const std::string table_file = table_path(trace_path_);
  std::ofstream trace(trace_path_, std::ios::binary);
  if (!trace) fail("--profile: cannot write {}", trace_path_);
  profiler_->write_chrome_trace(trace);
  trace.close();
  if (!trace) fail("--profile: writing {} failed", trace_path_);
  std::ofstream text(table_file, std::ios::binary);
  text << table;
  text.close();
  if (!text) fail("--profile: cannot write {}", table_file);
  std::fprintf(stderr, "profile: %zu graphs, %zu nodes: trace %s, table %s\n", profiler_->graphs().size(),
               profiler_->nodes().size(), trace_path_.c_str(), table_file.c_str());
}

}  // namespace loom::cli
