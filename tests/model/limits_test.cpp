// Values from files and options are bounded before they size an allocation:
// each limit is a clear error that names it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "loom/context.h"
#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"

namespace loom {
namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Limits, TensorWhoseByteSizeOverflowsIsRefused) {
  Context ctx;
  EXPECT_NE(error_of([&] { ctx.new_tensor(DType::F32, {int64_t{1} << 62}); }).find("larger than 2^63 bytes"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ctx.new_tensor(DType::F16, {1 << 21, 1 << 21, 1 << 21}); }).find("larger than 2^63"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { ctx.new_tensor(DType::F32, {int64_t{1} << 40}); }), "");  // metadata only: fine
}

TEST(Limits, ContextSizeIsBounded) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("loom_limits_test_" + std::to_string(::getpid()) + ".gguf")).string();
  ModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 64;
  s.n_layer = 1;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.n_ff = 64;
  write_random_model(s, DType::F32, 1, path);
  auto model = Model::load(path, {&Registry::get().cpu()});
  SessionOptions o;
  o.n_ctx = (int64_t{1} << 24) + 1;
  EXPECT_NE(error_of([&] { Session session(*model, o); }).find("is outside [1, 16777216] (the limit on the context size)"),
            std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace loom
