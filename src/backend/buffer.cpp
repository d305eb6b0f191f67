#include "loom/backend.h"

#include <algorithm>
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

// What a dry run's requests get: the size asked for, no memory. Tensors can
// be placed in it (their data pointers are never dereferenced: writes are
// dropped, reads leave the destination as it was).
class DryRunBuffer final : public Buffer {
 public:
  DryRunBuffer(BufferType& type, size_t size) : Buffer(type, size) {}
  void* base() override { return reinterpret_cast<void*>(kBase); }
  void set_tensor(Tensor&, const void*, size_t, size_t) override {}
  void get_tensor(const Tensor&, void*, size_t, size_t) override {}
  void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
  void clear(uint8_t) override {}

 private:
  static constexpr uintptr_t kBase = uintptr_t{1} << 40;  // aligned for every type, never read
};

thread_local DryRun* t_dry_run = nullptr;

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

}  // namespace

DryRun::DryRun() : outer_(t_dry_run) { t_dry_run = this; }
DryRun::~DryRun() { t_dry_run = outer_; }
DryRun* DryRun::active() { return t_dry_run; }

MemoryInfo Device::memory() const {
  MemoryInfo m = memory_impl();
  if (memory_cap_ == 0) return m;
  const size_t used = allocated_bytes();
  m.total = std::min(m.total, memory_cap_);
  m.free = std::min(m.free, used < memory_cap_ ? memory_cap_ - used : 0);
  return m;
}

Buffer::~Buffer() {
  if (charged_) charged_->allocated_.fetch_sub(size_, std::memory_order_relaxed);
}

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
  if (DryRun* dry = DryRun::active()) {
    auto b = std::make_shared<DryRunBuffer>(*this, size);
    dry->allocations_.push_back({this, size, b});
    return b;
  }
  if (fault::should_fail(fault::Site::BufferAlloc))
    fail("buffer type {}: cannot allocate {} bytes: injected failure", name(), size);
  // Charged to the type's device; pinned host memory of a GPU is host memory, not the GPU's.
  Device* d = device();
  if (d && is_host() && d->type() != DeviceType::CPU) d = nullptr;
  if (d && d->memory_cap_ != 0) {
    const size_t used = d->allocated_bytes();
    if (used > d->memory_cap_ || size > d->memory_cap_ - used)
      fail("buffer type {}: cannot allocate {} bytes ({}): device {} is capped at {} ({} allocated, {} free)", name(),
           size, mib(size), d->name(), mib(d->memory_cap_), mib(used),
           mib(used < d->memory_cap_ ? d->memory_cap_ - used : 0));
  }
  std::shared_ptr<Buffer> b = alloc_impl(size);
  if (d) {
    d->allocated_.fetch_add(size, std::memory_order_relaxed);
    b->charged_ = d;
  }
  return b;
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
