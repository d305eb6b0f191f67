// GET / (the web page: a chat and a status view) and GET /status (what the
// status view shows, as JSON).
#include <httplib.h>

#include <algorithm>
#include <map>
#include <string_view>

#include "loom/backend.h"
#include "loom/model.h"
#include "oai.h"
#include "routes.h"

namespace loom::serve {

std::string_view web_page();  // web_page.cpp, generated from web/index.html

namespace {

using nlohmann::json;

const char* device_type(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "CPU";
    case DeviceType::GPU: return "GPU";
    case DeviceType::IGPU: return "iGPU";
    case DeviceType::ACCEL: return "accelerator";
  }
  return "?";
}

json status_json(const Engine& engine, const ServerOptions& options) {
  const Model& model = engine.model();
  const EngineStats s = engine.stats();
  std::map<const Device*, int64_t> layers;
  for (int64_t l = 0; l < model.hparams().n_layer; ++l) ++layers[&model.layer_device(l)];
  json devices = json::array();
  for (const Device* d : model.devices())
    devices.push_back({{"name", std::string(d->name())}, {"type", device_type(d->type())}, {"layers", layers[d]}});
  for (const auto& [d, n] : layers)  // a layer device holding no weight
    if (std::find(model.devices().begin(), model.devices().end(), d) == model.devices().end())
      devices.push_back({{"name", std::string(d->name())}, {"type", device_type(d->type())}, {"layers", n}});
  json weights = json::array();
  for (const auto& [type, bytes] : model.weight_bytes_by_buffer_type())
    weights.push_back({{"buffer_type", type}, {"bytes", bytes}});
  json slots = json::array();
  for (const SlotStats& x : s.slots)
    slots.push_back({{"id", x.id}, {"state", x.busy ? "processing" : "idle"}, {"n_cached", x.n_cached},
                     {"n_prompt", x.n_prompt}, {"n_pending", x.n_pending}, {"generated", x.generated}});
  return {{"model", options.model_name},
          {"arch", model.hparams().arch},
          {"n_slots", engine.n_slots()},
          {"n_ctx_slot", engine.slot_ctx()},
          {"devices", devices},
          {"weights", weights},
          {"slots", slots},
          {"kv_cells", s.kv_cells},
          {"kv_cells_used", s.kv_cells_used},
          {"requests", s.requests},
          {"requests_queued", s.queued},
          {"generated_tokens", s.generated_tokens},
          {"decode_seconds", s.decode_seconds}};
}

}  // namespace

void add_web_routes(httplib::Server& http, Engine& engine, const ServerOptions& options) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = web_page();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  http.Get("/status", [&engine, &options](const httplib::Request&, httplib::Response& res) {
    res.set_content(json_text(status_json(engine, options)), "application/json");
  });
}

}  // namespace loom::serve
