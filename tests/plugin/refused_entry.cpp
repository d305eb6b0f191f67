// Entry points of plugins the registry must refuse before calling
// loom_backend_init: built for another plugin API version
// (LOOM_TEST_API_VERSION_OFFSET, added to this Loom's), or, without
// LOOM_TEST_API_VERSION_OFFSET, saying no version at all.
#include <cstdio>
#include <cstdlib>

#include "loom/registry.h"

#ifdef LOOM_TEST_API_VERSION_OFFSET
extern "C" __attribute__((visibility("default"))) uint32_t loom_backend_api_version() {
  return loom::kPluginApiVersion + LOOM_TEST_API_VERSION_OFFSET;
}
#endif

extern "C" __attribute__((visibility("default"))) loom::BackendFamily* loom_backend_init() {
  std::fputs("loom_backend_init of a plugin that should have been refused was called\n", stderr);
  std::abort();
}
