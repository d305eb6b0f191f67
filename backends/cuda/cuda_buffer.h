// CUDA memory. `CUDA<N>` buffers are device memory from cudaMalloc on device
// N; base() is the real device pointer, so tensor.data is a device pointer
// that kernels use as it is (it must never be dereferenced on the host).
// `CUDA_Host` buffers, one type for the whole family, are pinned host memory
// (cudaHostAlloc, portable to every device): the CPU uses them directly and
// the devices transfer from them quickly.
//
// A buffer's synchronous operations (set/get/memset/copy, clear) wait for
// all work queued on the device first, on any backend's stream, and finish
// before they return: what they write is visible to work queued after them
// on any stream.
#pragma once

#include <string>

#include "loom/backend.h"

namespace loom::cuda {

class CudaDevice;

class CudaBufferType final : public BufferType {
 public:
  explicit CudaBufferType(CudaDevice& device) : device_(device) {}
  std::string_view name() const override;
  size_t alignment() const override { return 256; }
  bool is_host() const override { return false; }
  Device* device() const override;
  CudaDevice& cuda_device() const { return device_; }

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  CudaDevice& device_;
};

class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(CudaBufferType& type, void* ptr, size_t size);
  ~CudaBuffer() override;

  void* base() override { return ptr_; }
  CudaDevice& cuda_device() const;
  int ordinal() const;  // the CUDA device ordinal

  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  bool copy_tensor(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override;

 private:
  void* ptr_;
};

// The CUDA device buffer holding t, or null when t lives elsewhere (host
// memory, another backend's memory, a zero-size or dry-run buffer).
CudaBuffer* cuda_buffer_of(const Tensor& t);

// Pinned host memory shared by the family's devices; device() is CUDA0 (its
// bytes are host memory, not charged to any GPU: BufferType::alloc).
class CudaHostBufferType final : public BufferType {
 public:
  std::string_view name() const override { return "CUDA_Host"; }
  size_t alignment() const override { return 64; }
  bool is_host() const override { return true; }
  Device* device() const override;
  void set_device(CudaDevice* device) { device_ = device; }

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  CudaDevice* device_ = nullptr;
};

}  // namespace loom::cuda
