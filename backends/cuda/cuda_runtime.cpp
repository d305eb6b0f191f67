#include "cuda_runtime.h"

#include <dlfcn.h>

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

namespace {

// The toolkit's libcublas (LOOM_CUBLAS_LIBRARY, from CMake): by its soname
// first, so that LD_LIBRARY_PATH and the loader's cache win, then at the
// path the build found.
CublasApi load_cublas() {
  void* lib = dlopen(LOOM_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen(LOOM_CUBLAS_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    fail("the CUDA backend cannot load cuBLAS ({}, nor {}): {}; install the CUDA {} runtime libraries or add "
         "their folder to LD_LIBRARY_PATH",
         LOOM_CUBLAS_SONAME, LOOM_CUBLAS_LIBRARY, dlerror(), CUDART_VERSION / 1000);
  CublasApi api{};
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) fail("cuBLAS ({}) has no function {}: not the CUDA {} library", LOOM_CUBLAS_SONAME, name,
                  CUDART_VERSION / 1000);
  };
  get(api.create, "cublasCreate_v2");
  get(api.destroy, "cublasDestroy_v2");
  get(api.set_stream, "cublasSetStream_v2");
  get(api.set_workspace, "cublasSetWorkspace_v2");
  get(api.set_pointer_mode, "cublasSetPointerMode_v2");
  get(api.set_math_mode, "cublasSetMathMode");
  get(api.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  get(api.get_status_name, "cublasGetStatusName");
  get(api.get_status_string, "cublasGetStatusString");
  return api;  // the library stays open for the life of the process
}

}  // namespace

const CublasApi& cublas() {
  static const CublasApi api = load_cublas();  // a failed load throws and is tried again next time
  return api;
}

void throw_cublas_error(cublasStatus_t status, const char* what) {
  fail("cuBLAS error {} ({}) while {}", cublas().get_status_name(status), cublas().get_status_string(status), what);
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
  check(cublas().create(&h), fmt::format("creating a cuBLAS handle on CUDA{}", device).c_str());
  CublasHandle handle(h, device);
  check(cublas().set_stream(h, stream), fmt::format("binding a cuBLAS handle to a stream on CUDA{}", device).c_str());
  return handle;
}

}  // namespace loom::cuda
