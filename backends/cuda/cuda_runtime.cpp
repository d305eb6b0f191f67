#include "cuda_runtime.h"

#include "loom/error.h"

namespace loom::cuda {

std::string human_bytes(size_t bytes) {
  constexpr const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 3) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

void throw_cuda_error(cudaError_t status, const char* what) {
  // Clears the error unless it is sticky (then the context is lost and every
  // later call fails with it, which the next message says again).
  cudaGetLastError();
  fail("CUDA error {} ({}) while {}", cudaGetErrorName(status), cudaGetErrorString(status), what);
}

void throw_cublas_error(cublasStatus_t status, const char* what) {
  fail("cuBLAS error {} ({}) while {}", cublasGetStatusName(status), cublasGetStatusString(status), what);
}

DeviceGuard::DeviceGuard(int device) {
  check(cudaGetDevice(&previous_), "asking for the current device");
  if (previous_ != device) {
    check(cudaSetDevice(device), fmt::format("selecting CUDA{}", device).c_str());
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);
}

StreamHandle create_stream(int device) {
  DeviceGuard guard(device);
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), fmt::format("creating a stream on CUDA{}", device).c_str());
  return StreamHandle(s, device);
}

EventHandle create_event(int device, bool timing) {
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
        fmt::format("creating an event on CUDA{}", device).c_str());
  return EventHandle(e, device);
}

CublasHandle create_cublas(int device, cudaStream_t stream) {
  DeviceGuard guard(device);
  cublasHandle_t h = nullptr;
  check(cublasCreate(&h), fmt::format("creating a cuBLAS handle on CUDA{}", device).c_str());
  CublasHandle handle(h, device);
  check(cublasSetStream(h, stream), fmt::format("binding a cuBLAS handle to a stream on CUDA{}", device).c_str());
  return handle;
}

}  // namespace loom::cuda
