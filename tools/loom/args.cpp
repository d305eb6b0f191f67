#include "args.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "loom/error.h"

namespace loom::cli {

Args::Args(std::string command, std::string summary, std::vector<OptionSpec> specs)
    : command_(std::move(command)), summary_(std::move(summary)), specs_(std::move(specs)) {
  specs_.push_back({{"-h", "--help"}, "", "show this help"});
}

const OptionSpec* Args::find(const std::string& name) const {
  for (const auto& s : specs_)
    for (const auto& n : s.names)
      if (n == name) return &s;
  return nullptr;
}

void Args::parse(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      positional_.push_back(arg);
      continue;
    }
    std::optional<std::string> inline_value;
    if (const auto eq = arg.find('='); eq != std::string::npos && arg.starts_with("--")) {
      inline_value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    const OptionSpec* spec = find(arg);
    if (!spec) fail("{}: unknown option '{}' (see 'loom {} --help')", command_, arg, command_);
    std::string value = "1";
    if (!spec->value_name.empty()) {
      if (inline_value) {
        value = *inline_value;
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        fail("{}: option '{}' needs a value ({})", command_, arg, spec->value_name);
      }
    }
    values_[spec->names.front()].push_back(value);
  }
}

bool Args::has(const std::string& name) const {
  const OptionSpec* s = find(name);
  return s && values_.count(s->names.front());
}

std::optional<std::string> Args::get(const std::string& name) const {
  const OptionSpec* s = find(name);
  if (!s) return std::nullopt;
  auto it = values_.find(s->names.front());
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  const OptionSpec* s = find(name);
  if (!s) return {};
  auto it = values_.find(s->names.front());
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

int Args::get_int(const std::string& name, int fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const int n = std::stoi(*v, &used);
    if (used == v->size()) return n;
  } catch (const std::exception&) {
  }
  fail("{}: option '{}' needs an integer, got '{}'", command_, name, *v);
}

namespace {

// "-t/--threads": every name of the option, as the user may have typed any.
std::string option_label(const OptionSpec* spec, const std::string& name) {
  if (!spec) return name;
  std::string out;
  for (const auto& n : spec->names) out += (out.empty() ? "" : "/") + n;
  return out;
}

}  // namespace

int Args::get_int(const std::string& name, int fallback, int min, int max) const {
  const int n = get_int(name, fallback);
  if (get(name) && (n < min || n > max))
    fail("{}: option '{}' must be between {} and {}, got {}", command_, option_label(find(name), name), min, max, n);
  return n;
}

double Args::get_number(const std::string& name, double fallback, double min, double max) const {
  auto v = get(name);
  if (!v) return fallback;
  double x = 0;
  try {
    size_t used = 0;
    x = std::stod(*v, &used);
    if (used != v->size()) throw std::invalid_argument(*v);
  } catch (const std::exception&) {
    fail("{}: option '{}' needs a number, got '{}'", command_, option_label(find(name), name), *v);
  }
  if (!std::isfinite(x) || x < min || x > max) {
    if (std::isinf(max))
      fail("{}: option '{}' must be a finite number of at least {}, got '{}'", command_,
           option_label(find(name), name), min, *v);
    fail("{}: option '{}' must be a finite number between {} and {}, got '{}'", command_,
         option_label(find(name), name), min, max, *v);
  }
  return x;
}

std::vector<std::string> split_list(std::string_view text, char sep, bool keep_empty) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) end = text.size();
    if (keep_empty || end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string Args::help() const {
  std::string out = fmt::format("usage: loom {} [options]\n\n{}\n\noptions:\n", command_, summary_);
  for (const auto& s : specs_) {
    std::string names;
    for (const auto& n : s.names) names += (names.empty() ? "" : ", ") + n;
    if (!s.value_name.empty()) names += " " + s.value_name;
    out += fmt::format("  {:<28} {}\n", names, s.help);
  }
  return out;
}

}  // namespace loom::cli
