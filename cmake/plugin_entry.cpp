// The entry point every plugin backend exports (see loom/registry.h).
#include "loom/registry.h"

namespace loom {
std::unique_ptr<BackendFamily> LOOM_PLUGIN_FACTORY();
}

extern "C" __attribute__((visibility("default"))) loom::BackendFamily* loom_backend_init() {
  return loom::LOOM_PLUGIN_FACTORY().release();
}
