#include "opencl_runtime.h"

#include <chrono>
#include <vector>

#include "loom/error.h"
#include "loom/log.h"

namespace loom::opencl {

std::string_view status_name(cl_int status) {
  switch (status) {
#define LOOM_CL_STATUS(x) \
  case x: return #x;
    LOOM_CL_STATUS(CL_SUCCESS)
    LOOM_CL_STATUS(CL_DEVICE_NOT_FOUND)
    LOOM_CL_STATUS(CL_DEVICE_NOT_AVAILABLE)
    LOOM_CL_STATUS(CL_COMPILER_NOT_AVAILABLE)
    LOOM_CL_STATUS(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    LOOM_CL_STATUS(CL_OUT_OF_RESOURCES)
    LOOM_CL_STATUS(CL_OUT_OF_HOST_MEMORY)
    LOOM_CL_STATUS(CL_MEM_COPY_OVERLAP)
    LOOM_CL_STATUS(CL_BUILD_PROGRAM_FAILURE)
    LOOM_CL_STATUS(CL_MAP_FAILURE)
    LOOM_CL_STATUS(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    LOOM_CL_STATUS(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    LOOM_CL_STATUS(CL_INVALID_VALUE)
    LOOM_CL_STATUS(CL_INVALID_DEVICE_TYPE)
    LOOM_CL_STATUS(CL_INVALID_PLATFORM)
    LOOM_CL_STATUS(CL_INVALID_DEVICE)
    LOOM_CL_STATUS(CL_INVALID_CONTEXT)
    LOOM_CL_STATUS(CL_INVALID_QUEUE_PROPERTIES)
    LOOM_CL_STATUS(CL_INVALID_COMMAND_QUEUE)
    LOOM_CL_STATUS(CL_INVALID_HOST_PTR)
    LOOM_CL_STATUS(CL_INVALID_MEM_OBJECT)
    LOOM_CL_STATUS(CL_INVALID_BUFFER_SIZE)
    LOOM_CL_STATUS(CL_INVALID_PROGRAM)
    LOOM_CL_STATUS(CL_INVALID_PROGRAM_EXECUTABLE)
    LOOM_CL_STATUS(CL_INVALID_KERNEL_NAME)
    LOOM_CL_STATUS(CL_INVALID_KERNEL)
    LOOM_CL_STATUS(CL_INVALID_ARG_INDEX)
    LOOM_CL_STATUS(CL_INVALID_ARG_VALUE)
    LOOM_CL_STATUS(CL_INVALID_ARG_SIZE)
    LOOM_CL_STATUS(CL_INVALID_KERNEL_ARGS)
    LOOM_CL_STATUS(CL_INVALID_WORK_DIMENSION)
    LOOM_CL_STATUS(CL_INVALID_WORK_GROUP_SIZE)
    LOOM_CL_STATUS(CL_INVALID_WORK_ITEM_SIZE)
    LOOM_CL_STATUS(CL_INVALID_GLOBAL_OFFSET)
    LOOM_CL_STATUS(CL_INVALID_EVENT_WAIT_LIST)
    LOOM_CL_STATUS(CL_INVALID_EVENT)
    LOOM_CL_STATUS(CL_INVALID_OPERATION)
    LOOM_CL_STATUS(CL_INVALID_GLOBAL_WORK_SIZE)
    LOOM_CL_STATUS(CL_INVALID_BUILD_OPTIONS)
#undef LOOM_CL_STATUS
    default: return "unknown OpenCL status";
  }
}

void check(cl_int status, std::string_view what) {
  if (status != CL_SUCCESS) fail("OpenCL: {} failed: {} ({})", what, status_name(status), status);
}

std::string device_string(cl_device_id device, cl_device_info what) {
  size_t n = 0;
  check(clGetDeviceInfo(device, what, 0, nullptr, &n), "clGetDeviceInfo");
  std::string s(n, '\0');
  check(clGetDeviceInfo(device, what, n, s.data(), nullptr), "clGetDeviceInfo");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id platform, cl_platform_info what) {
  size_t n = 0;
  check(clGetPlatformInfo(platform, what, 0, nullptr, &n), "clGetPlatformInfo");
  std::string s(n, '\0');
  check(clGetPlatformInfo(platform, what, n, s.data(), nullptr), "clGetPlatformInfo");
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

cl_program ProgramCache::program() {
  std::lock_guard lock(mutex_);
  if (program_) return program_.get();
  const auto start = std::chrono::steady_clock::now();
  cl_int status = CL_SUCCESS;
  const char* source = kKernelSource;
  ProgramHandle program(clCreateProgramWithSource(context_, 1, &source, nullptr, &status));
  check(status, fmt::format("creating the kernel program for {}", device_name_));
  std::string options = "-cl-std=CL1.2" + kernel_defines();
  // Division and sqrt as exact as the CPU's, where the device can.
  const auto fp = device_value<cl_device_fp_config>(device_, CL_DEVICE_SINGLE_FP_CONFIG);
  if (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) options += " -cl-fp32-correctly-rounded-divide-sqrt";
  status = clBuildProgram(program.get(), 1, &device_, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS) {
    std::string build_log = "(no build log)";
    size_t n = 0;
    if (clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) == CL_SUCCESS && n > 1) {
      build_log.assign(n, '\0');
      clGetProgramBuildInfo(program.get(), device_, CL_PROGRAM_BUILD_LOG, n, build_log.data(), nullptr);
    }
    fail("OpenCL: building the kernels for {} failed: {}\n{}", device_name_, status_name(status), build_log);
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log(LogLevel::Debug, "OpenCL: compiled the kernels for {} in {:.1f} ms", device_name_, ms);
  program_ = std::move(program);
  return program_.get();
}

KernelHandle ProgramCache::create_kernel(const char* name) {
  cl_program p = program();
  cl_int status = CL_SUCCESS;
  KernelHandle k(clCreateKernel(p, name, &status));
  check(status, fmt::format("creating kernel {} for {}", name, device_name_));
  return k;
}

}  // namespace loom::opencl
