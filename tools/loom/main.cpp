// loom: the command-line front end. `loom help` lists the subcommands.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

#include "commands.h"
#include "loom/error.h"
#include "loom/tensor_alloc.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

constexpr Command kCommands[] = {
    {"devices", loom::cli::cmd_devices, "list every device with its memory, capabilities and buffer types"},
    {"run", loom::cli::cmd_run, "generate text from a prompt with a GGUF model"},
    {"eval", loom::cli::cmd_eval, "print the logits of given tokens as JSON"},
    {"serve", loom::cli::cmd_serve, "serve a model over an OpenAI-compatible HTTP API (continuous batching)"},
    {"fit", loom::cli::cmd_fit, "predict each device's memory for a model (dry run), as given or as --fit chooses"},
    {"bench", loom::cli::cmd_bench, "measure prompt and generation speed (tokens/s), like llama-bench"},
    {"make-model", loom::cli::cmd_make_model, "write a llama GGUF file with reproducible random weights"},
    {"quantize", loom::cli::cmd_quantize, "quantize a GGUF model to a llama.cpp file type (Q4_K_M, Q8_0, ...)"},
    {"inspect", loom::cli::cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"tokenize", loom::cli::cmd_tokenize, "tokenize a prompt with a GGUF file's vocabulary (ids and pieces)"},
    {"apply-template", loom::cli::cmd_apply_template, "render a chat template over messages (JSON) and print the text"},
    {"demo", loom::cli::cmd_demo, "run a small demo graph on every device and check the results"},
    {"test-ops", loom::cli::cmd_test_ops, "run the op conformance suite on the registered devices"},
    {"rpc-server", loom::cli::cmd_rpc_server, "serve this machine's devices to other Looms over gRPC (--rpc)"},
};

// Which options would need less of the memory that ran out.
const char* oom_hint(loom::MemoryUse use) {
  switch (use) {
    case loom::MemoryUse::Weights:
      return "offload fewer layers (lower -ngl), keep weights on the CPU (-ot, --n-cpu-moe), or let --fit on choose";
    case loom::MemoryUse::KvCache:
      return "use a smaller context (lower -c), offload fewer layers (lower -ngl), or let --fit on choose";
    case loom::MemoryUse::Compute:
      return "use a smaller context (lower -c) or micro-batch (-ub), offload fewer layers (lower -ngl), or let --fit "
             "on choose";
    case loom::MemoryUse::Other: break;
  }
  return "offload fewer layers (lower -ngl), use a smaller context (lower -c), or let --fit on choose";
}

void print_usage() {
  std::printf("usage: loom <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::printf("  %-14s %s\n", c.name, c.summary);
  std::printf("\n'loom <command> --help' describes a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    print_usage();
    return argc < 2 ? 1 : 0;
  }
  for (const auto& c : kCommands) {
    if (std::string_view(argv[1]) != c.name) continue;
    try {
      return c.run(argc - 2, argv + 2);
    } catch (const loom::OutOfMemory& e) {
      std::fprintf(stderr, "loom %s: error: %s\nloom %s: hint: %s ('loom fit' shows what each device would hold)\n",
                   c.name, e.what(), c.name, oom_hint(e.use()));
      return 1;
    } catch (const loom::Error& e) {
      std::fprintf(stderr, "loom %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (const std::bad_alloc&) {
      // Whatever escaped the commands' own checks ends here as a message and
      // exit status 1, never as std::terminate's abort (134).
      std::fprintf(stderr, "loom %s: error: out of memory\n", c.name);
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loom %s: error: %s\n", c.name, e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "loom %s: error: unknown exception\n", c.name);
      return 1;
    }
  }
  std::fprintf(stderr, "loom: unknown command '%s'\n\n", argv[1]);
  print_usage();
  return 1;
}
