#include "rpc_service.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>

#include "loom/error.h"

namespace loom::rpc {
namespace {

grpc::Status invalid(const std::string& what) { return {grpc::StatusCode::INVALID_ARGUMENT, what}; }

// A tensor that only marks a byte position in `buffer`: what Buffer's byte
// methods need (they read data and the buffer, not the shape).
Tensor at(Buffer& buffer, uint64_t offset) {
  Tensor t;
  t.buffer = buffer.shared_from_this();
  t.data = static_cast<char*>(buffer.base()) + offset;
  return t;
}

// Where `range` lies in `b`: the tensor it names, checked in full as a
// tensor of a graph and around the range, with the range's start inside it;
// or, when it names none, a byte position (start 0). Buffer's byte methods
// take the tensor: a buffer of a layout type (CPU_Repack) stores its bytes
// permuted by its type and shape.
std::pair<Tensor, uint64_t> tensor_of(const BytesRange& range, Buffer& b) {
  if (!range.has_tensor()) return {at(b, range.offset()), 0};
  const TensorMsg& m = range.tensor();
  if (m.buffer() != range.buffer())
    fail("a range of buffer {} names a tensor in buffer {}", range.buffer(), m.buffer());
  GraphMsg msg;
  *msg.add_tensors() = m;
  std::shared_ptr<Buffer> shared = b.shared_from_this();
  auto decoded = decode_graph(msg, *b.type().device(), [&](uint64_t handle) {
    return handle == range.buffer() ? shared : nullptr;
  });
  Tensor t = decoded->tensors.front();
  if (t.op != Op::None || t.view_src) fail("a range names tensor {}, which is not plain data", tensor_label(t));
  if (range.offset() < m.offset() || range.offset() - m.offset() > t.nbytes() ||
      range.size() > t.nbytes() - (range.offset() - m.offset()))
    fail("{} bytes at offset {} of buffer {} are not inside tensor {} ({} bytes at offset {})", range.size(),
         range.offset(), range.buffer(), tensor_label(t), t.nbytes(), m.offset());
  return {std::move(t), range.offset() - m.offset()};
}

// Buffer types of `d` that a client may allocate besides its default: those
// that store weights in a layout of their own (not host memory).
std::vector<BufferType*> layouts_of(Device& d) {
  std::vector<BufferType*> out;
  for (BufferType* bt : d.buffer_types())
    if (bt != &d.default_buffer_type() && !bt->is_host() && bt->device() == &d) out.push_back(bt);
  return out;
}

// Runs `f`, turning the errors it throws into an answer.
template <class F>
grpc::Status guarded(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    return invalid(e.what());
  } catch (const std::bad_alloc&) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED, "out of memory"};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

std::string hex(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

}  // namespace

struct Handlers::Session {
  struct CachedGraph {
    uint64_t id;
    uint32_t device;
    GraphMsg msg;  // as sent: later requests patch it
    std::unique_ptr<DecodedGraph> graph;
  };

  std::shared_ptr<Buffer> buffer_at(uint64_t handle) const {
    auto it = buffers.find(handle);
    return it == buffers.end() ? nullptr : it->second;
  }
  // The buffer of `range`, with the range checked against its size.
  std::shared_ptr<Buffer> checked_range(const BytesRange& range, grpc::Status& status) const {
    std::shared_ptr<Buffer> b = buffer_at(range.buffer());
    if (!b) {
      status = {grpc::StatusCode::NOT_FOUND, fmt::format("no buffer {}", range.buffer())};
      return nullptr;
    }
    if (range.offset() > b->size() || range.size() > b->size() - range.offset()) {
      status = invalid(fmt::format("{} bytes at offset {} do not fit in buffer {} of {} bytes", range.size(),
                                   range.offset(), range.buffer(), b->size()));
      return nullptr;
    }
    return b;
  }

  std::mutex mutex;  // one request of this session at a time touches the state below
  std::map<uint64_t, std::shared_ptr<Buffer>> buffers;
  uint64_t next_handle = 1;
  std::vector<std::unique_ptr<Backend>> backends;  // per device, made on first use
  std::list<CachedGraph> graphs;                   // most recent first
  uint64_t next_graph_id = 1;
};

Handlers::Handlers(std::vector<Device*> devices, ServiceOptions options)
    : devices_(std::move(devices)), options_(options) {
  for (Device* d : devices_) {
    device_mutex_.push_back(std::make_unique<std::mutex>());
    layouts_.push_back(layouts_of(*d));
  }
}

Handlers::~Handlers() = default;

grpc::Status Handlers::open_session(uint64_t& id) {
  std::lock_guard lock(mutex_);
  if (sessions_.size() >= options_.max_sessions)
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            fmt::format("this server has {} sessions open, its limit", sessions_.size())};
  // Random ids: a client cannot guess another's.
  static thread_local std::mt19937_64 random(std::random_device{}());
  do id = random();
  while (id == 0 || sessions_.count(id));
  auto session = std::make_shared<Session>();
  session->backends.resize(devices_.size());
  sessions_.emplace(id, std::move(session));
  return grpc::Status::OK;
}

SessionEnd Handlers::close_session(uint64_t id) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return {};
    session = std::move(it->second);
    sessions_.erase(it);
    ++sessions_ended_;
  }
  // A request of the session still running finishes first; one that starts
  // later finds no session. Buffers its graphs or backends hold go with them.
  std::lock_guard lock(session->mutex);
  SessionEnd end;
  for (const auto& [handle, buffer] : session->buffers) {
    ++end.buffers;
    end.bytes += buffer->size();
  }
  session->graphs.clear();
  session->buffers.clear();
  session->backends.clear();
  return end;
}

std::shared_ptr<Handlers::Session> Handlers::session_at(uint64_t id, grpc::Status& status) const {
  std::lock_guard lock(mutex_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) return it->second;
  status = {grpc::StatusCode::FAILED_PRECONDITION,
            id == 0 ? std::string("no session: open one with Attach first")
                    : fmt::format("no session {} (it ended, or never began)", id)};
  return nullptr;
}

size_t Handlers::n_buffers() const {
  StatsReply r;
  (void)stats(r);
  return r.buffers();
}

grpc::Status Handlers::stats(StatsReply& reply) const {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, s] : sessions_) sessions.push_back(s);
    reply.set_sessions(sessions_.size());
    reply.set_sessions_ended(sessions_ended_);
  }
  uint64_t buffers = 0, bytes = 0;
  for (const auto& s : sessions) {
    std::lock_guard lock(s->mutex);
    buffers += s->buffers.size();
    for (const auto& [handle, b] : s->buffers) bytes += b->size();
  }
  reply.set_buffers(buffers);
  reply.set_buffer_bytes(bytes);
  return grpc::Status::OK;
}

Device* Handlers::device_at(uint32_t index, grpc::Status& status) const {
  if (index < devices_.size()) return devices_[index];
  status = invalid(fmt::format("no device {} (this server has {})", index, devices_.size()));
  return nullptr;
}

grpc::Status Handlers::hello(HelloReply& reply) {
  return guarded([&] {
    reply.set_protocol(kProtocolVersion);
    reply.set_cache(!options_.cache_dir.empty());
    for (size_t i = 0; i < devices_.size(); ++i) {
      Device* d = devices_[i];
      DeviceInfo& info = *reply.add_devices();
      const MemoryInfo m = d->memory();
      BufferType& bt = d->default_buffer_type();
      info.set_name(std::string(d->name()));
      info.set_description(d->description());
      info.set_type(static_cast<uint32_t>(d->type()));
      info.set_memory_free(m.free);
      info.set_memory_total(m.total);
      info.set_buffer_type(std::string(bt.name()));
      info.set_alignment(bt.alignment());
      info.set_max_size(std::min(bt.max_size(), options_.max_alloc));
      for (BufferType* layout : layouts_[i]) {
        LayoutInfo& l = *info.add_layouts();
        l.set_name(std::string(layout->name()));
        l.set_alignment(layout->alignment());
        l.set_max_size(std::min(layout->max_size(), options_.max_alloc));
      }
    }
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::memory(const DeviceRef& request, MemoryReply& reply) {
  return guarded([&] {
    grpc::Status status;
    Device* d = device_at(request.device(), status);
    if (!d) return status;
    const MemoryInfo m = d->memory();
    reply.set_free(m.free);
    reply.set_total(m.total);
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::supports_op(const SupportsOpRequest& request, SupportsOpReply& reply) {
  return guarded([&] {
    grpc::Status status;
    Device* d = device_at(request.graph().device(), status);
    if (!d) return status;
    if (request.graph().nodes_size() != 1) return invalid("supports_op takes a graph of exactly one node");
    // Shapes only: the tensors carry no buffers, so decode sees no memory.
    for (const TensorMsg& t : request.graph().tensors())
      if (t.buffer() != 0) return invalid("supports_op: tensors must not name buffers");
    BufferType* layout = nullptr;
    if (request.layout() != 0) {
      layout = layout_at(request.graph().device(), request.layout(), status);
      if (!layout) return status;
      if (request.slot() < 0 || request.slot() >= kMaxSrc)
        return invalid(fmt::format("supports_op: operand slot {} is outside [0, {})", request.slot(), kMaxSrc));
    }
    std::unique_ptr<DecodedGraph> decoded;
    try {
      decoded = decode_graph(request.graph(), *d, nullptr);
    } catch (const Error&) {
      return grpc::Status::OK;  // malformed or unsupported: either way, not here
    }
    reply.set_supported(true);
    if (!layout) return grpc::Status::OK;
    const Tensor& node = *decoded->graph.nodes().front();
    if (!node.src[request.slot()]) return grpc::Status::OK;
    reply.set_readable(d->supports_operand(node, request.slot(), *layout));
    reply.set_preferred(layout->supports_op(node));
    return grpc::Status::OK;
  });
}

BufferType* Handlers::layout_at(uint32_t device, uint32_t layout, grpc::Status& status) const {
  if (!device_at(device, status)) return nullptr;
  if (layout >= 1 && layout <= layouts_[device].size()) return layouts_[device][layout - 1];
  status = invalid(fmt::format("device {} ({}) has no layout {} (it has {})", device, devices_[device]->name(), layout,
                               layouts_[device].size()));
  return nullptr;
}

template <class F>
grpc::Status Handlers::in_session(uint64_t id, F&& f) {
  return guarded([&] {
    grpc::Status status;
    std::shared_ptr<Session> session = session_at(id, status);
    if (!session) return status;
    std::lock_guard lock(session->mutex);
    return f(*session);
  });
}

grpc::Status Handlers::alloc(uint64_t session, const AllocRequest& request, AllocReply& reply) {
  return guarded([&] {
    grpc::Status status;
    Device* d = device_at(request.device(), status);
    if (!d) return status;
    if (request.size() > options_.max_alloc)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          fmt::format("{} bytes is more than this server allocates at once ({})", request.size(),
                                      options_.max_alloc));
    std::shared_ptr<Session> owner = session_at(session, status);
    if (!owner) return status;
    BufferType* type = &d->default_buffer_type();
    if (request.layout() != 0 && !(type = layout_at(request.device(), request.layout(), status))) return status;
    std::shared_ptr<Buffer> b;
    try {
      b = type->alloc(request.size());
    } catch (const Error& e) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, e.what());
    }
    std::lock_guard lock(owner->mutex);
    const uint64_t handle = owner->next_handle++;
    owner->buffers.emplace(handle, std::move(b));
    reply.set_buffer(handle);
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::free(uint64_t session, const BufferRef& request) {
  return in_session(session, [&](Session& s) {
    if (!s.buffers.erase(request.buffer()))
      return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no buffer {}", request.buffer()));
    // Cached graphs may hold the buffer: the client's next graph is sent whole.
    s.graphs.clear();
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::clear(uint64_t session, const ClearRequest& request) {
  return in_session(session, [&](Session& s) {
    if (request.value() > 255) return invalid(fmt::format("clear value {} is not a byte", request.value()));
    std::shared_ptr<Buffer> b = s.buffer_at(request.buffer());
    if (!b) return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no buffer {}", request.buffer()));
    b->clear(static_cast<uint8_t>(request.value()));
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::set_bytes(uint64_t session, const BytesRange& range, uint64_t done, const std::string& data) {
  return in_session(session, [&](Session& s) {
    grpc::Status status;
    std::shared_ptr<Buffer> b = s.checked_range(range, status);
    if (!b) return status;
    if (done > range.size() || data.size() > range.size() - done)
      return invalid(fmt::format("set: chunk of {} bytes after {} overruns the transfer of {} bytes", data.size(),
                                 done, range.size()));
    if (data.empty()) return grpc::Status::OK;
    auto [t, start] = tensor_of(range, *b);
    b->set_tensor(t, data.data(), start + done, data.size());
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::get_bytes(uint64_t session, const BytesRange& range,
                                 const std::function<bool(const Chunk&)>& write) {
  return guarded([&] {
    Chunk chunk;
    for (uint64_t done = 0; done < range.size() || (done == 0 && range.size() == 0);) {
      const size_t n = std::min<uint64_t>(kChunkBytes, range.size() - done);
      // The session is locked per chunk, not while the client reads.
      grpc::Status status = in_session(session, [&](Session& s) {
        grpc::Status status;
        std::shared_ptr<Buffer> b = s.checked_range(range, status);
        if (!b) return status;
        chunk.mutable_data()->resize(n);
        if (n) {
          auto [t, start] = tensor_of(range, *b);
          b->get_tensor(t, chunk.mutable_data()->data(), start + done, n);
        }
        return grpc::Status::OK;
      });
      if (!status.ok()) return status;
      if (!write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading");
      done += n;
      if (n == 0) break;
    }
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::set_from_cache(uint64_t session, const CachedBytes& request, CacheReply& reply) {
  return in_session(session, [&](Session& s) {
    grpc::Status status;
    reply.set_hit(false);
    if (options_.cache_dir.empty() || request.sha256().size() != 32) return grpc::Status::OK;
    std::shared_ptr<Buffer> b = s.checked_range(request.range(), status);
    if (!b) return status;
    const auto path = std::filesystem::path(options_.cache_dir) / (hex(request.sha256()) + ".bin");
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) != request.range().size() || ec) return grpc::Status::OK;
    auto [t, start] = tensor_of(request.range(), *b);
    std::ifstream in(path, std::ios::binary);
    std::string chunk;
    for (uint64_t done = 0; done < request.range().size(); done += chunk.size()) {
      chunk.resize(std::min<uint64_t>(kChunkBytes, request.range().size() - done));
      if (!in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())))
        return grpc::Status(grpc::StatusCode::INTERNAL, fmt::format("cannot read {}", path.string()));
      b->set_tensor(t, chunk.data(), start + done, chunk.size());
    }
    reply.set_hit(true);
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::cache_store(uint64_t session, const BytesRange& range, const std::string& sha256) {
  return in_session(session, [&](Session& s) {
    grpc::Status status;
    if (options_.cache_dir.empty() || range.size() < kMinCachedBytes) return grpc::Status::OK;
    if (sha256.size() != 32) return invalid(fmt::format("a SHA-256 has 32 bytes, not {}", sha256.size()));
    std::shared_ptr<Buffer> b = s.checked_range(range, status);
    if (!b) return status;
    const auto dir = std::filesystem::path(options_.cache_dir);
    const auto path = dir / (hex(sha256) + ".bin");
    if (std::filesystem::exists(path)) return grpc::Status::OK;
    auto [t, start] = tensor_of(range, *b);
    // Hash what arrived, not what the client claims: a wrong claim is refused
    // and never names a file. The temporary file is the session's own, as
    // two sessions may store the same weights at once.
    const auto tmp = dir / fmt::format("{}.{:016x}.tmp", hex(sha256), session);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
    std::string chunk;
    for (uint64_t done = 0; done < range.size(); done += chunk.size()) {
      chunk.resize(std::min<uint64_t>(kChunkBytes, range.size() - done));
      b->get_tensor(t, chunk.data(), start + done, chunk.size());
      EVP_DigestUpdate(md.get(), chunk.data(), chunk.size());
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    out.close();
    std::string digest(32, '\0');
    unsigned int n = 0;
    EVP_DigestFinal_ex(md.get(), reinterpret_cast<unsigned char*>(digest.data()), &n);
    if (digest != sha256 || !out) {
      std::filesystem::remove(tmp);
      return digest != sha256 ? invalid("weight cache: the bytes do not have the SHA-256 sent with them")
                              : grpc::Status(grpc::StatusCode::INTERNAL, fmt::format("cannot write {}", tmp.string()));
    }
    std::filesystem::rename(tmp, path);
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::memset(uint64_t session, const MemsetRequest& request) {
  return in_session(session, [&](Session& s) {
    grpc::Status status;
    if (request.value() > 255) return invalid(fmt::format("memset value {} is not a byte", request.value()));
    std::shared_ptr<Buffer> b = s.checked_range(request.range(), status);
    if (!b) return status;
    if (request.range().size() == 0) return grpc::Status::OK;
    auto [t, start] = tensor_of(request.range(), *b);
    b->memset_tensor(t, static_cast<uint8_t>(request.value()), start, request.range().size());
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::copy(uint64_t session, const CopyRequest& request) {
  return in_session(session, [&](Session& s) {
    grpc::Status status;
    std::shared_ptr<Buffer> src = s.checked_range(request.src(), status);
    if (!src) return status;
    BytesRange dst_range;
    dst_range.set_buffer(request.dst_buffer());
    dst_range.set_offset(request.dst_offset());
    dst_range.set_size(request.src().size());
    std::shared_ptr<Buffer> dst = s.checked_range(dst_range, status);
    if (!dst) return status;
    // Staged through the host: correct for any two buffers, overlapping too.
    // The source's tensor, when named, reads its bytes plain; they land raw.
    std::string bytes(request.src().size(), '\0');
    auto [t, start] = tensor_of(request.src(), *src);
    for (uint64_t done = 0; done < bytes.size(); done += kChunkBytes) {
      const size_t n = std::min<uint64_t>(kChunkBytes, bytes.size() - done);
      src->get_tensor(t, bytes.data() + done, start + done, n);
    }
    for (uint64_t done = 0; done < bytes.size(); done += kChunkBytes) {
      const size_t n = std::min<uint64_t>(kChunkBytes, bytes.size() - done);
      Tensor t = at(*dst, request.dst_offset() + done);
      dst->set_tensor(t, bytes.data() + done, 0, n);
    }
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::compute(uint64_t session, const ComputeRequest& request, ComputeReply& reply) {
  return in_session(session, [&](Session& s) {
    grpc::Status status;
    // The writes, each checked as a SetBytes transfer; before the graph runs.
    auto write = [&] {
      for (const Write& w : request.writes()) {
        std::shared_ptr<Buffer> b = s.checked_range(w.range(), status);
        if (!b) return false;
        if (w.data().size() != w.range().size()) {
          status = invalid(fmt::format("compute: a write of {} bytes to a range of {}", w.data().size(),
                                       w.range().size()));
          return false;
        }
        if (w.data().empty()) continue;
        auto [t, start] = tensor_of(w.range(), *b);
        b->set_tensor(t, w.data().data(), start, w.data().size());
      }
      return true;
    };
    // The reads, checked before anything is written or run; made last.
    std::vector<std::shared_ptr<Buffer>> read_buffers;
    uint64_t read_bytes = 0;
    for (const BytesRange& r : request.reads()) {
      std::shared_ptr<Buffer> b = s.checked_range(r, status);
      if (!b) return status;
      if (r.size() > kMaxReplyReadBytes - read_bytes)
        return invalid(fmt::format("compute: the reads ask for more than {} bytes", kMaxReplyReadBytes));
      read_bytes += r.size();
      tensor_of(r, *b);  // throws for a range outside the tensor it names
      read_buffers.push_back(std::move(b));
    }
    auto read = [&] {
      for (int i = 0; i < request.reads_size(); ++i) {
        const BytesRange& r = request.reads(i);
        std::string& data = *reply.add_data();
        data.resize(r.size());
        if (r.size() == 0) continue;
        auto [t, start] = tensor_of(r, *read_buffers[i]);
        read_buffers[i]->get_tensor(t, data.data(), start, r.size());
      }
      return grpc::Status::OK;
    };
    if (!request.has_graph() && request.graph_id() == 0) {
      if (request.patches_size() != 0) return invalid("compute: patches need the id of the graph they patch");
      reply.set_graph_id(0);
      return write() ? read() : status;
    }
    auto lookup = [&](uint64_t handle) { return s.buffer_at(handle); };
    if (request.graph_id() != 0) {
      auto it = std::find_if(s.graphs.begin(), s.graphs.end(),
                             [&](const Session::CachedGraph& g) { return g.id == request.graph_id(); });
      if (it == s.graphs.end())
        return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no cached graph {}", request.graph_id()));
      if (request.patches_size() == 0) {
        s.graphs.splice(s.graphs.begin(), s.graphs, it);
      } else {
        // The graph sent before with some tensors replaced: a new graph,
        // checked in full.
        if (request.has_graph()) return invalid("compute: patches go with a graph id, not with a graph");
        GraphMsg msg = it->msg;
        for (const TensorPatch& p : request.patches()) {
          if (p.index() < 0 || p.index() >= msg.tensors_size())
            return invalid(fmt::format("compute: patch of tensor #{} in graph {} of {} tensors", p.index(),
                                       request.graph_id(), msg.tensors_size()));
          *msg.mutable_tensors(p.index()) = p.tensor();
        }
        const uint32_t device = it->device;
        auto decoded = decode_graph(msg, *devices_[device], lookup);
        s.graphs.push_front({s.next_graph_id++, device, std::move(msg), std::move(decoded)});
      }
    } else {
      if (request.patches_size() != 0) return invalid("compute: patches need the id of the graph they patch");
      const uint32_t device = request.graph().device();
      if (!device_at(device, status)) return status;
      auto decoded = decode_graph(request.graph(), *devices_[device], lookup);
      s.graphs.push_front({s.next_graph_id++, device, request.graph(), std::move(decoded)});
    }
    while (s.graphs.size() > std::max<size_t>(options_.graph_cache, 1)) s.graphs.pop_back();
    Session::CachedGraph& cached = s.graphs.front();
    if (!write()) return status;
    std::unique_ptr<Backend>& backend = s.backends[cached.device];
    if (!backend) backend = devices_[cached.device]->create_backend();
    {
      // Sessions compute at once on the CPU (each has its own backend and
      // threads); other devices take one graph at a time.
      std::unique_lock<std::mutex> device_lock;
      if (devices_[cached.device]->type() != DeviceType::CPU)
        device_lock = std::unique_lock(*device_mutex_[cached.device]);
      backend->compute(cached.graph->graph);
      backend->synchronize();
    }
    // The next graph comes after a round trip and the client's own work:
    // threads that poll for it would only take cores from the client (on
    // the same machine) or from other sessions.
    backend->idle();
    reply.set_graph_id(cached.id);
    return read();
  });
}

}  // namespace loom::rpc
