// Every test process sees two OpenCL devices on PoCL (unless the caller set
// POCL_DEVICES), also while CTest lists the tests, so per-device tests are
// registered for OpenCL0 and OpenCL1 alike.
#include <cstdlib>

namespace {
const bool kPoclDevicesSet = [] { return setenv("POCL_DEVICES", "pthread pthread", 0) == 0; }();
}  // namespace
