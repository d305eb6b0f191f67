// Fuzz target: Model::load on arbitrary bytes, on the CPU device only:
// GGUF parsing, hyper-parameters, the tokenizer, the tensor table and
// placement (weights mapped in place or repacked). Seeds are tiny generated
// models (scripts/fuzz-seeds).
#include <cstdlib>
#include <vector>

#include "fuzz_support.h"
#include "loom/error.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "loom/tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("LOOM_DEVICES", "CPU", 1);
  setenv("OCL_ICD_VENDORS", "/nonexistent", 1);  // no OpenCL platform: PoCL threads would only slow this down
  setenv("LOOM_LOG_LEVEL", "error", 1);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static loom::fuzz::InputFile input;
  static const std::vector<loom::Device*> cpu = [] {
    std::vector<loom::Device*> d;
    for (loom::Device* dev : loom::Registry::get().devices())
      if (dev->type() == loom::DeviceType::CPU) d.push_back(dev);
    return d;
  }();
  const std::string& path = input.write(data, size);
  try {
    loom::LoadOptions options;
    options.use_mmap = size % 2 == 0;  // both paths: mapped in place and read into buffers
    auto model = loom::Model::load(path, cpu, options);
    const auto& hp = model->hparams();
    if (hp.n_layer != static_cast<int64_t>(model->layers().size())) __builtin_trap();
    (void)model->describe_buffers();
    (void)model->tokenizer().n_vocab();
  } catch (const loom::Error&) {
  }
  return 0;
}
