#include "loom/fault_injection.h"

#include <mutex>

namespace loom::fault {
namespace detail {
std::atomic<bool> g_active{false};
}  // namespace detail

namespace {

struct SiteState {
  bool counting = false;
  uint64_t visits = 0;
  uint64_t fail_at = 0;  // 0: never
};

constexpr int kSites = 2;
std::mutex g_mutex;
SiteState g_sites[kSites];

SiteState& state(Site site) { return g_sites[static_cast<int>(site)]; }

}  // namespace

void arm(Site site, uint64_t n) {
  std::lock_guard lock(g_mutex);
  state(site) = {.counting = true, .visits = 0, .fail_at = n};
  detail::g_active.store(true);
}

void disarm() {
  std::lock_guard lock(g_mutex);
  for (auto& s : g_sites) s.counting = false, s.fail_at = 0;
  detail::g_active.store(false);
}

uint64_t visits(Site site) {
  std::lock_guard lock(g_mutex);
  return state(site).visits;
}

bool detail::should_fail_slow(Site site) {
  std::lock_guard lock(g_mutex);
  SiteState& s = state(site);
  if (!s.counting) return false;
  return ++s.visits == s.fail_at;
}

}  // namespace loom::fault
