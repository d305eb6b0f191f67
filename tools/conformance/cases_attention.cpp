// flash_attn_ext cases: head sizes 64 and 128, grouped-query ratios 1, 2
// and 4, odd KV lengths, f32 / f16 / per-head / padded masks or none,
// soft-capping, ALiBi, batches that share KV, K and V in every cache type
// (and viewed as the KV cache is: permuted, rows of whole blocks), and a
// single-token case long enough for the CPU to split its KV rows.
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "conformance/cases.h"
#include "loom/ops.h"

namespace loom::conformance::detail {
namespace {

using L = Layout;

struct AttnShape {
  int64_t D, n_q, H, Hkv, n_kv;
  std::optional<DType> mask;  // nullopt: no mask
  float softcap = 0.0f, max_bias = 0.0f;
  Layout q_layout = L::Contiguous, kv_layout = L::Permuted;
  int64_t Dv = 0;          // 0: D
  int64_t B = 1, Bk = 1;   // q's and k/v's dim 3
  int64_t mask_rows = 0;   // 0: n_q (more rows: a padded mask)
  bool mask_per_head = false;
};

Case attn_case(const AttnShape& s, DType tk, DType tv) {
  const int64_t Dv = s.Dv ? s.Dv : s.D;
  const Shape qs{s.D, s.n_q, s.H, s.B}, ks{s.D, s.n_kv, s.Hkv, s.Bk}, vs{Dv, s.n_kv, s.Hkv, s.Bk};
  const Shape ms{s.n_kv, s.mask_rows ? s.mask_rows : s.n_q, s.mask_per_head ? s.H : 1, 1};
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
  std::string name = fmt::format("flash_attn_ext(k={},v={},q={},k={},v={}", type_str(tk), type_str(tv),
                                 shape_name(qs, s.q_layout), shape_name(ks, s.kv_layout), shape_name(vs, s.kv_layout));
  if (s.mask) name += fmt::format(",mask={}{}", type_str(*s.mask), shape_name(ms));
  if (s.softcap > 0.0f) name += fmt::format(",softcap={}", s.softcap);
  if (s.max_bias > 0.0f) name += fmt::format(",max_bias={}", s.max_bias);
  name += ")";
  return make_case(name, Op::FlashAttnExt, tk, [s, qs, ks, vs, ms, scale, tk, tv](CaseGraph& g) {
    Tensor* q = operand(g, DType::F32, qs, s.q_layout);
    Tensor* k = operand(g, tk, ks, s.kv_layout);
    Tensor* v = operand(g, tv, vs, s.kv_layout);
    Tensor* mask = s.mask ? g.input(*s.mask, ms, {Fill::Kind::CausalMask}) : nullptr;
    return flash_attn_ext(g.ctx, q, k, v, mask, scale, s.max_bias, s.softcap);
  });
}

}  // namespace

void add_attention_cases(std::vector<Case>& cases) {
  const std::optional<DType> f32 = DType::F32, f16 = DType::F16;
  // Every cache type for K and V alike, on a prompt-like, a grouped and a
  // decode-like shape (the last long enough to be split over KV chunks).
  const AttnShape typed[] = {
      {64, 7, 4, 4, 37, f32, 0.0f, 0.0f, L::Permuted},
      {64, 5, 8, 2, 45, f16},
      {128, 1, 8, 2, 600, f32, 0.0f, 0.0f, L::Permuted},
  };
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1})
    for (const AttnShape& s : typed) cases.push_back(attn_case(s, t, t));
  // A quantized V with an f16 K (the -ctv only cache) and the reverse.
  for (DType t : {DType::Q8_0, DType::Q4_0}) {
    cases.push_back(attn_case(typed[1], DType::F16, t));
    cases.push_back(attn_case(typed[1], t, DType::F16));
  }
  // Shapes and options, with the default f16 cache.
  AttnShape more[] = {
      {128, 3, 4, 1, 33, std::nullopt},                         // no mask, GQA 4, hd 128
      {64, 4, 4, 2, 40, f32, 1.5f},                             // soft-capping
      {64, 4, 6, 3, 29, f32, 0.0f, 8.0f},                       // ALiBi, 6 heads (both slope rules)
      {64, 3, 2, 1, 31, f16, 0.0f, 0.0f, L::Contiguous, L::Contiguous, 0, 2, 1},  // batches share KV
      {64, 5, 4, 2, 27, f32, 0.0f, 0.0f, L::Contiguous, L::Permuted, 32},         // head size of v differs
      {64, 3, 4, 4, 50, f16, 0.0f, 0.0f, L::Permuted, L::Permuted, 0, 1, 1, 8, true},  // padded, per head
      {128, 1, 32, 4, 1000, f32, 30.0f, 0.0f, L::Permuted},     // decode with softcap, split KV
      {64, 16, 1, 1, 300, f32},                                 // one head: many query rows per unit
  };
  for (const AttnShape& s : more) cases.push_back(attn_case(s, DType::F16, DType::F16));
  cases.push_back(attn_case(more[1], DType::Q8_0, DType::Q8_0));  // soft-capping on the integer dots
}

}  // namespace loom::conformance::detail
