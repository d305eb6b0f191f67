// loom quantize: llama-quantize's file types (mixes) for a GGUF model.
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/quantize.h"

namespace loom::cli {
namespace {

std::string file_type_list() {
  std::string out;
  for (FileType t : quantize_file_types()) {
    if (!out.empty()) out += ", ";
    out += file_type_name(t);
  }
  return out;
}

DType tensor_type_arg(const Args& args, const std::string& option) {
  const std::string name = *args.get(option);
  const auto t = type_from_name(name);
  if (!t || *t == DType::I32 || *t == DType::MXFP4)
    fail("{}: unknown tensor type '{}' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
         "iq4_nl, iq4_xs)", option, name);
  return *t;
}

// "[#######.............]  12/201 blk.1.attn_v.weight" on one stderr line.
void draw_progress(size_t done, size_t total, std::string_view name) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r[%s%s] %zu/%zu %-40.40s", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, '.').c_str(), done, total, std::string(name).c_str());
  if (done == total) std::fprintf(stderr, "\n");
}

}  // namespace

int cmd_quantize(int argc, char** argv) {
  Args args("quantize",
            "Quantize a GGUF model to one of llama.cpp's file types, giving each tensor the type llama-quantize\n"
            "gives it (without an importance matrix), with the same bytes.\n"
            "usage: loom quantize [options] IN.gguf OUT.gguf TYPE\n"
            "TYPE: " + file_type_list() + " (Q3_K, Q4_K, Q5_K: the _M ones)\n"
            "The output is written to OUT.gguf.tmp and renamed at the end; on an error no file is left.",
            {{{"--pure"}, "", "every weight in TYPE's base type (no per-layer bumps; fallbacks still apply)"},
             {{"--output-type"}, "T", "tensor type for output.weight (e.g. q8_0)"},
             {{"--token-embedding-type"}, "T", "tensor type for token_embd.weight"},
             {{"-t", "--threads"}, "N", "threads (default: all cores)"},
             {{"--dry-run"}, "", "print each tensor's planned type and write nothing"}});
  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  const auto& pos = args.positional();
  if (pos.size() != 3) fail("quantize needs IN.gguf OUT.gguf TYPE ({} arguments given; see --help)", pos.size());
  const std::string& in = pos[0];
  const std::string& out = pos[1];
  QuantizeOptions options;
  const auto ft = file_type_from_name(pos[2]);
  if (!ft) fail("unknown file type '{}' ({})", pos[2], file_type_list());
  options.file_type = *ft;
  options.pure = args.has("--pure");
  if (args.has("--output-type")) options.output_type = tensor_type_arg(args, "--output-type");
  if (args.has("--token-embedding-type")) options.token_embedding_type = tensor_type_arg(args, "--token-embedding-type");
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.threads = args.get_int("-t", cores, 1, 1024);

  if (args.has("--dry-run")) {
    const auto file = gguf::File::open(in);
    for (const auto& p : plan_quantization(*file, options)) {
      const auto* from = gguf::type_info(p.from);
      const auto* to = gguf::type_info(p.to);
      std::printf("%-40s %-7s -> %s\n", p.name.c_str(), from ? std::string(from->name).c_str() : "?",
                  to ? std::string(to->name).c_str() : "?");
    }
    return 0;
  }
  options.progress = draw_progress;
  const auto start = std::chrono::steady_clock::now();
  quantize_file(in, out, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s (%s, %d threads) in %.1f s\n", out.c_str(), std::string(file_type_name(*ft)).c_str(),
              options.threads, seconds);
  return 0;
}

}  // namespace loom::cli
