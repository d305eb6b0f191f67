// OpenCL memory. `OpenCL<N>` buffers are device memory (one cl_mem each);
// their base() is a reserved, inaccessible address range, so tensor data
// pointers are unique opaque addresses and a tensor's offset in the cl_mem
// is data - base(). `OpenCL<N>_Host` buffers are pinned host memory (a cl_mem
// allocated by the driver and mapped for the buffer's lifetime) that the CPU
// can use directly and the device transfers from quickly.
#pragma once

#include "loom/backend.h"
#include "opencl_runtime.h"

namespace loom::opencl {

class OpenClDevice;

class OpenClBufferType final : public BufferType {
 public:
  explicit OpenClBufferType(OpenClDevice& device) : device_(device) {}
  std::string_view name() const override;
  size_t alignment() const override;
  size_t max_size() const override;
  bool is_host() const override { return false; }
  Device* device() const override;
  OpenClDevice& cl_device() const { return device_; }

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  OpenClDevice& device_;
};

class OpenClBuffer final : public Buffer {
 public:
  OpenClBuffer(OpenClBufferType& type, MemHandle mem, size_t size);
  ~OpenClBuffer() override;

  void* base() override { return base_; }
  cl_mem mem() const { return mem_.get(); }
  OpenClDevice& cl_device() const;
  // Byte offset of t's data in mem().
  size_t offset_in(const Tensor& t) const { return static_cast<const char*>(t.data) - static_cast<const char*>(base_); }

  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  bool copy_tensor(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override;

 private:
  MemHandle mem_;
  void* base_;  // PROT_NONE reservation of size() bytes: unique, never dereferenced
};

// The OpenCL buffer holding t, or null when t lives elsewhere (host memory,
// a zero-size buffer).
OpenClBuffer* opencl_buffer_of(const Tensor& t);

class OpenClHostBufferType final : public BufferType {
 public:
  explicit OpenClHostBufferType(OpenClDevice& device);
  std::string_view name() const override { return name_; }
  size_t alignment() const override { return 64; }
  size_t max_size() const override;
  bool is_host() const override { return true; }
  Device* device() const override;

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  OpenClDevice& device_;
  std::string name_;
};

}  // namespace loom::opencl
