// llama.cpp's own quantizer, for the parity tests: loads the prebuilt
// libllama that node-llama-cpp ships (dlopen, so Loom never links it) and
// calls llama_model_quantize, as llama-quantize does.
//
// usage: llama-quantize-ref LIBLLAMA.so IN.gguf OUT.gguf FTYPE_ID [--pure]
//   FTYPE_ID: llama.cpp's file type number (general.file_type), e.g. 15 for Q4_K_M
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// llama_model_quantize_params as declared in llama.h (the release
// node-llama-cpp ships); only nthread, ftype and pure are changed here.
struct QuantizeParams {
  int32_t nthread;
  int32_t ftype;
  int32_t output_tensor_type;
  int32_t token_embedding_type;
  bool allow_requantize;
  bool quantize_output_tensor;
  bool only_copy;
  bool pure;
  bool keep_split;
  bool dry_run;
  const void* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
};

using DefaultParamsFn = QuantizeParams (*)();
using QuantizeFn = uint32_t (*)(const char*, const char*, const QuantizeParams*);
using LogFn = void (*)(int, const char*, void*);
using SetLogFn = void (*)(LogFn, void*);

void quiet(int, const char*, void*) {}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s LIBLLAMA.so IN.gguf OUT.gguf FTYPE_ID [--pure]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  auto defaults = reinterpret_cast<DefaultParamsFn>(dlsym(lib, "llama_model_quantize_default_params"));
  auto quantize = reinterpret_cast<QuantizeFn>(dlsym(lib, "llama_model_quantize"));
  auto set_log = reinterpret_cast<SetLogFn>(dlsym(lib, "llama_log_set"));
  if (!defaults || !quantize) {
    std::fprintf(stderr, "%s does not export llama_model_quantize\n", argv[1]);
    return 1;
  }
  if (set_log) set_log(quiet, nullptr);
  QuantizeParams params = defaults();
  params.ftype = std::atoi(argv[4]);
  params.nthread = 2;
  params.pure = argc > 5 && std::strcmp(argv[5], "--pure") == 0;
  if (quantize(argv[2], argv[3], &params) != 0) {
    std::fprintf(stderr, "llama_model_quantize %s -> %s (file type %d) failed\n", argv[2], argv[3], params.ftype);
    return 1;
  }
  return 0;
}
