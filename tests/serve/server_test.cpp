// `loom serve` in process: the server on an ephemeral loopback port over a
// generated model, driven by httplib's client. Greedy answers are checked
// against a Session decoding the same prompt alone; parallel requests
// against the same requests sent one at a time.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loom/model.h"
#include "loom/registry.h"
#include "loom/tokenizer.h"
#include "model_gen/model_gen.h"
#include "server.h"

namespace loom::serve {
namespace {

using nlohmann::json;

constexpr const char* kKey = "test-key-123";

// One model, one engine (4 slots) and two servers on it: open and keyed.
class Serve : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = (std::filesystem::temp_directory_path() / ("loom_serve_test_" + std::to_string(::getpid()) + ".gguf")).string();
    ModelSpec spec;  // the "tiny" preset, smaller
    spec.n_embd = 64;
    spec.n_layer = 2;
    spec.n_head = 4;
    spec.n_head_kv = 2;
    spec.n_ff = 128;
    spec.n_ctx = 256;
    write_random_model(spec, DType::F32, 3, path_);
    model_ = Model::load(path_, {&Registry::get().cpu()}).release();
    EngineOptions eo;
    eo.n_slots = 4;
    eo.session.n_ctx = 512;
    engine_ = new Engine(*model_, eo);
    open_ = new Running(*engine_, "");
    keyed_ = new Running(*engine_, kKey);
  }
  static void TearDownTestSuite() {
    delete keyed_;
    delete open_;
    delete engine_;
    delete model_;
    std::filesystem::remove(path_);
  }

  struct Running {
    Running(Engine& engine, const std::string& key) {
      ServerOptions so;
      so.port = 0;
      so.api_key = key;
      so.model_name = "tiny-test";
      server = std::make_unique<Server>(engine, so);
      port = server->bind();
      thread = std::thread([this] { server->listen(); });
    }
    ~Running() {
      server->stop();
      thread.join();
    }
    std::unique_ptr<Server> server;
    int port = 0;
    std::thread thread;
  };

  static httplib::Client client(const Running& r = *open_) {
    httplib::Client c("127.0.0.1", r.port);
    c.set_read_timeout(120, 0);
    return c;
  }
  static json post(const std::string& path, const json& body, int want_status = 200) {
    auto res = client().Post(path, body.dump(), "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return {};
    EXPECT_EQ(res->status, want_status) << path << " " << body.dump() << " -> " << res->body;
    return json::parse(res->body);
  }
  // A text as the server sends it in JSON: bytes that are not UTF-8 (a
  // random model's piece may end mid-character) become U+FFFD.
  static std::string as_sent(const std::string& text) {
    return json::parse(json(text).dump(-1, ' ', false, json::error_handler_t::replace)).get<std::string>();
  }
  // logit_bias that keeps a random model from ending its answer.
  static json no_end() {
    json bias = json::object();
    for (int32_t t = 0; t < model_->tokenizer().n_vocab(); ++t)
      if (model_->tokenizer().is_eog(t)) bias[std::to_string(t)] = -100;
    return bias;
  }
  // The greedy continuation of a prompt, decoded alone in a fresh Session.
  static std::string greedy(const std::string& prompt, int n) {
    Session s(*model_, {.n_ctx = 256});
    const Tokenizer& tok = model_->tokenizer();
    std::vector<float> logits = s.decode(tok.encode(prompt, true, true));
    std::string text;
    for (int i = 0; i < n; ++i) {
      const int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (tok.is_eog(t)) break;
      text += tok.token_to_piece(t, false);
      logits = s.decode(std::span(&t, 1));
    }
    return text;
  }
  static json completion(const std::string& prompt, int max_tokens) {
    return post("/v1/completions", {{"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}});
  }
  static double metric(const std::string& name) {
    auto res = client().Get("/metrics");
    const std::string& t = res->body;
    const size_t at = t.find("\n" + name + " ");
    if (at == std::string::npos) return -1;
    return std::stod(t.substr(at + name.size() + 2));
  }

  static std::string path_;
  static Model* model_;
  static Engine* engine_;
  static Running* open_;
  static Running* keyed_;
};
std::string Serve::path_;
Model* Serve::model_ = nullptr;
Engine* Serve::engine_ = nullptr;
Serve::Running* Serve::open_ = nullptr;
Serve::Running* Serve::keyed_ = nullptr;

// The JSON payloads of an SSE body, "[DONE]" as a string.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

TEST_F(Serve, HealthModelsTokenizeDetokenize) {
  auto health = client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  const json models = json::parse(client().Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "tiny-test");
  const json tokens = post("/tokenize", {{"content", "hello world"}});
  const std::vector<int32_t> want = model_->tokenizer().encode("hello world", false, true);
  EXPECT_EQ(tokens["tokens"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(post("/detokenize", {{"tokens", want}})["content"], model_->tokenizer().decode(want));
  post("/detokenize", {{"tokens", {-1}}}, 400);
}

TEST_F(Serve, GreedyCompletionEqualsSessionAlone) {
  const json r = completion("Once upon a time", 10);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], greedy("Once upon a time", 10));
  const int n_prompt = static_cast<int>(model_->tokenizer().encode("Once upon a time", true, true).size());
  EXPECT_EQ(r["usage"]["prompt_tokens"], n_prompt);
  EXPECT_EQ(r["usage"]["total_tokens"], n_prompt + r["usage"]["completion_tokens"].get<int>());
}

TEST_F(Serve, StreamGivesTheSameTextInChunksThenDone) {
  const json body = {{"prompt", "The quick brown fox"}, {"max_tokens", 8}, {"temperature", 0}};
  const std::string whole = completion("The quick brown fox", 8)["choices"][0]["text"];
  json sbody = body;
  sbody["stream"] = true;
  auto res = client().Post("/v1/completions", sbody.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const auto events = sse_events(res->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, whole);
  const json last = json::parse(events[events.size() - 2]);
  EXPECT_EQ(last["usage"]["completion_tokens"], 8);
  EXPECT_FALSE(last["choices"][0]["finish_reason"].is_null());
}

TEST_F(Serve, ChatCompletionWholeAndStreamed) {
  const json msgs = json::array({{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hi"}}});
  const json r = post("/v1/chat/completions", {{"messages", msgs}, {"max_tokens", 6}, {"temperature", 0}});
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["role"], "assistant");
  // The model has no chat template: ChatML.
  const std::string chatml = "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(r["choices"][0]["message"]["content"], greedy(chatml, 6));
  auto res = client().Post("/v1/chat/completions",
                           json({{"messages", msgs}, {"max_tokens", 6}, {"temperature", 0}, {"stream", true}}).dump(),
                           "application/json");
  const auto events = sse_events(res->body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["delta"].value("content", "");
  EXPECT_EQ(text, r["choices"][0]["message"]["content"]);
}

TEST_F(Serve, ParallelRequestsGiveTheSequentialText) {
  const std::vector<std::string> prompts = {"a b c", "Once upon", "hello there friend", "x", "the end of it", "one two",
                                            "zebra", "last words here"};
  std::vector<std::string> sequential;
  for (const auto& p : prompts) sequential.push_back(completion(p, 12)["choices"][0]["text"]);
  std::vector<std::future<json>> parallel;
  for (const auto& p : prompts) parallel.push_back(std::async(std::launch::async, [p] { return completion(p, 12); }));
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(parallel[i].get()["choices"][0]["text"], sequential[i]) << prompts[i];
}

TEST_F(Serve, StopStringEndsTheAnswer) {
  const std::string full = completion("Once upon a time", 16)["choices"][0]["text"];
  ASSERT_GE(full.size(), 6u);
  const std::string stop = full.substr(4, 2);
  const json r = post("/v1/completions",
                      {{"prompt", "Once upon a time"}, {"max_tokens", 16}, {"temperature", 0}, {"stop", {stop}}});
  EXPECT_EQ(r["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
}

TEST_F(Serve, RepeatedPromptReusesTheSlotCache) {
  const std::string prompt = "a prompt long enough to be worth caching in a slot";
  const std::string first = completion(prompt, 4)["choices"][0]["text"];
  const double before = metric("loom_prompt_tokens_cached_total");
  EXPECT_EQ(completion(prompt, 4)["choices"][0]["text"], first);
  const auto n_prompt = model_->tokenizer().encode(prompt, true, true).size();
  EXPECT_EQ(metric("loom_prompt_tokens_cached_total") - before, static_cast<double>(n_prompt - 1));
}

TEST_F(Serve, ApiKeyIsRequired) {
  auto c = client(*keyed_);
  const std::string body = json({{"prompt", "hi"}, {"max_tokens", 1}}).dump();
  auto none = c.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["type"], "authentication_error");
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong-key-123"}})->status, 401);
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", std::string("Bearer ") + kKey}})->status, 200);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST_F(Serve, BadRequestsGet4xxAndTheServerKeepsServing) {
  const auto raw = [](const std::string& body) { return client().Post("/v1/completions", body, "application/json"); };
  for (const std::string& body : {std::string("{bad"), std::string("[1,2]"), std::string("")}) {
    auto r = raw(body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body;
    EXPECT_TRUE(json::parse(r->body)["error"].contains("message")) << body;
  }
  const json base = {{"prompt", "hi"}, {"max_tokens", 2}};
  const std::vector<std::pair<const char*, json>> bad_fields = {
      {"temperature", "hot"}, {"max_tokens", 0}, {"max_tokens", 1 << 30}, {"top_p", 2}, {"stream", "yes"},
      {"stop", json::array({"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"})},
      {"logit_bias", {{"99999999", 1}}}, {"prompt", 5}};
  for (const auto& [key, value] : bad_fields) {
    json b = base;
    b[key] = value;
    const json e = post("/v1/completions", b, 400);
    EXPECT_EQ(e["error"]["param"], key) << b.dump();
  }
  json unknown = base;  // unknown fields are ignored
  unknown["no_such_field"] = {1, 2};
  post("/v1/completions", unknown, 200);
  std::string long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt += "word ";
  post("/v1/completions", {{"prompt", long_prompt}}, 400);  // over a slot's 128 tokens
  auto big = raw(std::string(2 << 20, ' '));                 // over the 1 MiB body limit
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  post("/v1/chat/completions", {{"messages", "hi"}}, 400);
  const std::string deep = R"({"prompt": "hi", "x": )" + std::string(100, '[') + std::string(100, ']') + "}";
  auto nested = raw(deep);
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->status, 400);
  EXPECT_NE(json::parse(nested->body)["error"]["message"].get<std::string>().find("limit on JSON nesting"),
            std::string::npos);
  EXPECT_EQ(completion("Once upon a time", 10)["choices"][0]["text"], greedy("Once upon a time", 10));
}

// Sends a POST on a raw socket (so the test can close it mid-answer); the socket, or -1.
int post_raw(int port, const std::string& path, const json& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string b = body.dump();
  const std::string req = "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(b.size()) + "\r\n\r\n" + b;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Polls `get` until it returns `want` or a minute passes (the bound only
// keeps a broken build from hanging; it is not a timing assertion).
template <class F>
auto wait_for(F get, decltype(get()) want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto got = get();
  while (got != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    got = get();
  }
  return got;
}


// Greedy answers with their log-probabilities: the tokens spell the text,
// each chosen token is the first of its top list, and the first token's
// figure is the log-softmax of a lone Session's logits.
TEST_F(Serve, CompletionLogprobsMatchTheModel) {
  const std::string prompt = "Once upon a time";
  const json r = post("/v1/completions", {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 3}});
  const json& lp = r["choices"][0]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << r.dump();
  ASSERT_EQ(lp["tokens"].size(), 6u);
  std::string text;
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(lp["text_offset"][i], text.size());
    text += lp["tokens"][i].get<std::string>();
    const json& top = lp["top_logprobs"][i];
    EXPECT_LE(top.size(), 3u);
    EXPECT_FLOAT_EQ(top[lp["tokens"][i].get<std::string>()].get<float>(), lp["token_logprobs"][i].get<float>());
    for (const auto& [piece, logprob] : top.items()) EXPECT_LE(logprob.get<float>(), lp["token_logprobs"][i].get<float>());
  }
  EXPECT_EQ(text, r["choices"][0]["text"]);

  Session s(*model_, {.n_ctx = 256});
  const std::vector<float> logits = s.decode(model_->tokenizer().encode(prompt, true, true));
  const float max = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (float l : logits) z += std::exp(static_cast<double>(l - max));
  EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), 0.0 - std::log(z), 1e-4);  // the greedy token's logit is the max

  EXPECT_TRUE(completion(prompt, 2)["choices"][0]["logprobs"].is_null());  // not asked for
  post("/v1/completions", {{"prompt", prompt}, {"logprobs", 21}}, 400);
}

TEST_F(Serve, ChatLogprobsWholeAndStreamedAgree) {
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"max_tokens", 5}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  const json r = post("/v1/chat/completions", body);
  const json& content = r["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u) << r.dump();
  std::string bytes;
  for (const json& t : content) {
    for (int b : t["bytes"]) bytes += static_cast<char>(b);
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["bytes"], t["bytes"]);  // greedy: the likeliest
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
  }
  EXPECT_EQ(as_sent(bytes), r["choices"][0]["message"]["content"]);

  json sbody = body;
  sbody["stream"] = true;
  auto res = client().Post("/v1/chat/completions", sbody.dump(), "application/json");
  ASSERT_TRUE(res);
  json streamed = json::array();
  for (const std::string& e : sse_events(res->body)) {
    if (e == "[DONE]") break;
    const json chunk = json::parse(e);
    const json& l = chunk["choices"][0]["logprobs"];
    ASSERT_TRUE(l.is_object()) << e;
    for (const json& t : l["content"]) streamed.push_back(t);
  }
  // The same tokens; the figures within the documented tolerance (the slot's
  // cache makes the second request decode its prompt in other batches).
  ASSERT_EQ(streamed.size(), content.size());
  const auto near = [](const json& a, const json& b) {
    EXPECT_EQ(a["bytes"], b["bytes"]);
    EXPECT_NEAR(a["logprob"].get<double>(), b["logprob"].get<double>(), 1e-4 * std::abs(b["logprob"].get<double>()) + 1e-6);
  };
  for (size_t i = 0; i < content.size(); ++i) {
    near(streamed[i], content[i]);
    ASSERT_EQ(streamed[i]["top_logprobs"].size(), content[i]["top_logprobs"].size());
    for (size_t k = 0; k < content[i]["top_logprobs"].size(); ++k)
      near(streamed[i]["top_logprobs"][k], content[i]["top_logprobs"][k]);
  }

  json no_top = body;
  no_top.erase("logprobs");
  EXPECT_EQ(post("/v1/chat/completions", no_top, 400)["error"]["param"], "top_logprobs");
}

// 16 clients at once on the 4 slots, streaming and not: each gets the text
// a lone Session decodes greedily.
TEST_F(Serve, SixteenClientsOnFourSlotsGetTheSingleSequenceText) {
  std::vector<std::string> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(fmt::format("client {} says {}", i, std::string(static_cast<size_t>(i % 5 + 1), 'a' + i)));
  std::vector<std::future<std::string>> answers;
  for (int i = 0; i < 16; ++i)
    answers.push_back(std::async(std::launch::async, [&, i] {
      const json body = {{"prompt", prompts[i]}, {"max_tokens", 16}, {"temperature", 0}, {"stream", i % 2 == 1}};
      auto res = client().Post("/v1/completions", body.dump(), "application/json");
      if (!res || res->status != 200) return std::string("(failed)");
      if (i % 2 == 0) return json::parse(res->body)["choices"][0]["text"].get<std::string>();
      std::string text;
      for (const std::string& e : sse_events(res->body))
        if (e != "[DONE]") text += json::parse(e)["choices"][0]["text"].get<std::string>();
      return text;
    }));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(answers[i].get(), as_sent(greedy(prompts[i], 16))) << prompts[i];
}

// 400 malformed requests from 16 threads: each gets a 4xx error object,
// and the server then answers correctly.
TEST_F(Serve, BurstOfMalformedRequestsLeavesTheServerHealthy) {
  const std::vector<std::string> bodies = {
      "{", "null", "[]", "{\"prompt\": 1}", "{\"prompt\": \"x\", \"max_tokens\": \"a\"}",
      "{\"messages\": []}", "{\"prompt\": \"x\", \"temperature\": -1}", "\xff\xfe", std::string(100, '{'),
      "{\"prompt\": \"x\", \"logit_bias\": {\"-3\": 1}}", "{\"prompt\": [999999999]}"};
  std::vector<std::future<std::string>> bad;  // what went wrong, "" when nothing
  for (int t = 0; t < 16; ++t)
    bad.push_back(std::async(std::launch::async, [&, t] {
      std::string wrong;
      for (int i = 0; i < 25; ++i) {
        const std::string& b = bodies[static_cast<size_t>(t * 25 + i) % bodies.size()];
        const char* path = i % 2 ? "/v1/completions" : "/v1/chat/completions";
        auto res = client().Post(path, b, "application/json");
        if (!res || res->status < 400 || res->status >= 500 || !json::parse(res->body)["error"].contains("message"))
          wrong += fmt::format("{} {} -> {} {}\n", path, b, res ? std::to_string(res->status) : httplib::to_string(res.error()), res ? res->body : "");
      }
      return wrong;
    }));
  for (auto& f : bad) EXPECT_EQ(f.get(), "");
  EXPECT_EQ(json::parse(client().Get("/health")->body)["status"], "ok");
  EXPECT_EQ(completion("Once upon a time", 10)["choices"][0]["text"], greedy("Once upon a time", 10));
}

TEST_F(Serve, WebPageAndStatus) {
  auto page = client(*keyed_).Get("/");  // the page is open; what it fetches needs the key
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<textarea id=\"input\""), std::string::npos);
  EXPECT_NE(page->body.find("/v1/chat/completions"), std::string::npos);
  for (const char* external : {"src=\"http", "href=\"http", "@import", "//cdn"})
    EXPECT_EQ(page->body.find(external), std::string::npos) << external;
  EXPECT_EQ(client(*keyed_).Get("/status")->status, 401);
  const json s = json::parse(client().Get("/status")->body);
  EXPECT_EQ(s["n_slots"], 4);
  EXPECT_EQ(s["slots"].size(), 4u);
  EXPECT_EQ(s["devices"][0]["name"], "CPU");
  EXPECT_EQ(s["devices"][0]["layers"], 2);
  EXPECT_GT(s["kv_cells"].get<int>(), 0);
}

// A server of one slot with a long context, so an answer without
// max_tokens runs far longer than the tests take to hang up.
class ServeLong : public Serve {
 protected:
  static void SetUpTestSuite() {
    Serve::SetUpTestSuite();
    EngineOptions eo;
    eo.n_slots = 1;
    eo.session.n_ctx = 32768;
    long_engine_ = new Engine(*model_, eo);
    long_ = new Running(*long_engine_, "");
  }
  static void TearDownTestSuite() {
    delete long_;
    delete long_engine_;
    Serve::TearDownTestSuite();
  }
  static json health() { return json::parse(httplib::Client("127.0.0.1", long_->port).Get("/health")->body); }
  static Engine* long_engine_;
  static Running* long_;
};
Engine* ServeLong::long_engine_ = nullptr;
Serve::Running* ServeLong::long_ = nullptr;

// A client of a whole (not streamed) answer that hangs up frees its slot,
// and one that hangs up while queued leaves the queue.
TEST_F(ServeLong, DisconnectingFromAWholeAnswerOrTheQueueCancels) {
  const json body = {{"prompt", "go on"}, {"temperature", 0}, {"logit_bias", no_end()}};
  const int running = post_raw(long_->port, "/v1/completions", body);
  ASSERT_GE(running, 0);
  ASSERT_EQ(wait_for([] { return health()["slots_processing"].get<int>(); }, 1), 1);
  const int queued = post_raw(long_->port, "/v1/completions", body);
  ASSERT_GE(queued, 0);
  ASSERT_EQ(wait_for([] { return health()["requests_queued"].get<int>(); }, 1), 1);
  ::close(queued);
  EXPECT_EQ(wait_for([] { return health()["requests_queued"].get<int>(); }, 0), 0);
  EXPECT_EQ(health()["slots_processing"], 1);
  ::close(running);
  EXPECT_EQ(wait_for([] { return health()["slots_processing"].get<int>(); }, 0), 0);
  EXPECT_EQ(long_engine_->stats().cancelled, 2u);  // freed by the cancels, not by finishing
}

// A client that leaves mid-stream frees its slot.
TEST_F(ServeLong, DisconnectingMidStreamFreesTheSlot) {
  const uint64_t cancelled = long_engine_->stats().cancelled;
  const int fd = post_raw(long_->port, "/v1/completions",
                          {{"prompt", "go on"}, {"stream", true}, {"temperature", 0}, {"logit_bias", no_end()}});
  ASSERT_GE(fd, 0);
  std::string got;  // read until the first chunk: the stream has started
  char buf[256];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(health()["slots_processing"], 1);
  ::close(fd);
  EXPECT_EQ(wait_for([] { return health()["slots_processing"].get<int>(); }, 0), 0);
  EXPECT_EQ(long_engine_->stats().cancelled, cancelled + 1);
}

}  // namespace
}  // namespace loom::serve
