// loom test-ops: the op conformance suite (tools/conformance) on every
// registered device or one (-b), for every op or one (-o). Prints one line
// per failure (every case with -v) and ends with "N passed, M failed"
// (", K skipped" when a device does not support some cases); exit code 1 on
// any failure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "rpc_args.h"
#include "args.h"
#include "commands.h"
#include "conformance/conformance.h"
#include "loom/error.h"
#include "loom/registry.h"

namespace loom::cli {
namespace {

namespace conf = loom::conformance;

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

std::vector<Device*> pick_devices(const Args& args) {
  Registry& reg = Registry::get();
  const auto name = args.get("--backend");
  if (!name) return reg.devices();
  if (Device* d = reg.find(*name)) return {d};
  std::vector<std::string> names;
  for (Device* d : reg.devices()) names.emplace_back(d->name());
  fail("unknown device '{}'; the devices are: {}", *name, join_names(names));
}

conf::Filter pick_filter(const Args& args) {
  conf::Filter filter;
  const auto name = args.get("--op");
  if (!name) return filter;
  std::vector<Op> valid = conf::tested_ops();
  for (Op v : {Op::View, Op::Reshape, Op::Permute, Op::Transpose})
    if (std::find(valid.begin(), valid.end(), v) == valid.end()) valid.push_back(v);
  const std::optional<Op> op = op_from_name(*name);
  if (!op || std::find(valid.begin(), valid.end(), *op) == valid.end()) {
    std::vector<std::string> names;
    for (Op v : valid) names.emplace_back(op_name(v));
    fail("unknown op '{}'; the ops are: {}", *name, join_names(names));
  }
  filter.op = op;
  return filter;
}

int list_cases(const conf::Filter& filter) {
  std::map<std::string, int> per_op, per_type;
  int n = 0;
  for (const conf::Case& c : conf::all_cases()) {
    if (!filter.matches(c)) continue;
    std::printf("%s\n", c.name.c_str());
    ++per_op[std::string(op_name(c.op))];
    ++per_type[std::string(type_name(c.type))];
    ++n;
  }
  std::string ops, types;
  for (const auto& [k, v] : per_op) ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", k, v);
  for (const auto& [k, v] : per_type) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", k, v);
  std::printf("%d cases\nby op: %s\nby type: %s\n", n, ops.c_str(), types.c_str());
  return 0;
}

}  // namespace

int cmd_test_ops(int argc, char** argv) {
  Args args("test-ops",
            "Run the op conformance suite: every op x type x shape against a scalar reference, with guard\n"
            "bytes around every output. Prints one line per failure and ends with 'N passed, M failed'.",
            with_rpc_options({{{"-b", "--backend"}, "DEVICE", "only this device (default: every registered device)"},
             {{"-o", "--op"}, "OP", "only the cases of this op (a view op: the cases that use it)"},
             {{"-v", "--verbose"}, "", "one line per case"},
             {{"-l", "--list"}, "", "list the cases with counts per op and type; run nothing"}}));
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  connect_rpc(args);
  if (!args.positional().empty()) fail("test-ops: unexpected argument '{}'", args.positional().front());
  const conf::Filter filter = pick_filter(args);
  if (args.has("--list")) return list_cases(filter);
  const std::vector<Device*> devices = pick_devices(args);
  const bool verbose = args.has("--verbose");

  int passed = 0, failed = 0, skipped = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (Device* d : devices) {
    for (const conf::CaseResult& r : conf::run_conformance(*d, filter)) {
      switch (r.status) {
        case conf::CaseStatus::Passed:
          ++passed;
          if (verbose)
            std::printf("ok    %s %s  nmse %.3g <= %.3g\n", r.device.c_str(), r.name.c_str(), r.nmse, r.threshold);
          break;
        case conf::CaseStatus::Failed:
          ++failed;
          std::printf("FAIL  %s %s  %s\n", r.device.c_str(), r.name.c_str(), r.message.c_str());
          break;
        case conf::CaseStatus::Unsupported:
          ++skipped;
          if (verbose) std::printf("skip  %s %s  %s\n", r.device.c_str(), r.name.c_str(), r.message.c_str());
          break;
      }
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (verbose) std::printf("%zu device(s), %.2f s\n", devices.size(), seconds);
  std::string summary = fmt::format("{} passed, {} failed", passed, failed);
  if (skipped) summary += fmt::format(", {} skipped", skipped);
  std::printf("%s\n", summary.c_str());
  return failed == 0 ? 0 : 1;
}

}  // namespace loom::cli
