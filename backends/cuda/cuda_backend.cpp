#include "cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "loom/error.h"
#include "loom/log.h"

namespace loom::cuda {
namespace {

// The CUDA buffer of t if it is this backend's device memory.
CudaBuffer* local_buffer(const CudaBackend& backend, const Tensor& t) {
  CudaBuffer* b = cuda_buffer_of(t);
  return b && &b->cuda_device() == &backend.cuda_device() ? b : nullptr;
}

void check_range(const Tensor& t, size_t offset, size_t size, const char* what) {
  if (!t.buffer)
    fail("{} tensor {}: it has no memory (not placed in a buffer)", what,
         tensor_label(t, TensorLabel::QuotedWithShape));
  if (offset > t.nbytes() || size > t.nbytes() - offset)
    fail("{} tensor {}: bytes [{}, {}) are outside its {} bytes", what, tensor_label(t), offset, offset + size,
         t.nbytes());
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool graphs_from_env() {
  const char* v = std::getenv("LOOM_CUDA_GRAPHS");
  return !(v && std::strcmp(v, "0") == 0);
}

// 64-bit mixing (splitmix64's finalizer) over everything a launch reads.
struct Hasher {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  void add(uint64_t v) {
    v += 0x9e3779b97f4a7c15ull + h;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    h = v ^ (v >> 31);
  }
  void add_ptr(const void* p) { add(reinterpret_cast<uintptr_t>(p)); }
  void add_tensor(const Tensor& t) {
    add_ptr(&t);
    add_ptr(t.data);
    add(static_cast<uint64_t>(t.type));
    for (int i = 0; i < kMaxDims; ++i) {
      add(static_cast<uint64_t>(t.ne[i]));
      add(t.nb[i]);
    }
  }
};

uint64_t graph_key(const Graph& graph) {
  Hasher h;
  h.add(graph.nodes().size());
  for (const Tensor* node : graph.nodes()) {
    h.add_tensor(*node);
    h.add(static_cast<uint64_t>(node->op));
    for (int32_t p : node->op_params) h.add(static_cast<uint32_t>(p));
    for (const Tensor* s : node->src) {
      if (s) h.add_tensor(*s);
      else h.add(0);
    }
  }
  return h.h;
}

// A point in a CUDA backend's stream; waiting on it from another CUDA
// backend (any device) orders the streams, otherwise the host waits.
class CudaEvent final : public Event {
 public:
  void record(Backend& backend) override {
    auto* b = dynamic_cast<CudaBackend*>(&backend);
    if (!b) {  // another kind of backend: its work is done once it synchronizes
      backend.synchronize();
      recorded_ = false;
      return;
    }
    const int ordinal = b->cuda_device().ordinal();
    if (!event_ || ordinal_ != ordinal) {
      event_ = create_event(ordinal, false);
      ordinal_ = ordinal;
    }
    DeviceGuard guard(ordinal);
    check(cudaEventRecord(event_.get(), b->stream()), "recording an event");
    recorded_ = true;
  }
  void wait(Backend& backend) override {
    if (!recorded_) return;
    if (auto* b = dynamic_cast<CudaBackend*>(&backend)) {
      DeviceGuard guard(b->cuda_device().ordinal());
      check(cudaStreamWaitEvent(b->stream(), event_.get(), 0), "waiting for an event");
    } else {
      synchronize();
    }
  }
  void synchronize() override {
    if (!recorded_) return;
    check(cudaEventSynchronize(event_.get()), "waiting for an event");
  }

 private:
  EventHandle event_;
  int ordinal_ = -1;
  bool recorded_ = false;
};

}  // namespace

// --- Scratch ------------------------------------------------------------------

StreamScratch::~StreamScratch() {
  int previous = -1;
  const bool switched =
      cudaGetDevice(&previous) == cudaSuccess && previous != ordinal_ && cudaSetDevice(ordinal_) == cudaSuccess;
  if (stream_) cudaStreamSynchronize(stream_);
  for (void* p : ptr_)
    if (p) cudaFree(p);
  if (switched) cudaSetDevice(previous);
}

void* StreamScratch::get(int slot, size_t bytes) {
  if (slot < 0 || slot >= kSlots) fail("{}: scratch slot {} does not exist (0..{})", device_name_, slot, kSlots - 1);
  if (bytes <= size_[slot] && ptr_[slot]) return ptr_[slot];
  if (capturing_) throw GrowDuringCapture{};
  // Whole MiB, so that slowly growing requests do not reallocate every time.
  const size_t want = std::max<size_t>((bytes + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1), size_t{1} << 20);
  DeviceGuard guard(ordinal_);
  if (ptr_[slot]) {
    // Kernels queued before may still read the old memory.
    check(cudaStreamSynchronize(stream_), "waiting before growing a scratch buffer");
    check(cudaFree(ptr_[slot]), "freeing a scratch buffer");
    ptr_[slot] = nullptr;
    size_[slot] = 0;
  }
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, want);
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    fail("{}: cannot allocate {} of scratch memory (slot {}): CUDA error {} ({}); {} free of {}", device_name_,
         human_bytes(want), slot, cudaGetErrorName(status), cudaGetErrorString(status), human_bytes(free),
         human_bytes(total));
  }
  ptr_[slot] = p;
  size_[slot] = want;
  ++generation_;
  return p;
}

// --- Backend ------------------------------------------------------------------

CudaBackend::CudaBackend(CudaDevice& device)
    : device_(device),
      stream_(create_stream(device.ordinal())),
      cublas_(create_cublas(device.ordinal(), stream_.get())),
      scratch_(device.ordinal(), std::string(device.name())),
      use_graphs_(graphs_from_env()) {
  scratch_.bind(stream_.get());
  try {
    init_device_memory();
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    if (errors_) cudaFree(errors_);
    if (cublas_workspace_) cudaFree(cublas_workspace_);
    throw;
  }
}

void CudaBackend::init_device_memory() {
  CudaDevice& device = device_;
  DeviceGuard guard(device.ordinal());
  const std::string what = fmt::format("creating the error buffer of {}", device.name());
  check(cudaMalloc(reinterpret_cast<void**>(&errors_), 4 * sizeof(int)), what.c_str());
  check(cudaMemsetAsync(errors_, 0, 4 * sizeof(int), stream_.get()), what.c_str());
  // cuBLAS gets its workspace now: allocating one inside a CUDA graph capture fails.
  const size_t workspace = device.info().cc >= 90 ? size_t{32} << 20 : size_t{4} << 20;
  if (cudaMalloc(&cublas_workspace_, workspace) == cudaSuccess) {
    check(cublas().set_workspace(cublas_.get(), cublas_workspace_, workspace), "setting the cuBLAS workspace");
  } else {
    cudaGetLastError();
    cublas_workspace_ = nullptr;
    log(LogLevel::Debug, "{}: no memory for a cuBLAS workspace; CUDA graphs may not capture", device.name());
  }
  // Peer access to the other devices, where the hardware allows it (copies
  // between devices go direct; cudaMemcpyPeer works without it too).
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess)
    for (int j = 0; j < count; ++j) {
      int can = 0;
      if (j == device.ordinal() || cudaDeviceCanAccessPeer(&can, device.ordinal(), j) != cudaSuccess || !can) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(j, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled)
        log(LogLevel::Debug, "{}: no peer access to CUDA{}: {}", device.name(), j, cudaGetErrorName(e));
    }
  cudaGetLastError();
  check(cudaStreamSynchronize(stream_.get()), what.c_str());
}

CudaBackend::~CudaBackend() {
  int previous = -1;
  const int ordinal = device_.ordinal();
  const bool switched =
      cudaGetDevice(&previous) == cudaSuccess && previous != ordinal && cudaSetDevice(ordinal) == cudaSuccess;
  // No throwing here (DeviceGuard throws): errors surface on the next call that can fail.
  cudaStreamSynchronize(stream_.get());
  graphs_.clear();
  if (errors_) cudaFree(errors_);
  cublas_.reset();  // before its workspace goes
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (switched) cudaSetDevice(previous);
}

int CudaBackend::add_error_label(const std::string& message) {
  auto [it, added] = label_index_.try_emplace(message, static_cast<int>(error_labels_.size()));
  if (added) error_labels_.push_back(message);
  return it->second;
}

LaunchContext CudaBackend::launch_context() {
  LaunchContext ctx;
  ctx.stream = stream_.get();
  ctx.cublas = cublas_.get();
  ctx.device = device_.ordinal();
  ctx.sm_count = device_.info().sm_count;
  ctx.cc = device_.info().cc;
  ctx.scratch = &scratch_;
  ctx.errors = errors_;
  ctx.add_error_label = [](void* owner, const std::string& message) {
    return static_cast<CudaBackend*>(owner)->add_error_label(message);
  };
  ctx.owner = this;
  return ctx;
}

void CudaBackend::launch(Tensor& node, const LaunchContext& ctx) {
  if (!launch_node(node, ctx))
    fail("{}: no kernel for op {} (tensor {})", device_.name(), op_name(node.op),
         tensor_label(node, TensorLabel::QuotedWithShape));
}

void CudaBackend::launch_all(Graph& graph) {
  const LaunchContext ctx = launch_context();
  for (Tensor* node : graph.nodes()) {
    if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
    launch(*node, ctx);
  }
  // Launch errors (bad configuration, no kernel image for this GPU) show now;
  // errors while running show at synchronize().
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw_cuda_error(e, fmt::format("launching a graph of {} nodes on {}", graph.size(), device_.name()).c_str());
}

void CudaBackend::compute(Graph& graph) {
  check_nodes(graph);
  DeviceGuard guard(device_.ordinal());
  if (use_graphs_ && compute_with_cuda_graph(graph)) return;
  launch_all(graph);
}

bool CudaBackend::compute_with_cuda_graph(Graph& graph) {
  const uint64_t key = graph_key(graph);
  if (graphs_.size() > 64 && !graphs_.count(&graph)) graphs_.clear();  // graphs come and go: keep few
  CachedGraph& g = graphs_[&graph];
  if (g.key != key || g.seen == 0) {  // new or changed: run plainly
    g.key = key;
    g.seen = 1;
    g.exec.reset();
    g.capture_failed = false;  // a new shape may capture where the old one could not
    return false;
  }
  if (g.capture_failed) return false;
  if (g.exec && g.scratch_generation != scratch_.generation()) g.exec.reset();  // scratch moved
  if (!g.exec) {
    // Second compute of a stable graph: capture it. The first one ran plainly,
    // so scratch memory has its size and cuBLAS its workspace.
    cudaStream_t s = stream_.get();
    cudaError_t status = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    if (status != cudaSuccess) {
      cudaGetLastError();
      g.capture_failed = true;
      log(LogLevel::Debug, "{}: cannot capture a CUDA graph: {}", device_.name(), cudaGetErrorName(status));
      return false;
    }
    bool grew = false;
    std::string error;
    scratch_.set_capturing(true);
    try {
      const LaunchContext ctx = launch_context();
      for (Tensor* node : graph.nodes()) {
        if (!op_has_kernel(node->op) || node->nelements() == 0) continue;
        launch(*node, ctx);
      }
    } catch (const StreamScratch::GrowDuringCapture&) {
      grew = true;
    } catch (const std::exception& e) {
      error = e.what();
    } catch (...) {
      error = "an unknown exception";
    }
    scratch_.set_capturing(false);
    cudaGraph_t captured = nullptr;
    status = cudaStreamEndCapture(s, &captured);
    const cudaError_t launch_status = cudaGetLastError();
    if (status == cudaSuccess) status = launch_status;
    if (grew || !error.empty() || status != cudaSuccess || !captured) {
      if (captured) cudaGraphDestroy(captured);
      cudaGetLastError();
      if (grew) {
        g.seen = 1;  // capture again on the next compute, with the grown scratch
        return false;
      }
      // The plain launch that follows reports a real error again.
      g.capture_failed = true;
      log(LogLevel::Debug, "{}: capturing a CUDA graph of {} nodes failed ({}); running it without", device_.name(),
          graph.size(), status != cudaSuccess ? cudaGetErrorName(status) : error.c_str());
      return false;
    }
    cudaGraphExec_t exec = nullptr;
    status = cudaGraphInstantiate(&exec, captured, 0);
    cudaGraphDestroy(captured);
    if (status != cudaSuccess) {
      cudaGetLastError();
      g.capture_failed = true;
      log(LogLevel::Debug, "{}: instantiating a CUDA graph failed ({}); running it without", device_.name(),
          cudaGetErrorName(status));
      return false;
    }
    g.exec = GraphExecHandle(exec, device_.ordinal());
    g.scratch_generation = scratch_.generation();
  }
  ++g.seen;
  check(cudaGraphLaunch(g.exec.get(), stream_.get()),
        fmt::format("launching a CUDA graph of {} nodes on {}", graph.size(), device_.name()).c_str());
  return true;
}

// Timing events around each node; the first event is recorded on an idle
// stream right after the host reads its clock, so device times map to host
// times through it.
bool CudaBackend::compute_timed(Graph& graph, std::vector<NodeTime>& times) {
  check_nodes(graph);
  DeviceGuard guard(device_.ordinal());
  synchronize();  // work queued before comes first
  std::vector<EventHandle> marks;
  std::vector<Tensor*> timed;
  for (Tensor* node : graph.nodes())
    if (op_has_kernel(node->op) && node->nelements() > 0) timed.push_back(node);
  marks.reserve(timed.size() + 1);
  for (size_t i = 0; i <= timed.size(); ++i) marks.push_back(cuda::create_event(device_.ordinal(), true));
  const LaunchContext ctx = launch_context();
  const int64_t submitted = steady_ns();
  check(cudaEventRecord(marks[0].get(), stream_.get()), "profiling: marking the start");
  for (size_t i = 0; i < timed.size(); ++i) {
    launch(*timed[i], ctx);
    check(cudaEventRecord(marks[i + 1].get(), stream_.get()), "profiling: marking a node's end");
  }
  synchronize();
  int64_t prev = 0;
  for (size_t i = 0; i < timed.size(); ++i) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, marks[0].get(), marks[i + 1].get()), "profiling: reading an event's time");
    const int64_t end = std::max(prev, static_cast<int64_t>(static_cast<double>(ms) * 1e6));
    times.push_back({timed[i], 0, submitted + prev, submitted + end});
    prev = end;
  }
  return true;
}

void CudaBackend::check_nodes(const Graph& graph) const {
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

void CudaBackend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  CudaBuffer* b = local_buffer(*this, t);
  if (!b) return Backend::set_tensor_async(t, data, offset, size);
  check_range(t, offset, size, "write to");
  if (size == 0) return;
  DeviceGuard guard(device_.ordinal());
  check(cudaMemcpyAsync(static_cast<char*>(t.data) + offset, data, size, cudaMemcpyHostToDevice, stream_.get()),
        fmt::format("writing {} bytes to tensor {} on {}", size, tensor_label(t), device_.name()).c_str());
}

void CudaBackend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  CudaBuffer* b = local_buffer(*this, t);
  if (!b) return Backend::get_tensor_async(t, data, offset, size);
  check_range(t, offset, size, "read from");
  if (size == 0) return;
  DeviceGuard guard(device_.ordinal());
  check(cudaMemcpyAsync(data, static_cast<const char*>(t.data) + offset, size, cudaMemcpyDeviceToHost, stream_.get()),
        fmt::format("reading {} bytes from tensor {} on {}", size, tensor_label(t), device_.name()).c_str());
}

bool CudaBackend::copy_tensor_async(const Tensor& src, Tensor& dst) {
  if (src.type != dst.type || src.ne != dst.ne || src.nbytes() != dst.nbytes()) return false;
  if (!src.buffer || !dst.buffer) return false;
  const size_t n = src.nbytes();
  if (n == 0) return true;
  CudaBuffer* sb = cuda_buffer_of(src);
  CudaBuffer* db = cuda_buffer_of(dst);
  if (db && &db->cuda_device() == &device_ && src.buffer->is_host()) {
    set_tensor_async(dst, src.data, 0, n);
    return true;
  }
  if (sb && &sb->cuda_device() == &device_ && dst.buffer->is_host()) {
    get_tensor_async(src, dst.data, 0, n);
    return true;
  }
  // Between CUDA buffers, one of them this device's: the caller has ordered
  // the other device's work before this stream (events).
  if (!sb || !db || (&sb->cuda_device() != &device_ && &db->cuda_device() != &device_)) return false;
  const auto* s = static_cast<const char*>(src.data);
  const auto* d = static_cast<const char*>(dst.data);
  if (sb == db && s < d + n && d < s + n) return false;  // overlapping ranges of one buffer
  DeviceGuard guard(device_.ordinal());
  const std::string what = fmt::format("copying tensor {} ({} bytes) from {} to {}", tensor_label(src), n,
                                       sb->cuda_device().name(), db->cuda_device().name());
  if (sb->ordinal() == db->ordinal())
    check(cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, stream_.get()), what.c_str());
  else
    check(cudaMemcpyPeerAsync(dst.data, db->ordinal(), src.data, sb->ordinal(), n, stream_.get()), what.c_str());
  return true;
}

void CudaBackend::synchronize() {
  DeviceGuard guard(device_.ordinal());
  check(cudaStreamSynchronize(stream_.get()), fmt::format("waiting for {}", device_.name()).c_str());
  check_errors();
}

void CudaBackend::check_errors() {
  if (error_labels_.empty()) return;
  int err[4] = {};
  check(cudaMemcpyAsync(err, errors_, sizeof err, cudaMemcpyDeviceToHost, stream_.get()), "reading the error buffer");
  check(cudaStreamSynchronize(stream_.get()), "reading the error buffer");
  if (err[0] == 0) {
    // Labels are kept for captured CUDA graphs; forget them when there are many and none is cached.
    if (error_labels_.size() > 4096 &&
        std::none_of(graphs_.begin(), graphs_.end(), [](const auto& g) { return bool(g.second.exec); })) {
      error_labels_.clear();
      label_index_.clear();
    }
    return;
  }
  check(cudaMemsetAsync(errors_, 0, sizeof err, stream_.get()), "clearing the error buffer");
  check(cudaStreamSynchronize(stream_.get()), "clearing the error buffer");
  const std::string what =
      err[1] >= 0 && static_cast<size_t>(err[1]) < error_labels_.size() ? error_labels_[err[1]] : "a kernel";
  fail("{}: {}: row index {} is out of range", device_.name(), what, err[2]);
}

std::unique_ptr<Event> CudaBackend::create_event() { return std::make_unique<CudaEvent>(); }

}  // namespace loom::cuda
