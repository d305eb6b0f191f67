#include "loom/backend.h"
#include "loom/error.h"
#include "loom/fault_injection.h"
#include "loom/iequals.h"

namespace loom {
namespace {

// What a zero-byte request gets: no memory, but a valid buffer that can hold
// zero-byte tensors. The one place that handles zero-size allocations.
class EmptyBuffer final : public Buffer {
 public:
  explicit EmptyBuffer(BufferType& type) : Buffer(type, 0) {}
  void* base() override { return &anchor_; }  // non-null, never dereferenced
  void set_tensor(Tensor&, const void*, size_t, size_t) override {}
  void get_tensor(const Tensor&, void*, size_t, size_t) override {}
  void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
  void clear(uint8_t) override {}

 private:
  alignas(64) char anchor_ = 0;
};

}  // namespace

std::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::CPU: return "CPU";
    case DeviceType::GPU: return "GPU";
    case DeviceType::IGPU: return "IGPU";
    case DeviceType::ACCEL: return "ACCEL";
  }
  return "?";
}

std::shared_ptr<Buffer> BufferType::alloc(size_t size) {
  if (size == 0) return std::make_shared<EmptyBuffer>(*this);
  if (size > max_size())
    fail("buffer type {}: cannot allocate {} bytes, the largest allocation is {} bytes", name(), size,
         max_size());
  if (fault::should_fail(fault::Site::BufferAlloc))
    fail("buffer type {}: cannot allocate {} bytes: injected failure", name(), size);
  return alloc_impl(size);
}

size_t BufferType::alloc_size(const Tensor& t) const { return t.nbytes(); }

size_t Buffer::offset_of(const Tensor& t) const {
  return static_cast<size_t>(static_cast<const char*>(t.data) -
                             static_cast<const char*>(const_cast<Buffer*>(this)->base()));
}

void Buffer::place(Tensor& t, size_t offset) {
  if (t.view_src) fail("tensor {} is a view; place its source instead", tensor_label(t));
  const size_t need = type().alloc_size(t);
  if (offset > size() || need > size() - offset)
    fail("tensor {} ({} bytes) does not fit in {} buffer of {} bytes at offset {}", tensor_label(t), need,
         type().name(), size(), offset);
  if (offset % type().alignment() != 0)
    fail("tensor {}: offset {} is not a multiple of {}'s alignment {}", tensor_label(t), offset,
         type().name(), type().alignment());
  t.buffer = shared_from_this();
  t.data = static_cast<char*>(base()) + offset;
  init_tensor(t);
}

void Buffer::place_view(Tensor& view) {
  Tensor* src = view.view_src;
  if (!src) fail("tensor {} is not a view", tensor_label(view));
  if (!src->buffer) fail("view {}: its source {} has no memory yet", tensor_label(view), tensor_label(*src));
  view.buffer = src->buffer;
  view.data = static_cast<char*>(src->data) + view.view_offs;
  view.buffer->init_tensor(view);
}

std::string_view Backend::name() const { return device().name(); }

void Backend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  tensor_set(t, data, offset, size);
}

void Backend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  tensor_get(t, data, offset, size);
}

std::shared_ptr<Buffer> Device::buffer_from_host_ptr(void*, size_t size) {
  fail("device {} cannot wrap {} bytes of host memory in a buffer", name(), size);
}

BufferType* find_buffer_type(const std::vector<Device*>& devices, std::string_view name) {
  const auto named = [name](const BufferType* bt) { return bt && iequals(name, bt->name()); };
  for (Device* d : devices) {
    for (BufferType* bt : d->buffer_types())
      if (named(bt)) return bt;
    if (BufferType* host = d->host_buffer_type(); named(host)) return host;
  }
  return nullptr;
}

}  // namespace loom
