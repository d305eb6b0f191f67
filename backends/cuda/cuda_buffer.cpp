#include "cuda_buffer.h"

#include <cstring>

#include "cuda_device.h"
#include "cuda_runtime.h"
#include "loom/error.h"

namespace loom::cuda {
namespace {

// Waits for all work queued on the device (every stream).
void sync_device(int ordinal, const std::string& what) {
  DeviceGuard guard(ordinal);
  check(cudaDeviceSynchronize(), what.c_str());
}

bool overlaps(const CudaBuffer& a, const void* a_ptr, const CudaBuffer& b, const void* b_ptr, size_t n) {
  const auto* x = static_cast<const char*>(a_ptr);
  const auto* y = static_cast<const char*>(b_ptr);
  return &a == &b && x < y + n && y < x + n;
}

class CudaHostBuffer final : public Buffer {
 public:
  CudaHostBuffer(BufferType& type, void* ptr, size_t size) : Buffer(type, size), ptr_(ptr) {}
  ~CudaHostBuffer() override { cudaFreeHost(ptr_); }
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
    if (cuda_buffer_of(src)) {
      src.buffer->get_tensor(src, dst.data, 0, src.nbytes());
      return true;
    }
    return false;
  }
  void clear(uint8_t value) override { std::memset(ptr_, value, size()); }

 private:
  void* ptr_;
};

}  // namespace

CudaBuffer* cuda_buffer_of(const Tensor& t) { return dynamic_cast<CudaBuffer*>(t.buffer.get()); }

std::string_view CudaBufferType::name() const { return device_.name(); }
Device* CudaBufferType::device() const { return &device_; }

std::shared_ptr<Buffer> CudaBufferType::alloc_impl(size_t size) {
  DeviceGuard guard(device_.ordinal());
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, size);
  if (status != cudaSuccess) {
    cudaGetLastError();  // not sticky: the device stays usable
    size_t free = 0, total = 0;
    const bool known = cudaMemGetInfo(&free, &total) == cudaSuccess;
    fail("buffer type {}: cannot allocate {} ({} bytes) on {}: CUDA error {} ({}){}", name(), human_bytes(size), size,
         device_.name(), cudaGetErrorName(status), cudaGetErrorString(status),
         known ? fmt::format("; {} free of {}", human_bytes(free), human_bytes(total)) : std::string());
  }
  return std::make_shared<CudaBuffer>(*this, ptr, size);
}

CudaBuffer::CudaBuffer(CudaBufferType& type, void* ptr, size_t size) : Buffer(type, size), ptr_(ptr) {}

CudaBuffer::~CudaBuffer() {
  // cudaFree waits for work using the memory on the device; errors cannot be
  // reported from here (the next call on the device reports a lost context).
  int previous = -1;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != ordinal() &&
                        cudaSetDevice(ordinal()) == cudaSuccess;
  cudaFree(ptr_);
  if (switched) cudaSetDevice(previous);
}

CudaDevice& CudaBuffer::cuda_device() const { return static_cast<CudaBufferType&>(type()).cuda_device(); }
int CudaBuffer::ordinal() const { return cuda_device().ordinal(); }

void CudaBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  if (size == 0) return;
  const std::string what = fmt::format("writing {} bytes to tensor {} on {}", size, tensor_label(t), cuda_device().name());
  DeviceGuard guard(ordinal());
  check(cudaDeviceSynchronize(), what.c_str());
  check(cudaMemcpy(static_cast<char*>(t.data) + offset, data, size, cudaMemcpyHostToDevice), what.c_str());
  check(cudaDeviceSynchronize(), what.c_str());  // pageable sources return before the DMA lands
}

void CudaBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  if (size == 0) return;
  const std::string what =
      fmt::format("reading {} bytes from tensor {} on {}", size, tensor_label(t), cuda_device().name());
  DeviceGuard guard(ordinal());
  check(cudaDeviceSynchronize(), what.c_str());
  check(cudaMemcpy(data, static_cast<const char*>(t.data) + offset, size, cudaMemcpyDeviceToHost), what.c_str());
}

void CudaBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  if (size == 0) return;
  const std::string what = fmt::format("filling {} bytes of tensor {} on {}", size, tensor_label(t), cuda_device().name());
  DeviceGuard guard(ordinal());
  check(cudaDeviceSynchronize(), what.c_str());
  check(cudaMemset(static_cast<char*>(t.data) + offset, value, size), what.c_str());
  check(cudaDeviceSynchronize(), what.c_str());
}

bool CudaBuffer::copy_tensor(const Tensor& src, Tensor& dst) {
  const size_t n = src.nbytes();
  if (n == 0) return true;
  if (src.buffer && src.buffer->is_host()) {
    set_tensor(dst, src.data, 0, n);
    return true;
  }
  CudaBuffer* sb = cuda_buffer_of(src);
  if (!sb) return false;  // staged through the host by the caller
  if (overlaps(*sb, src.data, *this, dst.data, n)) return false;
  const std::string what = fmt::format("copying tensor {} ({}, {} bytes) to {} on {}", tensor_label(src),
                                       sb->cuda_device().name(), n, tensor_label(dst), cuda_device().name());
  // Work queued on either device (on any stream) comes first.
  sync_device(sb->ordinal(), what);
  DeviceGuard guard(ordinal());
  check(cudaDeviceSynchronize(), what.c_str());
  if (sb->ordinal() == ordinal()) {
    check(cudaMemcpy(dst.data, src.data, n, cudaMemcpyDeviceToDevice), what.c_str());
  } else {
    check(cudaMemcpyPeer(dst.data, ordinal(), src.data, sb->ordinal(), n), what.c_str());
  }
  check(cudaDeviceSynchronize(), what.c_str());
  return true;
}

void CudaBuffer::clear(uint8_t value) {
  const std::string what = fmt::format("clearing a {} buffer of {}", cuda_device().name(), human_bytes(size()));
  DeviceGuard guard(ordinal());
  check(cudaDeviceSynchronize(), what.c_str());
  check(cudaMemset(ptr_, value, size()), what.c_str());
  check(cudaDeviceSynchronize(), what.c_str());
}

Device* CudaHostBufferType::device() const { return device_; }

std::shared_ptr<Buffer> CudaHostBufferType::alloc_impl(size_t size) {
  void* ptr = nullptr;
  const cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
  if (status != cudaSuccess) {
    cudaGetLastError();
    fail("buffer type {}: cannot allocate {} ({} bytes) of pinned host memory: CUDA error {} ({})", name(),
         human_bytes(size), size, cudaGetErrorName(status), cudaGetErrorString(status));
  }
  return std::make_shared<CudaHostBuffer>(*this, ptr, size);
}

}  // namespace loom::cuda
