// The engine over a model with sliding-window layers: its session keeps a
// window cache sized for every slot, and a slot whose window cache no longer
// holds the positions before the shared prefix's end decodes the whole
// prompt again instead of failing the request.
#include <gtest/gtest.h>

#include "engine.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/temp_model.h"

namespace loom::serve {
namespace {

ModelSpec gemma3_spec() {
  ModelSpec s = test::tiny_spec("gemma3", 6, 1024);
  s.n_swa = 3;
  return s;
}

struct Answer {
  std::string text, error;
};

Answer run(Engine& engine, const std::vector<int32_t>& prompt) {
  CompletionRequest r;
  r.prompt_tokens = prompt;
  r.max_tokens = 8;
  r.sampling.temperature = 0;
  auto task = engine.submit(r);
  Answer a;
  for (;;) {
    auto e = task->pop(std::chrono::seconds(60));
    if (!e) return {"", "no answer within 60 s"};
    a.text += e->text;
    if (e->done) {
      a.error = e->error;
      return a;
    }
  }
}

TEST(EngineSwa, APromptPastTheWindowCacheIsDecodedAgain) {
  test::TempModel file("engine_swa", gemma3_spec(), DType::F32, 4);
  auto model = Model::load(file.path(), {&Registry::get().cpu()});
  EngineOptions o;
  o.n_slots = 2;
  o.session.n_ctx = 1024;
  o.session.n_ubatch = 16;
  Engine engine(*model, o);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back((i * 29 + 5) % 320);
  const Answer first = run(engine, prompt);
  ASSERT_EQ(first.error, "");
  // The slot's cache holds the prompt and the answer, but its window cache
  // only the last positions: the same prompt again cannot continue from 39.
  const Answer again = run(engine, prompt);
  EXPECT_EQ(again.error, "");
  EXPECT_EQ(again.text, first.text);
  EXPECT_EQ(engine.stats().prompt_tokens_cached, 0u);
}

}  // namespace
}  // namespace loom::serve
