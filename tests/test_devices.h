// Device lookups shared by tests that need OpenCL devices: with PoCL,
// POCL_DEVICES="pthread pthread" gives two (tests/test_environment.cpp sets it).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "loom/registry.h"

namespace loom::test {

inline Device* opencl(int i) { return Registry::get().find("OpenCL" + std::to_string(i)); }

}  // namespace loom::test

// Skips the calling test, with the reason, unless OpenCL0..OpenCL(n-1) exist.
#define REQUIRE_OPENCL(n)                                                                                   \
  do {                                                                                                      \
    for (int i_ = 0; i_ < (n); ++i_)                                                                        \
      if (!::loom::test::opencl(i_))                                                                        \
        GTEST_SKIP() << "OpenCL" << i_ << " is not registered (no OpenCL platform or fewer devices; with "   \
                     << "PoCL set POCL_DEVICES=\"pthread pthread\")";                                       \
  } while (0)
