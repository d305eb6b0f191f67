// `loom rpc-server`'s engine: this machine's devices behind gRPC. It binds
// 127.0.0.1 unless told otherwise, and refuses to bind any other address
// without a token or TLS; with a token, every call must carry it
// (metadata kTokenKey), or it is answered PERMISSION_DENIED. With a
// certificate and key it speaks TLS only.
//
// Each client holds a session (Attach) for as long as it is connected; the
// session's buffers are freed when the client ends it, dies, or stops
// answering keepalive pings (every keepalive_seconds, default
// kKeepaliveSeconds, with as long again for the answer).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "loom/backend.h"
#include "rpc_service.h"

namespace grpc {
class Server;
}

namespace loom::rpc {

inline constexpr const char* kTokenKey = "x-loom-token";
inline constexpr const char* kSessionKey = "x-loom-session";  // decimal session id
inline constexpr int kKeepaliveSeconds = 10;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 50052;  // 0: any free port (port() says which)
  std::vector<Device*> devices;
  std::string token;  // empty: none (loopback only, unless TLS)
  // PEM files; both or neither. With them the server speaks TLS only.
  std::string tls_cert, tls_key;
  ServiceOptions service;
  // Seconds between keepalive pings to each client, and to wait for its answer.
  int keepalive_seconds = kKeepaliveSeconds;
  // Where session starts and ends are told (rpc-server prints them); may be empty.
  std::function<void(const std::string&)> log;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

class Server {
 public:
  // Starts serving; throws loom::Error naming the address when it cannot bind.
  explicit Server(ServerOptions options);
  ~Server();  // shuts down, cancelling calls in progress
  int port() const { return port_; }
  std::string address() const;
  void wait();      // until shutdown() (from another thread or a signal handler's thread)
  void shutdown();  // stops accepting calls and ends those in progress
  const Handlers& handlers() const { return *service_; }

 private:
  class Impl;
  ServerOptions options_;
  std::unique_ptr<Handlers> service_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace loom::rpc
