// The CUDA backend: one non-blocking stream per backend with a cuBLAS handle
// bound to it; compute() queues each node's kernels (launch_node,
// kernels/cuda_ops.cu) and returns; synchronize() waits and reports bad data
// seen by kernels (row indices out of range), naming the node. Async copies
// and events use the same stream, so they order with compute.
//
// CUDA graphs (LOOM_CUDA_GRAPHS, on unless "0"): when the same Graph object
// is computed again unchanged (same nodes, shapes, strides, data pointers and
// op parameters), its second compute is captured into a CUDA graph and later
// ones replay it with one launch. Any change runs the nodes plainly again
// (and captures once the graph is stable again); a graph whose capture fails
// runs plainly from then on.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_device.h"
#include "cuda_runtime.h"
#include "loom/backend.h"

namespace loom::cuda {

// Grow-only device memory for temporaries, one allocation per slot.
class StreamScratch final : public Scratch {
 public:
  StreamScratch(int ordinal, std::string device_name) : ordinal_(ordinal), device_name_(std::move(device_name)) {}
  ~StreamScratch() override;
  void bind(cudaStream_t stream) { stream_ = stream; }
  void* get(int slot, size_t bytes) override;
  // While set, get() must not grow (a CUDA graph is being captured): it
  // throws GrowDuringCapture instead.
  void set_capturing(bool on) { capturing_ = on; }
  // Bumped whenever a slot moves: CUDA graphs captured before hold old pointers.
  uint64_t generation() const { return generation_; }
  struct GrowDuringCapture {};

 private:
  int ordinal_;
  std::string device_name_;
  cudaStream_t stream_ = nullptr;
  std::array<void*, kSlots> ptr_{};
  std::array<size_t, kSlots> size_{};
  bool capturing_ = false;
  uint64_t generation_ = 0;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(CudaDevice& device);
  ~CudaBackend() override;
  Device& device() const override { return device_; }
  void compute(Graph& graph) override;
  // Runs the graph with a timing event after each node and times each node
  // from the device's clock (lane 0).
  bool compute_timed(Graph& graph, std::vector<NodeTime>& times) override;
  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) override;
  bool copy_tensor_async(const Tensor& src, Tensor& dst) override;
  void synchronize() override;
  std::unique_ptr<Event> create_event() override;

  CudaDevice& cuda_device() const { return device_; }
  cudaStream_t stream() const { return stream_.get(); }
  // Registers a message for a kernel to report (with the bad value); returns
  // its label. Equal messages share a label, so a captured CUDA graph's labels
  // stay valid for its replays.
  int add_error_label(const std::string& message);

 private:
  struct CachedGraph {
    uint64_t key = 0;
    int seen = 0;              // computes in a row with this key
    bool capture_failed = false;
    uint64_t scratch_generation = 0;
    GraphExecHandle exec;
  };

  void init_device_memory();  // error slot, cuBLAS workspace, peer access
  void check_nodes(const Graph& graph) const;
  LaunchContext launch_context();
  void launch(Tensor& node, const LaunchContext& ctx);
  void launch_all(Graph& graph);
  // Whether the graph ran as (or was captured into) a CUDA graph.
  bool compute_with_cuda_graph(Graph& graph);
  void check_errors();

  CudaDevice& device_;
  StreamHandle stream_;
  CublasHandle cublas_;
  StreamScratch scratch_;
  void* cublas_workspace_ = nullptr;
  int* errors_ = nullptr;  // device memory, int[4]: flag, label, value, unused
  std::vector<std::string> error_labels_;
  std::unordered_map<std::string, int> label_index_;
  bool use_graphs_ = true;
  std::unordered_map<const Graph*, CachedGraph> graphs_;
};

}  // namespace loom::cuda
