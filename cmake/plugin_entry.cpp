// The entry points every plugin backend exports (see loom/registry.h).
#include "loom/registry.h"

namespace loom {
std::unique_ptr<BackendFamily> LOOM_PLUGIN_FACTORY();
}

// The plugin API version this plugin was compiled against; the registry
// checks it before calling loom_backend_init.
extern "C" __attribute__((visibility("default"))) uint32_t loom_backend_api_version() {
  return loom::kPluginApiVersion;
}

extern "C" __attribute__((visibility("default"))) loom::BackendFamily* loom_backend_init() {
  return loom::LOOM_PLUGIN_FACTORY().release();
}
