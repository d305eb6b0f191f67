// Remote devices: the client side of backends/rpc. connect() asks each
// server for its devices and returns a backend family whose devices stand
// for them: RPC0:CPU, RPC1:OpenCL0 (server index, then the server's name).
// Their buffers live on the server; tensor bytes move in chunks, graphs are
// sent whole once, then by id while they stay the same, and as patches (the
// tensors that changed, such as views into the KV cache that move with each
// token) while their structure stays the same.
// Each connection holds a session on its server (Attach): when this process
// ends or dies, the server frees everything it allocated for it.
// Weights of 1 MiB or more go to a server with a weight cache (rpc-server
// --cache) as their SHA-256 first; the bytes follow only when it lacks them.
// Every call has a deadline (ClientOptions::timeout); a server that is gone
// or silent makes the call throw loom::Error naming the server, never hang.
//
// A remote device reports type GPU whatever it is on its server: for
// placement it is memory and compute away from the host, as a GPU is
// (-ngl, -ts, -dev and -ot use it like one).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "loom/registry.h"

namespace loom::rpc {

struct ClientOptions {
  std::vector<std::string> endpoints;  // HOST:PORT, one per server
  std::string token;                   // sent with every call when not empty
  std::chrono::milliseconds timeout{60000};
  // PEM file of the CA that signed the servers' TLS certificates; empty:
  // plaintext. The certificate must name the host as the client names it.
  std::string tls_ca;
  // Send a graph whose structure matches one sent before as patches (off:
  // every changed graph goes whole; for measurements).
  bool graph_patches = true;
};

// Bytes moved to the servers so far, over all connections (for reports).
struct TransferStats {
  uint64_t bytes_sent = 0;      // tensor bytes written to remote buffers
  uint64_t bytes_saved = 0;     // weight bytes the servers took from their caches instead
  uint64_t bytes_received = 0;  // tensor bytes read back
  uint64_t graphs_sent = 0;     // graphs sent whole
  uint64_t graphs_reused = 0;   // graphs run again by id
  uint64_t graphs_patched = 0;  // graphs sent as patches of one sent before
  uint64_t graph_bytes = 0;     // bytes of the compute requests (graphs, ids, patches)
  uint64_t reads_in_replies = 0;  // reads that came back in a compute call's reply (no call of their own)
  uint64_t write_calls = 0;       // calls that carried small writes alone (not with a graph)
};
TransferStats transfer_stats();

// Connects to every endpoint (throws loom::Error naming the one that fails).
std::unique_ptr<BackendFamily> connect(const ClientOptions& options);

// "host:port,host:port" as --rpc and LOOM_RPC take it; throws on a bad item.
std::vector<std::string> parse_endpoints(std::string_view list);

}  // namespace loom::rpc
