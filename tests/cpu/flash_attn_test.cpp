// CPU flash_attn_ext: every ISA level this CPU runs (forced through
// set_mul_mat_isa, which LOOM_CPU_ISA also sets) against the scalar level,
// and 1, 2 and 5 threads (5: a single query over 1000 cells is split into KV
// chunks and merged) against one, for every KV cache type. The scalar level
// itself is checked against the conformance suite's double reference
// (Devices/Conformance.CPU_flash_attn_ext); here the vector levels must give
// the scalar answer up to f32 rounding: the same quantization of q (q8 rows
// are equal on every level), other exp approximations and sum orders.
// Also: the shape rules' errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/kernels/vec.h"
#include "loom/error.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

using cpu::Isa;

struct Shape {
  int64_t D, n_q, H, Hkv, n_kv;
  float softcap = 0.0f, max_bias = 0.0f;
};

// The op's output for random q, k, v and a causal-looking mask (rows past
// i + n_kv / 2 masked), with K and V viewed as the model views its cache.
std::vector<float> run(const Shape& s, DType tk, DType tv, Isa isa, int threads) {
  cpu::set_mul_mat_isa(isa);
  Context ctx;
  Tensor* q = ctx.new_tensor(DType::F32, {s.D, s.H, s.n_q, 1});
  Tensor* kc = ctx.new_tensor(tk, {s.D * s.Hkv, s.n_kv});
  Tensor* vc = ctx.new_tensor(tv, {s.D * s.Hkv, s.n_kv});
  Tensor* mask = ctx.new_tensor(DType::F16, {s.n_kv, s.n_q});
  const auto heads = [&](Tensor* c) {
    const size_t head = row_size(c->type, s.D);
    return permute(ctx, view(ctx, c, {s.D, s.Hkv, s.n_kv, 1}, {head, c->nb[1], c->nb[1] * s.n_kv}, 0), {0, 2, 1, 3});
  };
  Tensor* out = flash_attn_ext(ctx, permute(ctx, q, {0, 2, 1, 3}), heads(kc), heads(vc), mask,
                               1.0f / std::sqrt(static_cast<float>(s.D)), s.max_bias, s.softcap);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (Tensor* t : {q, kc, vc}) {
    std::vector<float> v(t->nelements());
    for (float& x : v) x = normal(rng);
    tensor_from_floats(*t, v);
  }
  std::vector<float> m(mask->nelements());
  for (int64_t i = 0; i < s.n_q; ++i)
    for (int64_t j = 0; j < s.n_kv; ++j)
      m[i * s.n_kv + j] = j <= i + s.n_kv / 2 ? 0.5f * normal(rng) : -INFINITY;
  tensor_from_floats(*mask, m);
  auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
  Graph graph = Graph::build(out);
  backend->compute(graph);
  return tensor_to_floats(*out);
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, norm = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err += (got[i] - want[i]) * double(got[i] - want[i]);
    norm += want[i] * double(want[i]);
  }
  return err / norm;
}

class FlashAttnCpu : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override {
    cpu::set_mul_mat_isa(std::nullopt);
    cpu::set_mul_mat_quant_path(cpu::QuantPath::Auto);
  }
};

const Shape kShapes[] = {
    {64, 7, 4, 4, 37},                 // GQA 1, odd n_kv
    {128, 5, 8, 2, 45},                // GQA 4, head size 128
    {128, 1, 8, 2, 1000},              // a generated token over many cells
    {64, 4, 6, 3, 29, 1.5f, 0.0f},     // soft-capping
    {64, 4, 6, 3, 29, 0.0f, 8.0f},     // ALiBi
};

// Quantized K: with QuantPath::IntDot every level meets the same q8 rows of
// q on the integer dots (the strict check); on the default path the vector
// levels dequantize K for units of 16 or more vectors, which leaves q
// unrounded: the scalar answer is then off by q's q8 rounding (~1e-5 nmse
// with these N(0,1) data, allowed up to 2e-4).
TEST_P(FlashAttnCpu, VectorLevelsGiveTheScalarAnswer) {
  const DType t = GetParam();
  const bool quantized = traits(t).is_quantized;
  for (cpu::QuantPath path : {cpu::QuantPath::IntDot, cpu::QuantPath::Auto}) {
    if (!quantized && path == cpu::QuantPath::Auto) continue;
    cpu::set_mul_mat_quant_path(path);
    const double tolerance = quantized && path == cpu::QuantPath::Auto ? 2e-4 : 1e-9;
    for (const Shape& s : kShapes) {
      const std::vector<float> want = run(s, t, t, Isa::Scalar, 1);
      for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
        if (isa > cpu::best_isa()) {
          std::printf("[ skipped ] %s: this CPU has no %s\n", std::string(type_name(t)).c_str(),
                      std::string(cpu::isa_name(isa)).c_str());
          continue;
        }
        const double e = nmse(run(s, t, t, isa, 2), want);
        EXPECT_LT(e, tolerance) << type_name(t) << " " << cpu::isa_name(isa) << " D=" << s.D << " n_q=" << s.n_q
                                << " n_kv=" << s.n_kv << (path == cpu::QuantPath::Auto ? " auto" : " int-dot");
      }
    }
  }
  cpu::set_mul_mat_quant_path(cpu::QuantPath::Auto);
}

TEST_P(FlashAttnCpu, ThreadsAndKvChunksGiveTheOneThreadAnswer) {
  const DType t = GetParam();
  for (const Shape& s : kShapes) {
    const std::vector<float> want = run(s, t, t, cpu::best_isa(), 1);
    for (int threads : {2, 5}) {
      const double e = nmse(run(s, t, t, cpu::best_isa(), threads), want);
      EXPECT_LT(e, 1e-10) << type_name(t) << " threads=" << threads << " n_q=" << s.n_q << " n_kv=" << s.n_kv;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, FlashAttnCpu,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0,
                                           DType::Q4_1, DType::Q5_0, DType::Q5_1),
                         [](const auto& info) { return std::string(type_name(info.param)); });

std::string shape_error(std::array<int64_t, 4> q, std::array<int64_t, 4> k, std::array<int64_t, 4> v,
                        std::array<int64_t, 4> mask, DType kt = DType::F16) {
  Context ctx;
  try {
    flash_attn_ext(ctx, ctx.new_tensor(DType::F32, q), ctx.new_tensor(kt, k), ctx.new_tensor(kt, v),
                   mask[0] ? ctx.new_tensor(DType::F32, mask) : nullptr, 1.0f);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FlashAttnOp, ShapeRulesNameTheProblem) {
  EXPECT_EQ(shape_error({64, 3, 8, 1}, {64, 40, 2, 1}, {32, 40, 2, 1}, {40, 3, 1, 1}), "");
  Context ctx;
  Tensor* out = flash_attn_ext(ctx, ctx.new_tensor(DType::F32, {64, 3, 8, 1}), ctx.new_tensor(DType::F16, {64, 40, 2, 1}),
                               ctx.new_tensor(DType::F16, {32, 40, 2, 1}), nullptr, 0.125f, 0.0f, 30.0f);
  EXPECT_EQ(out->ne, (std::array<int64_t, 4>{32, 8, 3, 1}));  // [hd_v, n_head, n_q]
  EXPECT_EQ(flash_attn_params(*out).softcap, 30.0f);
  EXPECT_EQ(flash_attn_params(*out).scale, 0.125f);
  const auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos ? ::testing::AssertionSuccess()
                                               : ::testing::AssertionFailure() << "'" << msg << "' lacks '" << part << "'";
  };
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {32, 40, 2, 1}, {32, 40, 2, 1}, {}), "same head size"));
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {64, 40, 2, 1}, {64, 41, 2, 1}, {}), "same [n_kv, n_head_kv, ne3]"));
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {64, 40, 3, 1}, {64, 40, 3, 1}, {}), "multiples of k's"));
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {64, 40, 2, 1}, {64, 40, 2, 1}, {39, 3, 1, 1}), "mask must be [n_kv"));
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {64, 40, 2, 1}, {64, 40, 2, 1}, {40, 2, 1, 1}), ">= n_q"));
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {64, 40, 2, 1}, {64, 40, 2, 1}, {}, DType::I32), "float or quantized"));
  EXPECT_TRUE(has(shape_error({64, 3, 8, 1}, {64, 40, 2, 1}, {64, 40, 2, 1}, {}, DType::I32), "flash_attn_ext"));
  try {
    flash_attn_ext(ctx, ctx.new_tensor(DType::F32, {64, 3, 8, 1}), ctx.new_tensor(DType::F16, {64, 40, 2, 1}),
                   ctx.new_tensor(DType::F16, {64, 40, 2, 1}), nullptr, 1.0f, -1.0f);
    ADD_FAILURE() << "a negative max_bias was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "max_bias"));
  }
}

}  // namespace
}  // namespace loom
