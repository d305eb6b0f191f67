// The architecture layer: each family's hyper-parameters and tensor shapes,
// its logits against a double-precision forward pass written from the
// family's definition (biases, per-head norms, NeoX and partial rope, fused
// projections, rope freq factors; gemma's embedding scale, post-norms,
// GeGLU, soft-capping, sliding window and per-layer rope), and the refusal of
// files with tensors or keys a family does not use.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/model_checks.h"

namespace loom {
namespace {

std::vector<Device*> cpu_only() { return {&Registry::get().cpu()}; }

std::string temp_model(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("loom_arch_test_" + std::to_string(::getpid()) + "_" + tag + ".gguf"))
      .string();
}

struct Family {
  std::string tag;
  std::function<void(ModelSpec&)> set;
};

ModelSpec small_spec(const Family& f) {
  ModelSpec s;
  s.n_vocab = 320;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = 64;
  f.set(s);
  return s;
}

const Family kFamilies[] = {
    {"llama", [](ModelSpec&) {}},
    {"llama_rope_freqs", [](ModelSpec& s) { s.rope_freqs = true; }},
    {"qwen2", [](ModelSpec& s) { s.arch = "qwen2"; }},
    {"qwen3", [](ModelSpec& s) { s.arch = "qwen3"; s.n_embd_head = 32; }},  // q is 128 wide, n_embd 64
    {"phi3", [](ModelSpec& s) { s.arch = "phi3"; s.n_rot = 8; }},            // rotary on 8 of 16 dims
    // layer 0 attends to a window of 3, layer 1 to all; tight caps bend the logits
    {"gemma2", [](ModelSpec& s) { s.arch = "gemma2"; s.n_swa = 3; s.attn_softcap = 2.0f; s.final_softcap = 5.0f; }},
    // layers 0-4 windowed (rope base 10000), layer 5 global (base 1e6, linear scaling 4)
    {"gemma3", [](ModelSpec& s) {
       s.arch = "gemma3"; s.n_layer = 6; s.n_swa = 3; s.rope_freq_base = 1e6f; s.rope_scale = 4.0f;
     }},
    // LongRoPE: the tests' 32-token context is over 16 (long factors), not over 48 (short ones)
    {"phi3_longrope_long", [](ModelSpec& s) { s.arch = "phi3"; s.n_rot = 8; s.longrope_orig_ctx = 16; }},
    {"phi3_longrope_short", [](ModelSpec& s) { s.arch = "phi3"; s.n_rot = 8; s.longrope_orig_ctx = 48; }},
};

using Vec = std::vector<double>;

Vec values(const Tensor* t) {
  const auto f = tensor_to_floats(*t);
  return {f.begin(), f.end()};
}

// y = W x (+ b), W stored as ne0 = in, ne1 = out; rows [first, first + out) of W.
Vec matvec(const Vec& w, int64_t in, int64_t out, const Vec& x, const Tensor* bias = nullptr, int64_t first = 0) {
  Vec y(out, 0.0);
  for (int64_t r = 0; r < out; ++r)
    for (int64_t k = 0; k < in; ++k) y[r] += w[(first + r) * in + k] * x[k];
  if (bias) {
    const Vec b = values(bias);
    for (int64_t r = 0; r < out; ++r) y[r] += b[first + r];
  }
  return y;
}

// RMS norm of each `n`-element group of x, times g.
Vec rms_norm(const Vec& x, const Vec& g, double eps) {
  const size_t n = g.size();
  Vec y(x.size());
  for (size_t s = 0; s < x.size(); s += n) {
    double ss = 0.0;
    for (size_t i = 0; i < n; ++i) ss += x[s + i] * x[s + i];
    const double f = 1.0 / std::sqrt(ss / n + eps);
    for (size_t i = 0; i < n; ++i) y[s + i] = x[s + i] * f * g[i];
  }
  return y;
}

void rope(Vec& v, const HParams& h, int64_t n_heads, int pos, const Vec& factors, double base, double scale,
          double mscale) {
  const int64_t hd = h.head_dim(), nr = h.n_rot;
  for (int64_t head = 0; head < n_heads; ++head)
    for (int64_t k = 0; k < nr / 2; ++k) {
      const double theta = pos * scale * std::pow(base, -2.0 * k / nr) /
                           (factors.empty() ? 1.0 : factors[k]);
      const bool neox = h.rope_mode == RopeMode::NeoX;
      double& a = v[head * hd + (neox ? k : 2 * k)];
      double& b = v[head * hd + (neox ? k + nr / 2 : 2 * k + 1)];
      const double x0 = a, x1 = b;
      a = mscale * (x0 * std::cos(theta) - x1 * std::sin(theta));
      b = mscale * (x0 * std::sin(theta) + x1 * std::cos(theta));
    }
}

// Logits of every position, from the weights and the families' definitions.
// The window, soft-caps and rope come from the spec the file was written from;
// `windows`, when given, says which layers are windowed instead of the
// family's default pattern.
std::vector<Vec> reference_forward(const Model& m, const ModelSpec& spec, const std::vector<int32_t>& tokens,
                                   int64_t n_ctx, const std::vector<bool>* windows = nullptr) {
  const HParams& h = m.hparams();
  const int64_t hd = h.head_dim(), nq = h.n_embd_q(), nkv = h.n_embd_kv(), T = static_cast<int64_t>(tokens.size());
  const Vec embd = values(m.token_embd());
  std::vector<Vec> x(T);
  const bool gemma = h.arch == "gemma2" || h.arch == "gemma3";
  for (int64_t t = 0; t < T; ++t) {
    x[t].assign(embd.begin() + tokens[t] * h.n_embd, embd.begin() + (tokens[t] + 1) * h.n_embd);
    if (gemma)
      for (double& e : x[t]) e *= std::sqrt(static_cast<double>(h.n_embd));
  }
  for (int64_t il = 0; il < h.n_layer; ++il) {
    const Layer& L = m.layers()[il];
    // LongRoPE: the long factors above the original context, and the rotated
    // dims scaled by sqrt(1 + ln(training / original context) / ln(original)).
    const int64_t orig = spec.longrope_orig_ctx;
    const Tensor* freqs = orig && n_ctx > orig ? L.rope_freqs_long : L.rope_freqs;
    const Vec factors = freqs ? values(freqs) : Vec{};
    const double mscale = orig && spec.n_ctx > orig
                              ? std::sqrt(1.0 + std::log(double(spec.n_ctx) / orig) / std::log(double(orig))) : 1.0;
    // gemma2: even layers see the last n_swa positions, gemma3: all but every
    // 6th layer, which alone ropes with the file's base and scale (gemma2: all).
    const bool windowed = windows ? (*windows)[static_cast<size_t>(il)]
                          : h.arch == "gemma2" ? il % 2 == 0
                          : h.arch == "gemma3" ? il % 6 != 5
                                               : false;
    const bool local_rope = h.arch == "gemma3" && windowed;
    const double base = local_rope ? 10000.0 : spec.rope_freq_base;
    const double rscale = local_rope || spec.rope_scale == 0.0f ? 1.0 : 1.0 / spec.rope_scale;
    const double attn_cap = h.arch == "gemma2" ? (spec.attn_softcap > 0 ? spec.attn_softcap : 50.0) : 0.0;
    std::vector<Vec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      const Vec hn = rms_norm(x[t], values(L.attn_norm), h.rms_eps);
      if (L.wqkv) {
        const Vec w = values(L.wqkv);
        q[t] = matvec(w, h.n_embd, nq, hn, L.bqkv, 0);
        k[t] = matvec(w, h.n_embd, nkv, hn, L.bqkv, nq);
        v[t] = matvec(w, h.n_embd, nkv, hn, L.bqkv, nq + nkv);
      } else {
        q[t] = matvec(values(L.wq), h.n_embd, nq, hn, L.bq);
        k[t] = matvec(values(L.wk), h.n_embd, nkv, hn, L.bk);
        v[t] = matvec(values(L.wv), h.n_embd, nkv, hn, L.bv);
      }
      if (L.attn_q_norm) q[t] = rms_norm(q[t], values(L.attn_q_norm), h.rms_eps);
      if (L.attn_k_norm) k[t] = rms_norm(k[t], values(L.attn_k_norm), h.rms_eps);
      rope(q[t], h, h.n_head, static_cast<int>(t), factors, base, rscale, mscale);
      rope(k[t], h, h.n_head_kv, static_cast<int>(t), factors, base, rscale, mscale);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec attn(nq, 0.0);
      for (int64_t head = 0; head < h.n_head; ++head) {
        const int64_t kvh = head / (h.n_head / h.n_head_kv);
        const int64_t first = windowed ? std::max<int64_t>(0, t - spec.n_swa + 1) : 0;
        Vec s(t + 1, 0.0);
        double mx = -1e300;
        for (int64_t j = first; j <= t; ++j) {
          double d = 0.0;
          for (int64_t i = 0; i < hd; ++i) d += q[t][head * hd + i] * k[j][kvh * hd + i];
          s[j] = d / std::sqrt(static_cast<double>(hd));
          if (attn_cap > 0) s[j] = attn_cap * std::tanh(s[j] / attn_cap);
          mx = std::max(mx, s[j]);
        }
        double sum = 0.0;
        for (int64_t j = first; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t j = first; j <= t; ++j)
          for (int64_t i = 0; i < hd; ++i) attn[head * hd + i] += s[j] / sum * v[j][kvh * hd + i];
      }
      Vec o = matvec(values(L.wo), nq, h.n_embd, attn, L.bo);
      if (gemma) o = rms_norm(o, values(L.attn_post_norm), h.rms_eps);
      for (int64_t i = 0; i < h.n_embd; ++i) x[t][i] += o[i];
      const Vec hn = rms_norm(x[t], values(L.ffn_norm), h.rms_eps);
      const Vec up_w = values(L.ffn_up);
      Vec g = L.ffn_gate ? matvec(values(L.ffn_gate), h.n_embd, h.n_ff, hn) : matvec(up_w, h.n_embd, h.n_ff, hn);
      const Vec u = matvec(up_w, h.n_embd, h.n_ff, hn, nullptr, L.ffn_gate ? 0 : h.n_ff);
      for (int64_t i = 0; i < h.n_ff; ++i)
        g[i] = (gemma ? 0.5 * g[i] * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g[i] + 0.044715 * g[i] * g[i] * g[i])))
                      : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
      Vec d = matvec(values(L.ffn_down), h.n_ff, h.n_embd, g);
      if (gemma) d = rms_norm(d, values(L.ffn_post_norm), h.rms_eps);
      for (int64_t i = 0; i < h.n_embd; ++i) x[t][i] += d[i];
    }
  }
  std::vector<Vec> logits;
  for (const Vec& xt : x) {
    logits.push_back(matvec(values(m.output()), h.n_embd, h.n_vocab, rms_norm(xt, values(m.output_norm()), h.rms_eps)));
    const double cap = spec.final_softcap > 0 ? spec.final_softcap : h.arch == "gemma2" ? 30.0 : 0.0;
    if (cap > 0)
      for (double& l : logits.back()) l = cap * std::tanh(l / cap);
  }
  return logits;
}

double max_rel_error(std::span<const float> got, const Vec& want) {
  double lo = want[0], hi = want[0], err = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    lo = std::min(lo, want[i]);
    hi = std::max(hi, want[i]);
    err = std::max(err, std::fabs(got[i] - want[i]));
  }
  return err / (hi - lo);
}

class FamilyTest : public ::testing::TestWithParam<Family> {};

TEST_P(FamilyTest, HParamsAndTensorShapes) {
  const ModelSpec spec = small_spec(GetParam());
  const std::string path = temp_model(GetParam().tag);
  write_random_model(spec, DType::F32, 5, path);
  auto m = Model::load(path, cpu_only());
  std::filesystem::remove(path);
  const HParams& h = m->hparams();
  EXPECT_EQ(h.arch, spec.arch);
  EXPECT_EQ(h.n_layer, spec.n_layer);
  EXPECT_EQ(h.head_dim(), spec.arch == "qwen3" ? 32 : 16);
  EXPECT_EQ(h.n_rot, spec.arch == "phi3" ? 8 : h.head_dim());
  EXPECT_EQ(h.rope_mode, spec.arch == "llama" ? RopeMode::Normal : RopeMode::NeoX);
  using Ne = std::array<int64_t, 4>;
  for (const Layer& L : m->layers()) {
    if (spec.arch == "phi3") {
      ASSERT_TRUE(L.wqkv && !L.wq && !L.ffn_gate);
      EXPECT_EQ(L.wqkv->ne, (Ne{64, 64 + 2 * 32, 1, 1}));
      EXPECT_EQ(L.ffn_up->ne, (Ne{64, 2 * 96, 1, 1}));
    } else {
      ASSERT_TRUE(L.wq && L.ffn_gate && !L.wqkv);
      EXPECT_EQ(L.wq->ne, (Ne{64, h.n_embd_q(), 1, 1}));
      EXPECT_EQ(L.wk->ne, (Ne{64, h.n_embd_kv(), 1, 1}));
      EXPECT_EQ(L.wo->ne, (Ne{h.n_embd_q(), 64, 1, 1}));
    }
    EXPECT_EQ(L.bq != nullptr, spec.arch == "qwen2");
    EXPECT_EQ(L.attn_q_norm != nullptr, spec.arch == "qwen3" || spec.arch == "gemma3");
    EXPECT_EQ(L.attn_post_norm != nullptr, spec.arch.starts_with("gemma"));
    EXPECT_EQ(L.ffn_post_norm != nullptr, spec.arch.starts_with("gemma"));
    if (L.attn_k_norm) EXPECT_EQ(L.attn_k_norm->ne, (Ne{h.head_dim(), 1, 1, 1}));
    EXPECT_EQ(L.rope_freqs != nullptr, spec.rope_freqs || spec.longrope_orig_ctx > 0);
    EXPECT_EQ(L.rope_freqs_long != nullptr, spec.longrope_orig_ctx > 0);
  }
}

TEST_P(FamilyTest, MatchesAPlainForwardPass) {
  const std::string path = temp_model(GetParam().tag);
  write_random_model(small_spec(GetParam()), DType::F32, 5, path);
  auto m = Model::load(path, cpu_only());
  std::filesystem::remove(path);
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 7, 300, 5, 11, 12, 13, 14, 15, 16, 31};
  const auto ref = reference_forward(*m, small_spec(GetParam()), tokens, 32);
  const int64_t nv = m->hparams().n_vocab;
  // Both attention paths: mul_mat + soft_max + mul_mat, and flash_attn_ext
  // (soft-capping and the sliding window's mask inside the fused op).
  for (FlashAttn fa : {FlashAttn::Off, FlashAttn::On}) {
    Session s(*m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32, .flash_attn = fa});
    const auto logits = s.decode(tokens, true);
    ASSERT_EQ(logits.size(), tokens.size() * nv);
    for (size_t t = 0; t < tokens.size(); ++t)
      EXPECT_LT(max_rel_error(std::span(logits).subspan(t * nv, nv), ref[t]), 1e-4)
          << "token " << t << ", -fa " << flash_attn_name(fa);
  }
}

// Tokens decoded in pieces (micro-batches of 3 after cached tokens, then one
// at a time) give the logits of one whole batch: the masks, the sliding
// window's included, follow the cached positions.
TEST_P(FamilyTest, PiecewiseDecodeMatchesOneBatch) {
  const std::string path = temp_model(GetParam().tag + "_pieces");
  write_random_model(small_spec(GetParam()), DType::F32, 5, path);
  auto m = Model::load(path, cpu_only());
  std::filesystem::remove(path);
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 7, 300, 5, 11, 12, 13};
  Session whole(*m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
  const auto want = whole.decode(tokens, true);
  Session pieces(*m, {.n_ctx = 32, .n_ubatch = 3, .type_k = DType::F32, .type_v = DType::F32});
  std::vector<float> got = pieces.decode(std::span(tokens).first(8), true);
  for (size_t t = 8; t < tokens.size(); ++t) {
    const auto one = pieces.decode(std::span(tokens).subspan(t, 1), true);
    got.insert(got.end(), one.begin(), one.end());
  }
  ASSERT_EQ(got.size(), want.size());
  const int64_t nv = m->hparams().n_vocab;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const Vec w(want.begin() + t * nv, want.begin() + (t + 1) * nv);
    EXPECT_LT(max_rel_error(std::span(got).subspan(t * nv, nv), w), 1e-5) << "token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTest, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return info.param.tag; });

// The llama3 rope factors change the logits (the file is not the same
// model without them): guards against rope_freqs being read but not used.
TEST(ArchRopeFreqs, ChangeTheLogits) {
  std::vector<float> out[2];
  for (bool with : {false, true}) {
    ModelSpec s = small_spec(kFamilies[0]);
    s.rope_freqs = with;
    const std::string path = temp_model(with ? "with" : "without");
    write_random_model(s, DType::F32, 5, path);
    auto m = Model::load(path, cpu_only());
    std::filesystem::remove(path);
    Session session(*m, {.n_ctx = 32});
    const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 7, 300, 5, 11, 12, 13, 14, 15, 16, 31};
    out[with] = session.decode(tokens);
  }
  double diff = 0.0;
  for (size_t i = 0; i < out[0].size(); ++i) diff = std::max(diff, std::fabs(double(out[0][i]) - out[1][i]));
  EXPECT_GT(diff, 1e-3);
}

// Rewrites a generated file: extra or replaced keys, extra tensors.
std::string rewrite(const std::string& src, const std::string& tag, const std::vector<gguf::KeyValue>& keys,
                    const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra_tensors = {}) {
  auto f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const auto& kv : keys) w.set(kv.key, kv.value);
  for (const auto& t : f->tensors()) {
    std::vector<uint8_t> bytes(t.size);
    f->read_tensor(t, bytes.data(), 0, t.size);
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), bytes);
  }
  for (const auto& [name, ne] : extra_tensors) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    w.add_tensor(name, static_cast<uint32_t>(DType::F32), ne, std::vector<uint8_t>(n * sizeof(float)));
  }
  const std::string out = temp_model(tag);
  w.write(out);
  return out;
}

using test::expect_load_refused;

TEST(ArchRefusal, UnknownTensorsKeysAndFamiliesNameTheFileAndWhat) {
  using gguf::Value;
  const std::string src = temp_model("refusal_src");
  write_random_model(small_spec(kFamilies[0]), DType::F32, 3, src);
  // A MoE router the llama family here does not run.
  std::string p = rewrite(src, "router", {}, {{"blk.0.ffn_gate_inp.weight", {64, 8}}});
  expect_load_refused(p, {p, "blk.0.ffn_gate_inp.weight [64, 8, 1, 1]", "'llama' family does not use"});
  // Keys that change the math: expert counts, a sliding window, soft-capping, YaRN.
  p = rewrite(src, "experts", {{"llama.expert_count", Value::u32(8)}});
  expect_load_refused(p, {p, "llama.expert_count = 8", "mixture of experts"});
  p = rewrite(src, "swa", {{"llama.attention.sliding_window", Value::u32(16)}});
  expect_load_refused(p, {p, "llama.attention.sliding_window = 16", "does not use"});
  p = rewrite(src, "softcap", {{"llama.final_logit_softcapping", Value::f32(30.0f)}});
  expect_load_refused(p, {"llama.final_logit_softcapping = 30"});
  p = rewrite(src, "yarn", {{"llama.rope.scaling.type", Value::string("yarn")}});
  expect_load_refused(p, {"llama.rope.scaling.type = 'yarn'"});
  p = rewrite(src, "vlen", {{"llama.attention.value_length", Value::u32(8)}});
  expect_load_refused(p, {"llama.attention.value_length = 8"});
  // A block count that would size a huge layer table (a fuzz finding: 12 GB
  // allocated before any tensor was looked at).
  p = rewrite(src, "layers", {{"llama.block_count", Value::u32(3000000000u)}});
  expect_load_refused(p, {p, "llama.block_count = 3000000000 is more than the", "the limit on the layer count"});
  p = rewrite(src, "falcon", {{"general.architecture", Value::string("falcon")}});
  expect_load_refused(p, {"architecture 'falcon' is not supported", "llama, qwen2, qwen3, phi3"});
  // Keys that do not change the math load: a zero expert count, the vocab size.
  p = rewrite(src, "harmless", {{"llama.expert_count", Value::u32(0)}, {"llama.vocab_size", Value::u32(320)}});
  EXPECT_NO_THROW(Model::load(p, cpu_only()));
  std::filesystem::remove(p);
  std::filesystem::remove(src);
}

// llama.cpp reads no output.weight for gemma2 (it refuses such a file) and
// no attention soft-capping for gemma3: Loom refuses both too.
TEST(ArchRefusal, GemmaOutputWeightAndSoftcapKeys) {
  using gguf::Value;
  const std::string g2 = temp_model("refusal_g2"), g3 = temp_model("refusal_g3");
  write_random_model(small_spec(kFamilies[5]), DType::F32, 3, g2);
  write_random_model(small_spec(kFamilies[6]), DType::F32, 3, g3);
  std::string p = rewrite(g2, "g2_output", {}, {{"output.weight", {64, 320}}});
  expect_load_refused(p, {p, "output.weight", "'gemma2' family does not use"});
  p = rewrite(g3, "g3_softcap", {{"gemma3.attn_logit_softcapping", Value::f32(50.0f)}});
  expect_load_refused(p, {"gemma3.attn_logit_softcapping = 50"});
  std::filesystem::remove(g2);
  std::filesystem::remove(g3);
}

TEST(ArchRefusal, LongRopeNeedsBothFactorSets) {
  const std::string phi3 = temp_model("refusal_phi3");
  write_random_model(small_spec(kFamilies[4]), DType::F32, 3, phi3);
  const std::string p = rewrite(phi3, "phi3_long_only", {}, {{"rope_factors_long.weight", {4}}});
  expect_load_refused(p, {p, "'rope_factors_short.weight' is missing", "both the short and the long factors"});
  std::filesystem::remove(phi3);
}

// attention.sliding_window_pattern as a per-layer array: each layer is
// windowed as the array says (checked against the plain forward pass), an
// array of the default pattern gives the logits of the period, and an array
// of the wrong length is refused naming both sizes.
TEST(ArchHParams, PerLayerSlidingWindowPattern) {
  using gguf::Value;
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 7, 300, 5, 11, 12, 13, 14, 15, 16, 31};
  const auto bools = [](const std::vector<bool>& v) {
    gguf::Array a(gguf::ValueType::Bool);
    for (bool b : v) a.push_back(Value::boolean(b));
    return Value::array(std::move(a));
  };
  for (const Family& f : {kFamilies[5], kFamilies[6]}) {
    const ModelSpec spec = small_spec(f);
    const std::string src = temp_model(spec.arch + "_pattern_src");
    write_random_model(spec, DType::F32, 5, src);
    const std::string key = spec.arch + ".attention.sliding_window_pattern";
    std::vector<bool> windows(static_cast<size_t>(spec.n_layer));
    for (size_t il = 0; il < windows.size(); ++il) windows[il] = il % 3 == 1;  // another pattern than the period's
    const std::string p = rewrite(src, spec.arch + "_pattern", {{key, bools(windows)}});
    auto m = Model::load(p, cpu_only());
    for (int64_t il = 0; il < spec.n_layer; ++il) EXPECT_EQ(m->layers()[il].swa, windows[il]) << spec.arch << " " << il;
    const auto ref = reference_forward(*m, spec, tokens, 32, &windows);
    Session s(*m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
    const auto got = s.decode(tokens, true);
    const int64_t nv = m->hparams().n_vocab;
    for (size_t t = 0; t < tokens.size(); ++t)
      EXPECT_LT(max_rel_error(std::span(got).subspan(t * nv, nv), ref[t]), 1e-4) << spec.arch << " token " << t;
    m.reset();
    // The default pattern as an array: the same logits as the period.
    std::vector<bool> period(windows.size());
    for (size_t il = 0; il < period.size(); ++il) period[il] = spec.arch == "gemma2" ? il % 2 == 0 : il % 6 != 5;
    const std::string q = rewrite(src, spec.arch + "_pattern_default", {{key, bools(period)}});
    std::vector<float> out[2];
    for (int i = 0; i < 2; ++i) {
      auto mi = Model::load(i == 0 ? src : q, cpu_only());
      Session si(*mi, {.n_ctx = 32});
      out[i] = si.decode(tokens);
    }
    EXPECT_EQ(out[0], out[1]) << spec.arch;
    windows.pop_back();
    expect_load_refused(rewrite(src, spec.arch + "_pattern_short", {{key, bools(windows)}}),
                   {key, std::to_string(spec.n_layer - 1) + " values but the model has " +
                             std::to_string(spec.n_layer) + " layers"});
    for (const std::string& path : {src, p, q}) std::filesystem::remove(path);
  }
}

TEST(ArchHParams, GemmaWindowsCapsAndRopeBases) {
  using gguf::Value;
  const std::string g2 = temp_model("hp_g2"), g3 = temp_model("hp_g3");
  ModelSpec s2 = small_spec(kFamilies[5]);
  s2.n_swa = 0;  // the defaults: window 4096, caps 50 and 30
  s2.attn_softcap = s2.final_softcap = 0.0f;
  write_random_model(s2, DType::F32, 3, g2);
  write_random_model(small_spec(kFamilies[6]), DType::F32, 3, g3);
  auto f2 = gguf::File::open(g2);
  const HParams h2 = HParams::from_gguf(*f2);
  EXPECT_EQ(h2.n_swa, 4096);
  EXPECT_FLOAT_EQ(h2.attn_softcap, 50.0f);
  EXPECT_FLOAT_EQ(h2.final_softcap, 30.0f);
  EXPECT_FLOAT_EQ(h2.embd_scale, 8.0f);  // sqrt(64)
  EXPECT_FLOAT_EQ(h2.attn_scale, 0.25f);  // 1/sqrt(16)
  EXPECT_FLOAT_EQ(h2.rope_freq_base_swa, h2.rope_freq_base);
  EXPECT_TRUE(h2.is_swa(0));
  EXPECT_FALSE(h2.is_swa(1));
  auto f3 = gguf::File::open(g3);
  const HParams h3 = HParams::from_gguf(*f3);
  EXPECT_EQ(h3.n_swa, 3);
  EXPECT_FLOAT_EQ(h3.attn_softcap, 0.0f);
  EXPECT_FLOAT_EQ(h3.final_softcap, 0.0f);
  EXPECT_FLOAT_EQ(h3.rope_freq_base, 1e6f);
  EXPECT_FLOAT_EQ(h3.rope_freq_scale, 0.25f);
  EXPECT_FLOAT_EQ(h3.rope_freq_base_swa, 10000.0f);
  EXPECT_FLOAT_EQ(h3.rope_freq_scale_swa, 1.0f);
  for (int il = 0; il < 12; ++il) EXPECT_EQ(h3.is_swa(il), il % 6 != 5) << il;
  f2.reset();
  f3.reset();
  // gemma3 without a window: every layer global.
  const std::string p = rewrite(g3, "g3_nowindow", {{"gemma3.attention.sliding_window", Value::u32(0)}});
  auto f = gguf::File::open(p);
  EXPECT_FALSE(HParams::from_gguf(*f).is_swa(0));
  f.reset();
  for (const std::string& path : {g2, g3, p}) std::filesystem::remove(path);
}

TEST(ArchHParams, LinearRopeScalingAndKeyLength) {
  using gguf::Value;
  const std::string src = temp_model("hp_src");
  write_random_model(small_spec(kFamilies[3]), DType::F32, 3, src);  // qwen3: key_length 32
  const std::string p = rewrite(src, "linear", {{"qwen3.rope.scaling.type", Value::string("linear")},
                                                {"qwen3.rope.scaling.factor", Value::f32(4.0f)},
                                                {"qwen3.rope.freq_base", Value::f32(5e5f)}});
  auto f = gguf::File::open(p);
  const HParams h = HParams::from_gguf(*f);
  EXPECT_EQ(h.arch, "qwen3");
  EXPECT_EQ(h.head_dim(), 32);
  EXPECT_EQ(h.n_embd_q(), 128);
  EXPECT_EQ(h.n_embd_kv(), 64);
  EXPECT_FLOAT_EQ(h.rope_freq_scale, 0.25f);
  EXPECT_FLOAT_EQ(h.rope_freq_base, 5e5f);
  EXPECT_EQ(h.rope_mode, RopeMode::NeoX);
  f.reset();
  std::filesystem::remove(p);
  std::filesystem::remove(src);
}

}  // namespace
}  // namespace loom
