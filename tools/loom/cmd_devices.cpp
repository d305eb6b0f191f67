// loom devices: every registered device with type, memory, capabilities and
// buffer types; --json for machines.
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rpc_args.h"
#include "args.h"
#include "commands.h"
#include "loom/registry.h"

namespace loom::cli {
namespace {

std::string mib(size_t bytes) { return fmt::format("{} MiB", bytes >> 20); }

std::string caps_string(const DeviceCaps& c) {
  std::string s;
  auto add = [&s](bool on, const char* name) {
    if (on) s += (s.empty() ? "" : ", ") + std::string(name);
  };
  add(c.async, "async");
  add(c.events, "events");
  add(c.host_buffer, "host buffer");
  add(c.buffer_from_host_ptr, "buffer from host ptr");
  return s.empty() ? "-" : s;
}

std::vector<BufferType*> all_buffer_types(Device& d) {
  auto types = d.buffer_types();
  if (BufferType* host = d.host_buffer_type()) types.push_back(host);
  return types;
}

}  // namespace

int cmd_devices(int argc, char** argv) {
  Args args("devices", "List every registered device (LOOM_DEVICES filters them).",
            with_rpc_options({{{"--json"}, "", "print JSON instead of a table"}}));
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  connect_rpc(args);
  Registry& reg = Registry::get();
  if (args.has("--json")) {
    nlohmann::json out = nlohmann::json::array();
    for (Device* d : reg.devices()) {
      const MemoryInfo m = d->memory();
      const DeviceCaps c = d->caps();
      nlohmann::json types = nlohmann::json::array();
      for (BufferType* bt : all_buffer_types(*d))
        types.push_back({{"name", bt->name()},
                         {"alignment", bt->alignment()},
                         {"max_size", bt->max_size()},
                         {"is_host", bt->is_host()}});
      out.push_back({{"name", d->name()},
                     {"type", device_type_name(d->type())},
                     {"description", d->description()},
                     {"memory_free", m.free},
                     {"memory_total", m.total},
                     {"caps",
                      {{"async", c.async},
                       {"events", c.events},
                       {"host_buffer", c.host_buffer},
                       {"buffer_from_host_ptr", c.buffer_from_host_ptr}}},
                     {"buffer_types", types}});
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("%-10s %-6s %-22s %s\n", "device", "type", "memory free/total", "description");
  for (Device* d : reg.devices()) {
    const MemoryInfo m = d->memory();
    std::printf("%-10s %-6s %-22s %s\n", std::string(d->name()).c_str(),
                std::string(device_type_name(d->type())).c_str(),
                (mib(m.free) + " / " + mib(m.total)).c_str(), d->description().c_str());
    std::string types;
    for (BufferType* bt : all_buffer_types(*d))
      types += (types.empty() ? "" : ", ") + std::string(bt->name()) + (bt->is_host() ? " (host)" : "");
    std::printf("%-17s capabilities: %s\n", "", caps_string(d->caps()).c_str());
    std::printf("%-17s buffer types: %s\n", "", types.c_str());
  }
  for (const auto& f : reg.families())
    if (f.origin != "built-in") std::printf("plugin %s: %s (%zu devices)\n", f.name.c_str(), f.origin.c_str(), f.n_devices);
  return 0;
}

}  // namespace loom::cli
