#include "opencl_backend.h"

#include <algorithm>
#include <chrono>

#include "loom/error.h"

namespace loom::opencl {
namespace {

// The OpenCL buffer of t if it is this backend's device memory.
OpenClBuffer* local_buffer(const OpenClBackend& backend, const Tensor& t) {
  OpenClBuffer* b = opencl_buffer_of(t);
  return b && &b->cl_device() == &backend.cl_device() ? b : nullptr;
}

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (!t.buffer)
    fail("{} tensor {}: it has no memory (not placed in a buffer)", what,
         tensor_label(t, TensorLabel::QuotedWithShape));
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    fail("{} tensor {}: bytes [{}, {}) are outside its {} bytes", what, tensor_label(t), offset, offset + size,
         t.nbytes());
}

// A marker in a queue; waiting on it in another queue of the same context
// orders the two, otherwise the host waits.
class OpenClEvent final : public Event {
 public:
  void record(Backend& backend) override {
    auto* b = dynamic_cast<OpenClBackend*>(&backend);
    if (!b) {  // another kind of backend: its work is done once it synchronizes
      backend.synchronize();
      event_ = EventHandle();
      return;
    }
    cl_event e = nullptr;
    check(clEnqueueMarkerWithWaitList(b->queue(), 0, nullptr, &e), "recording an event");
    event_ = EventHandle(e);
    context_ = b->cl_device().context();
  }
  void wait(Backend& backend) override {
    if (!event_) return;
    auto* b = dynamic_cast<OpenClBackend*>(&backend);
    if (b && b->cl_device().context() == context_) {
      cl_event e = event_.get();
      check(clEnqueueBarrierWithWaitList(b->queue(), 1, &e, nullptr), "waiting for an event");
    } else {
      synchronize();
    }
  }
  void synchronize() override {
    if (!event_) return;
    cl_event e = event_.get();
    check(clWaitForEvents(1, &e), "waiting for an event");
  }

 private:
  EventHandle event_;
  cl_context context_ = nullptr;
};

}  // namespace

OpenClBackend::OpenClBackend(OpenClDevice& device) : device_(device) {
  cl_int status = CL_SUCCESS;
  errors_ = MemHandle(clCreateBuffer(device.context(), CL_MEM_READ_WRITE, 4 * sizeof(cl_int), nullptr, &status));
  check(status, fmt::format("creating the error buffer of {}", device.name()));
  const cl_int zero[4] = {};
  check(clEnqueueWriteBuffer(queue(), errors_.get(), CL_TRUE, 0, sizeof zero, zero, 0, nullptr, nullptr),
        "clearing the error buffer");
}

cl_kernel OpenClBackend::kernel(const char* name) {
  auto it = kernels_.find(name);
  if (it == kernels_.end()) it = kernels_.emplace(name, device_.programs().create_kernel(name)).first;
  return it->second.get();
}

int OpenClBackend::add_error_label(std::string message) {
  error_labels_.push_back(std::move(message));
  return static_cast<int>(error_labels_.size() - 1);
}

void OpenClBackend::compute(Graph& graph) {
  check_nodes(graph);
  for (Tensor* node : graph.nodes()) {
    if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
    enqueue_node(*node);
  }
  check(clFlush(queue()), fmt::format("submitting a graph to {}", device_.name()));
}

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

cl_ulong event_end(cl_event e) {
  cl_ulong t = 0;
  const cl_int status = clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof t, &t, nullptr);
  return status == CL_SUCCESS ? t : 0;
}

}  // namespace

// The nodes are queued behind a gate (a user event) with a marker after
// each, then the gate opens and the device runs them back to back: node i
// ran from marker i-1's end to marker i's (its kernels and the device's
// gaps between them). Device times become host times through the gate:
// marker 0 ends when the host opens it.
bool OpenClBackend::compute_timed(Graph& graph, std::vector<NodeTime>& times) {
  check_nodes(graph);
  synchronize();  // copies queued on the main queue come first
  cl_command_queue q = device_.profiling_queue();
  cl_int status = CL_SUCCESS;
  EventHandle gate(clCreateUserEvent(device_.context(), &status));
  check(status, "creating a user event for profiling");
  struct Restore {
    cl_command_queue& q;
    cl_event gate;
    ~Restore() {
      q = nullptr;
      clSetUserEventStatus(gate, CL_COMPLETE);  // no-op once open; unblocks the queue after an error
    }
  } restore{active_queue_, gate.get()};
  active_queue_ = q;
  std::vector<EventHandle> marks;
  std::vector<const Tensor*> timed;
  const auto mark = [&](cl_uint n_wait, const cl_event* wait) {
    cl_event e = nullptr;
    check(clEnqueueMarkerWithWaitList(q, n_wait, wait, &e), "profiling: marking a node's end");
    marks.emplace_back(e);
  };
  cl_event g = gate.get();
  mark(1, &g);
  for (Tensor* node : graph.nodes()) {
    if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
    enqueue_node(*node);
    mark(0, nullptr);
    timed.push_back(node);
  }
  check(clFlush(q), fmt::format("submitting a graph to {}", device_.name()));
  const int64_t opened = steady_ns();
  check(clSetUserEventStatus(gate.get(), CL_COMPLETE), "opening the profiling gate");
  check(clFinish(q), fmt::format("waiting for {}", device_.name()));
  active_queue_ = nullptr;
  check_errors();
  const cl_ulong zero = event_end(marks[0].get());
  if (zero == 0) return false;  // no profiling information from this driver
  cl_ulong prev = zero;
  for (size_t i = 0; i < timed.size(); ++i) {
    const cl_ulong end = std::max(prev, event_end(marks[i + 1].get()));
    times.push_back({timed[i], 0, opened + static_cast<int64_t>(prev - zero), opened + static_cast<int64_t>(end - zero)});
    prev = end;
  }
  return true;
}

void OpenClBackend::check_nodes(const Graph& graph) const {
  for (const Tensor* node : graph.nodes()) {
    if (!device_.supports_op(*node))
      fail("{}: cannot compute op {} (tensor {}): unsupported types or layout", device_.name(), op_name(node->op),
           tensor_label(*node, TensorLabel::QuotedWithShape));
    // Kernels read and write only memory this device can use.
    if (node->buffer && !device_.supports_buffer_type(node->buffer->type()))
      fail("{}: tensor {} ({}) is in {} memory, which {} cannot write", device_.name(), tensor_label(*node),
           op_name(node->op), node->buffer->type().name(), device_.name());
    for (int i = 0; i < kMaxSrc; ++i) {
      const Tensor* s = node->src[i];
      if (s && s->buffer && !device_.supports_operand(*node, i, s->buffer->type()))
        fail("{}: operand {} of {} ({}) is in {} memory, which {} cannot read", device_.name(), tensor_label(*s),
             tensor_label(*node), op_name(node->op), s->buffer->type().name(), device_.name());
    }
    if (!node->data && node->nbytes() > 0)
      fail("{}: tensor {} has no memory; allocate the graph first", device_.name(),
           tensor_label(*node, TensorLabel::QuotedWithShape));
    for (const Tensor* s : node->src)
      if (s && !s->data && s->nbytes() > 0)
        fail("{}: operand {} of {} has no memory", device_.name(), tensor_label(*s), tensor_label(*node));
  }
}

void OpenClBackend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  OpenClBuffer* b = local_buffer(*this, t);
  if (!b) return Backend::set_tensor_async(t, data, offset, size);
  check_range(t, offset, size, "write to");
  if (size == 0) return;
  check(clEnqueueWriteBuffer(queue(), b->mem(), CL_FALSE, b->offset_in(t) + offset, size, data, 0, nullptr, nullptr),
        fmt::format("writing {} bytes to tensor {} on {}", size, tensor_label(t), device_.name()));
}

void OpenClBackend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  OpenClBuffer* b = local_buffer(*this, t);
  if (!b) return Backend::get_tensor_async(t, data, offset, size);
  check_range(t, offset, size, "read from");
  if (size == 0) return;
  check(clEnqueueReadBuffer(queue(), b->mem(), CL_FALSE, b->offset_in(t) + offset, size, data, 0, nullptr, nullptr),
        fmt::format("reading {} bytes from tensor {} on {}", size, tensor_label(t), device_.name()));
}

bool OpenClBackend::copy_tensor_async(const Tensor& src, Tensor& dst) {
  if (src.type != dst.type || src.ne != dst.ne || src.nbytes() != dst.nbytes()) return false;
  if (!src.buffer || !dst.buffer) return false;
  const size_t n = src.nbytes();
  if (n == 0) return true;
  OpenClBuffer* sb = opencl_buffer_of(src);
  OpenClBuffer* db = opencl_buffer_of(dst);
  if (db && &db->cl_device() == &device_ && src.buffer->is_host()) {
    set_tensor_async(dst, src.data, 0, n);
    return true;
  }
  if (sb && &sb->cl_device() == &device_ && dst.buffer->is_host()) {
    get_tensor_async(src, dst.data, 0, n);
    return true;
  }
  if (!sb || !db || sb->cl_device().context() != device_.context() || db->cl_device().context() != device_.context())
    return false;
  if (sb == db && sb->offset_in(src) < db->offset_in(dst) + n && db->offset_in(dst) < sb->offset_in(src) + n)
    return false;  // overlapping ranges of one cl_mem
  // Work queued on the other device's queue comes first.
  std::vector<cl_event> waits;
  for (OpenClDevice* other : {&sb->cl_device(), &db->cl_device()}) {
    if (other->queue() == queue()) continue;
    cl_event e = nullptr;
    check(clEnqueueMarkerWithWaitList(other->queue(), 0, nullptr, &e), "ordering a copy between devices");
    waits.push_back(e);
    check(clFlush(other->queue()), "ordering a copy between devices");
  }
  const cl_int status = clEnqueueCopyBuffer(queue(), sb->mem(), db->mem(), sb->offset_in(src), db->offset_in(dst), n,
                                            static_cast<cl_uint>(waits.size()), waits.empty() ? nullptr : waits.data(),
                                            nullptr);
  for (cl_event e : waits) clReleaseEvent(e);
  check(status, fmt::format("copying tensor {} ({} bytes) from {} to {}", tensor_label(src), n, sb->cl_device().name(),
                            db->cl_device().name()));
  return true;
}

void OpenClBackend::synchronize() {
  check(clFinish(queue()), fmt::format("waiting for {}", device_.name()));
  check_errors();
}

void OpenClBackend::check_errors() {
  if (error_labels_.empty()) return;
  cl_int err[4] = {};
  check(clEnqueueReadBuffer(queue(), errors_.get(), CL_TRUE, 0, sizeof err, err, 0, nullptr, nullptr),
        "reading the error buffer");
  std::vector<std::string> labels = std::move(error_labels_);
  error_labels_.clear();
  if (err[0] == 0) return;
  const cl_int zero[4] = {};
  check(clEnqueueWriteBuffer(queue(), errors_.get(), CL_TRUE, 0, sizeof zero, zero, 0, nullptr, nullptr),
        "clearing the error buffer");
  const std::string what = err[1] >= 0 && static_cast<size_t>(err[1]) < labels.size() ? labels[err[1]] : "a kernel";
  fail("{}: {}: row index {} is out of range", device_.name(), what, err[2]);
}

std::unique_ptr<Event> OpenClBackend::create_event() { return std::make_unique<OpenClEvent>(); }

}  // namespace loom::opencl
