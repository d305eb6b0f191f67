// The seam between the CUDA backend's host side (cuda_device.cpp,
// cuda_backend.cpp: plain C++ that may use fmt and loom::Error) and its
// kernels (kernels/*.cu, compiled by nvcc, which cannot include fmt): what
// a node's launcher gets, and the functions each side provides to the other.
// Launchers queue work on ctx.stream and return; they never synchronize.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "loom/tensor.h"

namespace loom::cuda {

// Device memory for temporaries (mul_mat's F16 copies of its operands),
// owned by one backend and used only on its stream: get() returns at least
// `bytes`, valid until the next get() on the same slot. It grows and never
// shrinks while the backend lives; a graph being captured must not make it
// grow (the backend warms it up first). Implemented by the host side.
class Scratch {
 public:
  static constexpr int kSlots = 2;  // two temporaries at once (mul_mat: a and b)
  virtual ~Scratch() = default;
  virtual void* get(int slot, size_t bytes) = 0;
};

// What a launcher needs besides the node.
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;  // bound to `stream`
  int device = 0;                   // CUDA device ordinal
  int sm_count = 1;                 // multiprocessors
  int cc = 0;                       // compute capability, 10 * major + minor (90 on an H200)
  Scratch* scratch = nullptr;
  // Device memory: int[4] {flag, label, value, unused}. A kernel that meets
  // bad data (a row index out of range) calls report_error (common.cuh); the
  // backend reads it after synchronizing and names the node by its label.
  int* errors = nullptr;
  // Registers a message for a kernel to report; returns its label.
  int (*add_error_label)(void* owner, const std::string& message) = nullptr;
  void* owner = nullptr;
  int error_label(const std::string& message) const { return add_error_label(owner, message); }
};

// --- Provided by the kernels (kernels/*.cu) --------------------------------

// Whether a kernel exists for this node's op, types and layout (reads only
// op, op params, types, shapes and strides, never data).
bool kernel_supports(const Tensor& node);
// Queues the node's kernels. Operands and result are in this device's
// memory (tensor.data is a device pointer). Returns false, having queued
// nothing, when kernel_supports(node) is false.
bool launch_node(const Tensor& node, const LaunchContext& ctx);

// --- Provided by the host side (cuda_runtime.cpp) ---------------------------

// cuBLAS, opened (dlopen) when the first backend needs it rather than
// linked: libcublasLt's static initializers cost every process that links
// it ~0.15 s at start, on machines with a GPU or without one. The members
// are the library's own functions (cublas_v2.h's names, _v2 where it has one).
struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode;
  decltype(&cublasSetMathMode) set_math_mode;
  // The int-sized overload (C++ also declares one with 64-bit sizes).
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long int, const void*,
                                            cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                            long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusName) get_status_name;
  decltype(&cublasGetStatusString) get_status_string;
};
// The loaded library; throws loom::Error naming the library and the
// loader's reason when it cannot be opened or lacks a function.
const CublasApi& cublas();

// Throws loom::Error: "CUDA error <name> (<string>) while <what>".
[[noreturn]] void throw_cuda_error(cudaError_t status, const char* what);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* what);

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw_cuda_error(status, what);
}
inline void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, what);
}

}  // namespace loom::cuda
