// Thin helpers over the CUDA runtime and cuBLAS for the host side: RAII
// handles for streams, events and cuBLAS handles, a guard that makes a
// device current for a scope, and byte counts for messages. Errors go
// through throw_cuda_error / throw_cublas_error (cuda_launch.h).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <utility>

#include "cuda_launch.h"

namespace loom::cuda {

// "1.2 GiB", "512 bytes": sizes in messages.
std::string human_bytes(size_t bytes);

// Makes `device` current for the scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

// Owns one CUDA or cuBLAS object; the destructor releases it on its device
// and ignores errors (a destructor must not throw; a broken context is
// reported by the next call that can fail).
template <class T, class Traits>
class Handle {
 public:
  Handle() = default;
  Handle(T h, int device) : h_(h), device_(device) {}
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)), device_(o.device_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
      device_ = o.device_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset() {
    if (!h_) return;
    int previous = -1;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    Traits::release(h_);
    if (switched) cudaSetDevice(previous);
    h_ = nullptr;
  }
  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
  int device_ = 0;
};

struct StreamTraits {
  static void release(cudaStream_t s) { cudaStreamDestroy(s); }
};
struct EventTraits {
  static void release(cudaEvent_t e) { cudaEventDestroy(e); }
};
struct CublasTraits {
  static void release(cublasHandle_t h) { cublas().destroy(h); }
};
struct GraphExecTraits {
  static void release(cudaGraphExec_t g) { cudaGraphExecDestroy(g); }
};

using StreamHandle = Handle<cudaStream_t, StreamTraits>;
using EventHandle = Handle<cudaEvent_t, EventTraits>;
using CublasHandle = Handle<cublasHandle_t, CublasTraits>;
using GraphExecHandle = Handle<cudaGraphExec_t, GraphExecTraits>;

// A non-blocking stream on `device` (which is made current while it is created).
StreamHandle create_stream(int device);
// An event on `device`; `timing` false gives the cheaper kind that cannot time.
EventHandle create_event(int device, bool timing);
// A cuBLAS handle on `device` whose work goes to `stream`.
CublasHandle create_cublas(int device, cudaStream_t stream);

}  // namespace loom::cuda
