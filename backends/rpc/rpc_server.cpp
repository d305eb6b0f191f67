#include "rpc_server.h"

#include <grpcpp/grpcpp.h>

#include <charconv>
#include <condition_variable>
#include <fstream>
#include <sstream>

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

std::string read_pem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("rpc-server: cannot read the TLS {} {}", what, path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) fail("rpc-server: {} is not a PEM {}", path, what);
  return ss.str();
}

}  // namespace

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.starts_with("127.");
}

class Server::Impl final : public Remote::Service {
 public:
  Impl(Handlers& service, std::string token, std::function<void(const std::string&)> log)
      : service_(service), token_(std::move(token)), log_(std::move(log)) {}

  grpc::Status Hello(grpc::ServerContext* c, const HelloRequest*, HelloReply* r) override {
    return authorized(c) ? service_.hello(*r) : denied();
  }
  grpc::Status Attach(grpc::ServerContext* c, const AttachRequest*, grpc::ServerWriter<SessionEvent>* w) override {
    if (!authorized(c)) return denied();
    uint64_t id = 0;
    grpc::Status s = service_.open_session(id);
    if (!s.ok()) return s;
    say(fmt::format("session {:016x} opened by {}", id, c->peer()));
    SessionEvent event;
    event.set_session(id);
    bool ended_by_client = false;
    if (w->Write(event)) {
      // Until the client ends the call or goes away (its connection closes,
      // or keepalive pings go unanswered), or the server stops.
      std::unique_lock lock(mutex_);
      while (!stopping_ && !(ended_by_client = c->IsCancelled())) wake_.wait_for(lock, std::chrono::milliseconds(100));
    }
    const SessionEnd end = service_.close_session(id);
    say(fmt::format("session {:016x} ended ({}): freed {} buffers, {} bytes", id,
                    ended_by_client ? "client gone" : "server stopping", end.buffers, end.bytes));
    return grpc::Status::OK;
  }
  grpc::Status Stats(grpc::ServerContext* c, const Empty*, StatsReply* r) override {
    return authorized(c) ? service_.stats(*r) : denied();
  }
  grpc::Status Memory(grpc::ServerContext* c, const DeviceRef* q, MemoryReply* r) override {
    return authorized(c) ? service_.memory(*q, *r) : denied();
  }
  grpc::Status SupportsOp(grpc::ServerContext* c, const SupportsOpRequest* q, SupportsOpReply* r) override {
    return authorized(c) ? service_.supports_op(*q, *r) : denied();
  }
  grpc::Status Alloc(grpc::ServerContext* c, const AllocRequest* q, AllocReply* r) override {
    return authorized(c) ? service_.alloc(session(c), *q, *r) : denied();
  }
  grpc::Status Free(grpc::ServerContext* c, const BufferRef* q, Empty*) override {
    return authorized(c) ? service_.free(session(c), *q) : denied();
  }
  grpc::Status Clear(grpc::ServerContext* c, const ClearRequest* q, Empty*) override {
    return authorized(c) ? service_.clear(session(c), *q) : denied();
  }
  grpc::Status SetBytes(grpc::ServerContext* c, grpc::ServerReader<SetBytesChunk>* reader, Empty*) override {
    if (!authorized(c)) return denied();
    const uint64_t id = session(c);
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
      grpc::Status s = service_.set_bytes(id, range, done, chunk.data());
      if (!s.ok()) return s;
      done += chunk.data().size();
    }
    if (!first && done != range.size())
      return {grpc::StatusCode::INVALID_ARGUMENT,
              fmt::format("set: {} of {} bytes arrived", done, range.size())};
    if (!sha256.empty()) return service_.cache_store(id, range, sha256);
    return grpc::Status::OK;
  }
  grpc::Status SetFromCache(grpc::ServerContext* c, const CachedBytes* q, CacheReply* r) override {
    return authorized(c) ? service_.set_from_cache(session(c), *q, *r) : denied();
  }
  grpc::Status GetBytes(grpc::ServerContext* c, const BytesRange* q, grpc::ServerWriter<Chunk>* writer) override {
    if (!authorized(c)) return denied();
    return service_.get_bytes(session(c), *q, [&](const Chunk& chunk) { return writer->Write(chunk); });
  }
  grpc::Status Memset(grpc::ServerContext* c, const MemsetRequest* q, Empty*) override {
    return authorized(c) ? service_.memset(session(c), *q) : denied();
  }
  grpc::Status Copy(grpc::ServerContext* c, const CopyRequest* q, Empty*) override {
    return authorized(c) ? service_.copy(session(c), *q) : denied();
  }
  grpc::Status Compute(grpc::ServerContext* c, const ComputeRequest* q, ComputeReply* r) override {
    return authorized(c) ? service_.compute(session(c), *q, *r) : denied();
  }

  // Ends the sessions' waits (before the server's shutdown waits for them).
  void stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    wake_.notify_all();
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

  // The session a call names (0, which none has, when it names none).
  static uint64_t session(grpc::ServerContext* c) {
    const auto& md = c->client_metadata();
    auto it = md.find(kSessionKey);
    uint64_t id = 0;
    if (it != md.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), id);
    return id;
  }
  void say(const std::string& line) const {
    if (log_) log_(line);
  }

  Handlers& service_;
  std::string token_;
  std::function<void(const std::string&)> log_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
};

Server::Server(ServerOptions options) : options_(std::move(options)) {
  if (options_.devices.empty()) fail("rpc-server: no devices to serve");
  const bool tls = !options_.tls_cert.empty() || !options_.tls_key.empty();
  if (tls && (options_.tls_cert.empty() || options_.tls_key.empty()))
    fail("rpc-server: TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
  if (!is_loopback(options_.host) && options_.token.empty() && !tls)
    fail("rpc-server: binding {} (not a loopback address) needs a token (--token) or TLS (--tls-cert, --tls-key)",
         options_.host);
  if (options_.port < 0 || options_.port > 65535) fail("rpc-server: port {} is not in 0..65535", options_.port);
  service_ = std::make_unique<Handlers>(options_.devices, options_.service);
  impl_ = std::make_unique<Impl>(*service_, options_.token, options_.log);
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (tls) {
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back(
        {read_pem(options_.tls_key, "key"), read_pem(options_.tls_cert, "certificate")});
    credentials = grpc::SslServerCredentials(ssl);
  }
  const std::string host = options_.host.find(':') != std::string::npos && !options_.host.starts_with("[")
                               ? "[" + options_.host + "]"
                               : options_.host;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(fmt::format("{}:{}", host, options_.port), credentials, &port_);
  // Pings each client every keepalive_seconds, even when only its session
  // stream is open; one that does not answer is gone, and its session ends.
  if (options_.keepalive_seconds < 1) fail("rpc-server: keepalive of {} s", options_.keepalive_seconds);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, options_.keepalive_seconds * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, options_.keepalive_seconds * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
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
  if (impl_) impl_->stop();
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
}

}  // namespace loom::rpc
