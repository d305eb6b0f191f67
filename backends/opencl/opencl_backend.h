// The OpenCL backend: enqueues one kernel per graph node on its device's
// in-order queue and returns; synchronize() waits and reports bad data seen
// by kernels (row indices out of range), naming the node. Async copies and
// events use the same queue, so they order with compute.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "loom/backend.h"
#include "opencl_device.h"

namespace loom::opencl {

class OpenClBackend final : public Backend {
 public:
  explicit OpenClBackend(OpenClDevice& device);
  Device& device() const override { return device_; }
  void compute(Graph& graph) override;
  // Runs the graph on the device's profiling queue with a marker between
  // nodes and times each node from the device's clock (lane 0).
  bool compute_timed(Graph& graph, std::vector<NodeTime>& times) override;
  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) override;
  bool copy_tensor_async(const Tensor& src, Tensor& dst) override;
  void synchronize() override;
  std::unique_ptr<Event> create_event() override;

  OpenClDevice& cl_device() const { return device_; }
  // The device's queue (its profiling queue while compute_timed runs).
  cl_command_queue queue() const { return active_queue_ ? active_queue_ : device_.queue(); }

  // Used by the op launchers (opencl_ops.cpp).
  cl_kernel kernel(const char* name);
  cl_mem error_buffer() const { return errors_.get(); }
  // Registers a message for a kernel to report (with the bad value); returns its label.
  int add_error_label(std::string message);

 private:
  void check_nodes(const Graph& graph) const;
  void enqueue_node(Tensor& node);  // opencl_ops.cpp
  void check_errors();

  OpenClDevice& device_;
  std::unordered_map<std::string, KernelHandle> kernels_;
  MemHandle errors_;  // int[4]: flag, label, value, unused
  std::vector<std::string> error_labels_;
  cl_command_queue active_queue_ = nullptr;  // set by compute_timed only
};

}  // namespace loom::opencl
