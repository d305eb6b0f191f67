#include "rpc_server.h"

#include <grpcpp/grpcpp.h>

#include "loom/error.h"
#include "loom_rpc.grpc.pb.h"

namespace loom::rpc {
namespace {

// Compares without stopping at the first difference (no timing hint).
bool same_token(std::string_view a, std::string_view b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    diff |= static_cast<unsigned>(i < a.size() ? a[i] : 0) ^ static_cast<unsigned>(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

class Server::Impl final : public Remote::Service {
 public:
  Impl(Handlers& service, std::string token) : service_(service), token_(std::move(token)) {}

  grpc::Status Hello(grpc::ServerContext* c, const HelloRequest*, HelloReply* r) override {
    return authorized(c) ? service_.hello(*r) : denied();
  }
  grpc::Status Memory(grpc::ServerContext* c, const DeviceRef* q, MemoryReply* r) override {
    return authorized(c) ? service_.memory(*q, *r) : denied();
  }
  grpc::Status SupportsOp(grpc::ServerContext* c, const SupportsOpRequest* q, SupportsOpReply* r) override {
    return authorized(c) ? service_.supports_op(*q, *r) : denied();
  }
  grpc::Status Alloc(grpc::ServerContext* c, const AllocRequest* q, AllocReply* r) override {
    return authorized(c) ? service_.alloc(*q, *r) : denied();
  }
  grpc::Status Free(grpc::ServerContext* c, const BufferRef* q, Empty*) override {
    return authorized(c) ? service_.free(*q) : denied();
  }
  grpc::Status Clear(grpc::ServerContext* c, const ClearRequest* q, Empty*) override {
    return authorized(c) ? service_.clear(*q) : denied();
  }
  grpc::Status SetBytes(grpc::ServerContext* c, grpc::ServerReader<SetBytesChunk>* reader, Empty*) override {
    if (!authorized(c)) return denied();
    SetBytesChunk chunk;
    BytesRange range;
    std::string sha256;
    uint64_t done = 0;
    bool first = true;
    while (reader->Read(&chunk)) {
      if (first) {
        if (!chunk.has_range()) return {grpc::StatusCode::INVALID_ARGUMENT, "set: the first chunk names no range"};
        range = chunk.range();
        sha256 = chunk.sha256();
        first = false;
      }
      grpc::Status s = service_.set_bytes(range, done, chunk.data());
      if (!s.ok()) return s;
      done += chunk.data().size();
    }
    if (!first && done != range.size())
      return {grpc::StatusCode::INVALID_ARGUMENT,
              fmt::format("set: {} of {} bytes arrived", done, range.size())};
    if (!sha256.empty()) return service_.cache_store(range, sha256);
    return grpc::Status::OK;
  }
  grpc::Status SetFromCache(grpc::ServerContext* c, const CachedBytes* q, CacheReply* r) override {
    return authorized(c) ? service_.set_from_cache(*q, *r) : denied();
  }
  grpc::Status GetBytes(grpc::ServerContext* c, const BytesRange* q, grpc::ServerWriter<Chunk>* writer) override {
    if (!authorized(c)) return denied();
    return service_.get_bytes(*q, [&](const Chunk& chunk) { return writer->Write(chunk); });
  }
  grpc::Status Memset(grpc::ServerContext* c, const MemsetRequest* q, Empty*) override {
    return authorized(c) ? service_.memset(*q) : denied();
  }
  grpc::Status Copy(grpc::ServerContext* c, const CopyRequest* q, Empty*) override {
    return authorized(c) ? service_.copy(*q) : denied();
  }
  grpc::Status Compute(grpc::ServerContext* c, const ComputeRequest* q, ComputeReply* r) override {
    return authorized(c) ? service_.compute(*q, *r) : denied();
  }

 private:
  bool authorized(grpc::ServerContext* c) const {
    if (token_.empty()) return true;
    const auto& md = c->client_metadata();
    auto it = md.find(kTokenKey);
    return it != md.end() && same_token(std::string_view(it->second.data(), it->second.size()), token_);
  }
  static grpc::Status denied() {
    return {grpc::StatusCode::PERMISSION_DENIED, "wrong or missing token (--rpc-token / LOOM_RPC_TOKEN)"};
  }

  Handlers& service_;
  std::string token_;
};

Server::Server(ServerOptions options) : options_(std::move(options)) {
  if (options_.devices.empty()) fail("rpc-server: no devices to serve");
  if (!is_loopback(options_.host) && options_.token.empty())
    fail("rpc-server: binding {} (not a loopback address) needs a token (--token)", options_.host);
  if (options_.port < 0 || options_.port > 65535) fail("rpc-server: port {} is not in 0..65535", options_.port);
  service_ = std::make_unique<Handlers>(options_.devices, options_.service);
  impl_ = std::make_unique<Impl>(*service_, options_.token);
  const std::string host = options_.host.find(':') != std::string::npos && !options_.host.starts_with("[")
                               ? "[" + options_.host + "]"
                               : options_.host;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("{}:{}", host, options_.port), grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(impl_.get());
  builder.SetMaxReceiveMessageSize(256 << 20);  // a graph of a large model in one message
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) fail("rpc-server: cannot listen on {}:{}", options_.host, options_.port);
}

Server::~Server() { shutdown(); }

std::string Server::address() const { return fmt::format("{}:{}", options_.host, port_); }

void Server::wait() {
  if (server_) server_->Wait();
}

void Server::shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

}  // namespace loom::rpc
