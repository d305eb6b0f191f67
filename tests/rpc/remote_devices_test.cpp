// Remote devices end to end: two rpc servers on loopback (ephemeral ports)
// inside this process, serving the CPU, and a client that uses them as
// RPC0:CPU and RPC1:CPU. The ops conform through them, a model split over
// CPU + RPC0 + RPC1 gives the CPU's logits, a server that goes away gives
// an error naming it, and a wrong token is refused. Sessions: a client that
// goes away without freeing leaves no buffers behind, and two clients run
// at once. Graphs of the same structure travel as patches; TLS with a
// certificate made at test time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <atomic>
#include <thread>

#include "conformance/conformance.h"
#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "loom_rpc.grpc.pb.h"
#include "loopback.h"

namespace loom {
namespace {

using test::client_options;
using test::connect;
using test::endpoint;
using test::start_server;

// Waits up to 20 s for `done` (a server noticing a client is gone happens
// on its own threads); whether it happened is the caller's to assert.
bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 200 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return done();
}

class RemoteDevices : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server0_ = start_server().release();
    server1_ = start_server().release();
    family_ = connect({endpoint(*server0_), endpoint(*server1_)}).release();
  }
  static void TearDownTestSuite() {
    delete family_;
    delete server1_;
    delete server0_;
  }
  static Device& remote(int i) { return *family_->devices().at(i); }

  static rpc::Server* server0_;
  static rpc::Server* server1_;
  static BackendFamily* family_;
};
rpc::Server* RemoteDevices::server0_ = nullptr;
rpc::Server* RemoteDevices::server1_ = nullptr;
BackendFamily* RemoteDevices::family_ = nullptr;

TEST_F(RemoteDevices, AreNamedByServerAndRemoteName) {
  ASSERT_EQ(family_->devices().size(), 2u);
  EXPECT_EQ(remote(0).name(), "RPC0:CPU");
  EXPECT_EQ(remote(1).name(), "RPC1:CPU");
  EXPECT_EQ(remote(0).default_buffer_type().name(), "RPC0:CPU");
  EXPECT_NE(remote(1).description().find(endpoint(*server1_)), std::string::npos);
  EXPECT_GT(remote(0).memory().total, 0u);
}

TEST_F(RemoteDevices, LargeTensorsRoundTripInChunks) {
  // 3.5 chunks: the last one partial.
  const size_t n = rpc::kChunkBytes * 7 / 8;
  std::vector<float> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = static_cast<float>(i % 1000) * 0.5f;
  Tensor t;
  t.ne = {static_cast<int64_t>(n), 1, 1, 1};
  set_contiguous_strides(t);
  auto buf = remote(0).default_buffer_type().alloc(t.nbytes() + 64);
  buf->place(t, 64);
  tensor_set(t, data.data(), 0, t.nbytes());
  std::vector<float> back(n);
  tensor_get(t, back.data(), 0, t.nbytes());
  EXPECT_EQ(back, data);
  // A copy within the server, then part of it read back.
  Tensor u = t;
  auto buf2 = remote(0).default_buffer_type().alloc(t.nbytes());
  u.buffer = nullptr;
  u.data = nullptr;
  buf2->place(u, 0);
  tensor_copy(t, u);
  std::vector<float> part(100);
  tensor_get(u, part.data(), 4 * (n - 100), 400);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.end() - 100));
}

// Every case the server's CPU runs passes through RPC0:CPU too (none is
// skipped as unsupported on the way).
// Every case the local CPU supports passes on the server's CPU, and the
// others are unsupported there too. (That they pass on the local CPU is the
// CPU conformance suite's business; running them here again doubled the time.)
TEST_F(RemoteDevices, OpsConformThroughAServer) {
  const std::vector<conformance::CaseResult> results = conformance::run_conformance(remote(0));
  const std::vector<conformance::Case>& cases = conformance::all_cases();
  ASSERT_EQ(results.size(), cases.size());
  int passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const bool local = conformance::case_supported(Registry::get().cpu(), cases[i]);
    EXPECT_EQ(results[i].status, local ? conformance::CaseStatus::Passed : conformance::CaseStatus::Unsupported)
        << results[i].name << ": " << results[i].message;
    passed += results[i].status == conformance::CaseStatus::Passed;
  }
  EXPECT_GT(passed, 100);
}

ModelSpec tiny_spec() {
  ModelSpec s;
  s.n_vocab = 260;
  s.n_embd = 64;
  s.n_layer = 3;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 128;
  s.n_ctx = 64;
  return s;
}

std::vector<float> run(Model& m) {
  Session s(m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
  const std::vector<int32_t> prompt = {1, 17, 120, 3, 99, 42};
  std::vector<float> logits = s.decode(prompt, true);
  for (int32_t next : {7, 8}) {
    const std::vector<float> last = s.decode(std::span<const int32_t>(&next, 1));
    logits.insert(logits.end(), last.begin(), last.end());
  }
  return logits;
}

std::string model_file(const char* tag) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("loom_rpc_" + std::string(tag) + "_" + std::to_string(::getpid()) + ".gguf");
  write_random_model(tiny_spec(), DType::Q8_0, 11, path.string());
  return path.string();
}

TEST_F(RemoteDevices, ModelSplitOverCpuAndTwoServersMatchesTheCpu) {
  const std::string path = model_file("split");
  Device& cpu = Registry::get().cpu();
  const std::vector<float> want = run(*Model::load(path, {&cpu}));
  // Layer 0 on the CPU, layer 1 on RPC0, layer 2 on RPC1.
  auto m = Model::load(path, {&cpu, &remote(0), &remote(1)},
                       {.placement = {.n_gpu_layers = 2, .tensor_split = {1.0f, 1.0f}}});
  EXPECT_EQ(m->layer_device(0).name(), "CPU");
  EXPECT_EQ(m->layer_device(1).name(), "RPC0:CPU");
  EXPECT_EQ(m->layer_device(2).name(), "RPC1:CPU");
  const rpc::TransferStats before = rpc::transfer_stats();
  const std::vector<float> got = run(*m);
  const rpc::TransferStats after = rpc::transfer_stats();
  ASSERT_EQ(got.size(), want.size());
  const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
  double err = 0;
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, double(std::fabs(got[i] - want[i])));
  // The same CPU kernels on both sides: equal but for summation order.
  EXPECT_LT(err / (*hi - *lo), 1e-5);
  EXPECT_GT(after.graphs_sent, before.graphs_sent);
  // The second token after the prompt has the first one's shape: its graph on
  // each server is run again by id (the session reuses it), not sent whole.
  EXPECT_EQ(after.graphs_reused - before.graphs_reused, 2u);
  std::printf("[ split ] max |logit difference| / range %.2g; graphs sent %llu, as patches %llu, run again by id %llu\n",
              err / (*hi - *lo), static_cast<unsigned long long>(after.graphs_sent - before.graphs_sent),
              static_cast<unsigned long long>(after.graphs_patched - before.graphs_patched),
              static_cast<unsigned long long>(after.graphs_reused - before.graphs_reused));
  m.reset();
  std::filesystem::remove(path);
}

// Graphs on the wire, every layer on RPC0. A session reuses its graph while
// the shape stays (tokens, cache cells attended in steps of 256), and the
// server runs it again by id; when the attended cells grow past 256 the new
// graph differs in its cache views and masks: sent whole, or as a patch of
// the graph before. Equal logits either way.
TEST(RemoteGraphs, SameShapeGraphsRunByIdAndNewShapesTravelAsPatches) {
  auto server = start_server();
  ModelSpec spec = tiny_spec();
  spec.n_ctx = 1024;
  const auto path = std::filesystem::temp_directory_path() /
                    ("loom_rpc_patches_" + std::to_string(::getpid()) + ".gguf");
  write_random_model(spec, DType::Q8_0, 11, path.string());
  Device& cpu = Registry::get().cpu();
  enum Mode { kWhole, kPatches };
  double growing_bytes[2];
  double by_id_bytes = 0;
  std::vector<float> logits[2];
  for (int mode : {kWhole, kPatches}) {
    rpc::ClientOptions o = client_options({endpoint(*server)});
    o.graph_patches = mode == kPatches;
    auto family = rpc::connect(o);
    auto m = Model::load(path.string(), {&cpu, family->devices()[0]}, {.placement = {.n_gpu_layers = 99}});
    Session s(*m, {.n_ctx = 1024, .type_k = DType::F32, .type_v = DType::F32});
    std::vector<int32_t> prompt(255);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + i % 250);
    s.decode(prompt);
    auto decode_one = [&s](int32_t t) { return s.decode(std::span<const int32_t>(&t, 1)); };
    decode_one(3);  // cell 255: 256 cells attended, a new shape (the prompt had 255 tokens)
    rpc::TransferStats before = rpc::transfer_stats();
    decode_one(4);  // cell 256: 512 cells attended
    rpc::TransferStats after = rpc::transfer_stats();
    growing_bytes[mode] = double(after.graph_bytes - before.graph_bytes);
    EXPECT_EQ(after.graphs_patched - before.graphs_patched, mode == kPatches ? 1u : 0u);
    EXPECT_EQ(after.graphs_sent - before.graphs_sent, mode == kWhole ? 1u : 0u);
    constexpr int kTokens = 8;
    before = rpc::transfer_stats();
    for (int32_t next = 5; next < 5 + kTokens; ++next) logits[mode] = decode_one(next);
    after = rpc::transfer_stats();
    EXPECT_EQ(after.graphs_reused - before.graphs_reused, uint64_t{kTokens});
    EXPECT_EQ(after.graphs_sent + after.graphs_patched, before.graphs_sent + before.graphs_patched);
    // Each token's logits came back in its compute call's reply, and its
    // inputs (the embedding row from the CPU, positions, cells, mask) went
    // with the graph: one call per token.
    EXPECT_EQ(after.reads_in_replies - before.reads_in_replies, uint64_t{kTokens});
    EXPECT_EQ(after.write_calls, before.write_calls);
    by_id_bytes = double(after.graph_bytes - before.graph_bytes + after.bytes_sent - before.bytes_sent) / kTokens;
  }
  EXPECT_LT(growing_bytes[kPatches], growing_bytes[kWhole]);
  EXPECT_EQ(logits[kWhole], logits[kPatches]);
  std::printf("[ patches ] 3-layer model all on RPC0: the graph for 512 cells after one for 256 took %.0f bytes whole, "
              "%.0f as a patch (%.1fx fewer); same-shape tokens sent %.0f bytes each (graph id and inputs)\n",
              growing_bytes[kWhole], growing_bytes[kPatches], growing_bytes[kWhole] / growing_bytes[kPatches],
              by_id_bytes);
  std::filesystem::remove(path);
}

// A client that goes away without freeing anything (its session stream
// ends, as when its process dies) leaves no buffers on the server.
TEST(RemoteSessions, AClientThatGoesAwayLeavesNoBuffers) {
  auto server = start_server();
  auto channel = grpc::CreateChannel(endpoint(*server), grpc::InsecureChannelCredentials());
  auto stub = rpc::Remote::NewStub(channel);
  grpc::ClientContext attach_context;
  auto attach = stub->Attach(&attach_context, rpc::AttachRequest());
  rpc::SessionEvent event;
  ASSERT_TRUE(attach->Read(&event));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext c;
    c.AddMetadata(rpc::kSessionKey, std::to_string(event.session()));
    rpc::AllocRequest q;
    q.set_size(1 << 20);
    rpc::AllocReply r;
    ASSERT_TRUE(stub->Alloc(&c, q, &r).ok());
  }
  EXPECT_EQ(server->handlers().n_buffers(), 3u);
  attach_context.TryCancel();  // the connection's end, seen by the server as a dead client's
  (void)attach->Finish();
  EXPECT_TRUE(eventually([&] { return server->handlers().n_buffers() == 0; }));
  rpc::StatsReply stats;
  ASSERT_TRUE(server->handlers().stats(stats).ok());
  EXPECT_EQ(stats.sessions(), 0u);
  EXPECT_EQ(stats.sessions_ended(), 1u);
  // The session's id opens nothing any more.
  grpc::ClientContext c;
  c.AddMetadata(rpc::kSessionKey, std::to_string(event.session()));
  rpc::AllocRequest q;
  q.set_size(16);
  rpc::AllocReply r;
  EXPECT_EQ(stub->Alloc(&c, q, &r).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A TCP relay between one client and a server that can freeze: it stops
// passing bytes but keeps both connections open, as a client machine that
// lost power or its network does.
class FreezableRelay {
 public:
  explicit FreezableRelay(int server_port) : server_port_(server_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("relay: cannot listen");
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { relay(); });
  }
  ~FreezableRelay() {
    stop_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    for (int fd : {listener_, client_, server_})
      if (fd >= 0) ::close(fd);
  }
  int port() const { return port_; }
  void freeze() { frozen_ = true; }

 private:
  void relay() {
    pollfd accept_fd{listener_, POLLIN, 0};
    while (!stop_ && ::poll(&accept_fd, 1, 50) == 0) {
    }
    if (stop_) return;
    client_ = ::accept(listener_, nullptr, nullptr);
    server_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(server_port_));
    if (client_ < 0 || ::connect(server_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    char buf[65536];
    while (!stop_) {
      pollfd fds[2] = {{client_, POLLIN, 0}, {server_, POLLIN, 0}};
      if (frozen_ || ::poll(fds, 2, 50) <= 0) {
        if (frozen_) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      for (int i = 0; i < 2; ++i)
        if (fds[i].revents & (POLLIN | POLLHUP)) {
          const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
          if (n <= 0) return;
          for (ssize_t done = 0; done < n;) {
            const ssize_t w = ::write(fds[1 - i].fd, buf + done, n - done);
            if (w <= 0) return;
            done += w;
          }
        }
    }
  }

  int server_port_, port_ = 0;
  int listener_ = -1, client_ = -1, server_ = -1;
  std::atomic<bool> stop_{false}, frozen_{false};
  std::thread thread_;
};

// A client that stops answering without closing its connection: the
// server's keepalive pings go unanswered, the connection is dropped, and
// the session's buffers are freed (keepalive 1 s here, 10 s by default).
TEST(RemoteSessions, AClientThatFallsSilentLosesItsSessionAfterKeepalive) {
  rpc::ServerOptions o;
  o.port = 0;
  o.devices = {&Registry::get().cpu()};
  o.keepalive_seconds = 1;
  rpc::Server server(o);
  FreezableRelay relay(server.port());
  auto stub = rpc::Remote::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(relay.port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext attach_context;
  auto attach = stub->Attach(&attach_context, rpc::AttachRequest());
  rpc::SessionEvent event;
  ASSERT_TRUE(attach->Read(&event));
  grpc::ClientContext c;
  c.AddMetadata(rpc::kSessionKey, std::to_string(event.session()));
  rpc::AllocRequest q;
  q.set_size(1 << 20);
  rpc::AllocReply r;
  ASSERT_TRUE(stub->Alloc(&c, q, &r).ok());
  EXPECT_EQ(server.handlers().n_buffers(), 1u);
  relay.freeze();
  EXPECT_TRUE(eventually([&] { return server.handlers().n_buffers() == 0; }));
  attach_context.TryCancel();
  (void)attach->Finish();
}

// Two clients of one server at once, each with its own session: both get
// the CPU's logits, and their buffers go when they disconnect.
TEST(RemoteSessions, TwoClientsRunAtOnce) {
  auto server = start_server();
  const std::string path = model_file("two");
  Device& cpu = Registry::get().cpu();
  const std::vector<float> want = run(*Model::load(path, {&cpu}));
  std::vector<float> got[2];
  std::string errors[2];
  {
    std::thread clients[2];
    for (int i = 0; i < 2; ++i)
      clients[i] = std::thread([&, i] {
        try {
          auto family = connect({endpoint(*server)});
          auto m = Model::load(path, {&cpu, family->devices()[0]}, {.placement = {.n_gpu_layers = 99}});
          got[i] = run(*m);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    for (std::thread& t : clients) t.join();
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(errors[i], "");
    ASSERT_EQ(got[i].size(), want.size());
    const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
    for (size_t k = 0; k < want.size(); ++k) ASSERT_NEAR(got[i][k], want[k], 1e-5 * (*hi - *lo)) << "client " << i;
  }
  EXPECT_TRUE(eventually([&] { return server->handlers().n_buffers() == 0; }));
  std::filesystem::remove(path);
}

TEST(RemoteTls, AServerWithACertificateSpeaksTlsOnly) {
  const auto dir = std::filesystem::temp_directory_path() / ("loom_rpc_tls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string make_cert =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + key + " -out " + cert + " 2>/dev/null";
  if (std::system(make_cert.c_str()) != 0) GTEST_SKIP() << "the openssl command could not make a certificate";
  rpc::ServerOptions o;
  o.port = 0;
  o.devices = {&Registry::get().cpu()};
  o.tls_cert = cert;
  o.tls_key = key;
  rpc::Server server(o);
  rpc::ClientOptions c = client_options({endpoint(server)});
  c.tls_ca = cert;
  auto family = rpc::connect(c);
  ASSERT_EQ(family->devices().size(), 1u);
  {
    Tensor t;  // holds its buffer, which must go before the family
    t.ne = {64, 1, 1, 1};
    set_contiguous_strides(t);
    family->devices()[0]->default_buffer_type().alloc(t.nbytes())->place(t, 0);
    std::vector<float> data(64, 2.5f), back(64);
    tensor_set(t, data.data(), 0, t.nbytes());
    tensor_get(t, back.data(), 0, t.nbytes());
    EXPECT_EQ(back, data);
  }
  // Plaintext to a TLS server, and TLS trusting another certificate, fail.
  c.tls_ca.clear();
  c.timeout = std::chrono::seconds(5);
  EXPECT_THROW(rpc::connect(c), Error);
  const std::string other = (dir / "other.pem").string();
  const std::string make_other = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " +
                                 (dir / "other.key").string() + " -out " + other + " 2>/dev/null";
  ASSERT_EQ(std::system(make_other.c_str()), 0);
  c.tls_ca = other;
  EXPECT_THROW(rpc::connect(c), Error);
  // TLS alone allows binding beyond loopback; half of it is refused.
  o.host = "0.0.0.0";
  EXPECT_NO_THROW(rpc::Server{o});
  o.tls_key.clear();
  EXPECT_THROW(rpc::Server{o}, Error);
  family.reset();
  std::filesystem::remove_all(dir);
}

TEST(RemoteDeviceFailures, AServerThatGoesAwayIsAnErrorNamingIt) {
  auto server = start_server();
  const std::string where = endpoint(*server);
  auto family = connect({where});
  const std::string path = model_file("killed");
  Device& cpu = Registry::get().cpu();
  auto m = Model::load(path, {&cpu, family->devices()[0]}, {.placement = {.n_gpu_layers = 2}});
  Session s(*m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
  const std::vector<int32_t> prompt = {1, 17, 120};
  s.decode(prompt);
  server.reset();  // mid-generation
  const int32_t next = 7;
  try {
    s.decode(std::span<const int32_t>(&next, 1));
    FAIL() << "decoding on a server that is gone succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RPC0"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// Weights of 1 MiB or more: the second load onto a server with a cache
// sends none of their bytes.
TEST(RemoteWeightCache, ASecondLoadSendsNoCachedWeightBytes) {
  const auto dir = std::filesystem::temp_directory_path() / ("loom_rpc_cache_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  rpc::ServerOptions o;
  o.port = 0;
  o.devices = {&Registry::get().cpu()};
  o.service.cache_dir = dir.string();
  rpc::Server server(o);
  auto family = connect({endpoint(server)});
  ModelSpec spec = tiny_spec();
  spec.n_embd = 512;  // f32 [512, 512] matrices: 1 MiB each
  spec.n_ff = 512;
  spec.n_layer = 1;
  const auto path = (dir / "m.gguf").string();
  write_random_model(spec, DType::F32, 3, path);
  Device& cpu = Registry::get().cpu();
  size_t cached_bytes = 0;
  std::vector<rpc::TransferStats> stats;
  std::vector<std::vector<float>> logits;
  for (int load = 0; load < 2; ++load) {
    const rpc::TransferStats before = rpc::transfer_stats();
    auto m = Model::load(path, {&cpu, family->devices()[0]}, {.placement = {.n_gpu_layers = 2}});
    rpc::TransferStats after = rpc::transfer_stats();
    after.bytes_sent -= before.bytes_sent;
    after.bytes_saved -= before.bytes_saved;
    stats.push_back(after);
    if (load == 0)
      for (const WeightPlacement& p : m->placements())
        if (p.buffer_type == "RPC0:CPU" && p.bytes >= rpc::kMinCachedBytes) cached_bytes += p.bytes;
    logits.push_back(run(*m));
  }
  EXPECT_EQ(cached_bytes, 5u << 20);  // wq, wo, gate, up, down; wk and wv (2 kv heads) are 0.5 MiB
  EXPECT_EQ(stats[0].bytes_saved, 0u);
  EXPECT_EQ(stats[1].bytes_saved, cached_bytes);
  EXPECT_EQ(stats[1].bytes_sent + cached_bytes, stats[0].bytes_sent);
  EXPECT_EQ(logits[0], logits[1]);
  std::printf("[ cache ] first load sent %.2f MiB; second sent %.2f MiB, %.2f MiB from the cache\n",
              stats[0].bytes_sent / 1048576.0, stats[1].bytes_sent / 1048576.0, stats[1].bytes_saved / 1048576.0);
  std::filesystem::remove_all(dir);
}

TEST(RemoteDeviceFailures, NoServerIsAnErrorNamingIt) {
  auto server = start_server();
  const std::string where = endpoint(*server);
  server.reset();
  try {
    connect({where});
    FAIL() << "connected to nothing";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(where), std::string::npos) << e.what();
  }
}

TEST(RemoteDeviceFailures, AWrongTokenIsRefused) {
  auto server = start_server("right");
  for (const char* token : {"wrong", "", "righ", "right "}) {
    try {
      connect({endpoint(*server)}, token);
      FAIL() << "token '" << token << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(connect({endpoint(*server)}, "right")->devices().size(), 1u);
}

TEST(RemoteDeviceFailures, BindingBeyondLoopbackNeedsAToken) {
  rpc::ServerOptions o;
  o.host = "0.0.0.0";
  o.port = 0;
  o.devices = {&Registry::get().cpu()};
  EXPECT_THROW(rpc::Server{o}, Error);
  EXPECT_TRUE(rpc::is_loopback("127.0.0.1"));
  EXPECT_FALSE(rpc::is_loopback("10.0.0.1"));
}

TEST(RemoteDeviceFailures, EndpointListsAreChecked) {
  EXPECT_EQ(rpc::parse_endpoints("a:1,b:2").size(), 2u);
  EXPECT_THROW(rpc::parse_endpoints("a"), Error);
  EXPECT_THROW(rpc::parse_endpoints("a:99999"), Error);
  EXPECT_THROW(rpc::parse_endpoints(","), Error);
}

}  // namespace
}  // namespace loom
