#include "loom/cpu_cores.h"

#include <sched.h>

#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>

namespace loom {

int physical_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::set<std::pair<int, int>> cores;  // (package, core)
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (!CPU_ISSET(c, &allowed)) continue;
      const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(c) + "/topology/";
      int package = -1, core = -1;
      std::ifstream(dir + "physical_package_id") >> package;
      std::ifstream(dir + "core_id") >> core;
      cores.emplace(package, core < 0 ? c : core);  // no topology: count the CPU
    }
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace loom
