// A small command-line parser that accepts llama.cpp-style flags: short
// multi-letter options with one dash (-ngl 10), long ones with two
// (--json), values as the next argument or after '='.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cli {

struct OptionSpec {
  std::vector<std::string> names;  // "-t", "--threads"
  std::string value_name;          // empty for flags
  std::string help;
};

class Args {
 public:
  Args(std::string command, std::string summary, std::vector<OptionSpec> specs);
  // Parses argv; throws loom::Error naming an unknown option or a missing value.
  void parse(int argc, char** argv);
  bool has(const std::string& name) const;
  std::optional<std::string> get(const std::string& name) const;  // the last value given
  // Every value given for a repeatable option, in order (get() is the last).
  std::vector<std::string> get_all(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  int get_int(const std::string& name, int fallback) const;
  // The same, refusing a value outside [min, max] with an error that names
  // the option and the range.
  int get_int(const std::string& name, int fallback, int min, int max) const;
  // A finite number in [min, max] (nan and inf are refused), or fallback;
  // max may be infinity for no upper bound.
  double get_number(const std::string& name, double fallback, double min, double max) const;
  const std::vector<std::string>& positional() const { return positional_; }
  std::string help() const;

 private:
  const OptionSpec* find(const std::string& name) const;
  std::string command_, summary_;
  std::vector<OptionSpec> specs_;
  std::map<std::string, std::vector<std::string>> values_;  // keyed by the first name
  std::vector<std::string> positional_;
};

// The one list split of the CLI: "a,b,c" at `sep`. Empty items are dropped,
// unless keep_empty, which keeps those followed by a separator ("3,,1" has
// three items) for a parser to refuse; a trailing separator adds no item.
std::vector<std::string> split_list(std::string_view text, char sep = ',', bool keep_empty = false);

}  // namespace loom::cli
