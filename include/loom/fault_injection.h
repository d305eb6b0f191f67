// Test hook: make the Nth buffer allocation, or the Nth read of a model file,
// fail as a real failure would (loom::Error), to check that every failure
// path gives a clear error, leaks nothing and leaves objects usable or
// cleanly destroyed (tests/model/fault_injection_test.cpp sweeps N).
//
// Off by default, and then it costs one relaxed atomic load per site visit.
// Not meant for production use: nothing in Loom arms it by itself.
#pragma once

#include <atomic>
#include <cstdint>

namespace loom::fault {

enum class Site {
  BufferAlloc,  // BufferType::alloc, before the type allocates (sizes > 0)
  FileRead,     // a read(2)/pread(2) of a GGUF file (not reads from a mapping)
};

// Starts counting the visits of `site` from zero; with n > 0 the nth visit
// fails (once). Stops any earlier arming of `site`.
void arm(Site site, uint64_t n);
// Stops counting and failing at every site.
void disarm();
// Visits of `site` since arm() (the failing one included).
uint64_t visits(Site site);

namespace detail {
extern std::atomic<bool> g_active;
bool should_fail_slow(Site site);
}  // namespace detail

// Called by the library at each site: true when this visit must fail.
inline bool should_fail(Site site) {
  return detail::g_active.load(std::memory_order_relaxed) && detail::should_fail_slow(site);
}

}  // namespace loom::fault
