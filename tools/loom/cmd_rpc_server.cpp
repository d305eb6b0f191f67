// loom rpc-server: this machine's devices for other Looms (--rpc).
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <thread>

#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "loom/registry.h"
#if LOOM_HAVE_RPC
#include "rpc_server.h"
#endif

namespace loom::cli {
namespace {

std::vector<Device*> pick_devices(const Args& args) {
  Registry& reg = Registry::get();
  auto spec = args.get("--devices");
  if (!spec) return reg.devices();
  std::vector<Device*> out;
  for (const std::string& name : split_list(*spec)) {
    Device* d = reg.find(name);
    if (!d) {
      std::string known;
      for (Device* k : reg.devices()) known += (known.empty() ? "" : ", ") + std::string(k->name());
      fail("--devices: unknown device '{}'; the devices are: {}", name, known);
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace

int cmd_rpc_server(int argc, char** argv) {
  Args args("rpc-server",
            "Serve this machine's devices to other Looms over gRPC (they add them with --rpc HOST:PORT).\n"
            "Binds 127.0.0.1 unless --host says otherwise; any other address needs --token or TLS\n"
            "(--tls-cert and --tls-key). Each client holds a session: what it allocated is freed when it\n"
            "disconnects or dies (sessions are printed as they open and end). Runs until interrupted (Ctrl-C).",
            {{{"--host"}, "ADDR", "address to bind (default 127.0.0.1)"},
             {{"--port"}, "N", "port to listen on (default 50052; 0: any free port, printed)"},
             {{"--devices"}, "A,B", "devices to serve, e.g. CPU,OpenCL0 (default: all)"},
             {{"--token"}, "SECRET", "every call must carry this token (clients: --rpc-token)"},
             {{"--tls-cert"}, "FILE", "speak TLS only, with this certificate (PEM; clients: --rpc-tls-ca)"},
             {{"--tls-key"}, "FILE", "the private key of --tls-cert (PEM)"},
             {{"--cache"}, "DIR", "keep weights of 1 MiB or more here by SHA-256: a later load sends no bytes for them"}});
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  if (!args.positional().empty()) fail("rpc-server: unexpected argument '{}'", args.positional().front());
#if LOOM_HAVE_RPC
  // Block the signals before any thread starts (device runtimes, gRPC); one thread waits for
  // them. Their default action first: a shell starts background jobs with
  // SIGINT ignored, and an ignored signal never reaches sigwait.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  rpc::ServerOptions o;
  o.host = args.get_or("--host", "127.0.0.1");
  o.port = args.get_int("--port", 50052, 0, 65535);
  o.token = args.get_or("--token", "");
  o.tls_cert = args.get_or("--tls-cert", "");
  o.tls_key = args.get_or("--tls-key", "");
  o.log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  o.devices = pick_devices(args);
  if (auto dir = args.get("--cache")) {
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    if (ec) fail("--cache: cannot create {}: {}", *dir, ec.message());
    o.service.cache_dir = *dir;
  }
  rpc::Server server(o);
  std::string names;
  for (Device* d : o.devices) names += (names.empty() ? "" : ", ") + std::string(d->name());
  std::printf("loom rpc-server listening on %s (devices: %s%s%s)\n", server.address().c_str(), names.c_str(),
              o.token.empty() ? "" : "; token required", o.tls_cert.empty() ? "" : "; TLS");
  if (!o.service.cache_dir.empty()) std::printf("weight cache: %s\n", o.service.cache_dir.c_str());
  std::fflush(stdout);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    server.shutdown();
  });
  server.wait();
  stopper.join();
  return 0;
#else
  fail("rpc-server: this loom was built without gRPC (LOOM_RPC=OFF or gRPC not found)");
#endif
}

}  // namespace loom::cli
