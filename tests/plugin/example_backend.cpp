// A minimal plugin backend used to test run-time loading: one device,
// "Example0", with a host-memory buffer type and no ops.
#include <cstdlib>
#include <cstring>

#include "loom/error.h"
#include "loom/registry.h"

namespace loom {
namespace {

class ExampleBuffer final : public Buffer {
 public:
  ExampleBuffer(BufferType& type, size_t size) : Buffer(type, size), data_(std::calloc(size, 1)) {
    if (!data_) fail("Example: out of memory ({} bytes)", size);
  }
  ~ExampleBuffer() override { std::free(data_); }
  void* base() override { return data_; }
  void set_tensor(Tensor& t, const void* d, size_t off, size_t n) override {
    std::memcpy(static_cast<char*>(t.data) + off, d, n);
  }
  void get_tensor(const Tensor& t, void* d, size_t off, size_t n) override {
    std::memcpy(d, static_cast<const char*>(t.data) + off, n);
  }
  void memset_tensor(Tensor& t, uint8_t v, size_t off, size_t n) override {
    std::memset(static_cast<char*>(t.data) + off, v, n);
  }
  void clear(uint8_t v) override { std::memset(data_, v, size()); }

 private:
  void* data_;
};

class ExampleDevice;

class ExampleBufferType final : public BufferType {
 public:
  explicit ExampleBufferType(Device* device) : device_(device) {}
  std::string_view name() const override { return "Example0"; }
  size_t alignment() const override { return 32; }
  bool is_host() const override { return true; }
  Device* device() const override { return device_; }

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override { return std::make_shared<ExampleBuffer>(*this, size); }

 private:
  Device* device_;
};

class ExampleDevice final : public Device {
 public:
  std::string_view name() const override { return "Example0"; }
  std::string description() const override { return "example plugin device (no ops)"; }
  DeviceType type() const override { return DeviceType::ACCEL; }
  MemoryInfo memory_impl() const override { return {1 << 20, 1 << 20}; }
  DeviceCaps caps() const override { return {}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions&) override {
    fail("Example0 cannot compute");
  }
  BufferType& default_buffer_type() override { return type_; }
  bool supports_op(const Tensor&) const override { return false; }
  bool supports_buffer_type(const BufferType& t) const override { return &t == &type_; }

 private:
  ExampleBufferType type_{this};
};

class ExampleFamily final : public BackendFamily {
 public:
  std::string_view name() const override { return "Example"; }
  std::vector<Device*> devices() override { return {&device_}; }

 private:
  ExampleDevice device_;
};

}  // namespace

std::unique_ptr<BackendFamily> register_example_backend() { return std::make_unique<ExampleFamily>(); }

}  // namespace loom
