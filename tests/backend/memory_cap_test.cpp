// Device memory caps (Device::set_memory_cap, LOOM_DEVICE_MEMORY) and the
// per-device count of allocated bytes they rest on; a DryRun allocates nothing.
#include <gtest/gtest.h>

#include <string>

#include "loom/error.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "test_devices.h"

namespace loom {
namespace {

// Restores the caps of the fake devices and OpenCL0 on exit.
struct CapGuard {
  ~CapGuard() {
    for (Device* d : test::fake_devices()) d->set_memory_cap(0);
    if (Device* d = test::opencl(0)) d->set_memory_cap(0);
    Registry::get().cpu().set_memory_cap(0);
  }
};

std::string message_of(const std::vector<Device*>& devices, const std::string& spec) {
  try {
    Registry::apply_memory_caps(devices, spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MemoryCap, ParsesSizesAndNamesCaseInsensitively) {
  CapGuard guard;
  Device& f0 = *test::fake_devices()[0];
  Device& f1 = *test::fake_devices()[1];
  Registry::apply_memory_caps({&Registry::get().cpu(), &f0, &f1}, "fake0=512MiB,Fake1=3G,CPU=1048576");
  EXPECT_EQ(f0.memory_cap(), size_t{512} << 20);
  EXPECT_EQ(f1.memory_cap(), size_t{3} << 30);
  EXPECT_EQ(Registry::get().cpu().memory_cap(), size_t{1} << 20);
  Registry::apply_memory_caps({&f0}, "Fake0=64k");
  EXPECT_EQ(f0.memory_cap(), size_t{64} << 10);
}

TEST(MemoryCap, BadEntriesNameTheVariableAndTheEntryAndCapNothing) {
  CapGuard guard;
  Device& f0 = *test::fake_devices()[0];
  const std::vector<Device*> devices{&Registry::get().cpu(), &f0};
  for (const std::string entry : {"Fake0", "Fake0=", "Fake0=lots", "Fake0=0", "Fake0=12XB", "Fake0=-5M",
                                  "NoSuchDevice=1G", "Fake0=99999999999999999999"}) {
    const std::string msg = message_of(devices, "CPU=1G," + entry);
    EXPECT_NE(msg.find("LOOM_DEVICE_MEMORY"), std::string::npos) << entry << ": " << msg;
    EXPECT_NE(msg.find("'" + entry + "'"), std::string::npos) << entry << ": " << msg;
    EXPECT_EQ(f0.memory_cap(), 0u) << entry;
    EXPECT_EQ(Registry::get().cpu().memory_cap(), 0u) << entry;  // the good entry before it is not applied
  }
  EXPECT_NE(message_of(devices, "NoSuchDevice=1G").find("devices: CPU, Fake0"), std::string::npos);
}

// A capped device reports the cap, counts what is allocated, and refuses an
// allocation past the cap as out of memory, naming the device and the sizes.
void check_cap(Device& d) {
  CapGuard guard;
  BufferType& bt = d.default_buffer_type();
  const size_t base = d.allocated_bytes();
  d.set_memory_cap(base + (size_t{4} << 20));
  EXPECT_LE(d.memory().total, base + (size_t{4} << 20));
  EXPECT_EQ(d.memory().free, size_t{4} << 20);
  {
    auto a = bt.alloc(size_t{3} << 20);
    EXPECT_EQ(d.allocated_bytes(), base + (size_t{3} << 20));
    EXPECT_EQ(d.memory().free, size_t{1} << 20);
    try {
      auto b = alloc_buffer_or_throw(bt, size_t{2} << 20, "test");
      FAIL() << "an allocation past the cap succeeded on " << d.name();
    } catch (const OutOfMemory& e) {
      const std::string msg = e.what();
      EXPECT_EQ(e.device(), d.name());
      EXPECT_EQ(e.free(), size_t{1} << 20);
      EXPECT_EQ(e.requested(), size_t{2} << 20);
      EXPECT_NE(msg.find(std::string(bt.name())), std::string::npos) << msg;
      EXPECT_NE(msg.find("capped at 4.0 MiB"), std::string::npos) << msg;
      EXPECT_NE(msg.find("2097152 bytes"), std::string::npos) << msg;
    }
    auto c = bt.alloc(size_t{1} << 20);  // exactly the rest fits
    EXPECT_EQ(d.memory().free, 0u);
  }
  EXPECT_EQ(d.allocated_bytes(), base);
  EXPECT_EQ(d.memory().free, size_t{4} << 20);
}

TEST(MemoryCap, FakeDevice) { check_cap(*test::fake_devices()[0]); }
TEST(MemoryCap, Cpu) { check_cap(Registry::get().cpu()); }
TEST(MemoryCap, OpenCl) {
  REQUIRE_OPENCL(1);
  check_cap(*test::opencl(0));
}

TEST(MemoryCap, DryRunAllocatesNothingAndRecordsTheRequests) {
  CapGuard guard;
  Device& d = *test::fake_devices()[0];
  const size_t base = d.allocated_bytes();
  d.set_memory_cap(base + 1024);
  DryRun dry;
  auto b = d.default_buffer_type().alloc(size_t{1} << 30);  // past the cap: a dry run only measures
  EXPECT_EQ(b->size(), size_t{1} << 30);
  EXPECT_EQ(d.allocated_bytes(), base);
  ASSERT_EQ(dry.allocations().size(), 1u);
  EXPECT_EQ(dry.allocations()[0].type, &d.default_buffer_type());
  EXPECT_EQ(dry.allocations()[0].size, size_t{1} << 30);
}

}  // namespace
}  // namespace loom
