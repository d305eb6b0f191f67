#include "rpc_service.h"

#include <openssl/evp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <new>

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

Handlers::Handlers(std::vector<Device*> devices, ServiceOptions options)
    : devices_(std::move(devices)), options_(options), backends_(devices_.size()) {}

Handlers::~Handlers() = default;

size_t Handlers::n_buffers() const {
  std::lock_guard lock(mutex_);
  return buffers_.size();
}

Device* Handlers::device_at(uint32_t index, grpc::Status& status) const {
  if (index < devices_.size()) return devices_[index];
  status = invalid(fmt::format("no device {} (this server has {})", index, devices_.size()));
  return nullptr;
}

std::shared_ptr<Buffer> Handlers::buffer_at(uint64_t handle) const {
  auto it = buffers_.find(handle);
  return it == buffers_.end() ? nullptr : it->second;
}

std::shared_ptr<Buffer> Handlers::checked_range(const BytesRange& range, grpc::Status& status) const {
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

Backend& Handlers::backend_for(uint32_t device) {
  if (!backends_[device]) backends_[device] = devices_[device]->create_backend();
  return *backends_[device];
}

grpc::Status Handlers::hello(HelloReply& reply) {
  return guarded([&] {
    reply.set_protocol(kProtocolVersion);
    reply.set_cache(!options_.cache_dir.empty());
    for (Device* d : devices_) {
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
    try {
      std::lock_guard lock(mutex_);
      decode_graph(request.graph(), *d, nullptr);
      reply.set_supported(true);
    } catch (const Error&) {
      reply.set_supported(false);  // malformed or unsupported: either way, not here
    }
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::alloc(const AllocRequest& request, AllocReply& reply) {
  return guarded([&] {
    grpc::Status status;
    Device* d = device_at(request.device(), status);
    if (!d) return status;
    if (request.size() > options_.max_alloc)
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          fmt::format("{} bytes is more than this server allocates at once ({})", request.size(),
                                      options_.max_alloc));
    std::shared_ptr<Buffer> b;
    try {
      b = d->default_buffer_type().alloc(request.size());
    } catch (const Error& e) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, e.what());
    }
    std::lock_guard lock(mutex_);
    const uint64_t handle = next_handle_++;
    buffers_.emplace(handle, std::move(b));
    reply.set_buffer(handle);
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::free(const BufferRef& request) {
  std::lock_guard lock(mutex_);
  if (!buffers_.erase(request.buffer()))
    return {grpc::StatusCode::NOT_FOUND, fmt::format("no buffer {}", request.buffer())};
  // Cached graphs may hold the buffer: the client's next graph is sent whole.
  graphs_.clear();
  return grpc::Status::OK;
}

grpc::Status Handlers::clear(const ClearRequest& request) {
  return guarded([&] {
    if (request.value() > 255) return invalid(fmt::format("clear value {} is not a byte", request.value()));
    std::lock_guard lock(mutex_);
    std::shared_ptr<Buffer> b = buffer_at(request.buffer());
    if (!b) return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no buffer {}", request.buffer()));
    b->clear(static_cast<uint8_t>(request.value()));
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::set_bytes(const BytesRange& range, uint64_t done, const std::string& data) {
  return guarded([&] {
    std::lock_guard lock(mutex_);
    grpc::Status status;
    std::shared_ptr<Buffer> b = checked_range(range, status);
    if (!b) return status;
    if (done > range.size() || data.size() > range.size() - done)
      return invalid(fmt::format("set: chunk of {} bytes after {} overruns the transfer of {} bytes", data.size(),
                                 done, range.size()));
    if (data.empty()) return grpc::Status::OK;
    Tensor t = at(*b, range.offset() + done);
    b->set_tensor(t, data.data(), 0, data.size());
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::get_bytes(const BytesRange& range, const std::function<bool(const Chunk&)>& write) {
  return guarded([&] {
    Chunk chunk;
    for (uint64_t done = 0; done < range.size() || (done == 0 && range.size() == 0);) {
      const size_t n = std::min<uint64_t>(kChunkBytes, range.size() - done);
      {
        std::lock_guard lock(mutex_);
        grpc::Status status;
        std::shared_ptr<Buffer> b = checked_range(range, status);
        if (!b) return status;
        chunk.mutable_data()->resize(n);
        if (n) {
          Tensor t = at(*b, range.offset() + done);
          b->get_tensor(t, chunk.mutable_data()->data(), 0, n);
        }
      }
      if (!write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading");
      done += n;
      if (n == 0) break;
    }
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::set_from_cache(const CachedBytes& request, CacheReply& reply) {
  return guarded([&] {
    reply.set_hit(false);
    if (options_.cache_dir.empty() || request.sha256().size() != 32) return grpc::Status::OK;
    std::lock_guard lock(mutex_);
    grpc::Status status;
    std::shared_ptr<Buffer> b = checked_range(request.range(), status);
    if (!b) return status;
    const auto path = std::filesystem::path(options_.cache_dir) / (hex(request.sha256()) + ".bin");
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) != request.range().size() || ec) return grpc::Status::OK;
    std::ifstream in(path, std::ios::binary);
    std::string chunk;
    for (uint64_t done = 0; done < request.range().size(); done += chunk.size()) {
      chunk.resize(std::min<uint64_t>(kChunkBytes, request.range().size() - done));
      if (!in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())))
        return grpc::Status(grpc::StatusCode::INTERNAL, fmt::format("cannot read {}", path.string()));
      Tensor t = at(*b, request.range().offset() + done);
      b->set_tensor(t, chunk.data(), 0, chunk.size());
    }
    reply.set_hit(true);
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::cache_store(const BytesRange& range, const std::string& sha256) {
  return guarded([&] {
    if (options_.cache_dir.empty() || range.size() < kMinCachedBytes) return grpc::Status::OK;
    if (sha256.size() != 32) return invalid(fmt::format("a SHA-256 has 32 bytes, not {}", sha256.size()));
    std::lock_guard lock(mutex_);
    grpc::Status status;
    std::shared_ptr<Buffer> b = checked_range(range, status);
    if (!b) return status;
    const auto dir = std::filesystem::path(options_.cache_dir);
    const auto path = dir / (hex(sha256) + ".bin");
    if (std::filesystem::exists(path)) return grpc::Status::OK;
    // Hash what arrived, not what the client claims: a wrong claim is refused
    // and never names a file.
    const auto tmp = dir / (hex(sha256) + ".tmp");
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
    std::string chunk;
    for (uint64_t done = 0; done < range.size(); done += chunk.size()) {
      chunk.resize(std::min<uint64_t>(kChunkBytes, range.size() - done));
      Tensor t = at(*b, range.offset() + done);
      b->get_tensor(t, chunk.data(), 0, chunk.size());
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

grpc::Status Handlers::memset(const MemsetRequest& request) {
  return guarded([&] {
    if (request.value() > 255) return invalid(fmt::format("memset value {} is not a byte", request.value()));
    std::lock_guard lock(mutex_);
    grpc::Status status;
    std::shared_ptr<Buffer> b = checked_range(request.range(), status);
    if (!b) return status;
    if (request.range().size() == 0) return grpc::Status::OK;
    Tensor t = at(*b, request.range().offset());
    b->memset_tensor(t, static_cast<uint8_t>(request.value()), 0, request.range().size());
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::copy(const CopyRequest& request) {
  return guarded([&] {
    std::lock_guard lock(mutex_);
    grpc::Status status;
    std::shared_ptr<Buffer> src = checked_range(request.src(), status);
    if (!src) return status;
    BytesRange dst_range;
    dst_range.set_buffer(request.dst_buffer());
    dst_range.set_offset(request.dst_offset());
    dst_range.set_size(request.src().size());
    std::shared_ptr<Buffer> dst = checked_range(dst_range, status);
    if (!dst) return status;
    // Staged through the host: correct for any two buffers, overlapping too.
    std::string bytes(request.src().size(), '\0');
    for (uint64_t done = 0; done < bytes.size(); done += kChunkBytes) {
      const size_t n = std::min<uint64_t>(kChunkBytes, bytes.size() - done);
      Tensor s = at(*src, request.src().offset() + done);
      src->get_tensor(s, bytes.data() + done, 0, n);
    }
    for (uint64_t done = 0; done < bytes.size(); done += kChunkBytes) {
      const size_t n = std::min<uint64_t>(kChunkBytes, bytes.size() - done);
      Tensor d = at(*dst, request.dst_offset() + done);
      dst->set_tensor(d, bytes.data() + done, 0, n);
    }
    return grpc::Status::OK;
  });
}

grpc::Status Handlers::compute(const ComputeRequest& request, ComputeReply& reply) {
  return guarded([&] {
    std::lock_guard lock(mutex_);
    DecodedGraph* graph = nullptr;
    uint32_t device = 0;
    if (request.graph_id() != 0) {
      auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const CachedGraph& g) { return g.id == request.graph_id(); });
      if (it == graphs_.end())
        return grpc::Status(grpc::StatusCode::NOT_FOUND, fmt::format("no cached graph {}", request.graph_id()));
      graphs_.splice(graphs_.begin(), graphs_, it);
    } else {
      grpc::Status status;
      device = request.graph().device();
      if (!device_at(device, status)) return status;
      auto decoded = decode_graph(request.graph(), *devices_[device],
                                  [&](uint64_t handle) { return buffer_at(handle); });
      graphs_.push_front({next_graph_id_++, device, std::move(decoded)});
      while (graphs_.size() > std::max<size_t>(options_.graph_cache, 1)) graphs_.pop_back();
    }
    CachedGraph& cached = graphs_.front();
    graph = cached.graph.get();
    device = cached.device;
    Backend& backend = backend_for(device);
    backend.compute(graph->graph);
    backend.synchronize();
    reply.set_graph_id(cached.id);
    return grpc::Status::OK;
  });
}

}  // namespace loom::rpc
