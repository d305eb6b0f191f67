// Host-memory buffers for the CPU backend: `CPU` owns aligned memory,
// `CPU_Mapped` wraps memory it does not own (an mmap'd model file), which
// must outlive the buffer.
#pragma once

#include "loom/backend.h"

namespace loom::cpu {

inline constexpr size_t kHostAlignment = 64;
inline constexpr size_t kMappedAlignment = 32;

class HostBuffer : public Buffer {
 public:
  // Owns `data` when `owned` is true (freed with std::free).
  HostBuffer(BufferType& type, void* data, size_t size, bool owned);
  ~HostBuffer() override;

  void* base() override { return data_; }
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  bool copy_tensor(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override;

 private:
  void* data_;
  bool owned_;
};

class HostBufferType : public BufferType {
 public:
  // Mapped types wrap files whose tensors GGUF aligns to 32 bytes.
  HostBufferType(std::string name, Device* device, bool mapped)
      : name_(std::move(name)), device_(device), mapped_(mapped) {}
  std::string_view name() const override { return name_; }
  size_t alignment() const override { return mapped_ ? kMappedAlignment : kHostAlignment; }
  bool is_host() const override { return true; }
  Device* device() const override { return device_; }
  // Wraps memory owned by someone else (the CPU_Mapped path).
  std::shared_ptr<Buffer> wrap(void* data, size_t size);

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  std::string name_;
  Device* device_;
  bool mapped_;
};

}  // namespace loom::cpu
