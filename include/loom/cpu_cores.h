// The number of physical cores this process may run on (its affinity mask,
// SMT siblings counted once): the default compute thread count, as
// llama.cpp's. Two threads on one core's hyper-threads share its vector
// units and mostly wait for each other at every node.
#pragma once

namespace loom {

int physical_cores();

}  // namespace loom
