// loom make-model: a GGUF of a supported family with reproducible random weights.
#include <cstdio>
#include <limits>

#include "args.h"
#include "commands.h"
#include "loom/error.h"
#include "model_gen/model_gen.h"

namespace loom::cli {

int cmd_make_model(int argc, char** argv) {
  Args args("make-model",
            "Write a GGUF file of a supported family with reproducible random weights and a tokenizer.\n"
            "usage: loom make-model -o FILE [--arch llama|qwen2|qwen3|qwen3moe|phi3|gemma2|gemma3] [--preset tiny|tinyllama-1.1b] "
            "[--type q4_0] [dims...]",
            {{{"-o", "--output"}, "FILE", "output path (required)"},
             {{"--arch"}, "NAME", "llama (default), qwen2 (q/k/v biases), qwen3 (per-head q/k norms), "
                                  "phi3 (fused qkv and gate-up), gemma2 (post-norms, GeGLU, soft-capping, "
                                  "sliding window; tied output), gemma3 (gemma2's layer with q/k norms), "
                                  "qwen3moe (qwen3 with experts; 8 experts, 2 used unless --n-expert says otherwise)"},
             {{"--preset"}, "NAME", "tiny (default) or tinyllama-1.1b"},
             {{"--type"},
              "TYPE",
              "weight type: f32 (default), f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, "
              "iq4_nl, iq4_xs, mxfp4 (a matrix whose rows are not whole blocks falls back as in llama.cpp)"},
             {{"--seed"}, "N", "random seed (default 1)"},
             {{"--vocab"}, "STYLE", "tokenizer: spm (SentencePiece 'llama', default), bpe (byte-level 'gpt2'), "
                                    "bpe-llama3, bpe-qwen2, or any style of `loom tokenize --list-styles`"},
             {{"--n-embd"}, "N", "embedding size"},
             {{"--n-layer"}, "N", "layers"},
             {{"--n-head"}, "N", "attention heads"},
             {{"--n-head-kv"}, "N", "key/value heads (grouped-query attention)"},
             {{"--n-ff"}, "N", "feed-forward size"},
             {{"--n-vocab"}, "N", "vocabulary size"},
             {{"--n-ctx"}, "N", "training context length"},
             {{"--n-embd-head"}, "N", "head size (written as attention.key_length; default n-embd / n-head)"},
             {{"--n-rot"}, "N", "rotated dims per head (partial rotary; default the head size)"},
             {{"--rope-freqs"}, "", "llama: Llama 3 rope scaling, as a rope_freqs.weight tensor"},
             {{"--longrope"}, "N", "phi3: LongRoPE (Phi-3.5) with original context N: rope_factors_short/long "
                                   "(the long ones used when a session's context exceeds N) and attn_factor"},
             {{"--n-expert"}, "N", "experts per layer (llama: a Mixtral-style model; default 0: dense)"},
             {{"--n-expert-used"}, "N", "experts each token uses (default 2 with experts)"},
             {{"--n-ff-exp"}, "N", "qwen3moe: feed-forward size of one expert (default --n-ff)"},
             {{"--tied"}, "", "no output.weight: logits use token_embd"},
             {{"--rope-base"}, "F", "rope.freq_base (default 10000)"},
             {{"--rope-scale"}, "F", "linear rope scaling by this factor (rope.scaling.type/factor)"},
             {{"--zero-attn-output"}, "", "attn_output.weight all zeros: each token's logits come from its own FFNs "
                                          "(tests of the FFN and expert routing alone)"},
             {{"--sliding-window"}, "N", "gemma2/gemma3: attention.sliding_window (gemma2 default 4096, gemma3 none)"},
             {{"--attn-softcap"}, "F", "gemma2: attn_logit_softcapping (default 50)"},
             {{"--final-softcap"}, "F", "gemma2/gemma3: final_logit_softcapping (gemma2 default 30, gemma3 none)"}});

  args.parse(argc, argv);
  if (args.has("--help")) {
    std::fputs(args.help().c_str(), stdout);
    return 0;
  }
  const auto out = args.get("--output");
  if (!out) fail("an output file is required (-o FILE)");
  ModelSpec spec = model_preset(args.get_or("--preset", "tiny"));
  spec.n_embd = args.get_int("--n-embd", static_cast<int>(spec.n_embd));
  spec.n_layer = args.get_int("--n-layer", static_cast<int>(spec.n_layer));
  spec.n_head = args.get_int("--n-head", static_cast<int>(spec.n_head));
  spec.n_head_kv = args.get_int("--n-head-kv", static_cast<int>(spec.n_head_kv));
  spec.n_ff = args.get_int("--n-ff", static_cast<int>(spec.n_ff));
  spec.n_vocab = args.get_int("--n-vocab", static_cast<int>(spec.n_vocab));
  spec.n_ctx = args.get_int("--n-ctx", static_cast<int>(spec.n_ctx));
  spec.n_embd_head = args.get_int("--n-embd-head", 0);
  spec.n_rot = args.get_int("--n-rot", 0);
  spec.rope_freqs = args.has("--rope-freqs");
  spec.longrope_orig_ctx = args.get_int("--longrope", 0, 1, 1 << 30);
  spec.arch = args.get_or("--arch", "llama");
  spec.n_expert = args.get_int("--n-expert", spec.arch == "qwen3moe" ? 8 : 0);
  spec.n_expert_used = args.get_int("--n-expert-used", spec.n_expert > 0 ? 2 : 0);
  spec.n_ff_exp = args.get_int("--n-ff-exp", 0);
  spec.tied_output = args.has("--tied");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  spec.rope_freq_base = static_cast<float>(args.get_number("--rope-base", spec.rope_freq_base, 1.0, kInf));
  spec.rope_scale = static_cast<float>(args.get_number("--rope-scale", 0.0, 1e-3, 1e3));
  spec.n_swa = args.get_int("--sliding-window", 0, 1, 1 << 30);
  spec.attn_softcap = static_cast<float>(args.get_number("--attn-softcap", 0.0, 1e-3, kInf));
  spec.final_softcap = static_cast<float>(args.get_number("--final-softcap", 0.0, 1e-3, kInf));
  spec.zero_attn_output = args.has("--zero-attn-output");
  spec.vocab = parse_tokenizer_style(args.get_or("--vocab", "spm"));
  const std::string type_str = args.get_or("--type", "f32");
  const auto type = type_from_name(type_str);
  if (!type || *type == DType::I32)
    fail("--type: unknown type '{}' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, "
         "iq4_xs, mxfp4)", type_str);
  const uint64_t seed = static_cast<uint64_t>(args.get_int("--seed", 1));
  write_random_model(spec, *type, seed, *out, [](size_t done, size_t total) {
    std::fprintf(stderr, "\rwriting tensors: %zu/%zu", done, total);
    if (done == total) std::fprintf(stderr, "\n");
  });
  const std::string experts =
      spec.n_expert ? fmt::format(", {} of {} experts of ff {}", spec.n_expert_used, spec.n_expert,
                                  spec.arch == "llama" || !spec.n_ff_exp ? spec.n_ff : spec.n_ff_exp)
                    : "";
  std::printf("wrote %s: %s %s, %lld layers, embd %lld, heads %lld/%lld, ff %lld%s, vocab %lld, %s weights, seed %llu\n",
              out->c_str(), spec.arch.c_str(), spec.name.c_str(), static_cast<long long>(spec.n_layer),
              static_cast<long long>(spec.n_embd), static_cast<long long>(spec.n_head),
              static_cast<long long>(spec.n_head_kv), static_cast<long long>(spec.n_ff), experts.c_str(),
              static_cast<long long>(spec.n_vocab), std::string(type_name(*type)).c_str(),
              static_cast<unsigned long long>(seed));
  return 0;
}

}  // namespace loom::cli
