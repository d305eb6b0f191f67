// Thin helpers over the OpenCL C API: error checking with readable names,
// reference-counted handles, device queries, and the per-device program
// (the embedded kernel source, compiled on first use and cached for the
// process).
#pragma once

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace loom::opencl {

// The text of an OpenCL status code ("CL_OUT_OF_RESOURCES").
std::string_view status_name(cl_int status);
// Throws loom::Error "OpenCL: <what>: <status name>" unless status is CL_SUCCESS.
void check(cl_int status, std::string_view what);

// Owns one reference to an OpenCL object.
template <class T, cl_int (*Retain)(T), cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}  // adopts an existing reference
  Handle(const Handle& o) : h_(o.h_) {
    if (h_) Retain(h_);
  }
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Handle() {
    if (h_) Release(h_);
  }
  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
};

using ContextHandle = Handle<cl_context, clRetainContext, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clRetainCommandQueue, clReleaseCommandQueue>;
using MemHandle = Handle<cl_mem, clRetainMemObject, clReleaseMemObject>;
using ProgramHandle = Handle<cl_program, clRetainProgram, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clRetainKernel, clReleaseKernel>;
using EventHandle = Handle<cl_event, clRetainEvent, clReleaseEvent>;

std::string device_string(cl_device_id device, cl_device_info what);
std::string platform_string(cl_platform_id platform, cl_platform_info what);
template <class T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  check(clGetDeviceInfo(device, what, sizeof value, &value, nullptr), "clGetDeviceInfo");
  return value;
}

// The kernels of one device: the embedded source built for it once, on the
// first request, with the compile time logged at debug level.
class ProgramCache {
 public:
  ProgramCache(cl_context context, cl_device_id device, std::string device_name)
      : context_(context), device_(device), device_name_(std::move(device_name)) {}
  // The built program; throws loom::Error with the build log on failure.
  cl_program program();
  // A new kernel object (each backend owns its own: setting arguments is not
  // thread-safe on a shared kernel).
  KernelHandle create_kernel(const char* name);

 private:
  cl_context context_;
  cl_device_id device_;
  std::string device_name_;
  std::mutex mutex_;
  ProgramHandle program_;
};

extern const char* const kKernelSource;  // generated from kernels/*.cl
// Compiler options defining the kernels' ids: " -DT_F32=0 ... -DOP_ADD=5 ..."
// from loom::DType and loom::Op (opencl_ops.cpp).
std::string kernel_defines();

}  // namespace loom::opencl
