// The backend interfaces (see DESIGN.md for the vocabulary):
//   Device      one piece of hardware; says what it can run and which memory it can use
//   BufferType  how and where memory is allocated
//   Buffer      one allocation of a buffer type; places tensors and moves their bytes
//   Backend     an execution stream on a device: computes graphs, async copies
//   Event       a point in a backend's stream that others can wait for
// Optional members have defaults here, documented where declared.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/graph.h"
#include "loom/tensor.h"

namespace loom {

class Backend;
class Buffer;
class Device;

enum class DeviceType { CPU, GPU, IGPU, ACCEL };
std::string_view device_type_name(DeviceType type);

struct DeviceCaps {
  bool async = false;                 // async set/get/copy on its backends
  bool events = false;                // create_event works
  bool host_buffer = false;           // host_buffer_type() is not null
  bool buffer_from_host_ptr = false;  // buffer_from_host_ptr works
};

struct MemoryInfo {
  size_t free = 0;
  size_t total = 0;
};

enum class BufferUsage { Any, Weights, Compute };

class BufferType {
 public:
  virtual ~BufferType() = default;
  virtual std::string_view name() const = 0;
  // Allocates `size` bytes. A zero-size request is handled here, once, for
  // every type: it returns an empty buffer that can place zero-byte tensors.
  // Failure throws loom::Error naming the type and the size.
  std::shared_ptr<Buffer> alloc(size_t size);
  virtual size_t alignment() const = 0;
  // Largest single allocation (default: unlimited).
  virtual size_t max_size() const { return std::numeric_limits<size_t>::max(); }
  // Bytes a tensor needs in this type (default: nbytes; may add padding).
  virtual size_t alloc_size(const Tensor& t) const;
  // Host memory: tensor data pointers can be dereferenced by the CPU.
  virtual bool is_host() const = 0;
  // Device whose memory this is (null for types not bound to one device).
  virtual Device* device() const = 0;
  // Weight layout preference, for types that store a weight in their own
  // layout (CPU_Repack): whether a weight used as src0 of `node` should live
  // here because the device runs `node` faster so. Like Device::supports_op it
  // reads only op, types and shapes, never memory. Whether the device can read
  // the weight there at all is Device::supports_operand's answer; a loader
  // asks both before it prefers such a type to the default one (default: true,
  // any use).
  virtual bool supports_op(const Tensor& node) const {
    (void)node;
    return true;
  }

 protected:
  virtual std::shared_ptr<Buffer> alloc_impl(size_t size) = 0;  // size > 0
};

class Buffer : public std::enable_shared_from_this<Buffer> {
 public:
  Buffer(BufferType& type, size_t size) : type_(&type), size_(size) {}
  virtual ~Buffer();  // returns its bytes to its device's count (Device::allocated_bytes)
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  BufferType& type() const { return *type_; }
  size_t size() const { return size_; }
  bool is_host() const { return type_->is_host(); }
  BufferUsage usage() const { return usage_; }
  void set_usage(BufferUsage usage) { usage_ = usage; }

  // Start address: a real pointer for host memory, an opaque non-null
  // address otherwise (tensor data = base + offset).
  virtual void* base() = 0;

  // Places `t` at `offset`: bounds-checked, then init_tensor. For a view,
  // use place_view instead.
  void place(Tensor& t, size_t offset);
  // Gives a view the memory of its view_src (which must be placed).
  static void place_view(Tensor& view);

  // Called for every tensor placed in this buffer, views too (default: nothing).
  virtual void init_tensor(Tensor& t) { (void)t; }
  virtual void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) = 0;
  virtual void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) = 0;
  virtual void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) = 0;
  // Copies src (in any buffer) into dst (in this buffer) without going through
  // the host; returns false when it cannot (default), and the caller stages.
  virtual bool copy_tensor(const Tensor& src, Tensor& dst) {
    (void)src, (void)dst;
    return false;
  }
  virtual void clear(uint8_t value) = 0;

  size_t offset_of(const Tensor& t) const;

 private:
  friend class BufferType;
  BufferType* type_;
  size_t size_;
  BufferUsage usage_ = BufferUsage::Any;
  Device* charged_ = nullptr;  // the device whose count holds size_ (set by BufferType::alloc)
};

class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Backend& backend) = 0;  // marks the backend's current point
  virtual void wait(Backend& backend) = 0;    // backend's later work waits for it
  virtual void synchronize() = 0;             // the host waits for it
};

// One interval of work on one node, for a profiler (Backend::compute_timed).
struct NodeTime {
  const Tensor* node = nullptr;
  int lane = 0;              // the thread (CPU) or queue that ran it: one row in a trace
  int64_t start_ns = 0;      // std::chrono::steady_clock, nanoseconds since its epoch
  int64_t end_ns = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device& device() const = 0;
  virtual std::string_view name() const;  // default: the device's name

  // Runs every node of the graph; may return before it finishes on async
  // backends (call synchronize). Throws loom::Error on unsupported nodes.
  virtual void compute(Graph& graph) = 0;
  // Profiling (optional): runs the graph as compute does, waits until it has
  // finished, and appends to `times` the intervals in which each node ran (a
  // node that several threads share has one per thread). Returns false when
  // the backend cannot time single nodes (default: compute, synchronize,
  // append nothing); the caller then times the graph as a whole. Backends
  // check for profiling once per compute, so compute() itself pays nothing.
  virtual bool compute_timed(Graph& graph, std::vector<NodeTime>& times) {
    (void)times;
    compute(graph);
    synchronize();
    return false;
  }

  // Defaults run synchronously through the tensor's buffer.
  virtual void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size);
  virtual void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size);
  // Copies src into dst on this backend's stream; false if not possible (default).
  virtual bool copy_tensor_async(const Tensor& src, Tensor& dst) {
    (void)src, (void)dst;
    return false;
  }
  // True when set_tensor_async and copy_tensor_async take the bytes of a
  // host source before they return, so that the caller may reuse that
  // memory at once (a remote device copies them into its next request);
  // else the source must stay until the backend synchronizes (default).
  virtual bool takes_host_bytes_at_once() const { return false; }
  virtual void synchronize() {}
  // Null unless the device reports caps().events.
  virtual std::unique_ptr<Event> create_event() { return nullptr; }
  // Threads used for compute (backends without a pool ignore it).
  virtual void set_n_threads(int n) { (void)n; }
  // A hint that no work comes for a while (the scheduler's next split runs
  // on another device): threads that poll for work go to sleep now instead
  // of spinning on cores that device may need (default: nothing).
  virtual void idle() {}
};

// The most compute threads a backend starts (llama.cpp's GGML_MAX_N_THREADS):
// more fail with an Error instead of std::system_error from thread creation.
inline constexpr int kMaxThreads = 512;

// How long idle compute threads poll for work before they sleep, as
// llama.cpp's --poll: 0 sleeps at once, 100 polls longest.
inline constexpr int kDefaultPoll = 50;
inline constexpr int kMaxPoll = 100;

struct BackendOptions {
  int n_threads = 0;  // 0: the device's default; at most kMaxThreads
  int poll = kDefaultPoll;  // 0..kMaxPoll (backends without threads ignore it)
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string_view name() const = 0;  // what users type: "CPU", "OpenCL0"
  virtual std::string description() const = 0;
  virtual DeviceType type() const = 0;
  // Free and total memory: what the device reports (memory_impl), capped by
  // set_memory_cap: total at most the cap, free at most the cap less the
  // bytes allocated here through BufferType::alloc.
  MemoryInfo memory() const;
  // A cap on this device's memory (0: none), for tests and for sharing a GPU
  // (LOOM_DEVICE_MEMORY sets it, see registry.h): an allocation that would
  // take the bytes allocated here past it fails as out of memory.
  void set_memory_cap(size_t bytes) { memory_cap_ = bytes; }
  size_t memory_cap() const { return memory_cap_; }
  // Bytes held now by buffers of this device's types allocated through
  // BufferType::alloc (mapped host memory, buffer_from_host_ptr, is not counted).
  size_t allocated_bytes() const { return allocated_.load(std::memory_order_relaxed); }
  virtual DeviceCaps caps() const = 0;

  virtual std::unique_ptr<Backend> create_backend(const BackendOptions& options = {}) = 0;
  virtual BufferType& default_buffer_type() = 0;
  // Every buffer type this device offers, the default first (default: just it).
  virtual std::vector<BufferType*> buffer_types() { return {&default_buffer_type()}; }
  // Pinned host memory for fast transfers (default: none).
  virtual BufferType* host_buffer_type() { return nullptr; }
  // Wraps memory the buffer does not own (e.g. an mmap) (default: unsupported, throws).
  virtual std::shared_ptr<Buffer> buffer_from_host_ptr(void* ptr, size_t size);
  // The buffer type of buffer_from_host_ptr's buffers (CPU_Mapped), so that a
  // loader can choose it before wrapping anything; non-null exactly when
  // caps().buffer_from_host_ptr (default: null).
  virtual BufferType* host_ptr_buffer_type() { return nullptr; }

  // Two questions, asked separately (the scheduler and the loader combine them):
  //
  // 1. Capability: whether this device has a kernel for `node`: its op, op
  //    parameters, and the types, shapes and strides of the node and its
  //    operands. It never looks at buffers or data, so `node` may be unplaced,
  //    or a plain Tensor value outside any Context.
  virtual bool supports_op(const Tensor& node) const = 0;
  // 2. Memory: whether this device's kernel for `node` can read operand
  //    `slot` (node.src[slot]) where it lies, in memory of `type`. Reads the
  //    operand's op use (node.op, slot) and its type and shape, never where it
  //    is placed. Default: supports_buffer_type(type). The CPU overrides it:
  //    CPU_Repack memory holds interleaved weights that only mul_mat reads, as
  //    src0, and only whole (a view sees interleaved bytes).
  virtual bool supports_operand(const Tensor& node, int slot, const BufferType& type) const {
    (void)node, (void)slot;
    return supports_buffer_type(type);
  }
  // Memory, for no particular use: whether kernels on this device can read
  // and write memory of `type` at all (for some operands; see
  // supports_operand). Where a tensor's memory belongs, which memory needs no
  // copy, which buffers a backend may read directly.
  virtual bool supports_buffer_type(const BufferType& type) const = 0;
  // Whether it pays to run `node` here although its weight is in host
  // memory (default: no).
  virtual bool offload_op(const Tensor& node) const {
    (void)node;
    return false;
  }

 protected:
  // The device's own figures, before any cap.
  virtual MemoryInfo memory_impl() const = 0;

 private:
  friend class BufferType;
  friend class Buffer;
  size_t memory_cap_ = 0;
  std::atomic<size_t> allocated_{0};
};

// A dry run: while one is alive on a thread, BufferType::alloc on that
// thread allocates nothing and returns buffers without memory (writes to
// them are dropped, reads give nothing), and records every request. A model
// loaded and a session created inside one run the real placement and
// planning code, so the bytes recorded are what a real load allocates.
class DryRun {
 public:
  struct Allocation {
    BufferType* type;
    size_t size;
    std::weak_ptr<Buffer> buffer;  // for its usage, set after the allocation
  };
  DryRun();
  ~DryRun();
  DryRun(const DryRun&) = delete;
  DryRun& operator=(const DryRun&) = delete;
  const std::vector<Allocation>& allocations() const { return allocations_; }
  // The dry run active on this thread, or null.
  static DryRun* active();

 private:
  friend class BufferType;
  DryRun* outer_;
  std::vector<Allocation> allocations_;
};

// The one tensor-data path. Offsets and sizes are in bytes within the tensor
// and are bounds-checked; errors name the tensor.
void tensor_set(Tensor& t, const void* data, size_t offset, size_t size);
void tensor_get(const Tensor& t, void* data, size_t offset, size_t size);
void tensor_memset(Tensor& t, uint8_t value, size_t offset, size_t size);
// Copies all bytes of src into dst (same type and shape; any two buffers).
void tensor_copy(const Tensor& src, Tensor& dst);

// Reads a whole tensor as float / writes floats into it (converting types).
std::vector<float> tensor_to_floats(const Tensor& t);
void tensor_from_floats(Tensor& t, const std::vector<float>& values);

// The buffer type named `name` (case-insensitive) among the buffer types and
// host buffer types of `devices`, or null.
BufferType* find_buffer_type(const std::vector<Device*>& devices, std::string_view name);

}  // namespace loom
