#include "rpc_args.h"

#include <cstdio>
#include <cstdlib>

#include "loom/error.h"
#include "loom/registry.h"
#if LOOM_HAVE_RPC
#include "rpc_client.h"
#endif

namespace loom::cli {

std::vector<OptionSpec> rpc_option_specs() {
  return {
      {{"--rpc"}, "HOST:PORT,..", "use the devices of these loom rpc-servers (env LOOM_RPC)"},
      {{"--rpc-token"}, "SECRET", "token the rpc-servers require (env LOOM_RPC_TOKEN)"},
      {{"--rpc-tls-ca"}, "FILE", "speak TLS to the rpc-servers, trusting this CA certificate (PEM; env LOOM_RPC_TLS_CA)"},
  };
}

std::vector<OptionSpec> with_rpc_options(std::vector<OptionSpec> specs) {
  for (OptionSpec& s : rpc_option_specs()) specs.push_back(std::move(s));
  return specs;
}

void connect_rpc(const Args& args) {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v && *v ? std::optional<std::string>(v) : std::nullopt;
  };
  const std::optional<std::string> list = args.has("--rpc") ? args.get("--rpc") : env("LOOM_RPC");
  if (!list) {
    Registry::get().warn_unknown_filter_names(true);
    Registry::get().apply_env_memory_caps(true);  // an RPC entry then names no device: an error
    return;
  }
#if LOOM_HAVE_RPC
  rpc::ClientOptions o;
  o.endpoints = rpc::parse_endpoints(*list);
  o.token = args.get("--rpc-token").value_or(env("LOOM_RPC_TOKEN").value_or(""));
  o.tls_ca = args.get("--rpc-tls-ca").value_or(env("LOOM_RPC_TLS_CA").value_or(""));
  if (auto t = env("LOOM_RPC_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(t->c_str(), &end);
    if (*end != '\0' || !(s > 0 && s < 1e6)) fail("LOOM_RPC_TIMEOUT: '{}' is not a number of seconds", *t);
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  }
  Registry::get().add_family(rpc::connect(o), "rpc " + *list);
  Registry::get().warn_unknown_filter_names(true);
  Registry::get().apply_env_memory_caps(true);
  // What went over the wire, once the command is done.
  std::atexit([] {
    const rpc::TransferStats s = rpc::transfer_stats();
    if (s.bytes_sent + s.bytes_saved + s.graph_bytes == 0) return;
    std::fprintf(stderr,
                 "rpc: %.1f MiB of tensor bytes sent, %.1f MiB of weights taken from the servers' caches; graphs: "
                 "%llu sent whole, %llu as patches, %llu by id, %.1f MiB\n",
                 s.bytes_sent / 1048576.0, s.bytes_saved / 1048576.0, static_cast<unsigned long long>(s.graphs_sent),
                 static_cast<unsigned long long>(s.graphs_patched), static_cast<unsigned long long>(s.graphs_reused),
                 s.graph_bytes / 1048576.0);
  });
#else
  fail("--rpc: this loom was built without gRPC (LOOM_RPC=OFF or gRPC not found)");
#endif
}

}  // namespace loom::cli
