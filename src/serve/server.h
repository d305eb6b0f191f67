// `loom serve`'s HTTP side: the OpenAI-compatible routes over an Engine,
// with an optional API key, on cpp-httplib. Errors are OpenAI-style objects:
//   {"error": {"message": ..., "type": ..., "param": ..., "code": STATUS}}
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "engine.h"

namespace httplib {
class Server;
}

namespace loom::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port (bind() says which)
  std::string api_key;           // non-empty: every request but GET /health and GET / (the page) needs "Authorization: Bearer KEY"
  std::string model_name;        // what /v1/models lists and responses name
  size_t max_body_bytes = 1 << 20;
  int n_threads = 32;            // HTTP worker threads (streams hold one each)
};

class Server {
 public:
  Server(Engine& engine, ServerOptions options);
  ~Server();
  // Binds the socket; returns the port. Throws loom::Error when it cannot.
  int bind();
  // Serves until stop() (blocking). stop() may come from another thread at
  // any time, even before listen() has started; listen() then returns at once.
  void listen();
  void stop();

 private:
  void routes();
  Engine& engine_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> listening_{false}, stopping_{false};
  int listen_socket_ = -1;  // httplib's listening socket, once bind() has made it
};

}  // namespace loom::serve
