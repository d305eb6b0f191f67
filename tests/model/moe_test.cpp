// Mixture of experts (qwen3moe; mixtral = llama with experts): the MoE FFN
// against a double-precision forward pass written from its definition, the
// loader's checks of expert keys and tensors (errors name the file and key),
// and expert weights placed like any other weight (-ngl, -ot, the
// --cpu-moe / --n-cpu-moe patterns) with the CPU's results. The attention
// of these families is qwen3's and llama's, tested in arch_test.cpp; here the
// attention output matrices are zeroed so that each token's logits depend on
// its own FFNs only.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "loom/error.h"
#include "loom/gguf.h"
#include "loom/model.h"
#include "loom/registry.h"
#include "model_gen/model_gen.h"
#include "support/model_checks.h"
#include "test_devices.h"

namespace loom {
namespace {

using Vec = std::vector<double>;

std::string temp_model(const std::string& tag) {
  return (std::filesystem::temp_directory_path() / ("loom_moe_test_" + std::to_string(::getpid()) + "_" + tag + ".gguf"))
      .string();
}

std::vector<Device*> cpu_only() { return {&Registry::get().cpu()}; }

ModelSpec moe_spec(const std::string& arch) {
  ModelSpec s;
  s.arch = arch;
  s.n_vocab = 320;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = 64;
  s.n_expert = 6;
  s.n_expert_used = 2;
  if (arch == "qwen3moe") {
    s.n_embd_head = 32;
    s.n_ff_exp = 64;  // differs from n_ff: the experts' size comes from expert_feed_forward_length
    s.n_expert_used = 3;
  }
  return s;
}

// Rewrites a file: keys set or replaced, tensors dropped, extra f32 tensors.
struct Rewrite {
  std::vector<gguf::KeyValue> keys;
  std::vector<std::string> drop;
  std::vector<std::pair<std::string, std::vector<int64_t>>> extra;
};

std::string rewrite(const std::string& src, const std::string& tag, const Rewrite& r) {
  auto f = gguf::File::open(src);
  gguf::Writer w;
  for (const auto& kv : f->metadata()) w.set(kv.key, kv.value);
  for (const auto& kv : r.keys) w.set(kv.key, kv.value);
  for (const auto& t : f->tensors()) {
    if (std::find(r.drop.begin(), r.drop.end(), t.name) != r.drop.end()) continue;
    std::vector<uint8_t> bytes(t.size);
    f->read_tensor(t, bytes.data(), 0, t.size);
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), bytes);
  }
  for (const auto& [name, ne] : r.extra) {
    const int64_t n = std::accumulate(ne.begin(), ne.end(), int64_t{1}, std::multiplies<>());
    w.add_tensor(name, static_cast<uint32_t>(DType::F32), ne, std::vector<uint8_t>(n * sizeof(float)));
  }
  const std::string out = temp_model(tag);
  w.write(out);
  return out;
}

// A MoE model of `arch` whose attention adds nothing (attn_output zeroed).
std::string ffn_only_model(const std::string& arch, const std::string& tag) {
  ModelSpec spec = moe_spec(arch);
  spec.zero_attn_output = true;
  const std::string path = temp_model(tag);
  write_random_model(spec, DType::F32, 7, path);
  return path;
}

Vec values(const Tensor* t) {
  const auto f = tensor_to_floats(*t);
  return {f.begin(), f.end()};
}

Vec rms_norm(const Vec& x, const Vec& g, double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double f = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * f * g[i];
  return y;
}

// Rows [first, first + out) of W (ne0 = in) times x.
Vec matvec(const Vec& w, int64_t in, int64_t out, const Vec& x, int64_t first = 0) {
  Vec y(out, 0.0);
  for (int64_t r = 0; r < out; ++r)
    for (int64_t k = 0; k < in; ++k) y[r] += w[(first + r) * in + k] * x[k];
  return y;
}

// The MoE FFN from its definition: softmax over the router's logits, the
// n_used most probable experts, their probabilities divided by their sum,
// the weighted sum of down_e (silu(gate_e x) * up_e x).
Vec moe_reference(const HParams& h, const Layer& L, const Vec& x) {
  const int64_t E = h.n_expert, ff = h.n_ff_exp, d = h.n_embd;
  Vec p = matvec(values(L.ffn_gate_inp), d, E, x);
  const double mx = *std::max_element(p.begin(), p.end());
  double sum = 0.0;
  for (double& v : p) sum += (v = std::exp(v - mx));
  for (double& v : p) v /= sum;
  std::vector<int64_t> order(E);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&p](int64_t a, int64_t b) { return p[a] > p[b]; });
  double picked = 0.0;
  for (int64_t s = 0; s < L.n_expert_used; ++s) picked += p[order[s]];
  const Vec gate = values(L.ffn_gate_exps), up = values(L.ffn_up_exps), down = values(L.ffn_down_exps);
  Vec out(d, 0.0);
  for (int64_t s = 0; s < L.n_expert_used; ++s) {
    const int64_t e = order[s];
    Vec g = matvec(gate, d, ff, x, e * ff);
    const Vec u = matvec(up, d, ff, x, e * ff);
    for (int64_t i = 0; i < ff; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
    const Vec y = matvec(down, ff, d, g, e * d);
    for (int64_t i = 0; i < d; ++i) out[i] += p[e] / picked * y[i];
  }
  return out;
}

class MoeFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(MoeFamily, LoadsWithItsExpertShapes) {
  const ModelSpec spec = moe_spec(GetParam());
  const std::string path = temp_model(GetParam() + "_shapes");
  write_random_model(spec, DType::F32, 3, path);
  auto m = Model::load(path, cpu_only());
  std::filesystem::remove(path);
  const HParams& h = m->hparams();
  EXPECT_EQ(h.arch, GetParam());
  EXPECT_EQ(h.n_expert, 6);
  EXPECT_EQ(h.n_expert_used, spec.n_expert_used);
  EXPECT_EQ(h.n_ff_exp, GetParam() == "qwen3moe" ? 64 : 96);  // llama's experts are feed_forward_length wide
  using Ne = std::array<int64_t, 4>;
  for (const Layer& L : m->layers()) {
    ASSERT_TRUE(L.ffn_gate_inp && L.ffn_gate_exps && L.ffn_up_exps && L.ffn_down_exps);
    EXPECT_FALSE(L.ffn_gate || L.ffn_up || L.ffn_down);
    EXPECT_EQ(L.ffn_gate_inp->ne, (Ne{64, 6, 1, 1}));
    EXPECT_EQ(L.ffn_gate_exps->ne, (Ne{64, h.n_ff_exp, 6, 1}));
    EXPECT_EQ(L.ffn_up_exps->ne, (Ne{64, h.n_ff_exp, 6, 1}));
    EXPECT_EQ(L.ffn_down_exps->ne, (Ne{h.n_ff_exp, 64, 6, 1}));
    EXPECT_EQ(L.attn_q_norm != nullptr, GetParam() == "qwen3moe");
  }
}

using test::expect_load_refused;

// Every token's logits against the plain mixture of experts, layer by layer
// with each layer's expert count (Layer::n_expert_used).
void expect_plain_mixture_of_experts(const Model& m) {
  const HParams& h = m.hparams();
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 7, 300, 5, 11, 12, 13, 14, 15, 16, 31};
  // Several micro-batches, so that rows of more than one token and single
  // tokens both go through mul_mat_id.
  Session s(m, {.n_ctx = 32, .n_ubatch = 5, .type_k = DType::F32, .type_v = DType::F32});
  const auto logits = s.decode(tokens, true);
  const Vec embd = values(m.token_embd()), out_w = values(m.output()), out_norm = values(m.output_norm());
  for (size_t t = 0; t < tokens.size(); ++t) {
    Vec x(embd.begin() + tokens[t] * h.n_embd, embd.begin() + (tokens[t] + 1) * h.n_embd);
    for (const Layer& L : m.layers()) {
      const Vec y = moe_reference(h, L, rms_norm(x, values(L.ffn_norm), h.rms_eps));
      for (int64_t i = 0; i < h.n_embd; ++i) x[i] += y[i];
    }
    const Vec want = matvec(out_w, h.n_embd, h.n_vocab, rms_norm(x, out_norm, h.rms_eps));
    const auto [lo, hi] = std::minmax_element(want.begin(), want.end());
    double err = 0.0;
    for (int64_t i = 0; i < h.n_vocab; ++i) err = std::max(err, std::fabs(logits[t * h.n_vocab + i] - want[i]));
    EXPECT_LT(err / (*hi - *lo), 1e-5) << "token " << t;
  }
}

TEST_P(MoeFamily, MatchesAPlainMixtureOfExperts) {
  const std::string path = ffn_only_model(GetParam(), GetParam() + "_ffn");
  auto m = Model::load(path, cpu_only());
  std::filesystem::remove(path);
  for (const Layer& L : m->layers()) EXPECT_EQ(L.n_expert_used, moe_spec(GetParam()).n_expert_used);
  expect_plain_mixture_of_experts(*m);
}

// expert_used_count as a per-layer array: each layer picks its own number of
// experts; a count above expert_count or an array of the wrong length is
// refused, naming the key.
TEST_P(MoeFamily, PerLayerExpertCounts) {
  using gguf::Value;
  const std::string src = ffn_only_model(GetParam(), GetParam() + "_per_layer_src");
  const std::string key = GetParam() + ".expert_used_count";
  const auto counts = [](std::vector<uint32_t> v) {
    gguf::Array a(gguf::ValueType::U32);
    for (uint32_t c : v) a.push_back(Value::u32(c));
    return Value::array(std::move(a));
  };
  const std::string path = rewrite(src, GetParam() + "_per_layer", {.keys = {{key, counts({4, 1})}}});
  auto m = Model::load(path, cpu_only());
  EXPECT_EQ(m->layers()[0].n_expert_used, 4);
  EXPECT_EQ(m->layers()[1].n_expert_used, 1);
  EXPECT_EQ(m->hparams().n_expert_used, 4);  // layer 0's, as llama.cpp reads it
  expect_plain_mixture_of_experts(*m);
  m.reset();
  std::filesystem::remove(path);
  expect_load_refused(rewrite(src, GetParam() + "_per_layer_big", {.keys = {{key, counts({2, 7})}}}),
                 {key, "between 1 and"});
  expect_load_refused(rewrite(src, GetParam() + "_per_layer_short", {.keys = {{key, counts({2})}}}),
                 {key, "1 values but the model has 2 layers"});
  std::filesystem::remove(src);
}

INSTANTIATE_TEST_SUITE_P(Families, MoeFamily, ::testing::Values("llama", "qwen3moe"),
                         [](const auto& info) { return info.param; });


TEST(MoeRefusal, ExpertKeysAndTensorsThatCannotRunFaithfully) {
  using gguf::Value;
  const std::string mix = temp_model("refuse_mix"), q3m = temp_model("refuse_q3m"), dense = temp_model("refuse_dense");
  write_random_model(moe_spec("llama"), DType::F32, 3, mix);
  write_random_model(moe_spec("qwen3moe"), DType::F32, 3, q3m);
  ModelSpec qwen3 = moe_spec("qwen3moe");
  qwen3.arch = "qwen3";
  qwen3.n_expert = qwen3.n_expert_used = qwen3.n_ff_exp = 0;
  write_random_model(qwen3, DType::F32, 3, dense);

  std::string p = rewrite(q3m, "used_gt", {.keys = {{"qwen3moe.expert_used_count", Value::u32(7)}}});
  expect_load_refused(p, {p, "qwen3moe.expert_used_count = 7 is more than qwen3moe.expert_count = 6"});
  p = rewrite(mix, "no_used", {.keys = {{"llama.expert_used_count", Value::u32(0)}}});
  expect_load_refused(p, {p, "llama.expert_count = 6 but llama.expert_used_count is 0"});
  p = rewrite(mix, "used_no_count", {.keys = {{"llama.expert_count", Value::u32(0)}}});
  expect_load_refused(p, {p, "llama.expert_used_count = 2 but llama.expert_count is 0"});
  // Expert keys the families do not read change the math: refused by name.
  p = rewrite(q3m, "shared", {.keys = {{"qwen3moe.expert_shared_feed_forward_length", Value::u32(64)}}});
  expect_load_refused(p, {p, "qwen3moe.expert_shared_feed_forward_length = 64", "does not use"});
  p = rewrite(mix, "scale", {.keys = {{"llama.expert_weights_scale", Value::f32(2.5f)}}});
  expect_load_refused(p, {p, "llama.expert_weights_scale = 2.5", "does not use"});
  p = rewrite(mix, "groups", {.keys = {{"llama.expert_group_count", Value::u32(2)}}});
  expect_load_refused(p, {p, "llama.expert_group_count = 2"});
  p = rewrite(q3m, "sigmoid", {.keys = {{"qwen3moe.expert_gating_func", Value::u32(2)}}});
  expect_load_refused(p, {p, "qwen3moe.expert_gating_func = 2: only softmax gating"});
  // A family without experts.
  p = rewrite(dense, "dense_experts",
              {.keys = {{"qwen3.expert_count", Value::u32(4)}, {"qwen3.expert_used_count", Value::u32(2)}}});
  expect_load_refused(p, {p, "qwen3.expert_count = 4", "not supported by Loom's 'qwen3' family"});
  // qwen3moe without experts.
  p = rewrite(q3m, "q3m_dense",
              {.keys = {{"qwen3moe.expert_count", Value::u32(0)}, {"qwen3moe.expert_used_count", Value::u32(0)}}});
  expect_load_refused(p, {p, "qwen3moe.expert_count is 0: a qwen3moe model needs experts"});
  // An expert tensor no family reads (a shared expert).
  p = rewrite(q3m, "shexp", {.extra = {{"blk.0.ffn_up_shexp.weight", {64, 32}}}});
  expect_load_refused(p, {p, "blk.0.ffn_up_shexp.weight [64, 32, 1, 1]", "'qwen3moe' family does not use"});
  // An older Mixtral conversion: one 2-D tensor per expert.
  p = rewrite(mix, "per_expert",
              {.drop = {"blk.0.ffn_gate_exps.weight"}, .extra = {{"blk.0.ffn_gate.0.weight", {64, 96}}}});
  expect_load_refused(p, {p, "blk.0.ffn_gate.0.weight", "one 2-D tensor per expert", "not supported"});
  // Expert weights of the wrong shape name the tensor and both shapes.
  p = rewrite(q3m, "shape", {.keys = {{"qwen3moe.expert_feed_forward_length", Value::u32(32)}}});
  expect_load_refused(p, {p, "blk.0.ffn_gate_exps.weight' has shape [64, 64, 6, 1], expected [64, 32, 6, 1]"});
  for (const auto& f : {mix, q3m, dense}) std::filesystem::remove(f);
}

// Expert weights go where -ngl and -ot put them; the results stay the CPU's.
class MoePlacement : public ::testing::TestWithParam<test::DeviceKind> {
 protected:
  static std::vector<Device*> devices() { return test::cpu_and_devices_of(GetParam()); }
  static std::string buffer_type_of(const Model& m, const std::string& name) {
    for (const auto& p : m.placements())
      if (p.name == name) return p.buffer_type;
    return "(absent)";
  }
};

TEST_P(MoePlacement, ExpertsGoWhereAskedWithTheCpuResults) {
  REQUIRE_DEVICES_OF(GetParam(), 2);
  const std::string path = temp_model("placement");
  write_random_model(moe_spec("qwen3moe"), DType::F32, 9, path);
  const std::vector<int32_t> prompt = {1, 40, 41, 42, 7, 99, 5};
  auto run = [&](const PlacementOptions& p, std::unique_ptr<Model>* keep = nullptr) {
    auto m = Model::load(path, devices(), {.placement = p});
    Session s(*m, {.n_ctx = 16});
    auto logits = s.decode(prompt, true);
    if (keep) *keep = std::move(m);
    return logits;
  };
  const auto cpu = run({});
  const std::string dev0 = std::string(test::device_of(GetParam(), 0)->default_buffer_type().name());
  const std::string dev1 = std::string(test::device_of(GetParam(), 1)->default_buffer_type().name());
  const std::string experts = "\\.ffn_(up|down|gate|gate_up)_(ch|)exps";  // what --cpu-moe adds
  struct Case {
    PlacementOptions options;
    std::string layer0_experts, layer1_experts, layer1_router;
  };
  const Case cases[] = {
      {{.n_gpu_layers = 3, .split_mode = SplitMode::None}, dev0, dev0, dev0},
      {{.n_gpu_layers = 3, .tensor_split = {1.0f, 1.0f}}, dev0, dev1, dev1},
      {{.n_gpu_layers = 3, .split_mode = SplitMode::Row, .tensor_split = {1.0f, 1.0f}}, dev0, dev0, "(absent)"},
      {{.n_gpu_layers = 3, .split_mode = SplitMode::None, .overrides = {{experts, "CPU"}}}, "CPU", "CPU", dev0},
      {{.n_gpu_layers = 3, .tensor_split = {1.0f, 1.0f}, .overrides = {{"blk\\.0" + experts, "CPU"}}}, "CPU", dev1,
       dev1},
  };
  for (const Case& c : cases) {
    std::unique_ptr<Model> m;
    const auto got = run(c.options, &m);
    EXPECT_EQ(buffer_type_of(*m, "blk.0.ffn_up_exps.weight"), c.layer0_experts);
    EXPECT_EQ(buffer_type_of(*m, "blk.1.ffn_down_exps.weight"), c.layer1_experts);
    EXPECT_EQ(buffer_type_of(*m, "blk.1.ffn_gate_inp.weight"), c.layer1_router);  // row-split: in parts
    EXPECT_EQ(buffer_type_of(*m, "blk.1.attn_q.weight"), c.options.split_mode == SplitMode::Row ? "(absent)"
                                                         : c.layer1_router);
    ASSERT_EQ(got.size(), cpu.size());
    const auto [lo, hi] = std::minmax_element(cpu.begin(), cpu.end());
    double err = 0.0;
    for (size_t i = 0; i < cpu.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - cpu[i])));
    EXPECT_LT(err / (*hi - *lo), 1e-4) << "case with layer 0 experts in " << c.layer0_experts;
  }
  std::filesystem::remove(path);
}

// --cpu-moe with the rest on a device and mul_mat_id offloaded to it (as a
// GPU does for large batches): only the experts the tokens select are
// copied, and the results stay the CPU's.
TEST_P(MoePlacement, OffloadedExpertsCopyOnlyTheSelectedOnes) {
  REQUIRE_DEVICES_OF(GetParam(), 1);
  const std::string path = temp_model("expert_copy");
  write_random_model(moe_spec("qwen3moe"), DType::F32, 9, path);  // 6 experts, 3 used per token
  const std::vector<int32_t> prompt = {1, 40, 41, 42, 7, 99, 5};
  auto run = [&](const PlacementOptions& p, SessionStats* prompt_stats, SessionStats* token_stats) {
    auto m = Model::load(path, devices(), {.placement = p});
    Session s(*m, {.n_ctx = 16});
    auto logits = s.decode(prompt, true);
    if (prompt_stats) *prompt_stats = s.stats();
    s.reset_stats();
    const std::vector<int32_t> token = {17};
    const auto next = s.decode(token, false);
    logits.insert(logits.end(), next.begin(), next.end());
    if (token_stats) *token_stats = s.stats();
    return logits;
  };
  const auto cpu = run({}, nullptr, nullptr);
  const char* before = std::getenv("LOOM_OFFLOAD_MIN_BATCH");
  const std::string saved = before ? before : "";
  ::setenv("LOOM_OFFLOAD_MIN_BATCH", "1", 1);
  SessionStats prompt_stats, token_stats;
  const auto got = run({.n_gpu_layers = 3, .split_mode = SplitMode::None,
                        .overrides = {{"\\.ffn_(up|down|gate|gate_up)_(ch|)exps", "CPU"}}},
                       &prompt_stats, &token_stats);
  if (before) ::setenv("LOOM_OFFLOAD_MIN_BATCH", saved.c_str(), 1);
  else ::unsetenv("LOOM_OFFLOAD_MIN_BATCH");
  // One token selects 3 of the 6 experts of each expert tensor: half its
  // bytes go; the prompt's tokens select some or all of them.
  EXPECT_GT(token_stats.expert_bytes_copied, 0u);
  EXPECT_EQ(token_stats.expert_bytes_copied, token_stats.expert_bytes_skipped);
  EXPECT_EQ(prompt_stats.expert_bytes_copied + prompt_stats.expert_bytes_skipped,
            token_stats.expert_bytes_copied + token_stats.expert_bytes_skipped);
  EXPECT_GT(prompt_stats.expert_bytes_copied, token_stats.expert_bytes_copied);
  ASSERT_EQ(got.size(), cpu.size());
  const auto [lo, hi] = std::minmax_element(cpu.begin(), cpu.end());
  double err = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - cpu[i])));
  EXPECT_LT(err / (*hi - *lo), 1e-4);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Fake, MoePlacement, ::testing::Values(test::DeviceKind::Fake));
INSTANTIATE_TEST_SUITE_P(OpenCL, MoePlacement, ::testing::Values(test::DeviceKind::OpenCL));

}  // namespace
}  // namespace loom
