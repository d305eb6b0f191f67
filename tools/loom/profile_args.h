// --profile FILE (run, bench) and LOOM_PROFILE: a Profiler for the command's
// sessions and its outputs when the command ends. LOOM_PROFILE=1 prints the
// table to stderr; LOOM_PROFILE=FILE (or --profile FILE, which wins) writes
// the Chrome trace to FILE and the table next to it (FILE with .txt).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "loom/profiler.h"

namespace loom::cli {

std::vector<OptionSpec> profile_option_specs();

class ProfileOutput {
 public:
  explicit ProfileOutput(const Args& args);
  // Null when profiling is off.
  Profiler* profiler() const { return profiler_.get(); }
  // Writes the trace and table, or prints the table; once.
  void finish();
  // Where the table goes for a trace at `trace`: the same name with .txt.
  static std::string table_path(const std::string& trace);

 private:
  std::unique_ptr<Profiler> profiler_;
  std::string trace_path_;  // empty: the table to stderr
  bool done_ = false;
};

}  // namespace loom::cli
