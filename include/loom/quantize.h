// Quantizing a GGUF model file: llama.cpp's file types ("mixes") and the type
// each of them gives each tensor, following llama.cpp's llama-quantize
// without an importance matrix (src/llama-quant.cpp): norms and other 1-D
// tensors stay as they are; output.weight (and token_embd.weight when the
// output is tied to it) gets Q6_K; some attn_v / ffn_down / attn_output
// layers get a higher type in the _M / _L mixes; a matrix whose rows are not
// whole blocks of its type falls back to a 32-element type (or F16).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/types.h"

namespace loom {

namespace gguf {
class File;
}

// llama.cpp's file types, numbered as its general.file_type values.
enum class FileType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 7,
  Q5_0 = 8,
  Q5_1 = 9,
  Q2_K = 10,
  Q3_K_S = 11,
  Q3_K_M = 12,
  Q3_K_L = 13,
  Q4_K_S = 14,
  Q4_K_M = 15,
  Q5_K_S = 16,
  Q5_K_M = 17,
  Q6_K = 18,
  IQ4_NL = 25,
  IQ4_XS = 30,
  BF16 = 32,
};

// The file types `loom quantize` writes, in llama-quantize's order.
std::span<const FileType> quantize_file_types();
std::string_view file_type_name(FileType t);  // "Q4_K_M"
// Case-insensitive ("q4_k_m"); nullopt for a name Loom does not write.
std::optional<FileType> file_type_from_name(std::string_view name);
// The type of most weights in a file of this type (Q4_K for Q4_K_M).
DType file_type_base(FileType t);

struct QuantizeOptions {
  FileType file_type = FileType::Q8_0;
  bool pure = false;                          // every weight in the base type (fallbacks still apply)
  std::optional<DType> output_type;           // output.weight (and a tied token_embd.weight)
  std::optional<DType> token_embedding_type;  // token_embd.weight
  int threads = 1;
  // After each tensor: tensors done, total, and the tensor's name.
  std::function<void(size_t done, size_t total, std::string_view name)> progress;
};

// What one tensor of the input becomes.
struct TensorQuantPlan {
  std::string name;
  uint32_t from;  // GGUF type id in the input
  uint32_t to;    // GGUF type id in the output
};

// The type of every tensor of `in`, in the order llama.cpp visits (and
// writes) them: tensors outside layers, then layer by layer, by name.
// Throws loom::Error for a tensor that cannot take its type (a --output-type
// or --token-embedding-type whose blocks do not divide the rows).
std::vector<TensorQuantPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& options);

// Writes `out_path` (through a temporary file in its directory, renamed at
// the end, so an error leaves no partial file): the metadata of `in_path`
// with general.file_type and general.quantization_version set, and every
// tensor converted as planned. A quantized input tensor whose planned type
// differs is refused (llama.cpp refuses requantizing too).
void quantize_file(const std::string& in_path, const std::string& out_path, const QuantizeOptions& options);

}  // namespace loom
