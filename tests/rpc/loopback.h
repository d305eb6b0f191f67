// Loopback rpc servers for the tests: a server inside the test process on
// an ephemeral port, serving this machine's CPU, and clients of it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "loom/registry.h"
#include "rpc_client.h"
#include "rpc_server.h"

namespace loom::test {

inline std::unique_ptr<rpc::Server> start_server(std::string token = "") {
  rpc::ServerOptions o;
  o.port = 0;
  o.devices = {&Registry::get().cpu()};
  o.token = std::move(token);
  return std::make_unique<rpc::Server>(o);
}

inline std::string endpoint(const rpc::Server& s) { return "127.0.0.1:" + std::to_string(s.port()); }

inline rpc::ClientOptions client_options(std::vector<std::string> endpoints, std::string token = "") {
  rpc::ClientOptions o;
  o.endpoints = std::move(endpoints);
  o.token = std::move(token);
  o.timeout = std::chrono::seconds(20);
  return o;
}

inline std::unique_ptr<BackendFamily> connect(std::vector<std::string> endpoints, std::string token = "") {
  return rpc::connect(client_options(std::move(endpoints), std::move(token)));
}

}  // namespace loom::test
