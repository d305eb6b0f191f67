#include "host_buffer.h"

#include <cstdlib>
#include <cstring>

#include "loom/error.h"

namespace loom::cpu {

HostBuffer::HostBuffer(BufferType& type, void* data, size_t size, bool owned)
    : Buffer(type, size), data_(data), owned_(owned) {}

HostBuffer::~HostBuffer() {
  if (owned_) std::free(data_);
}

void HostBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  std::memcpy(static_cast<char*>(t.data) + offset, data, size);
}

void HostBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  std::memcpy(data, static_cast<const char*>(t.data) + offset, size);
}

void HostBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  std::memset(static_cast<char*>(t.data) + offset, value, size);
}

bool HostBuffer::copy_tensor(const Tensor& src, Tensor& dst) {
  if (!src.buffer || !src.buffer->is_host()) return false;
  std::memmove(dst.data, src.data, src.nbytes());
  return true;
}

void HostBuffer::clear(uint8_t value) { std::memset(data_, value, size()); }

std::shared_ptr<Buffer> HostBufferType::alloc_impl(size_t size) {
  if (mapped_) fail("buffer type {} only wraps existing memory; it cannot allocate {} bytes", name_, size);
  const size_t rounded = (size + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* data = std::aligned_alloc(kHostAlignment, rounded);
  if (!data) fail("buffer type {}: out of memory allocating {} bytes", name_, size);
  return std::make_shared<HostBuffer>(*this, data, size, true);
}

std::shared_ptr<Buffer> HostBufferType::wrap(void* data, size_t size) {
  if (!data && size) fail("buffer type {}: cannot wrap a null pointer of {} bytes", name_, size);
  if (size == 0) return alloc(0);
  return std::make_shared<HostBuffer>(*this, data, size, false);
}

}  // namespace loom::cpu
