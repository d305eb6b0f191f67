// loom bench parameters: every option takes a comma list (and numbers take
// ranges: 1-8, 1-8+2, 1-64*2), flags may repeat, and the runs are the
// cartesian product, ordered so that each model is loaded as rarely as
// possible. The placement options (-ngl, -sm, -mg, -ts, -ot, -ncmoe,
// --cpu-moe) are part of the load: each distinct combination loads the model once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "loom/model.h"
#include "loom/placement.h"
#include "loom/types.h"

namespace loom::cli {

// What a model load depends on: instances sharing one are run back to back.
struct BenchLoadKey {
  std::string model;
  bool use_mmap = true;
  int n_gpu_layers = 0;
  std::string split_mode = "layer";  // none | layer | row
  int main_gpu = 0;
  std::string tensor_split;      // "" (by free memory) or "3/1"
  std::string override_tensors;  // "" or "pattern=buffer-type,..."
  int n_cpu_moe = 0;             // experts of the first N layers in CPU memory (after the -ot overrides)
  bool cpu_moe = false;          // experts of every layer in CPU memory
  bool operator==(const BenchLoadKey&) const = default;
};

struct BenchInstance {
  BenchLoadKey load;
  int n_batch = 2048;
  int n_ubatch = 512;
  int n_threads = 0;
  int poll = 50;
  bool graph_reuse = true;
  DType type_k = DType::F16;
  DType type_v = DType::F16;
  FlashAttn flash_attn = FlashAttn::Auto;
  int n_prompt = 0;
  int n_gen = 0;
  int n_depth = 0;
};

struct BenchParams {
  std::vector<std::string> models;
  std::vector<int> n_prompt{512};
  std::vector<int> n_gen{128};
  std::vector<std::pair<int, int>> prompt_gen;  // -pg pp,tg
  std::vector<int> n_depth{0};
  std::vector<int> n_batch{2048};
  std::vector<int> n_ubatch{512};
  std::vector<int> n_threads;  // empty: one per physical core
  std::vector<int> poll{50};
  std::vector<int> graph_reuse{1};
  std::vector<DType> type_k{DType::F16};
  std::vector<DType> type_v{DType::F16};
  std::vector<FlashAttn> flash_attn{FlashAttn::Auto};
  std::vector<int> n_gpu_layers{0};
  std::vector<std::string> split_mode{"layer"};
  std::vector<int> main_gpu{0};
  std::vector<std::string> tensor_split{""};
  std::vector<std::string> override_tensors{""};
  std::vector<int> n_cpu_moe{0};
  bool cpu_moe = false;
  std::vector<bool> use_mmap{true};
  int repetitions = 5;
  bool warmup = true;

  // Throws loom::Error for values that make no sense (no tests, zero
  // threads, an unknown split mode, a malformed -ts or -ot), naming the option.
  void validate() const;
  // The cartesian product, grouped by load key (in the order models were given).
  std::vector<BenchInstance> instances(int default_threads) const;
};

// "512", "1,2,4", "1-4" (1,2,3,4), "16-128*2" (16,32,64,128), "0-512+256".
// `flag` names the option in error messages. A list has at most
// kMaxListValues values: a range is counted before it is expanded, so
// "-p 0-1000000000" fails at once instead of filling memory.
inline constexpr size_t kMaxListValues = 1024;
std::vector<int> parse_int_list(const std::string& flag, const std::string& text);
// The loader's placement options for a load key (-ts "3/1", -ot "a=CPU,b=OpenCL0",
// then the --cpu-moe and -ncmoe overrides).
PlacementOptions placement_options(const BenchLoadKey& key);

}  // namespace loom::cli
