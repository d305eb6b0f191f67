#include <gtest/gtest.h>

#include <fmt/format.h>

#include "loom/error.h"
#include "loom/registry.h"

namespace loom {
namespace {

TEST(Registry, CpuIsAlwaysPresentAndFoundCaseInsensitively) {
  Registry& reg = Registry::get();
  ASSERT_FALSE(reg.devices().empty());
  EXPECT_EQ(reg.devices().front()->name(), "CPU");
  EXPECT_EQ(reg.find("cpu"), reg.find("CPU"));
  EXPECT_EQ(reg.find_type(DeviceType::CPU), &reg.cpu());
  EXPECT_EQ(reg.find("no-such-device"), nullptr);
  ASSERT_NE(reg.find_buffer_type("cpu_mapped"), nullptr);
  EXPECT_TRUE(reg.find_buffer_type("CPU_Mapped")->is_host());
}

// Regression (issue 18): `run -t 100000` ended in std::system_error from
// thread creation; more than kMaxThreads is a loom::Error naming the limit.
TEST(Registry, CpuBackendRefusesMoreThanMaxThreads) {
  Device& cpu = Registry::get().cpu();
  try {
    cpu.create_backend({.n_threads = kMaxThreads + 1});
    ADD_FAILURE() << "accepted " << kMaxThreads + 1 << " threads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most 512"), std::string::npos) << e.what();
  }
  auto backend = cpu.create_backend({.n_threads = 2});
  EXPECT_THROW(backend->set_n_threads(100000), Error);
}

TEST(Registry, FilterKeepsNamedDevicesAndTheCpu) {
  Registry& reg = Registry::get();
  std::vector<Device*> all = reg.devices();
  EXPECT_EQ(Registry::filter_devices(all, "").size(), all.size());
  auto only_cpu = Registry::filter_devices(all, "nothing-by-this-name");
  ASSERT_EQ(only_cpu.size(), 1u);
  EXPECT_EQ(only_cpu.front()->name(), "CPU");
  if (Device* ocl = reg.find("OpenCL0")) {
    auto kept = Registry::filter_devices(all, "opencl0");
    EXPECT_EQ(kept.size(), 2u);
    EXPECT_EQ(kept.back(), ocl);
  }
}

TEST(Registry, LoadsAPluginAtRunTime) {
  Registry& reg = Registry::get();
  if (!reg.find("Example0")) reg.load_plugin(LOOM_TEST_PLUGIN_PATH);
  Device* dev = reg.find("example0");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->type(), DeviceType::ACCEL);
  auto buf = dev->default_buffer_type().alloc(128);
  EXPECT_EQ(buf->size(), 128u);
  bool listed = false;
  for (const auto& f : reg.families()) listed |= f.name == "Example" && f.origin == LOOM_TEST_PLUGIN_PATH;
  EXPECT_TRUE(listed);
  // Loading it again is refused with a warning, not a second family.
  reg.load_plugin(LOOM_TEST_PLUGIN_PATH);
  int count = 0;
  for (Device* d : reg.devices()) count += d->name() == "Example0";
  EXPECT_EQ(count, 1);
}

TEST(Registry, MissingPluginIsAClearError) {
  try {
    Registry::get().load_plugin("/nonexistent/libloom-backend-nothing.so");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libloom-backend-nothing.so"), std::string::npos);
  }
}

// The message of the loom::Error that loading `path` throws ("" if none).
std::string load_error(const std::string& path) {
  try {
    Registry::get().load_plugin(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, PluginBuiltForAnotherApiVersionIsRefusedNamingFileAndVersions) {
  const std::string path = LOOM_TEST_WRONG_API_PLUGIN_PATH;
  const std::string msg = load_error(path);
  EXPECT_EQ(msg, fmt::format("backend plugin {} was built for plugin API {}, this Loom has {}; rebuild it", path,
                             kPluginApiVersion + 1, kPluginApiVersion));
}

TEST(Registry, PluginWithoutApiVersionIsRefusedNamingFileAndVersion) {
  const std::string path = LOOM_TEST_NO_API_VERSION_PLUGIN_PATH;
  const std::string msg = load_error(path);
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("no loom_backend_api_version"), std::string::npos) << msg;
  EXPECT_NE(msg.find(fmt::format("this Loom has plugin API {}", kPluginApiVersion)), std::string::npos) << msg;
}

TEST(Registry, RefusedPluginsAddNoDevices) {
  const size_t before = Registry::get().devices().size();
  EXPECT_FALSE(load_error(LOOM_TEST_WRONG_API_PLUGIN_PATH).empty());
  EXPECT_FALSE(load_error(LOOM_TEST_NO_API_VERSION_PLUGIN_PATH).empty());
  EXPECT_EQ(Registry::get().devices().size(), before);
}

}  // namespace
}  // namespace loom
