// Fault injection (loom/fault_injection.h): the Nth buffer allocation, or the
// Nth read of the model file, fails, for every N a load + session + decode
// makes. Each failure must be a loom::Error that says so, and whatever was
// built before it must still work: a model whose session failed makes a new
// session, a session whose decode failed decodes again after reset(). Under
// LeakSanitizer (scripts/test --sanitize address,undefined) nothing leaks.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "loom/error.h"
#include "loom/fault_injection.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/fake_device.h"

namespace loom {
namespace {

struct Config {
  const char* name;
  fault::Site site;
  bool use_mmap;
  bool offload;  // two fake devices beside the CPU, every layer offloaded
};

class FaultInjection : public ::testing::TestWithParam<Config> {
 protected:
  static void SetUpTestSuite() {
    path_ = (std::filesystem::temp_directory_path() / ("loom_fault_test_" + std::to_string(::getpid()) + ".gguf"))
                .string();
    ModelSpec s;
    s.n_vocab = 300;
    s.n_embd = 64;
    s.n_layer = 2;
    s.n_head = 2;
    s.n_head_kv = 1;
    s.n_ff = 64;
    s.n_ctx = 32;
    write_random_model(s, DType::Q8_0, 7, path_);
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }

  std::vector<Device*> devices() const {
    std::vector<Device*> d{&Registry::get().cpu()};
    if (GetParam().offload)
      for (Device* f : test::fake_devices()) d.push_back(f);
    return d;
  }
  LoadOptions load_options() const {
    LoadOptions o;
    o.use_mmap = GetParam().use_mmap;
    if (GetParam().offload) o.placement.n_gpu_layers = 3;  // both layers and the output layer
    return o;
  }
  static SessionOptions session_options() {
    SessionOptions o;
    o.n_ctx = 16;
    o.n_ubatch = 2;  // two graphs for the prompt, then one per token
    o.n_threads = 1;
    return o;
  }
  // The prompt, then one more token: logits of both.
  static std::vector<float> decode_all(Session& s) {
    const std::vector<int32_t> prompt = {1, 17, 42};
    const int32_t next = 5;
    std::vector<float> out = s.decode(prompt);
    const std::vector<float> last = s.decode(std::span(&next, 1));
    out.insert(out.end(), last.begin(), last.end());
    return out;
  }

  static std::string path_;
};
std::string FaultInjection::path_;

TEST_P(FaultInjection, EveryFailureIsAnErrorAndLeavesTheRestUsable) {
  const Config& c = GetParam();
  const auto model = Model::load(path_, devices(), load_options());
  std::vector<float> expected;
  {
    Session session(*model, session_options());
    expected = decode_all(session);
  }

  // How many visits a whole run makes.
  fault::arm(c.site, 0);
  {
    auto m = Model::load(path_, devices(), load_options());
    Session s(*m, session_options());
    decode_all(s);
  }
  const uint64_t total = fault::visits(c.site);
  fault::disarm();
  ASSERT_GT(total, 0u);

  int failed_in[3] = {0, 0, 0};  // load, session, decode
  for (uint64_t n = 1; n <= total; ++n) {
    SCOPED_TRACE("failing visit " + std::to_string(n) + " of " + std::to_string(total));
    std::unique_ptr<Model> m;
    std::unique_ptr<Session> s;
    int stage = 0;
    fault::arm(c.site, n);
    try {
      m = Model::load(path_, devices(), load_options());
      stage = 1;
      s = std::make_unique<Session>(*m, session_options());
      stage = 2;
      decode_all(*s);
      stage = 3;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("injected failure"), std::string::npos) << e.what();
    }
    fault::disarm();
    ASSERT_LT(stage, 3) << "visit " << n << " did not fail";
    ++failed_in[stage];
    if (stage == 1) {
      Session again(*m, session_options());
      EXPECT_EQ(decode_all(again), expected);
    } else if (stage == 2) {
      s->reset();
      EXPECT_EQ(decode_all(*s), expected);
    }
  }
  std::printf("%s: %llu visits failed in turn: %d in loading, %d in session creation, %d in decoding\n", c.name,
              static_cast<unsigned long long>(total), failed_in[0], failed_in[1], failed_in[2]);
}

INSTANTIATE_TEST_SUITE_P(
    Sites, FaultInjection,
    ::testing::Values(Config{"AllocMapped", fault::Site::BufferAlloc, true, false},
                      Config{"AllocRead", fault::Site::BufferAlloc, false, false},
                      Config{"AllocOffload", fault::Site::BufferAlloc, true, true},
                      Config{"FileRead", fault::Site::FileRead, false, false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace loom
