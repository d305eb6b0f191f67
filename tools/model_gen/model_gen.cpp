#include "model_gen/model_gen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "loom/error.h"
#include "loom/gguf.h"

namespace loom {
namespace {

// splitmix64: a fast, well-mixed counter-based generator, so every tensor's
// values depend only on (seed, tensor index, element index).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform values in [center - half, center + half].
void fill_uniform(float* out, int64_t n, uint64_t stream, float center, float half) {
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t r = mix(stream ^ mix(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    out[i] = center + (2.0f * u - 1.0f) * half;
  }
}

}  // namespace

int64_t head_size(const ModelSpec& s) { return s.n_embd_head ? s.n_embd_head : s.n_embd / s.n_head; }

ModelSpec model_preset(const std::string& name) {
  ModelSpec s;
  if (name == "tiny") return s;
  if (name == "tinyllama-1.1b") {
    s.name = name;
    s.n_vocab = 32000;
    s.n_ctx = 2048;
    s.n_embd = 2048;
    s.n_layer = 22;
    s.n_head = 32;
    s.n_head_kv = 4;
    s.n_ff = 5632;
    return s;
  }
  fail("unknown model preset '{}' (presets: tiny, tinyllama-1.1b)", name);
}

void validate_spec(const ModelSpec& s) {
  if (std::find(std::begin(kModelGenArchs), std::end(kModelGenArchs), s.arch) == std::end(kModelGenArchs))
    fail("model spec: unknown architecture '{}' (llama, qwen2, qwen3, phi3, gemma2, gemma3, qwen3moe)", s.arch);
  if (s.rope_freqs && s.arch != "llama") fail("model spec: rope_freqs (Llama 3 rope scaling) is for llama only");
  if (s.longrope_orig_ctx && s.arch != "phi3") fail("model spec: LongRoPE is for phi3 only");
  if (s.longrope_orig_ctx < 0) fail("model spec: the LongRoPE original context must be positive");
  const bool gemma = s.arch == "gemma2" || s.arch == "gemma3";
  if ((s.n_swa || s.final_softcap) && !gemma)
    fail("model spec: a sliding window and final soft-capping are for gemma2 and gemma3 only");
  if (s.attn_softcap && s.arch != "gemma2") fail("model spec: attention soft-capping is for gemma2 only");
  if (s.n_swa < 0 || s.attn_softcap < 0 || s.final_softcap < 0 || s.rope_scale < 0)
    fail("model spec: the sliding window, soft-caps and rope scale must not be negative");
  auto positive = [](int64_t v, const char* what) {
    if (v <= 0) fail("model spec: {} must be positive, got {}", what, v);
  };
  positive(s.n_vocab, "vocab size");
  positive(s.n_ctx, "context length");
  positive(s.n_embd, "embedding size");
  positive(s.n_layer, "layer count");
  positive(s.n_head, "head count");
  positive(s.n_head_kv, "kv head count");
  positive(s.n_ff, "feed-forward size");
  if (s.arch == "qwen3moe" && s.n_expert == 0) fail("model spec: qwen3moe needs experts (n_expert > 0)");
  if (s.n_expert > 0 && s.arch != "llama" && s.arch != "qwen3moe")
    fail("model spec: experts are for llama and qwen3moe, not {}", s.arch);
  if (s.n_expert < 0 || s.n_expert_used < 0 || s.n_expert_used > s.n_expert || (s.n_expert > 0) != (s.n_expert_used > 0))
    fail("model spec: {} experts used of {}: need 1 <= used <= experts (or both 0)", s.n_expert_used, s.n_expert);
  if (s.arch == "llama" && s.n_ff_exp && s.n_ff_exp != s.n_ff)
    fail("model spec: llama's experts are feed_forward_length ({}) wide; an expert size of {} is for qwen3moe", s.n_ff,
         s.n_ff_exp);
  if (s.n_ff_exp < 0 || s.n_ff_exp % 32) fail("model spec: expert feed-forward size {} must be a multiple of 32", s.n_ff_exp);
  if (s.n_embd_head == 0 && s.n_embd % s.n_head)
    fail("model spec: {} heads do not divide the embedding size {}", s.n_head, s.n_embd);
  if (s.n_head % s.n_head_kv)
    fail("model spec: {} kv heads do not divide the {} heads", s.n_head_kv, s.n_head);
  const int64_t head = head_size(s);
  if (head <= 0 || head % 2) fail("model spec: head size {} must be positive and even for RoPE", head);
  const int64_t rot = s.n_rot ? s.n_rot : head;
  if (rot <= 0 || rot % 2 || rot > head) fail("model spec: rotated dims {} must be even and at most the head size {}",
                                              rot, head);
  if (s.n_embd % 32 || s.n_ff % 32 || (head * s.n_head_kv) % 32 || (head * s.n_head) % 32)
    fail("model spec: embedding ({}), feed-forward ({}) and kv sizes must be multiples of 32 for quantized types",
         s.n_embd, s.n_ff);
}

namespace {

// llama_ftype (llama.h) of a file whose matrices are mostly `type`; the
// K types get llama.cpp's "_M" mix number, which loaders only print.
uint32_t file_type_of(DType type) {
  switch (type) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q4_1: return 3;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q2_K: return 10;
    case DType::Q3_K: return 12;
    case DType::Q4_K: return 15;
    case DType::Q5_K: return 17;
    case DType::Q6_K: return 18;
    case DType::IQ4_NL: return 25;
    case DType::IQ4_XS: return 30;
    case DType::BF16: return 32;
    case DType::MXFP4: return 38;
    case DType::I32: break;
  }
  fail("make-model: no GGUF file type for {}", type_name(type));
}

// Llama 3's rope scaling (factor 8, low_freq_factor 1, high_freq_factor 4)
// as its converter writes it to rope_freqs.weight: one divisor per rotated
// pair, 1 for wavelengths under original_ctx / 4, 8 over original_ctx, and
// a smooth blend between. `original_ctx` is the model's context here, so a
// tiny model gets the whole range.
std::vector<float> llama3_rope_factors(int64_t n_rot, float base, int64_t original_ctx) {
  const double factor = 8.0, low = 1.0, high = 4.0;
  const double low_wavelen = original_ctx / low, high_wavelen = original_ctx / high;
  std::vector<float> out;
  for (int64_t k = 0; k < n_rot / 2; ++k) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(k) / static_cast<double>(n_rot));
    const double wavelen = 2.0 * M_PI / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (original_ctx / wavelen - low) / (high - low);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

// LongRoPE's per-pair divisors, shaped like Phi-3.5's: short ones near 1,
// long ones growing from 1 to about 40 for the slowest pairs.
std::vector<float> longrope_factors(int64_t n_rot, bool long_factors) {
  std::vector<float> out;
  for (int64_t k = 0; k < n_rot / 2; ++k) {
    const double x = static_cast<double>(k) / static_cast<double>(std::max<int64_t>(n_rot / 2 - 1, 1));
    out.push_back(static_cast<float>(long_factors ? 1.0 + 39.0 * x * x : 1.0 + 0.2 * x));
  }
  return out;
}

}  // namespace

DType type_for_rows(DType type, int64_t n_row) {
  if (n_row % traits(type).block_size == 0) return type;
  DType fallback = DType::F16;
  switch (type) {  // llama.cpp's tensor_type_fallback (llama-quant.cpp)
    case DType::IQ4_XS: fallback = DType::IQ4_NL; break;
    case DType::Q2_K:
    case DType::Q3_K: fallback = DType::Q4_0; break;
    case DType::Q4_K: fallback = DType::Q5_0; break;
    case DType::Q5_K: fallback = DType::Q5_1; break;
    case DType::Q6_K: fallback = DType::Q8_0; break;
    default: break;
  }
  return n_row % traits(fallback).block_size == 0 ? fallback : DType::F16;
}

void write_random_model(const ModelSpec& s, DType type, uint64_t seed, const std::string& path,
                        const std::function<void(size_t, size_t)>& progress) {
  validate_spec(s);
  if (type == DType::I32) fail("make-model: weight type i32 is not supported (a float or quantized type)");
  const int64_t head_dim = head_size(s);
  const int64_t n_rot = s.n_rot ? s.n_rot : head_dim;
  const int64_t n_embd_q = head_dim * s.n_head;
  const int64_t n_embd_kv = head_dim * s.n_head_kv;
  const bool gemma = s.arch == "gemma2" || s.arch == "gemma3";
  gguf::Writer w;
  using gguf::Value;
  const std::string a = s.arch + ".";
  w.set("general.architecture", Value::string(s.arch));
  w.set("general.name", Value::string("loom-random-" + s.name));
  w.set("general.file_type", Value::u32(file_type_of(type)));
  w.set("general.quantization_version", Value::u32(2));
  w.set(a + "vocab_size", Value::u32(static_cast<uint32_t>(s.n_vocab)));
  w.set(a + "context_length", Value::u32(static_cast<uint32_t>(s.n_ctx)));
  w.set(a + "embedding_length", Value::u32(static_cast<uint32_t>(s.n_embd)));
  w.set(a + "block_count", Value::u32(static_cast<uint32_t>(s.n_layer)));
  w.set(a + "feed_forward_length", Value::u32(static_cast<uint32_t>(s.n_ff)));
  w.set(a + "attention.head_count", Value::u32(static_cast<uint32_t>(s.n_head)));
  w.set(a + "attention.head_count_kv", Value::u32(static_cast<uint32_t>(s.n_head_kv)));
  w.set(a + "rope.dimension_count", Value::u32(static_cast<uint32_t>(n_rot)));
  if (s.n_embd_head) {
    w.set(a + "attention.key_length", Value::u32(static_cast<uint32_t>(head_dim)));
    w.set(a + "attention.value_length", Value::u32(static_cast<uint32_t>(head_dim)));
  }
  w.set(a + "rope.freq_base", Value::f32(s.rope_freq_base));
  if (s.rope_scale > 0.0f) {
    w.set(a + "rope.scaling.type", Value::string("linear"));
    w.set(a + "rope.scaling.factor", Value::f32(s.rope_scale));
  }
  if (s.longrope_orig_ctx > 0) {
    const double scale = static_cast<double>(s.n_ctx) / static_cast<double>(s.longrope_orig_ctx);
    const double attn_factor =
        scale > 1.0 ? std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.longrope_orig_ctx))) : 1.0;
    w.set(a + "rope.scaling.original_context_length", Value::u32(static_cast<uint32_t>(s.longrope_orig_ctx)));
    w.set(a + "rope.scaling.attn_factor", Value::f32(static_cast<float>(attn_factor)));
  }
  if (s.n_swa > 0) w.set(a + "attention.sliding_window", Value::u32(static_cast<uint32_t>(s.n_swa)));
  if (s.attn_softcap > 0.0f) w.set(a + "attn_logit_softcapping", Value::f32(s.attn_softcap));
  if (s.final_softcap > 0.0f) w.set(a + "final_logit_softcapping", Value::f32(s.final_softcap));
  w.set(a + "attention.layer_norm_rms_epsilon", Value::f32(s.rms_eps));
  const int64_t n_ff_exp = s.n_ff_exp ? s.n_ff_exp : s.n_ff;
  if (s.n_expert) {
    w.set(a + "expert_count", Value::u32(static_cast<uint32_t>(s.n_expert)));
    w.set(a + "expert_used_count", Value::u32(static_cast<uint32_t>(s.n_expert_used)));
    if (s.arch == "qwen3moe") w.set(a + "expert_feed_forward_length", Value::u32(static_cast<uint32_t>(n_ff_exp)));
  }
  write_tokenizer_metadata(w, s.vocab, static_cast<int>(s.n_vocab));

  uint64_t index = 0;
  // Weights: uniform with std ~ 1/sqrt(fan_in) so activations keep their scale
  // through the layers and logits are not degenerate.
  auto add = [&](const std::string& name, std::vector<int64_t> ne, DType t, float center, float half) {
    t = type_for_rows(t, ne[0]);
    const uint64_t stream = mix(seed * 0x100000001b3ull + (++index));
    w.add_tensor(name, static_cast<uint32_t>(t), ne, [=](uint8_t* dst, size_t) {
      const int64_t n_row = ne[0];
      int64_t rows = 1;
      for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
      std::vector<float> row(n_row);
      const size_t row_bytes = row_size(t, n_row);
      for (int64_t r = 0; r < rows; ++r) {
        fill_uniform(row.data(), n_row, mix(stream + static_cast<uint64_t>(r)), center, half);
        traits(t).from_float(row.data(), dst + r * row_bytes, n_row);
      }
    });
  };
  auto scale_for = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  add("token_embd.weight", {s.n_embd, s.n_vocab}, type, 0.0f, 1.0f);
  if (s.rope_freqs) {
    const std::vector<float> factors = llama3_rope_factors(n_rot, s.rope_freq_base, s.n_ctx);
    w.add_tensor("rope_freqs.weight", static_cast<uint32_t>(DType::F32), {n_rot / 2}, [factors](uint8_t* dst, size_t) {
      std::memcpy(dst, factors.data(), factors.size() * sizeof(float));
    });
  }
  for (const char* which : {"long", "short"}) {
    if (!s.longrope_orig_ctx) break;
    const std::vector<float> factors = longrope_factors(n_rot, which[0] == 'l');
    w.add_tensor("rope_factors_" + std::string(which) + ".weight", static_cast<uint32_t>(DType::F32), {n_rot / 2},
                 [factors](uint8_t* dst, size_t) { std::memcpy(dst, factors.data(), factors.size() * sizeof(float)); });
  }
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", {s.n_embd}, DType::F32, 1.0f, 0.1f);
    if (s.arch == "phi3") {
      add(p + "attn_qkv.weight", {s.n_embd, n_embd_q + 2 * n_embd_kv}, type, 0.0f, scale_for(s.n_embd));
    } else {
      add(p + "attn_q.weight", {s.n_embd, n_embd_q}, type, 0.0f, scale_for(s.n_embd));
      add(p + "attn_k.weight", {s.n_embd, n_embd_kv}, type, 0.0f, scale_for(s.n_embd));
      add(p + "attn_v.weight", {s.n_embd, n_embd_kv}, type, 0.0f, scale_for(s.n_embd));
    }
    if (s.arch == "qwen2") {
      add(p + "attn_q.bias", {n_embd_q}, DType::F32, 0.0f, 0.5f);
      add(p + "attn_k.bias", {n_embd_kv}, DType::F32, 0.0f, 0.5f);
      add(p + "attn_v.bias", {n_embd_kv}, DType::F32, 0.0f, 0.5f);
    }
    if (s.arch == "qwen3" || s.arch == "qwen3moe" || s.arch == "gemma3") {
      add(p + "attn_q_norm.weight", {head_dim}, DType::F32, 1.0f, 0.1f);
      add(p + "attn_k_norm.weight", {head_dim}, DType::F32, 1.0f, 0.1f);
    }
    add(p + "attn_output.weight", {n_embd_q, s.n_embd}, type, 0.0f, s.zero_attn_output ? 0.0f : scale_for(n_embd_q));
    if (gemma) add(p + "post_attention_norm.weight", {s.n_embd}, DType::F32, 1.0f, 0.1f);
    add(p + "ffn_norm.weight", {s.n_embd}, DType::F32, 1.0f, 0.1f);
    if (s.n_expert) {
      // The router stays f32, as llama.cpp's quantizer leaves it; its wide
      // range keeps the picked experts clear of ties.
      const int64_t e = s.n_expert, ff = s.arch == "llama" ? s.n_ff : n_ff_exp;
      add(p + "ffn_gate_inp.weight", {s.n_embd, e}, DType::F32, 0.0f, 4.0f * scale_for(s.n_embd));
      add(p + "ffn_gate_exps.weight", {s.n_embd, ff, e}, type, 0.0f, scale_for(s.n_embd));
      add(p + "ffn_up_exps.weight", {s.n_embd, ff, e}, type, 0.0f, scale_for(s.n_embd));
      add(p + "ffn_down_exps.weight", {ff, s.n_embd, e}, type, 0.0f, scale_for(ff));
    } else if (s.arch == "phi3") {
      add(p + "ffn_up.weight", {s.n_embd, 2 * s.n_ff}, type, 0.0f, scale_for(s.n_embd));
      add(p + "ffn_down.weight", {s.n_ff, s.n_embd}, type, 0.0f, scale_for(s.n_ff));
    } else {
      add(p + "ffn_gate.weight", {s.n_embd, s.n_ff}, type, 0.0f, scale_for(s.n_embd));
      add(p + "ffn_up.weight", {s.n_embd, s.n_ff}, type, 0.0f, scale_for(s.n_embd));
      add(p + "ffn_down.weight", {s.n_ff, s.n_embd}, type, 0.0f, scale_for(s.n_ff));
    }
    if (gemma) add(p + "post_ffw_norm.weight", {s.n_embd}, DType::F32, 1.0f, 0.1f);
  }
  add("output_norm.weight", {s.n_embd}, DType::F32, 1.0f, 0.1f);
  // gemma2 files have no output.weight (llama.cpp reads token_embd).
  if (!s.tied_output && s.arch != "gemma2") add("output.weight", {s.n_embd, s.n_vocab}, type, 0.0f, 3.0f * scale_for(s.n_embd));
  if (progress) w.set_progress(progress);
  w.write(path);
}

}  // namespace loom
