// The type each tensor gets in each of llama.cpp's file types: the rules of
// llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for the file types
// Loom writes, restated. Counters advance in llama.cpp's visiting order, so
// "the first attn_v" / "layer i of n" mean the same here.
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/iequals.h"
#include "loom/quantize.h"

namespace loom {
namespace {

using FT = FileType;

struct FileTypeInfo {
  FileType type;
  std::string_view name;
  DType base;
};

constexpr std::array kFileTypes = {
    FileTypeInfo{FT::Q4_0, "Q4_0", DType::Q4_0},       FileTypeInfo{FT::Q4_1, "Q4_1", DType::Q4_1},
    FileTypeInfo{FT::Q5_0, "Q5_0", DType::Q5_0},       FileTypeInfo{FT::Q5_1, "Q5_1", DType::Q5_1},
    FileTypeInfo{FT::IQ4_NL, "IQ4_NL", DType::IQ4_NL}, FileTypeInfo{FT::IQ4_XS, "IQ4_XS", DType::IQ4_XS},
    FileTypeInfo{FT::Q2_K, "Q2_K", DType::Q2_K},       FileTypeInfo{FT::Q3_K_S, "Q3_K_S", DType::Q3_K},
    FileTypeInfo{FT::Q3_K_M, "Q3_K_M", DType::Q3_K},   FileTypeInfo{FT::Q3_K_L, "Q3_K_L", DType::Q3_K},
    FileTypeInfo{FT::Q4_K_S, "Q4_K_S", DType::Q4_K},   FileTypeInfo{FT::Q4_K_M, "Q4_K_M", DType::Q4_K},
    FileTypeInfo{FT::Q5_K_S, "Q5_K_S", DType::Q5_K},   FileTypeInfo{FT::Q5_K_M, "Q5_K_M", DType::Q5_K},
    FileTypeInfo{FT::Q6_K, "Q6_K", DType::Q6_K},       FileTypeInfo{FT::Q8_0, "Q8_0", DType::Q8_0},
    FileTypeInfo{FT::F16, "F16", DType::F16},          FileTypeInfo{FT::BF16, "BF16", DType::BF16},
};

const FileTypeInfo& info(FileType t) {
  for (const auto& i : kFileTypes)
    if (i.type == t) return i;
  fail("file type {} is not one `loom quantize` writes", static_cast<uint32_t>(t));
}

enum class Category { Output, TokenEmbd, AttnV, AttnK, AttnQ, AttnOutput, FfnUp, FfnGate, FfnDown, Other };

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::Output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::TokenEmbd;
  // Fused QKV and MLA's kv_b count as attn_v (the more sensitive part).
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") || contains(name, "attn_v.weight"))
    return Category::AttnV;
  if (contains(name, "attn_k.weight")) return Category::AttnK;
  if (contains(name, "attn_q.weight")) return Category::AttnQ;
  if (contains(name, "attn_output.weight")) return Category::AttnOutput;
  if (contains(name, "ffn_up")) return Category::FfnUp;
  if (contains(name, "ffn_gate")) return Category::FfnGate;
  if (contains(name, "ffn_down")) return Category::FfnDown;
  return Category::Other;
}

// Dimensions up to the last one above 1 (ggml_n_dims).
int effective_dims(const gguf::TensorInfo& t) {
  int n = 1;
  for (int i = 0; i < 4; ++i)
    if (t.ne[i] > 1) n = i + 1;
  return n;
}

// Names llama.cpp never quantizes: small or position-like matrices.
constexpr std::string_view kKeepParts[] = {
    "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
    "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
    "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
    "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight",
    "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight", ".position_embd",
    "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook",
    "mm.a.code_embd"};

bool may_quantize(const gguf::TensorInfo& t) {
  const std::string_view name = t.name;
  if (effective_dims(t) < 2 || !name.ends_with("weight")) return false;
  if (name == "position_embd.weight" || name == "token_types.weight") return false;
  return std::none_of(std::begin(kKeepParts), std::end(kKeepParts), [&](std::string_view p) { return contains(name, p); });
}

int layer_of(std::string_view name) {
  int layer = -1;
  std::sscanf(std::string(name).c_str(), "blk.%d.", &layer);
  return layer;
}

bool is_quantized_type(DType t) { return traits(t).is_quantized; }
int block_size(DType t) { return traits(t).block_size; }

// A 32-element type for rows that are not whole blocks of `target` (or F16
// when even those do not fit).
DType fallback_type(DType target, int64_t ncols) {
  if (ncols % block_size(target) == 0) return target;
  DType to = target;
  switch (target) {
    case DType::IQ4_XS: to = DType::IQ4_NL; break;
    case DType::Q2_K:
    case DType::Q3_K: to = DType::Q4_0; break;
    case DType::Q4_K: to = DType::Q5_0; break;
    case DType::Q5_K: to = DType::Q5_1; break;
    case DType::Q6_K: to = DType::Q8_0; break;
    default: break;  // already a 32-element type
  }
  return ncols % block_size(to) == 0 ? to : DType::F16;
}

// The model facts the rules use.
struct ModelFacts {
  std::string arch;
  int n_layer = 0;
  int n_gqa = 0;  // heads per kv head
  int n_expert = 0;
  bool is_70b = false;
  bool tied = true;  // no output.weight
};

ModelFacts model_facts(const gguf::File& in) {
  ModelFacts m;
  const auto* arch = in.find("general.architecture");
  m.arch = arch ? arch->as_string() : "";
  const auto key = [&](std::string_view suffix) { return m.arch + "." + std::string(suffix); };
  m.n_layer = static_cast<int>(in.get_uint_or(key("block_count")).value_or(0));
  const uint64_t n_head = in.get_uint_or(key("attention.head_count")).value_or(0);
  const uint64_t n_head_kv = in.get_uint_or(key("attention.head_count_kv")).value_or(n_head);
  m.n_gqa = n_head_kv ? static_cast<int>(n_head / n_head_kv) : 0;
  m.n_expert = static_cast<int>(in.get_uint_or(key("expert_count")).value_or(0));
  // llama.cpp names an 80-layer llama with grouped-query attention "70B".
  m.is_70b = m.arch == "llama" && m.n_layer == 80 && n_head != n_head_kv;
  m.tied = in.find_tensor("output.weight") == nullptr;
  return m;
}

bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

class MixRules {
 public:
  MixRules(const ModelFacts& m, const QuantizeOptions& o, int n_attn_v) : m_(m), o_(o), n_attn_v_(n_attn_v) {}

  DType choose(const gguf::TensorInfo& t, DType base, Category cat) {
    const FT ft = o_.file_type;
    const bool falcon = m_.arch == "falcon";
    DType type = base;
    if (cat == Category::Output || (m_.tied && cat == Category::TokenEmbd)) {
      if (o_.output_type) return *o_.output_type;
      if (falcon || t.ne[0] % block_size(type) != 0) return DType::Q8_0;
      return type == DType::Q8_0 ? type : DType::Q6_K;
    }
    switch (cat) {
      case Category::AttnV: {
        const int i = i_attn_v_++;
        if (ft == FT::Q2_K) type = m_.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
        else if (ft == FT::Q3_K_M) type = i < 2 ? DType::Q5_K : DType::Q4_K;
        else if (ft == FT::Q3_K_L) type = DType::Q5_K;
        else if ((ft == FT::IQ4_NL || ft == FT::IQ4_XS) && m_.n_gqa >= 4) type = DType::Q5_K;
        else if ((ft == FT::Q4_K_M || ft == FT::Q5_K_M) && use_more_bits(i, n_attn_v_)) type = DType::Q6_K;
        else if (ft == FT::Q4_K_S && i < 4) type = DType::Q5_K;
        if (m_.is_70b && (type == DType::Q3_K || type == DType::Q4_K)) type = DType::Q5_K;
        if (m_.n_expert == 8) type = DType::Q8_0;
        return type;
      }
      case Category::AttnK: return m_.n_expert == 8 ? DType::Q8_0 : type;
      case Category::FfnDown: {
        int i = i_ffn_down_++;
        const int n = m_.n_layer;
        if (m_.n_expert > 1) {  // experts are not in layer order: the layer is in the name
          i = layer_of(t.name);
          if (i < 0 || i >= n) fail("tensor '{}': cannot tell its layer (0..{})", t.name, n - 1);
        }
        if (ft == FT::Q2_K) type = DType::Q3_K;
        else if (ft == FT::Q3_K_M)
          type = i < n / 16 ? DType::Q5_K : !falcon || use_more_bits(i, n) ? DType::Q4_K : DType::Q3_K;
        else if (ft == FT::Q3_K_L) type = falcon ? DType::Q4_K : DType::Q5_K;
        else if (ft == FT::Q4_K_M) {
          if (falcon) type = i < n / 16 ? DType::Q6_K : use_more_bits(i, n) ? DType::Q5_K : DType::Q4_K;
          else if (use_more_bits(i, n)) type = DType::Q6_K;
        } else if (i < n / 8 && (ft == FT::IQ4_NL || ft == FT::IQ4_XS)) type = DType::Q5_K;
        else if (ft == FT::Q5_K_M && use_more_bits(i, n)) type = DType::Q6_K;
        else if (ft == FT::Q4_K_S && !falcon && i < n / 8) type = DType::Q5_K;
        return type;
      }
      case Category::AttnOutput:
        if (falcon) return ft == FT::Q3_K_L ? DType::Q4_K : type;
        if (m_.n_expert == 8) {
          const bool bump = ft == FT::Q2_K || ft == FT::Q3_K_S || ft == FT::Q3_K_M || ft == FT::IQ4_NL ||
                            ft == FT::Q4_K_S || ft == FT::Q4_K_M || ft == FT::IQ4_XS;
          return bump ? DType::Q5_K : type;
        }
        if (ft == FT::Q2_K) return DType::Q3_K;
        if (ft == FT::Q3_K_M) return DType::Q4_K;
        if (ft == FT::Q3_K_L) return DType::Q5_K;
        return type;
      default: return type;
    }
  }

 private:
  const ModelFacts& m_;
  const QuantizeOptions& o_;
  int n_attn_v_;
  int i_attn_v_ = 0;
  int i_ffn_down_ = 0;
};

uint32_t id(DType t) { return static_cast<uint32_t>(t); }

}  // namespace

std::span<const FileType> quantize_file_types() {
  static const auto types = [] {
    std::array<FileType, kFileTypes.size()> out{};
    for (size_t i = 0; i < kFileTypes.size(); ++i) out[i] = kFileTypes[i].type;
    return out;
  }();
  return types;
}

std::string_view file_type_name(FileType t) { return info(t).name; }
DType file_type_base(FileType t) { return info(t).base; }

std::optional<FileType> file_type_from_name(std::string_view name) {
  for (const auto& i : kFileTypes)
    if (iequals(i.name, name)) return i.type;
  // llama-quantize's aliases.
  if (iequals(name, "Q3_K")) return FT::Q3_K_M;
  if (iequals(name, "Q4_K")) return FT::Q4_K_M;
  if (iequals(name, "Q5_K")) return FT::Q5_K_M;
  return std::nullopt;
}

std::vector<TensorQuantPlan> plan_quantization(const gguf::File& in, const QuantizeOptions& options) {
  const ModelFacts facts = model_facts(in);
  const DType base = file_type_base(options.file_type);

  std::vector<const gguf::TensorInfo*> order;
  for (const auto& t : in.tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const int la = layer_of(a->name), lb = layer_of(b->name);
    return la != lb ? la < lb : a->name < b->name;
  });
  int n_attn_v = 0;
  for (const auto* t : order) n_attn_v += category_of(t->name) == Category::AttnV;
  MixRules rules(facts, options, n_attn_v);

  std::vector<TensorQuantPlan> plan;
  for (const auto* t : order) {
    TensorQuantPlan p{t->name, t->type, t->type};
    const Category cat = category_of(t->name);
    if (may_quantize(*t)) {
      DType to = base;
      bool forced = false;
      if (options.token_embedding_type && cat == Category::TokenEmbd) to = *options.token_embedding_type, forced = true;
      else if (options.output_type && cat == Category::Output) to = *options.output_type, forced = true;
      else if (is_quantized_type(base)) {
        if (!options.pure) to = rules.choose(*t, base, cat);
        to = fallback_type(to, t->ne[0]);
      }
      if (t->ne[0] % block_size(to) != 0)
        fail("tensor '{}': rows of {} elements are not whole {}-element blocks of {}{}", t->name, t->ne[0],
             block_size(to), type_name(to), forced ? " (the type given for it)" : "");
      p.to = id(to);
    }
    plan.push_back(std::move(p));
  }
  return plan;
}

}  // namespace loom
