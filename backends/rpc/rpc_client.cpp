#include "rpc_client.h"

#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>

#include <atomic>
#include <fstream>
#include <list>
#include <sstream>
#include <mutex>
#include <unordered_map>

#include "loom/error.h"
#include "call_queue.h"
#include "loom_rpc.grpc.pb.h"
#include "rpc_graph.h"
#include "rpc_server.h"

namespace loom::rpc {
namespace {

std::atomic<uint64_t> g_sent{0}, g_saved{0}, g_received{0}, g_graphs_sent{0}, g_graphs_reused{0},
    g_graphs_patched{0}, g_graph_bytes{0}, g_reads_in_replies{0}, g_write_calls{0};

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("--rpc-tls-ca: cannot read the {} {}", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string sha256_of(const void* data, size_t size) {
  std::string digest(32, '\0');
  unsigned int n = 0;
  EVP_Digest(data, size, reinterpret_cast<unsigned char*>(digest.data()), &n, EVP_sha256(), nullptr);
  return digest;
}

// Where a transfer goes: a byte range of a remote buffer, and the tensor's
// name for errors. Worked out when the call is made, so that a queued call
// does not depend on the tensor afterwards.
struct Range {
  uint64_t buffer = 0, offset = 0, size = 0;
  std::string label;
  // The tensor the range lies in, for a buffer of a layout type (CPU_Repack).
  std::shared_ptr<const TensorMsg> tensor;
  void to(BytesRange& r) const {
    r.set_buffer(buffer);
    r.set_offset(offset);
    r.set_size(size);
    if (tensor) *r.mutable_tensor() = *tensor;
  }
};

// A read of a range into client memory, made when its call runs.
struct Read {
  Range range;
  void* data;
};

// One server: the channel, the session, the token and the deadline of every call.
class Connection {
 public:
  Connection(int index, std::string endpoint, const ClientOptions& options)
      : index_(index),
        endpoint_(std::move(endpoint)),
        token_(options.token),
        timeout_(options.timeout),
        graph_patches_(options.graph_patches) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetMaxSendMessageSize(256 << 20);
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (!options.tls_ca.empty()) {
      grpc::SslCredentialsOptions ssl;
      ssl.pem_root_certs = read_file(options.tls_ca, "CA certificate");
      credentials = grpc::SslCredentials(ssl);
    }
    channel_ = grpc::CreateCustomChannel(endpoint_, credentials, args);
    stub_ = Remote::NewStub(channel_);
    calls_ = std::make_unique<CallQueue>();
  }
  ~Connection() {
    flush();
    calls_.reset();  // what is queued runs first
    // Ends the session: the server frees what is left of it.
    if (attach_) {
      attach_context_->TryCancel();
      (void)attach_->Finish();
    }
  }

  // Opens this client's session (after Hello, which needs none).
  void attach() {
    attach_context_ = context();
    attach_context_->set_deadline(std::chrono::system_clock::time_point::max());  // the session's lifetime
    attach_ = stub_->Attach(attach_context_.get(), AttachRequest());
    SessionEvent event;
    if (!attach_->Read(&event)) {
      const grpc::Status s = attach_->Finish();
      attach_.reset();
      check(s.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the session stream ended") : s, "opening a session");
    }
    session_ = std::to_string(event.session());
  }

  Remote::Stub& stub() { return *stub_; }
  // Every call that touches the session's buffers or runs graphs goes
  // through one queue, in order; push returns at once, run waits. Small
  // writes (write_later) wait in a list and travel with the next compute
  // request, or on their own just before any other call is queued. A
  // compute request is held (hold) until the next call is queued, so that
  // the reads asked for right after it (read_with_compute: the logits)
  // come back in its reply.
  uint64_t push(std::function<void()> call) {
    flush();
    return calls_->push(std::move(call));
  }
  void run(std::function<void()> call) {
    flush();
    calls_->run(std::move(call));
  }
  // The queue position after everything asked for so far.
  uint64_t mark() {
    flush();
    return calls_->last();
  }
  void sync() { calls_->wait(mark()); }
  CallQueue& queue() { return *calls_; }

  // Below kMinCachedBytes: the bytes are copied now.
  void write_later(const Range& r, const void* data) {
    Write w;
    r.to(*w.mutable_range());
    w.set_data(data, r.size);
    std::lock_guard lock(writes_mutex_);
    writes_bytes_ += r.size;
    writes_.push_back(std::move(w));
    if (writes_bytes_ >= kMaxWriteBytes) queue_waiting_locked();  // many inputs before a graph: they go now
  }
  std::vector<Write> take_writes() {
    std::lock_guard lock(writes_mutex_);
    writes_bytes_ = 0;
    return std::exchange(writes_, {});
  }

  // Holds a compute call, queuing whatever waited before it. `send` makes
  // the call with the reads added to it by then.
  using ComputeSend = std::function<void(const std::vector<Read>&)>;
  void hold(ComputeSend send) {
    std::lock_guard lock(writes_mutex_);
    queue_waiting_locked();
    held_ = std::move(send);
  }
  // Adds a read to the held compute call; false when none is held, when
  // writes came after it (they must run before the read) or when the
  // reads would pass what one reply may carry.
  bool read_with_compute(const Range& r, void* data) {
    std::lock_guard lock(writes_mutex_);
    if (!held_ || !writes_.empty() || r.size > kMaxReplyReadBytes - held_read_bytes_) return false;
    held_reads_.push_back({r, data});
    held_read_bytes_ += r.size;
    return true;
  }

  // Sends writes alone, as a compute request without a graph (on the queue).
  void send_writes(const std::vector<Write>& writes) {
    ComputeRequest q;
    for (const Write& w : writes) *q.add_writes() = w;
    ComputeReply r;
    auto c = context();
    check(stub_->Compute(c.get(), q, &r), fmt::format("writing {} inputs of {}", writes.size(), label(writes)));
    count_sent(writes);
    ++g_write_calls;
  }
  static void count_sent(const std::vector<Write>& writes) {
    for (const Write& w : writes) g_sent += w.data().size();
  }
  static std::string label(const std::vector<Write>& writes) {
    uint64_t n = 0;
    for (const Write& w : writes) n += w.data().size();
    return fmt::format("{} bytes", n);
  }
  int index() const { return index_; }
  bool cache() const { return cache_; }  // the server keeps a weight cache
  bool graph_patches() const { return graph_patches_; }
  void set_cache(bool cache) { cache_ = cache; }
  const std::string& endpoint() const { return endpoint_; }

  std::unique_ptr<grpc::ClientContext> context() const {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + timeout_);
    if (!token_.empty()) c->AddMetadata(kTokenKey, token_);
    if (!session_.empty()) c->AddMetadata(kSessionKey, session_);
    return c;
  }

  // Throws an Error naming the server and the tensor of a read that went wrong.
  [[noreturn]] void read_failed(const Range& r, std::string_view why) const {
    fail("RPC{} server {}: reading tensor {}: {}", index_, endpoint_, r.label, why);
  }

  // Throws an Error naming the server for a failed call.
  void check(const grpc::Status& s, std::string_view what) const {
    if (s.ok()) return;
    std::string why = s.error_message();
    switch (s.error_code()) {
      case grpc::StatusCode::UNAVAILABLE: why = "the server is unreachable or has gone (" + why + ")"; break;
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        why = fmt::format("no answer within {} s (LOOM_RPC_TIMEOUT)", timeout_.count() / 1000.0);
        break;
      case grpc::StatusCode::PERMISSION_DENIED: why = "refused: " + why; break;
      default: break;
    }
    fail("RPC{} server {}: {}: {}", index_, endpoint_, what, why);
  }

 private:
  int index_;
  std::string endpoint_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  bool graph_patches_;
  bool cache_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Remote::Stub> stub_;
  std::string session_;  // decimal, as kSessionKey carries it
  std::unique_ptr<grpc::ClientContext> attach_context_;
  std::unique_ptr<grpc::ClientReader<SessionEvent>> attach_;
  std::unique_ptr<CallQueue> calls_;
  static constexpr size_t kMaxWriteBytes = size_t{8} << 20;  // waiting writes, at most
  std::mutex writes_mutex_;  // guards the writes and the held compute call
  std::vector<Write> writes_;
  size_t writes_bytes_ = 0;
  ComputeSend held_;
  std::vector<Read> held_reads_;
  uint64_t held_read_bytes_ = 0;

  // The held compute call, then the writes made after it as one call,
  // queued under the lock so that two threads writing inputs keep their order.
  void queue_waiting_locked() {
    if (held_) {
      calls_->push([send = std::exchange(held_, nullptr), reads = std::exchange(held_reads_, {})] { send(reads); });
      held_read_bytes_ = 0;
    }
    if (writes_.empty()) return;
    writes_bytes_ = 0;
    calls_->push([this, batch = std::exchange(writes_, {})] { send_writes(batch); });
  }
  void flush() {
    std::lock_guard lock(writes_mutex_);
    queue_waiting_locked();
  }
};

class RpcDevice;

// A remote device's memory: its default buffer type (layout 0) or one that
// keeps weights in a layout of its own there (layout i: DeviceInfo.layouts[i - 1]).
class RpcBufferType final : public BufferType {
 public:
  RpcBufferType(RpcDevice& device, uint32_t layout, std::string name, size_t alignment, size_t max_size)
      : device_(device), layout_(layout), name_(std::move(name)), alignment_(alignment), max_size_(max_size) {}
  std::string_view name() const override { return name_; }
  size_t alignment() const override { return alignment_; }
  size_t max_size() const override { return max_size_; }
  bool is_host() const override { return false; }
  Device* device() const override;
  uint32_t layout() const { return layout_; }
  // A layout type: whether the server's type wants node's weight (asked once per shape).
  bool supports_op(const Tensor& node) const override;

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override;

 private:
  RpcDevice& device_;
  uint32_t layout_;
  std::string name_;
  size_t alignment_, max_size_;
};

// Each buffer gets its own opaque address range so that data pointers of
// different buffers never compare equal.
constexpr int kAddressBits = 40;
std::atomic<uintptr_t> g_next_base{1};

class RpcBuffer final : public Buffer {
 public:
  RpcBuffer(RpcBufferType& type, Connection& conn, uint64_t handle, size_t size)
      : Buffer(type, size), conn_(conn), handle_(handle), base_(g_next_base++ << kAddressBits) {}
  ~RpcBuffer() override {
    // Queued after the calls that may still use it; a server that is gone has freed it already.
    conn_.push([&conn = conn_, handle = handle_] {
      BufferRef ref;
      ref.set_buffer(handle);
      Empty empty;
      auto c = conn.context();
      (void)conn.stub().Free(c.get(), ref, &empty);
    });
  }

  Connection& connection() const { return conn_; }
  uint64_t handle() const { return handle_; }
  void* base() override { return reinterpret_cast<void*>(base_); }

  // In a layout type's buffer the range names its tensor: the server
  // stores that tensor's bytes permuted and moves them plain.
  Range range(const Tensor& t, size_t offset, size_t size) const {
    Range r{handle_, offset_of(t) + offset, size, tensor_label(t), nullptr};
    if (has_layout()) {
      const Tensor& root = t.view_src ? *t.view_src : t;
      auto m = std::make_shared<TensorMsg>();
      encode_tensor(root, RemoteRef{handle_, offset_of(root)}, *m);
      r.tensor = std::move(m);
    }
    return r;
  }
  bool has_layout() const { return static_cast<const RpcBufferType&>(type()).layout() != 0; }

  // Queued behind the async calls to this server. Weights and large writes
  // are waited for; a small write of other memory (a graph's inputs: tokens,
  // positions, masks) is not: its bytes are taken now and the next call that
  // waits reports its error, as ggml's rpc backend does, which saves a round
  // trip per input per token.
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    if (usage() != BufferUsage::Weights && size < kMinCachedBytes) return conn_.write_later(range(t, offset, size), data);
    const bool cached = usage() == BufferUsage::Weights;
    conn_.run([&, r = range(t, offset, size)] { write(conn_, r, data, cached); });
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    conn_.run([&, r = range(t, offset, size)] { read(conn_, r, data); });
  }

  // Not waited for, as a small write.
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    conn_.push([this, value, r = range(t, offset, size)] {
      MemsetRequest q;
      r.to(*q.mutable_range());
      q.set_value(value);
      Empty empty;
      auto c = conn_.context();
      conn_.check(conn_.stub().Memset(c.get(), q, &empty), fmt::format("filling tensor {}", r.label));
    });
  }

  bool copy_tensor(const Tensor& src, Tensor& dst) override {
    auto* sb = dynamic_cast<RpcBuffer*>(src.buffer.get());
    // Another server or the host, or a layout's permuted bytes: the caller stages.
    if (!sb || &sb->conn_ != &conn_ || sb->has_layout() || has_layout()) return false;
    conn_.run(copy_call(sb->range(src, 0, src.nbytes()), range(dst, 0, dst.nbytes())));
    return true;
  }

  void clear(uint8_t value) override {
    conn_.run([this, value] {
      ClearRequest q;
      q.set_buffer(handle_);
      q.set_value(value);
      Empty empty;
      auto c = conn_.context();
      conn_.check(conn_.stub().Clear(c.get(), q, &empty), fmt::format("clearing a buffer of {} bytes", size()));
    });
  }

  // A copy of src's range into dst's within one server, as a queued call.
  std::function<void()> copy_call(Range src, Range dst) {
    return [&conn = conn_, src = std::move(src), dst = std::move(dst)] {
      CopyRequest q;
      src.to(*q.mutable_src());
      q.set_dst_buffer(dst.buffer);
      q.set_dst_offset(dst.offset);
      Empty empty;
      auto c = conn.context();
      conn.check(conn.stub().Copy(c.get(), q, &empty), fmt::format("copying tensor {} to {}", src.label, dst.label));
    };
  }

  // Writes bytes into a range (run on the connection's queue). Weights
  // (`cached`) the server may keep in its cache are offered by hash first.
  static void write(Connection& conn, const Range& r, const void* data, bool cached) {
    std::string sha256;
    if (cached && conn.cache() && r.size >= kMinCachedBytes) {
      sha256 = sha256_of(data, r.size);
      CachedBytes q;
      r.to(*q.mutable_range());
      q.set_sha256(sha256);
      CacheReply reply;
      auto c = conn.context();
      conn.check(conn.stub().SetFromCache(c.get(), q, &reply), fmt::format("weight cache for tensor {}", r.label));
      if (reply.hit()) {
        g_saved += r.size;
        return;
      }
    }
    auto c = conn.context();
    Empty empty;
    auto writer = conn.stub().SetBytes(c.get(), &empty);
    SetBytesChunk chunk;
    r.to(*chunk.mutable_range());
    chunk.set_sha256(sha256);
    const char* bytes = static_cast<const char*>(data);
    size_t done = 0;
    do {
      const size_t n = std::min<size_t>(kChunkBytes, r.size - done);
      chunk.set_data(bytes + done, n);
      if (!writer->Write(chunk)) break;  // the server ended the call: Finish says why
      chunk.clear_range();
      chunk.clear_sha256();
      done += n;
    } while (done < r.size);
    writer->WritesDone();
    conn.check(writer->Finish(), fmt::format("writing {} bytes of tensor {}", r.size, r.label));
    g_sent += r.size;
  }

  // Queues a write of a copy of the bytes: the caller may reuse its memory at once.
  // A small one waits for the next compute request.
  static void push_write(Connection& conn, Range r, const void* data) {
    if (r.size < kMinCachedBytes) return conn.write_later(r, data);
    std::string bytes(static_cast<const char*>(data), r.size);
    conn.push([&conn, r = std::move(r), bytes = std::move(bytes)] { write(conn, r, bytes.data(), false); });
  }

  // Reads a range into `data` (run on the connection's queue).
  static void read(Connection& conn, const Range& r, void* data) {
    auto c = conn.context();
    BytesRange q;
    r.to(q);
    auto reader = conn.stub().GetBytes(c.get(), q);
    Chunk chunk;
    size_t done = 0;
    char* out = static_cast<char*>(data);
    while (reader->Read(&chunk)) {
      if (chunk.data().size() > r.size - done) {
        c->TryCancel();
        reader->Finish();
        conn.read_failed(r, fmt::format("the server sent more than {} bytes", r.size));
      }
      std::memcpy(out + done, chunk.data().data(), chunk.data().size());
      done += chunk.data().size();
    }
    conn.check(reader->Finish(), fmt::format("reading {} bytes of tensor {}", r.size, r.label));
    if (done != r.size) conn.read_failed(r, fmt::format("{} of {} bytes arrived", done, r.size));
    g_received += r.size;
  }

 private:
  Connection& conn_;
  uint64_t handle_;
  uintptr_t base_;
};

class RpcBackend;

class RpcDevice final : public Device {
 public:
  RpcDevice(Connection& conn, uint32_t index, const DeviceInfo& info)
      : conn_(conn),
        index_(index),
        name_(fmt::format("RPC{}:{}", conn.index(), info.name())),
        description_(fmt::format("{} on {}", info.description(), conn.endpoint())),
        buffer_type_(*this, 0, name_, std::max<size_t>(info.alignment(), 1),
                     std::min<size_t>(info.max_size(), size_t{1} << kAddressBits)) {
    for (int i = 0; i < info.layouts_size(); ++i) {
      const LayoutInfo& l = info.layouts(i);
      layouts_.push_back(std::make_unique<RpcBufferType>(
          *this, static_cast<uint32_t>(i + 1), fmt::format("RPC{}:{}", conn.index(), l.name()),
          std::max<size_t>(l.alignment(), 1), std::min<size_t>(l.max_size(), size_t{1} << kAddressBits)));
    }
  }

  std::string_view name() const override { return name_; }
  std::string description() const override { return description_; }
  DeviceType type() const override { return DeviceType::GPU; }
  MemoryInfo memory_impl() const override {
    DeviceRef q;
    q.set_device(index_);
    MemoryReply r;
    auto c = conn_.context();
    conn_.check(conn_.stub().Memory(c.get(), q, &r), fmt::format("memory of {}", name_));
    return {r.free(), r.total()};
  }
  DeviceCaps caps() const override { return {.async = true, .events = true}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  BufferType& default_buffer_type() override { return buffer_type_; }
  std::vector<BufferType*> buffer_types() override {
    std::vector<BufferType*> out{&buffer_type_};
    for (auto& l : layouts_) out.push_back(l.get());
    return out;
  }

  bool supports_op(const Tensor& node) const override { return ask(node, 0, 0).supported(); }
  bool supports_buffer_type(const BufferType& type) const override { return layout_of(type) >= 0; }
  // Default memory: any operand. A layout type: the server's answer.
  bool supports_operand(const Tensor& node, int slot, const BufferType& type) const override {
    const int layout = layout_of(type);
    if (layout <= 0) return layout == 0;
    const Tensor* s = slot >= 0 && slot < kMaxSrc ? node.src[slot] : nullptr;
    return !s || ask(node, static_cast<uint32_t>(layout), slot).readable();
  }
  // Whether layout type `layout` wants node's src0 (RpcBufferType::supports_op).
  bool prefers(const Tensor& node, uint32_t layout) const { return node.src[0] && ask(node, layout, 0).preferred(); }

  Connection& connection() const { return conn_; }
  uint32_t index() const { return index_; }

 private:
  // 0 for the default type, i for layout i, -1 for memory of another device.
  int layout_of(const BufferType& type) const {
    if (&type == &buffer_type_) return 0;
    for (const auto& l : layouts_)
      if (l.get() == &type) return static_cast<int>(l->layout());
    return -1;
  }

  // The server's answers about a node, once per node encoding and question.
  SupportsOpReply ask(const Tensor& node, uint32_t layout, int slot) const {
    SupportsOpRequest q;
    Tensor* n = const_cast<Tensor*>(&node);
    encode_graph(std::span<Tensor* const>(&n, 1), [](const Tensor&) { return RemoteRef{}; }, index_,
                 *q.mutable_graph());
    for (TensorMsg& t : *q.mutable_graph()->mutable_tensors()) t.clear_name();  // names do not matter here
    q.set_layout(layout);
    q.set_slot(slot);
    std::string key;
    q.SerializeToString(&key);
    std::lock_guard lock(mutex_);
    if (auto it = answers_.find(key); it != answers_.end()) return it->second;
    SupportsOpReply r;
    auto c = conn_.context();
    conn_.check(conn_.stub().SupportsOp(c.get(), q, &r), fmt::format("asking {} about {}", name_, tensor_label(node)));
    answers_.emplace(std::move(key), r);
    return r;
  }

  Connection& conn_;
  uint32_t index_;
  std::string name_, description_;
  RpcBufferType buffer_type_;
  std::vector<std::unique_ptr<RpcBufferType>> layouts_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, SupportsOpReply> answers_;  // by the request's encoding
};

Device* RpcBufferType::device() const { return &device_; }

bool RpcBufferType::supports_op(const Tensor& node) const { return layout_ != 0 && device_.prefers(node, layout_); }

std::shared_ptr<Buffer> RpcBufferType::alloc_impl(size_t size) {
  Connection& conn = device_.connection();
  AllocRequest q;
  q.set_device(device_.index());
  q.set_size(size);
  q.set_layout(layout_);
  AllocReply r;
  auto c = conn.context();
  conn.check(conn.stub().Alloc(c.get(), q, &r), fmt::format("allocating {} bytes of {}", size, name_));
  return std::make_shared<RpcBuffer>(*this, conn, r.buffer(), size);
}

class RpcBackend final : public Backend {
 public:
  explicit RpcBackend(RpcDevice& device) : device_(device) {}
  ~RpcBackend() override {
    // Queued graphs refer to this backend's list of graphs sent.
    device_.connection().queue().wait_quietly(device_.connection().mark());
  }
  Device& device() const override { return device_; }
  Connection& connection() const { return device_.connection(); }

  // Encodes the graph now (its tensors may change once this returns) and
  // queues the call: returns before the server has run it (synchronize).
  // A graph with the signature of one encoded lately (a generation step
  // like the last) reuses that encoding.
  void compute(Graph& graph) override {
    const RemoteRefOf ref = [&](const Tensor& t) { return ref_of(t); };
    auto sig = std::make_shared<const GraphSignature>(graph_signature(graph.nodes(), ref, device_.index()));
    auto it = std::find_if(encoded_.begin(), encoded_.end(), [&](const Encoded& e) { return *e.sig == *sig; });
    if (it != encoded_.end()) {
      encoded_.splice(encoded_.begin(), encoded_, it);
    } else {
      auto msg = std::make_shared<GraphMsg>();
      encode_graph(graph.nodes(), ref, device_.index(), *msg);
      encoded_.push_front({std::move(sig), std::move(msg)});
      if (encoded_.size() > kRemembered) encoded_.pop_back();
    }
    Encoded e = encoded_.front();
    std::string what = fmt::format("computing a graph of {} nodes on {}", graph.size(), device_.name());
    // The inputs written since the last call travel with the graph.
    std::vector<Write> writes = connection().take_writes();
    connection().hold([this, e = std::move(e), what = std::move(what), writes = std::move(writes)](
                          const std::vector<Read>& reads) { run_graph(e, what, writes, reads); });
  }

  // The bytes are taken at once, so the caller may reuse its memory.
  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override {
    RpcBuffer* b = local(t);
    if (!b) return Backend::set_tensor_async(t, data, offset, size);
    RpcBuffer::push_write(connection(), b->range(t, offset, size), data);
  }
  // `data` is written when the call has run: read it after synchronize.
  // Right after compute, the bytes come in the compute call's reply.
  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) override {
    RpcBuffer* b = local(t);
    if (!b) return Backend::get_tensor_async(t, data, offset, size);
    Range r = b->range(t, offset, size);
    if (connection().read_with_compute(r, data)) return;
    connection().push([&conn = connection(), r = std::move(r), data] { RpcBuffer::read(conn, r, data); });
  }
  // Host to this server, this server to the host, or within this server.
  bool copy_tensor_async(const Tensor& src, Tensor& dst) override {
    if (src.type != dst.type || src.ne != dst.ne || src.nbytes() != dst.nbytes() || !src.buffer || !dst.buffer)
      return false;
    RpcBuffer* sb = local(src);
    RpcBuffer* db = local(dst);
    const size_t n = src.nbytes();
    if (db && src.buffer->is_host()) {
      RpcBuffer::push_write(connection(), db->range(dst, 0, n), src.data);
    } else if (sb && dst.buffer->is_host()) {
      get_tensor_async(src, dst.data, 0, n);
    } else if (sb && db && !sb->has_layout() && !db->has_layout()) {
      connection().push(db->copy_call(sb->range(src, 0, n), db->range(dst, 0, n)));
    } else {
      return false;
    }
    return true;
  }
  void synchronize() override { connection().sync(); }
  // Host bytes are copied into a request (push_write) before the call returns.
  bool takes_host_bytes_at_once() const override { return true; }
  std::unique_ptr<Event> create_event() override;

 private:
  RpcBuffer* local(const Tensor& t) const {
    auto* b = dynamic_cast<RpcBuffer*>(t.buffer.get());
    return b && &b->connection() == &connection() ? b : nullptr;
  }

  // A graph as encoded, and its signature; shared with the calls queued.
  struct Encoded {
    std::shared_ptr<const GraphSignature> sig;
    std::shared_ptr<const GraphMsg> msg;
  };

  // Sends a graph (run on the connection's queue): by id when the server
  // has it, as patches of one of the same structure, else whole.
  void run_graph(const Encoded& e, const std::string& what, const std::vector<Write>& writes,
                 const std::vector<Read>& reads) {
    // The same graph as one sent before: run it by id.
    if (auto it = find_sent(*e.sig); it != sent_.end()) {
      ComputeRequest q;
      q.set_graph_id(it->id);
      if (send(q, what, writes, reads)) {
        ++g_graphs_reused;
        sent_.splice(sent_.begin(), sent_, it);
        return;
      }
      sent_.erase(it);  // the server dropped it
    }
    // The same structure as one sent before: only the tensors that changed.
    if (connection().graph_patches()) {
      auto [base, q] = patches_for(*e.msg);
      if (base != sent_.end()) {
        if (uint64_t id = send(q, what, writes, reads)) {
          ++g_graphs_patched;
          remember(e, id);
          return;
        }
        sent_.erase(base);
      }
    }
    ComputeRequest q;
    *q.mutable_graph() = *e.msg;
    const uint64_t id = send(q, what, writes, reads, /*whole=*/true);
    ++g_graphs_sent;
    remember(e, id);
  }

  static constexpr size_t kRemembered = 8;
  struct Sent {
    Encoded graph;
    uint64_t id;  // the server's
  };

  // The server's id for the graph; 0 when the server no longer has the graph
  // the request names (NOT_FOUND; never for a whole graph); throws on any other failure.
  // The writes and reads go with it (made by the server only when it has the graph).
  uint64_t send(ComputeRequest q, const std::string& what, const std::vector<Write>& writes,
                const std::vector<Read>& reads, bool whole = false) {
    Connection& conn = device_.connection();
    g_graph_bytes += q.ByteSizeLong();
    for (const Write& w : writes) *q.add_writes() = w;
    for (const Read& rd : reads) rd.range.to(*q.add_reads());
    ComputeReply r;
    auto c = conn.context();
    const grpc::Status s = conn.stub().Compute(c.get(), q, &r);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND && !whole) return 0;
    conn.check(s, what);
    Connection::count_sent(writes);
    if (r.data_size() != static_cast<int>(reads.size()))
      fail("RPC{} server {}: {}: {} reads asked for, {} answered", conn.index(), conn.endpoint(), what, reads.size(),
           r.data_size());
    for (size_t i = 0; i < reads.size(); ++i) {
      const Range& range = reads[i].range;
      const std::string& data = r.data(static_cast<int>(i));
      if (data.size() != range.size)
        conn.read_failed(range, fmt::format("{} of {} bytes arrived", data.size(), range.size));
      std::memcpy(reads[i].data, data.data(), range.size);
      g_received += range.size;
      ++g_reads_in_replies;
    }
    return r.graph_id();
  }

  std::list<Sent>::iterator find_sent(const GraphSignature& sig) {
    return std::find_if(sent_.begin(), sent_.end(), [&](const Sent& s) { return *s.graph.sig == sig; });
  }

  // The remembered graph of the same structure (tensor count, nodes, device)
  // that differs from `msg` in the fewest tensors, and the request that
  // patches it into `msg`; end() when none differs in under half its tensors.
  std::pair<std::list<Sent>::iterator, ComputeRequest> patches_for(const GraphMsg& msg) {
    auto best = sent_.end();
    ComputeRequest best_q;
    for (auto it = sent_.begin(); it != sent_.end(); ++it) {
      const GraphMsg& old = *it->graph.msg;
      if (old.tensors_size() != msg.tensors_size() || old.device() != msg.device() ||
          !std::equal(old.nodes().begin(), old.nodes().end(), msg.nodes().begin(), msg.nodes().end()))
        continue;
      ComputeRequest q;
      q.set_graph_id(it->id);
      for (int i = 0; i < msg.tensors_size() && q.patches_size() * 2 < msg.tensors_size(); ++i)
        if (old.tensors(i).SerializeAsString() != msg.tensors(i).SerializeAsString()) {
          TensorPatch& p = *q.add_patches();
          p.set_index(i);
          *p.mutable_tensor() = msg.tensors(i);
        }
      if (q.patches_size() * 2 >= msg.tensors_size()) continue;
      if (best == sent_.end() || q.patches_size() < best_q.patches_size()) {
        best = it;
        best_q = std::move(q);
      }
    }
    return {best, std::move(best_q)};
  }

  void remember(const Encoded& e, uint64_t id) {
    sent_.push_front({e, id});
    if (sent_.size() > kRemembered) sent_.pop_back();
  }

  RemoteRef ref_of(const Tensor& t) const {
    if (t.nbytes() == 0 && !t.buffer) return {};
    auto* b = dynamic_cast<RpcBuffer*>(t.buffer.get());
    if (!b || &b->connection() != &device_.connection())
      fail("{}: tensor {} lies in {} memory, not on this server; the scheduler should have copied it", device_.name(),
           tensor_label(t), t.buffer ? t.buffer->type().name() : "no");
    return {b->handle(), b->offset_of(t)};
  }

  RpcDevice& device_;
  std::list<Sent> sent_;  // most recent first; touched on the connection's queue only
  std::list<Encoded> encoded_;  // most recent first; touched by compute only
};

// A position in a connection's queue. Another server's backend waits for
// it on its own queue; any other backend makes the host wait.
class RpcEvent final : public Event {
 public:
  void record(Backend& backend) override {
    auto* b = dynamic_cast<RpcBackend*>(&backend);
    if (!b) {  // another kind of backend: its work is done once it synchronizes
      backend.synchronize();
      calls_ = nullptr;
      return;
    }
    position_ = b->connection().mark();
    calls_ = &b->connection().queue();
  }
  void wait(Backend& backend) override {
    if (!calls_) return;
    auto* b = dynamic_cast<RpcBackend*>(&backend);
    if (b && &b->connection().queue() == calls_) return;  // one queue: in order already
    if (b) {
      b->connection().push([calls = calls_, position = position_] { calls->wait_quietly(position); });
      return;
    }
    synchronize();
  }
  void synchronize() override {
    if (calls_) calls_->wait(position_);
  }

 private:
  CallQueue* calls_ = nullptr;
  uint64_t position_ = 0;
};

std::unique_ptr<Event> RpcBackend::create_event() { return std::make_unique<RpcEvent>(); }

std::unique_ptr<Backend> RpcDevice::create_backend(const BackendOptions&) {
  return std::make_unique<RpcBackend>(*this);
}

class RpcFamily final : public BackendFamily {
 public:
  std::string_view name() const override { return "RPC"; }
  std::vector<Device*> devices() override {
    std::vector<Device*> out;
    for (auto& d : devices_) out.push_back(d.get());
    return out;
  }

  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<std::unique_ptr<RpcDevice>> devices_;
};

}  // namespace

TransferStats transfer_stats() {
  return {g_sent, g_saved, g_received, g_graphs_sent, g_graphs_reused, g_graphs_patched, g_graph_bytes,
          g_reads_in_replies, g_write_calls};
}

std::vector<std::string> parse_endpoints(std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item(list.substr(start, end - start));
    start = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.rfind(':');
    const std::string port = colon == std::string::npos ? "" : item.substr(colon + 1);
    if (colon == 0 || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(port) > 65535)
      fail("--rpc: '{}' is not HOST:PORT", item);
    out.push_back(item);
  }
  if (out.empty()) fail("--rpc: '{}' names no server (HOST:PORT[,HOST:PORT])", list);
  return out;
}

std::unique_ptr<BackendFamily> connect(const ClientOptions& options) {
  auto family = std::make_unique<RpcFamily>();
  for (size_t i = 0; i < options.endpoints.size(); ++i) {
    auto conn = std::make_unique<Connection>(static_cast<int>(i), options.endpoints[i], options);
    HelloRequest q;
    HelloReply r;
    auto c = conn->context();
    conn->check(conn->stub().Hello(c.get(), q, &r), "connecting");
    if (r.protocol() != kProtocolVersion)
      fail("RPC{} server {} speaks protocol {}, this Loom {}", i, options.endpoints[i], r.protocol(), kProtocolVersion);
    conn->set_cache(r.cache());
    conn->attach();
    for (int d = 0; d < r.devices_size(); ++d)
      family->devices_.push_back(std::make_unique<RpcDevice>(*conn, static_cast<uint32_t>(d), r.devices(d)));
    family->connections_.push_back(std::move(conn));
  }
  return family;
}

}  // namespace loom::rpc
