// Device lookups shared by the multi-device tests. Such a test runs beside
// the CPU on two devices of one kind: two fake devices with memory of their
// own (tests/support/fake_device.h, on every machine) and OpenCL0/OpenCL1
// when present (with PoCL, POCL_DEVICES="pthread pthread" gives two;
// tests/test_environment.cpp sets it).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "loom/registry.h"
#include "support/fake_device.h"

namespace loom::test {

inline Device* opencl(int i) { return Registry::get().find("OpenCL" + std::to_string(i)); }

// The kind of the two devices a multi-device test uses beside the CPU.
enum class DeviceKind { Fake, OpenCL };

// Device i (0 or 1) of `kind`; null when it is not registered (fake ones always exist).
inline Device* device_of(DeviceKind kind, int i) { return kind == DeviceKind::Fake ? &fake_device(i) : opencl(i); }

// The CPU, then whichever of the two devices of `kind` exist, in order: the
// devices a test gives the loader (the CPU is the host, the others offload).
inline std::vector<Device*> cpu_and_devices_of(DeviceKind kind) {
  std::vector<Device*> devices = {&Registry::get().cpu()};
  for (int i = 0; i < 2; ++i)
    if (Device* d = device_of(kind, i)) devices.push_back(d);
  return devices;
}

}  // namespace loom::test

// Skips the calling test, with the reason, unless OpenCL0..OpenCL(n-1) exist.
#define REQUIRE_OPENCL(n)                                                                                   \
  do {                                                                                                      \
    for (int i_ = 0; i_ < (n); ++i_)                                                                        \
      if (!::loom::test::opencl(i_))                                                                        \
        GTEST_SKIP() << "OpenCL" << i_ << " is not registered (no OpenCL platform or fewer devices; with "   \
                     << "PoCL set POCL_DEVICES=\"pthread pthread\")";                                       \
  } while (0)

// Skips the calling test, with the reason, unless devices 0..n-1 of `kind`
// exist (fake ones always do).
#define REQUIRE_DEVICES_OF(kind, n)                                    \
  do {                                                                 \
    if ((kind) == ::loom::test::DeviceKind::OpenCL) REQUIRE_OPENCL(n); \
  } while (0)
