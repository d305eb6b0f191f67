// loom serve: an OpenAI-compatible HTTP server (src/serve) over one model,
// with N slots decoded together by continuous batching.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include <pthread.h>
#include <unistd.h>

#include "args.h"
#include "chat_args.h"
#include "commands.h"
#include "model_args.h"
#include "fit_args.h"
#include "placement_args.h"
#include "profile_args.h"
#include "server.h"

namespace loom::cli {

int cmd_serve(int argc, char** argv) {
  auto specs = model_option_specs();
  specs.insert(specs.end(),
               {
                   {{"--host"}, "ADDR", "address to listen on (default 127.0.0.1: this machine only)"},
                   {{"--port"}, "N", "port (default 8080; 0: any free port, printed)"},
                   {{"-np", "--parallel"}, "N", "slots: requests decoded together; -c is shared by them (default 4)"},
                   {{"--api-key"}, "KEY", "require 'Authorization: Bearer KEY' on every request but GET /health"},
                   {{"--chat-template"}, "FILE", "a Jinja chat template instead of the file's (default without one: ChatML)"},
                   {{"--alias"}, "NAME", "the model name /v1/models lists (default: the file name)"},
               });
  for (auto& s : profile_option_specs()) specs.push_back(std::move(s));
  Args args("serve",
            "Serve a GGUF model over HTTP: POST /v1/chat/completions, /v1/completions (stream or not), "
            "GET /v1/models, /health, /metrics, POST /tokenize, /detokenize.",
            specs);
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  serve::ServerOptions so;
  so.host = args.get_or("--host", "127.0.0.1");
  so.port = args.get_int("--port", 8080, 0, 65535);
  so.api_key = args.get_or("--api-key", "");
  const std::string path = model_path(args);
  so.model_name = args.get_or("--alias", std::filesystem::path(path).filename().string());

  ProfileOutput profile(args);
  // With a profile to write, SIGINT and SIGTERM stop the server and the
  // profile is written; a second signal ends the process at once. The
  // signals are blocked before any thread starts, so only the waiter gets them.
  sigset_t stop_signals;
  if (profile.profiler()) {
    std::signal(SIGINT, SIG_DFL);  // a shell starts background jobs with SIGINT ignored
    std::signal(SIGTERM, SIG_DFL);
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  }
  LoadOptions lo = load_options(args);
  lo.progress = true;
  serve::EngineOptions eo;
  eo.session = session_options(args);
  eo.session.profiler = profile.profiler();
  eo.n_slots = args.get_int("--parallel", 4, 1, 4096);
  eo.session.n_seq_max = eo.n_slots;  // --fit sizes a sliding-window cache for every slot
  const bool fit_ctx = apply_fit(args, path, lo, eo.session);
  auto model = load_model(path, lo);
  if (!fit_ctx && args.get("--ctx-size") == std::nullopt)  // the default context, for every slot together
    eo.session.n_ctx = std::min<int64_t>(model->hparams().n_ctx_train, 4096);
  eo.n_step_tokens = eo.session.n_batch;
  GgufChatInfo chat = chat_info_from_gguf(model->file());
  eo.chat_template = args.get("--chat-template") ? read_text_file(*args.get("--chat-template")) : chat.chat_template;
  eo.bos_token = chat.bos_token;
  eo.eos_token = chat.eos_token;
  {
    serve::Engine engine(*model, eo);
    serve::Server server(engine, so);
    const int port = server.bind();
    std::fprintf(stderr, "loom serve: %s on http://%s:%d (%d slots of %lld tokens)\n", so.model_name.c_str(),
                 so.host.c_str(), port, eo.n_slots, static_cast<long long>(engine.slot_ctx()));
    // The waiter outlives this scope; it reaches the server only while it exists.
    struct Running {
      std::mutex mutex;
      serve::Server* server;
    };
    auto running = std::make_shared<Running>();
    running->server = &server;
    if (profile.profiler()) {
      std::thread([running, stop_signals] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        std::fprintf(stderr, "loom serve: stopping (signal %d); the profile follows\n", sig);
        {
          std::lock_guard lock(running->mutex);
          if (running->server) running->server->stop();
        }
        sigwait(&stop_signals, &sig);
        _exit(128 + sig);
      }).detach();
    }
    server.listen();
    std::lock_guard lock(running->mutex);
    running->server = nullptr;
  }  // the engine's thread has ended: nothing records any more
  profile.finish();
  return 0;
}

}  // namespace loom::cli
