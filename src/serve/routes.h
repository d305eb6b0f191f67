// The route groups of Server, one file each.
#pragma once

#include "request.h"
#include "server.h"

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace loom::serve {

// POST /v1/completions and /v1/chat/completions (stream or not).
void add_completion_routes(httplib::Server& http, Engine& engine, const ServerOptions& options);
// GET /health, /v1/models, /metrics; POST /tokenize, /detokenize.
void add_info_routes(httplib::Server& http, Engine& engine, const ServerOptions& options);
// GET / (the web page) and GET /status (its status view's JSON).
void add_web_routes(httplib::Server& http, Engine& engine, const ServerOptions& options);
// Answers with e's status and an OpenAI-style error object.
void send_error(httplib::Response& res, const RequestError& e);

}  // namespace loom::serve
