// Generates GGUF files of the supported families (llama with or without
// experts, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3) with reproducible random weights
// (`loom make-model`), for tests, benchmarks and the built-in default model.
// The same spec, type and seed always give the same bytes. Test support,
// not part of libloom: tools/loom and the tests link it as loom::model_gen.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "loom/types.h"
#include "model_gen/vocab_gen.h"

namespace loom {

struct ModelSpec {
  std::string name = "tiny";
  // general.architecture: llama, qwen2 (q/k/v biases), qwen3 (q/k head norms), phi3 (fused), gemma2 (post-norms,
  // GeGLU, soft-capping, sliding window; always tied output), gemma3 (gemma2's layer with q/k head norms),
  // qwen3moe (qwen3 with experts)
  std::string arch = "llama";
  int64_t n_vocab = 2048;
  int64_t n_ctx = 512;
  int64_t n_embd = 256;
  int64_t n_layer = 4;
  int64_t n_head = 8;
  int64_t n_head_kv = 4;
  int64_t n_ff = 704;
  int64_t n_embd_head = 0;  // head size; 0: n_embd / n_head (else written as attention.key_length)
  int64_t n_rot = 0;        // rotated dims per head; 0: the head size
  bool rope_freqs = false;  // llama: Llama 3 rope scaling as rope_freqs.weight (factor 8, low 1, high 4)
  // phi3: LongRoPE with this original context (rope_factors_short/long.weight,
  // rope.scaling.original_context_length and attn_factor as Phi-3.5's
  // converter computes it from n_ctx); 0: none.
  int64_t longrope_orig_ctx = 0;
  float rope_freq_base = 10000.0f;
  float rope_scale = 0.0f;     // > 0: linear rope scaling by this factor (rope.scaling.type/factor)
  int64_t n_swa = 0;           // gemma2/3: attention.sliding_window when > 0
  float attn_softcap = 0.0f;   // gemma2: attn_logit_softcapping when > 0
  float final_softcap = 0.0f;  // gemma2/3: final_logit_softcapping when > 0
  float rms_eps = 1e-5f;
  bool tied_output = false;  // no output.weight: token_embd is used for logits
  // Mixture of experts (llama: Mixtral-style, experts of n_ff; qwen3moe:
  // experts of n_ff_exp, 0: n_ff): n_expert > 0 replaces every layer's FFN.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  // attn_output written as zeros: attention adds nothing, so each token's
  // logits come from its own FFNs (tests of the FFN path, MoE routing included).
  bool zero_attn_output = false;
  TokenizerStyle vocab = TokenizerStyle::Spm;
};

// n_embd_head, or n_embd / n_head when it is 0.
int64_t head_size(const ModelSpec& spec);
// "tiny" or "tinyllama-1.1b"; throws loom::Error listing the presets otherwise.
ModelSpec model_preset(const std::string& name);
// The families write_random_model knows.
inline constexpr const char* kModelGenArchs[] = {"llama", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "qwen3moe"};
// Checks the dims fit together (heads divide n_embd, ...), naming the bad one.
void validate_spec(const ModelSpec& spec);

// The type a matrix of `type` with rows of n_row elements gets: `type` when
// the rows are whole blocks, else llama.cpp's fallback (IQ4_XS -> IQ4_NL,
// Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), else F16.
DType type_for_rows(DType type, int64_t n_row);

// Writes the model with weights of `type` (norms stay f32; a matrix whose
// rows are not whole blocks of `type` gets type_for_rows). `progress` gets
// (tensors written, total).
void write_random_model(const ModelSpec& spec, DType type, uint64_t seed, const std::string& path,
                        const std::function<void(size_t, size_t)>& progress = {});

}  // namespace loom
