// An in-process fake device for tests: "Fake0", "Fake1", ... of type GPU
// with memory of its own. Its buffers keep their bytes in storage the buffer
// owns and hand out an opaque base address that faults if the CPU
// dereferences it, so every byte must move through the buffer (set/get/
// memset/copy) as with a real device. Its backend computes a graph with the
// CPU kernels on that storage, one node at a time.
//
// The ops it runs can be limited (FakeDeviceOptions::ops) so that tests see
// nodes fall back to another device, as with OpenCL's missing ops. With it
// the multi-device scheduler and placement tests run on every machine, with
// or without an OpenCL platform.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loom/backend.h"

namespace loom::test {

struct FakeDeviceOptions {
  std::string name = "Fake0";
  DeviceType type = DeviceType::GPU;
  size_t memory = size_t{1} << 30;  // total bytes its buffers may hold at once
  size_t alignment = 128;
  // Ops it runs (those the CPU kernels support for the node's types); nullopt: all.
  std::optional<std::set<Op>> ops;
};

class FakeDevice;

class FakeBufferType final : public BufferType {
 public:
  explicit FakeBufferType(FakeDevice& device) : device_(device) {}
  std::string_view name() const override;
  size_t alignment() const override;
  bool is_host() const override { return false; }
  Device* device() const override;

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  FakeDevice& device_;
};

class FakeDevice final : public Device {
 public:
  explicit FakeDevice(FakeDeviceOptions options);
  std::string_view name() const override { return options_.name; }
  std::string description() const override;
  DeviceType type() const override { return options_.type; }
  MemoryInfo memory_impl() const override;
  DeviceCaps caps() const override { return {}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options = {}) override;
  BufferType& default_buffer_type() override { return buffer_type_; }

  // The two questions: the node's op and types (the configured ops that the
  // CPU kernels run), and which memory its kernels can use (only its own).
  bool supports_op(const Tensor& node) const override;
  bool supports_buffer_type(const BufferType& type) const override { return &type == &buffer_type_; }

  const FakeDeviceOptions& options() const { return options_; }
  size_t used_bytes() const { return used_; }
  // Backend::idle calls its backends have had (the scheduler's hints).
  int idle_hints() const { return idle_hints_; }
  void count_idle_hint() { ++idle_hints_; }

 private:
  friend class FakeBuffer;
  FakeDeviceOptions options_;
  FakeBufferType buffer_type_{*this};
  std::atomic<size_t> used_{0};
  std::atomic<int> idle_hints_{0};
};

// Two fake devices, "Fake0" and "Fake1", that live for the whole test run
// (shared: a test that checks free memory makes its own FakeDevice).
FakeDevice& fake_device(int i);
// Both, e.g. as the devices a loader may use beside the CPU.
inline std::vector<Device*> fake_devices() { return {&fake_device(0), &fake_device(1)}; }

}  // namespace loom::test
