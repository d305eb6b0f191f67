// GET /health, /v1/models and /metrics; POST /tokenize and /detokenize
// (llama-server's shapes: {"content", "add_special"} -> {"tokens"},
// {"tokens"} -> {"content"}).
#include <httplib.h>

#include <fmt/format.h>

#include "loom/model.h"
#include "loom/tokenizer.h"
#include "oai.h"
#include "routes.h"

namespace loom::serve {

namespace {

using nlohmann::json;

void send_json(httplib::Response& res, const json& j) { res.set_content(json_text(j), "application/json"); }

[[noreturn]] void bad(const std::string& param, const std::string& message) {
  throw RequestError(400, "invalid_request_error", param, message);
}

// Prometheus text exposition: one "# HELP", "# TYPE" and sample per metric.
std::string metrics_text(const EngineStats& s) {
  std::string out;
  const auto metric = [&out](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP loom_{0} {1}\n# TYPE loom_{0} {2}\nloom_{0} {3}\n", name, help, type, value);
  };
  metric("requests_total", "counter", "Completion requests accepted.", static_cast<double>(s.requests));
  metric("requests_cancelled_total", "counter", "Requests whose client left before the end.",
         static_cast<double>(s.cancelled));
  metric("prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", static_cast<double>(s.prompt_tokens));
  metric("prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's cache instead of decoded.",
         static_cast<double>(s.prompt_tokens_cached));
  metric("generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(s.generated_tokens));
  metric("decode_seconds_total", "counter", "Seconds spent in decode steps.", s.decode_seconds);
  metric("decode_steps_total", "counter", "Decode steps (one batch over every active slot each).",
         static_cast<double>(s.decode_steps));
  metric("generated_tokens_per_second", "gauge", "Generated tokens over decode seconds, since start.",
         s.decode_seconds > 0 ? static_cast<double>(s.generated_tokens) / s.decode_seconds : 0.0);
  metric("kv_cache_cells_used", "gauge", "KV cache cells holding a token.", static_cast<double>(s.kv_cells_used));
  metric("kv_cache_cells", "gauge", "KV cache cells in all.", static_cast<double>(s.kv_cells));
  metric("kv_cache_usage_ratio", "gauge", "Used over all KV cache cells.",
         s.kv_cells > 0 ? static_cast<double>(s.kv_cells_used) / static_cast<double>(s.kv_cells) : 0.0);
  metric("requests_queued", "gauge", "Requests waiting for a slot.", static_cast<double>(s.queued));
  out += "# HELP loom_slots Slots by state.\n# TYPE loom_slots gauge\n";
  out += fmt::format("loom_slots{{state=\"idle\"}} {}\nloom_slots{{state=\"processing\"}} {}\n", s.slots_idle,
                     s.slots_busy);
  return out;
}

}  // namespace

void add_info_routes(httplib::Server& http, Engine& engine, const ServerOptions& options) {
  http.Get("/health", [&engine](const httplib::Request&, httplib::Response& res) {
    const EngineStats s = engine.stats();
    send_json(res, {{"status", "ok"}, {"slots_idle", s.slots_idle}, {"slots_processing", s.slots_busy},
                    {"requests_queued", s.queued}});
  });
  http.Get("/v1/models", [&engine, &options](const httplib::Request&, httplib::Response& res) {
    const HParams& h = engine.model().hparams();
    json model = {{"id", options.model_name},
                  {"object", "model"},
                  {"created", 0},
                  {"owned_by", "loom"},
                  {"meta",
                   {{"arch", h.arch}, {"n_vocab", h.n_vocab}, {"n_ctx_train", h.n_ctx_train}, {"n_embd", h.n_embd},
                    {"n_layer", h.n_layer}, {"n_slots", engine.n_slots()}, {"n_ctx_slot", engine.slot_ctx()}}}};
    send_json(res, {{"object", "list"}, {"data", json::array({model})}});
  });
  http.Get("/metrics", [&engine](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(engine.stats()), "text/plain; version=0.0.4");
  });
  http.Post("/tokenize", [&engine](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_object(req.body);
    auto it = body.find("content");
    if (it == body.end() || !it->is_string()) bad("content", "'content' must be a string");
    bool add_special = false;
    if (auto a = body.find("add_special"); a != body.end() && !a->is_null()) {
      if (!a->is_boolean()) bad("add_special", "'add_special' must be true or false");
      add_special = a->get<bool>();
    }
    send_json(res, {{"tokens", engine.model().tokenizer().encode(it->get<std::string>(), add_special, true)}});
  });
  http.Post("/detokenize", [&engine](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_json_object(req.body);
    auto it = body.find("tokens");
    if (it == body.end() || !it->is_array()) bad("tokens", "'tokens' must be an array of token ids");
    const Tokenizer& tok = engine.model().tokenizer();
    std::vector<int32_t> tokens;
    for (const json& t : *it) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab())
        bad("tokens", fmt::format("each token must be an id in [0, {})", tok.n_vocab()));
      tokens.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    send_json(res, {{"content", tok.decode(tokens)}});
  });
}

}  // namespace loom::serve
