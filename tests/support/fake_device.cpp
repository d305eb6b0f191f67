#include "support/fake_device.h"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <cstring>

#include "cpu/kernels/kernels.h"
#include "loom/error.h"

namespace loom::test {

// One allocation: bytes in storage it owns, at an opaque address. The
// addresses are non-canonical on x86-64 (and kernel space elsewhere), so a
// stray dereference by host code faults at once instead of reading garbage.
class FakeBuffer final : public Buffer {
 public:
  FakeBuffer(FakeBufferType& type, FakeDevice& device, size_t size)
      : Buffer(type, size), device_(device), storage_(new uint8_t[size]()) {
    static std::atomic<uint64_t> next_id{0};
    base_ = reinterpret_cast<void*>(uintptr_t{0xF0000000'00000000} + ((next_id++ % 4096) << 40));
    device_.used_ += size;
  }
  ~FakeBuffer() override { device_.used_ -= size(); }

  void* base() override { return base_; }

  // Where the bytes of `t` (placed in this buffer) really are.
  uint8_t* storage_of(const Tensor& t) const {
    return storage_.get() + (static_cast<const uint8_t*>(t.data) - static_cast<const uint8_t*>(base_));
  }
  static FakeBuffer* of(const Tensor& t) { return dynamic_cast<FakeBuffer*>(t.buffer.get()); }

  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(storage_of(t) + offset, data, size);
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    std::memcpy(data, storage_of(t) + offset, size);
  }
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    std::memset(storage_of(t) + offset, value, size);
  }
  // Device to device between fake buffers (any fake device), like a peer copy.
  bool copy_tensor(const Tensor& src, Tensor& dst) override {
    FakeBuffer* from = of(src);
    if (!from || !src.is_contiguous() || !dst.is_contiguous()) return false;
    std::memcpy(storage_of(dst), from->storage_of(src), src.nbytes());
    return true;
  }
  void clear(uint8_t value) override { std::memset(storage_.get(), value, size()); }

 private:
  FakeDevice& device_;
  std::unique_ptr<uint8_t[]> storage_;
  void* base_ = nullptr;
};

std::string_view FakeBufferType::name() const { return device_.name(); }
size_t FakeBufferType::alignment() const { return device_.options().alignment; }
Device* FakeBufferType::device() const { return &device_; }

std::shared_ptr<Buffer> FakeBufferType::alloc_impl(size_t size) {
  const MemoryInfo m = device_.memory();
  if (size > m.free)
    fail("{}: out of device memory ({} bytes asked, {} of {} free)", device_.name(), size, m.free, m.total);
  return std::make_shared<FakeBuffer>(*this, device_, size);
}

namespace {

// Runs each node with the CPU kernels, single-threaded, on copies of the node
// and its operands whose data pointers address the buffers' storage.
class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(FakeDevice& device) : device_(device) {}
  Device& device() const override { return device_; }
  void idle() override { device_.count_idle_hint(); }

  void compute(Graph& graph) override {
    for (Tensor* node : graph.nodes()) {
      if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
      if (!device_.supports_op(*node))
        fail("{}: op {} is not supported (tensor {})", device_.name(), op_name(node->op),
             tensor_label(*node, TensorLabel::QuotedWithShape));
      run(*node);
    }
  }

 private:
  uint8_t* storage_of(const Tensor& t, const Tensor& node) const {
    if (!t.data) return nullptr;
    FakeBuffer* b = FakeBuffer::of(t);
    if (!b || &b->type() != &device_.default_buffer_type())
      fail("{}: tensor {} used by {} ({}) is in {} memory, which {} cannot use", device_.name(), tensor_label(t),
           tensor_label(node), op_name(node.op), t.buffer ? t.buffer->type().name() : "no", device_.name());
    return b->storage_of(t);
  }

  void run(const Tensor& node) {
    std::array<Tensor, kMaxSrc + 1> staged;
    Tensor& dst = staged[0];
    dst = node;
    dst.data = storage_of(node, node);
    for (int i = 0; i < kMaxSrc; ++i) {
      if (!node.src[i]) continue;
      staged[i + 1] = *node.src[i];
      staged[i + 1].data = storage_of(*node.src[i], node);
      dst.src[i] = &staged[i + 1];
    }
    const size_t need = cpu::kernel_work_size(dst, 1);
    if (work_.size() < need) work_.resize(need);
    cpu::ErrorSink errors;
    for (int phase = 0; phase < cpu::kernel_phases(dst); ++phase) {
      const int64_t n = cpu::kernel_tasks(dst, phase, 1);
      ++serial_;
      for (int64_t t = 0; t < n; ++t) {
        cpu::ComputeParams p{t, n, 0, 1, work_.data(), work_.size(), &errors};
        p.serial = serial_;
        p.thread_tag = &thread_tag_;
        cpu::compute_node(p, dst, phase);
      }
    }
    if (errors.failed()) throw Error(errors.message());
  }

  FakeDevice& device_;
  std::vector<uint8_t> work_;
  uint64_t serial_ = 0;
  uint64_t thread_tag_ = 0;
};

}  // namespace

FakeDevice::FakeDevice(FakeDeviceOptions options) : options_(std::move(options)) {}

std::string FakeDevice::description() const {
  std::string ops = "all ops";
  if (options_.ops) {
    ops = "ops:";
    for (Op op : *options_.ops) ops += fmt::format(" {}", op_name(op));
  }
  return fmt::format("fake device for tests ({} MiB, {})", options_.memory >> 20, ops);
}

MemoryInfo FakeDevice::memory_impl() const {
  const size_t used = used_;
  return {used < options_.memory ? options_.memory - used : 0, options_.memory};
}

std::unique_ptr<Backend> FakeDevice::create_backend(const BackendOptions&) {
  return std::make_unique<FakeBackend>(*this);
}

bool FakeDevice::supports_op(const Tensor& node) const {
  if (options_.ops && !options_.ops->contains(node.op)) return false;
  return cpu::kernel_supports(node);
}

FakeDevice& fake_device(int i) {
  static std::array<FakeDevice, 2> devices{FakeDevice({.name = "Fake0"}), FakeDevice({.name = "Fake1"})};
  return devices.at(i);
}

}  // namespace loom::test
