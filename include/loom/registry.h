// The device registry. Every backend family registers its devices here: the
// built-in ones at startup (the CPU always), plugins from shared libraries at
// run time. LOOM_DEVICES (comma-separated names, case-insensitive) limits the
// devices listed; the CPU stays available as the fallback.
//
// A plugin is a shared library named libloom-backend-<name>.so exporting
//   extern "C" uint32_t loom_backend_api_version();  // kPluginApiVersion it was built with
//   extern "C" loom::BackendFamily* loom_backend_init();
// (cmake/plugin_entry.cpp defines both; loom_add_backend(... PLUGIN) adds it),
// searched for in LOOM_BACKEND_PATH (colon-separated) and the executable's
// directory. Plugins exchange C++ objects with Loom, so a plugin is loaded
// only if it was built for this Loom's plugin API version: the version is
// checked before loom_backend_init runs, and a plugin without it or with
// another is refused (load_plugin throws; the automatic search at startup
// logs a warning and goes on).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/backend.h"

namespace loom {

// The plugin API version. Bump it when anything a plugin compiles against
// changes layout or meaning: a class or member in backend.h or registry.h
// (virtual functions added, removed, reordered or with new semantics), a
// type they use by value (Tensor, Graph, DType, Op numbering, ...), or the
// entry points themselves. Adding a non-virtual helper does not need a bump.
inline constexpr uint32_t kPluginApiVersion = 4;  // 2: Device memory caps and counts, Buffer charges, DryRun; 3: Backend::compute_timed, Op::FlashAttnExt (the op table grew); 4: Backend::idle

class BackendFamily {
 public:
  virtual ~BackendFamily() = default;
  virtual std::string_view name() const = 0;  // "CPU", "OpenCL"
  virtual std::vector<Device*> devices() = 0;
};

class Registry {
 public:
  // The process-wide registry, filled with built-in families and plugins on first use.
  static Registry& get();

  void add_family(std::unique_ptr<BackendFamily> family, std::string origin = "built-in");
  // Loads one plugin library; throws loom::Error with the dlopen message, or
  // naming the file and both versions when it was built for another plugin
  // API version (or says none).
  void load_plugin(const std::string& path);

  // Devices after the LOOM_DEVICES filter, in registration order.
  const std::vector<Device*>& devices() const { return devices_; }
  Device* find(std::string_view name) const;  // case-insensitive
  Device* find_type(DeviceType type) const;   // first of that type
  Device& cpu() const;                        // always present
  // Buffer type by name over all devices ("CPU", "OpenCL0", "CPU_Mapped").
  BufferType* find_buffer_type(std::string_view name) const;

  struct FamilyInfo {
    std::string name;
    std::string origin;  // "built-in" or the plugin's path
    size_t n_devices;
  };
  std::vector<FamilyInfo> families() const;

  // The devices a LOOM_DEVICES value keeps: those named (case-insensitive),
  // plus the CPU, which is always kept as the fallback.
  static std::vector<Device*> filter_devices(const std::vector<Device*>& devices, std::string_view spec);
  // Applies a LOOM_DEVICE_MEMORY value, "NAME=SIZE,NAME=SIZE" (names
  // case-insensitive; SIZE is bytes with an optional K, M, G or T suffix,
  // powers of 1024, "KiB"/"MiB"/... and a trailing "B" accepted), as memory
  // caps (Device::set_memory_cap) on `devices`. Throws loom::Error naming the
  // variable and the entry for a malformed entry, a zero size or an unknown
  // device; nothing is capped then.
  static void apply_memory_caps(const std::vector<Device*>& devices, std::string_view spec);
  // Applies the entries of the LOOM_DEVICE_MEMORY variable that name local
  // devices (remote = false: when the registry is first filled) or remote
  // ones ("RPC…", remote = true: once the rpc-servers have been connected,
  // or not); throws as apply_memory_caps does.
  void apply_env_memory_caps(bool remote);
  // Warns about LOOM_DEVICES names that match no device: local names
  // (remote = false) when the registry is first filled, remote ones ("RPC…",
  // remote = true) once the rpc-servers have been connected, or not.
  void warn_unknown_filter_names(bool remote) const;

 private:
  Registry() = default;
  void load_plugins_from_search_path();
  void apply_filter();

  std::vector<std::unique_ptr<BackendFamily>> families_;
  std::vector<std::string> origins_;
  std::vector<Device*> all_devices_;
  std::vector<Device*> devices_;
  std::vector<void*> libraries_;  // dlopen handles, never closed
};

}  // namespace loom
