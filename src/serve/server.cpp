#include "server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <thread>

#include "loom/error.h"
#include "oai.h"
#include "routes.h"

namespace loom::serve {

namespace {

// Compares without an early exit, so the time taken does not tell how much
// of the key was right.
bool same_key(std::string_view given, std::string_view key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  return diff == 0;
}

}  // namespace

Server::Server(Engine& engine, ServerOptions options)
    : engine_(engine), options_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  http_->new_task_queue = [n = options_.n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  // httplib 0.11 listens with a backlog of 5, which a burst of clients
  // overflows (16 connecting at once saw connections dropped). Its hook for
  // socket options is given the listening socket before bind(); bind() then
  // listens on it again with the system's largest backlog.
  http_->set_socket_options([this](int sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);  // httplib's default option
    listen_socket_ = sock;
  });
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // The page itself holds no data: it asks for the key and sends it.
    const bool open = req.path == "/health" || (req.path == "/" && req.method == "GET");
    if (options_.api_key.empty() || open) return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string_view prefix = "Bearer ";
    if (auth.rfind(prefix, 0) == 0 && same_key(std::string_view(auth).substr(prefix.size()), options_.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, RequestError(401, "authentication_error", "", "invalid or missing API key (Authorization: Bearer KEY)"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404, 413 for a body over the limit, ...)
  // get an error object too.
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string message = res.status == 413   ? "the request body is over the size limit"
                                : res.status == 404 ? "no route " + req.method + " " + req.path
                                                    : "the request failed";
    send_error(res, RequestError(res.status, "invalid_request_error", "", message));
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const RequestError& e) {
      send_error(res, e);
    } catch (const std::exception& e) {
      send_error(res, RequestError(500, "server_error", "", e.what()));
    }
  });
  routes();
}

Server::~Server() { stop(); }

void Server::routes() {
  add_completion_routes(*http_, engine_, options_);
  add_info_routes(*http_, engine_, options_);
  add_web_routes(*http_, engine_, options_);
}

int Server::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port <= 0) fail("cannot bind {} on any port", options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    fail("cannot bind {}:{} (in use, or not an address of this machine)", options_.host, port);
  }
  if (::listen(listen_socket_, SOMAXCONN) != 0) fail("listen on {}:{}: {}", options_.host, port, std::strerror(errno));
  return port;
}

void Server::listen() {
  listening_ = true;
  if (!stopping_) http_->listen_after_bind();
  listening_ = false;
}

// httplib's stop() does nothing until its accept loop runs: wait for the
// loop when listen() has been entered (listening_ and stopping_ are set
// before each is checked, so one side always sees the other).
void Server::stop() {
  stopping_ = true;
  while (listening_ && !http_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (http_->is_running()) http_->stop();
}

void send_error(httplib::Response& res, const RequestError& e) {
  res.status = e.status;
  res.set_content(json_text(error_json(e.status, e.type, e.param, e.what())), "application/json");
}

}  // namespace loom::serve
