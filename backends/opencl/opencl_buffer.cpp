#include "opencl_buffer.h"

#include <sys/mman.h>

#include <cstring>

#include "loom/error.h"
#include "opencl_device.h"

namespace loom::opencl {
namespace {

// Address space only: no memory is committed and any access faults.
void* reserve_addresses(size_t size, std::string_view type_name) {
  void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) fail("buffer type {}: cannot reserve {} bytes of address space", type_name, size);
  return p;
}

bool overlaps(const OpenClBuffer& a, size_t a_off, const OpenClBuffer& b, size_t b_off, size_t n) {
  return &a == &b && a_off < b_off + n && b_off < a_off + n;
}

// Pinned host memory mapped for the buffer's whole life.
class OpenClHostBuffer final : public Buffer {
 public:
  OpenClHostBuffer(BufferType& type, OpenClDevice& device, MemHandle mem, void* ptr, size_t size)
      : Buffer(type, size), device_(device), mem_(std::move(mem)), ptr_(ptr) {}
  ~OpenClHostBuffer() override {
    clEnqueueUnmapMemObject(device_.queue(), mem_.get(), ptr_, 0, nullptr, nullptr);
    clFinish(device_.queue());
  }
  void* base() override { return ptr_; }
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    std::memcpy(static_cast<char*>(t.data) + offset, data, size);
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    std::memcpy(data, static_cast<const char*>(t.data) + offset, size);
  }
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    std::memset(static_cast<char*>(t.data) + offset, value, size);
  }
  bool copy_tensor(const Tensor& src, Tensor& dst) override {
    if (!src.buffer) return false;
    if (src.buffer->is_host()) {
      std::memmove(dst.data, src.data, src.nbytes());
      return true;
    }
    if (opencl_buffer_of(src)) {
      src.buffer->get_tensor(src, dst.data, 0, src.nbytes());
      return true;
    }
    return false;
  }
  void clear(uint8_t value) override { std::memset(ptr_, value, size()); }

 private:
  OpenClDevice& device_;
  MemHandle mem_;
  void* ptr_;
};

}  // namespace

OpenClBuffer* opencl_buffer_of(const Tensor& t) { return dynamic_cast<OpenClBuffer*>(t.buffer.get()); }

std::string_view OpenClBufferType::name() const { return device_.name(); }
size_t OpenClBufferType::alignment() const { return device_.alignment(); }
size_t OpenClBufferType::max_size() const { return device_.max_alloc(); }
Device* OpenClBufferType::device() const { return &device_; }

std::shared_ptr<Buffer> OpenClBufferType::alloc_impl(size_t size) {
  device_.check_host_memory(size, name());
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, size, nullptr, &status));
  if (status != CL_SUCCESS)
    fail("buffer type {}: allocating {} bytes failed: {} ({} MiB of {} MiB free)", name(), size,
         status_name(status), device_.memory().free >> 20, device_.memory().total >> 20);
  // Drivers allocate lazily; touching the memory now turns an out-of-memory
  // at first use into an error here.
  const uint8_t zero = 0;
  status = clEnqueueFillBuffer(device_.queue(), mem.get(), &zero, 1, 0, size, 0, nullptr, nullptr);
  if (status == CL_SUCCESS) status = clFinish(device_.queue());
  if (status != CL_SUCCESS) fail("buffer type {}: allocating {} bytes failed: {}", name(), size, status_name(status));
  return std::make_shared<OpenClBuffer>(*this, std::move(mem), size);
}

OpenClBuffer::OpenClBuffer(OpenClBufferType& type, MemHandle mem, size_t size)
    : Buffer(type, size), mem_(std::move(mem)), base_(reserve_addresses(size, type.name())) {
  cl_device().note_alloc(size);
}

OpenClBuffer::~OpenClBuffer() {
  munmap(base_, size());
  cl_device().note_free(size());
}

OpenClDevice& OpenClBuffer::cl_device() const { return static_cast<OpenClBufferType&>(type()).cl_device(); }

void OpenClBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  check(clEnqueueWriteBuffer(cl_device().queue(), mem(), CL_TRUE, offset_in(t) + offset, size, data, 0, nullptr,
                             nullptr),
        fmt::format("writing {} bytes to tensor {} on {}", size, tensor_label(t), cl_device().name()));
}

void OpenClBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  check(clEnqueueReadBuffer(cl_device().queue(), mem(), CL_TRUE, offset_in(t) + offset, size, data, 0, nullptr,
                            nullptr),
        fmt::format("reading {} bytes from tensor {} on {}", size, tensor_label(t), cl_device().name()));
}

void OpenClBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  cl_command_queue q = cl_device().queue();
  check(clEnqueueFillBuffer(q, mem(), &value, 1, offset_in(t) + offset, size, 0, nullptr, nullptr),
        fmt::format("filling {} bytes of tensor {} on {}", size, tensor_label(t), cl_device().name()));
  check(clFinish(q), fmt::format("filling tensor {} on {}", tensor_label(t), cl_device().name()));
}

bool OpenClBuffer::copy_tensor(const Tensor& src, Tensor& dst) {
  const size_t n = src.nbytes();
  cl_command_queue q = cl_device().queue();
  if (src.buffer && src.buffer->is_host()) {
    set_tensor(dst, src.data, 0, n);
    return true;
  }
  OpenClBuffer* sb = opencl_buffer_of(src);
  if (!sb || sb->cl_device().context() != cl_device().context()) return false;  // staged by the caller
  if (overlaps(*sb, sb->offset_in(src), *this, offset_in(dst), n)) return false;
  // The source's queue may still be writing it: let it finish first.
  if (sb->cl_device().queue() != q)
    check(clFinish(sb->cl_device().queue()), fmt::format("waiting for {}", sb->cl_device().name()));
  check(clEnqueueCopyBuffer(q, sb->mem(), mem(), sb->offset_in(src), offset_in(dst), n, 0, nullptr, nullptr),
        fmt::format("copying tensor {} ({} bytes, {}) to {} on {}", tensor_label(src), n, sb->cl_device().name(),
                    tensor_label(dst), cl_device().name()));
  check(clFinish(q), fmt::format("copying tensor {} to {}", tensor_label(src), cl_device().name()));
  return true;
}

void OpenClBuffer::clear(uint8_t value) {
  cl_command_queue q = cl_device().queue();
  check(clEnqueueFillBuffer(q, mem(), &value, 1, 0, size(), 0, nullptr, nullptr),
        fmt::format("clearing a {} buffer of {} bytes", cl_device().name(), size()));
  check(clFinish(q), fmt::format("clearing a {} buffer", cl_device().name()));
}

OpenClHostBufferType::OpenClHostBufferType(OpenClDevice& device)
    : device_(device), name_(std::string(device.name()) + "_Host") {}

size_t OpenClHostBufferType::max_size() const { return device_.max_alloc(); }
Device* OpenClHostBufferType::device() const { return &device_; }

std::shared_ptr<Buffer> OpenClHostBufferType::alloc_impl(size_t size) {
  device_.check_host_memory(size, name_);
  cl_int status = CL_SUCCESS;
  MemHandle mem(clCreateBuffer(device_.context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, nullptr, &status));
  if (status != CL_SUCCESS) fail("buffer type {}: allocating {} bytes failed: {}", name_, size, status_name(status));
  void* ptr = clEnqueueMapBuffer(device_.queue(), mem.get(), CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0,
                                 nullptr, nullptr, &status);
  if (status != CL_SUCCESS || !ptr)
    fail("buffer type {}: mapping {} bytes failed: {}", name_, size, status_name(status));
  if (reinterpret_cast<uintptr_t>(ptr) % alignment() != 0) {
    clEnqueueUnmapMemObject(device_.queue(), mem.get(), ptr, 0, nullptr, nullptr);
    clFinish(device_.queue());
    fail("buffer type {}: the driver mapped {} bytes at {}, which is not {}-byte aligned", name_, size, ptr,
         alignment());
  }
  return std::make_shared<OpenClHostBuffer>(*this, device_, std::move(mem), ptr, size);
}

}  // namespace loom::opencl
