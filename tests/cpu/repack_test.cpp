// CPU_Repack: interleaved Q4_0 / Q8_0 / Q4_K / Q6_K weights read back as they were
// written (whole, partial, memset), mul_mat with them equal to mul_mat with
// the plain weights on every ISA level and both paths (mat-vec, gemm), and
// the device accepting a repacked weight only as mul_mat's src0.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "cpu/kernels/quant_dot.h"
#include "cpu/kernels/vec.h"
#include "cpu/repack.h"
#include "loom/graph.h"
#include "loom/model.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"
#include "model_gen/model_gen.h"

namespace loom {
namespace {

BufferType& repack_type() {
  BufferType* bt = Registry::get().find_buffer_type("CPU_Repack");
  if (!bt) throw std::runtime_error("no CPU_Repack buffer type");
  return *bt;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

class RepackTest : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override { cpu::set_mul_mat_isa(std::nullopt); }
};

void expect_reads_back(DType type, int64_t K, int64_t M) {
  Context ctx;
  Tensor* w = ctx.new_tensor(type, {K, M});
  auto alloc = allocate_tensors(ctx, repack_type(), BufferUsage::Weights);
  ASSERT_TRUE(cpu::is_repacked(*w));
  const size_t n = w->nbytes();
  std::vector<uint8_t> plain = random_bytes(n, 1);
  tensor_set(*w, plain.data(), 0, n);
  // The stored bytes are interleaved, not a copy...
  EXPECT_NE(0, std::memcmp(w->data, plain.data(), n));
  std::vector<uint8_t> got(n);
  tensor_get(*w, got.data(), 0, n);
  EXPECT_EQ(got, plain);
  // ...and partial writes, reads and memsets act on the plain bytes.
  const std::vector<uint8_t> patch = random_bytes(1001, 2);
  tensor_set(*w, patch.data(), 107, patch.size());
  std::copy(patch.begin(), patch.end(), plain.begin() + 107);
  tensor_memset(*w, 0x5a, 2000, 77);
  std::fill(plain.begin() + 2000, plain.begin() + 2077, 0x5a);
  std::vector<uint8_t> part(555);
  tensor_get(*w, part.data(), 901, part.size());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), plain.begin() + 901));
  tensor_get(*w, got.data(), 0, n);
  EXPECT_EQ(got, plain);
}

TEST_P(RepackTest, ReadsBackWhatWasWritten) { expect_reads_back(GetParam(), 96, 48); }

TEST_P(RepackTest, RowsNotAMultipleOf16StayPlain) {
  Context ctx;
  Tensor* w = ctx.new_tensor(GetParam(), {64, 40});
  auto alloc = allocate_tensors(ctx, repack_type(), BufferUsage::Weights);
  EXPECT_FALSE(cpu::is_repacked(*w));
  const std::vector<uint8_t> plain = random_bytes(w->nbytes(), 3);
  tensor_set(*w, plain.data(), 0, plain.size());
  EXPECT_EQ(0, std::memcmp(w->data, plain.data(), plain.size()));
}

// mul_mat with the weight in CPU_Repack and in CPU memory, same bytes.
void compare(DType type, int64_t K, int64_t M, int64_t N, cpu::Isa isa, int threads) {
  SCOPED_TRACE(fmt::format("{} K={} M={} N={} isa={} threads={}", type_name(type), K, M, N, cpu::isa_name(isa),
                           threads));
  cpu::set_mul_mat_isa(isa);
  Context wctx, ctx;
  Tensor* wr = wctx.new_tensor(type, {K, M});
  auto walloc = allocate_tensors(wctx, repack_type(), BufferUsage::Weights);
  Tensor* wp = ctx.new_tensor(type, {K, M});
  Tensor* b = ctx.new_tensor(DType::F32, {K, N});
  Tensor* out_r = mul_mat(ctx, wr, b);
  Tensor* out_p = mul_mat(ctx, wp, b);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(static_cast<uint32_t>(K * 7 + M * 3 + N));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> wv(K * M), bv(K * N);
  for (float& v : wv) v = dist(rng);
  for (float& v : bv) v = dist(rng);
  // Where the plain weights take the integer gemm (b in q8 blocks of 32) and
  // the interleaved ones a 16-row kernel (b in q8 blocks of 256), b holds
  // integers with a 127 in every 32: both formats then hold b exactly, and
  // the two paths must agree to f32 rounding.
  if (cpu::mul_mat_int_gemm(isa, type, N) && cpu::quant_gemm16(isa, type, N))
    for (size_t i = 0; i < bv.size(); ++i) bv[i] = i % 32 == 0 ? 127.0f : std::round(127.0f * bv[i]);
  tensor_from_floats(*wp, wv);
  tensor_from_floats(*b, bv);
  tensor_copy(*wp, *wr);
  Device& cpu = Registry::get().cpu();
  ASSERT_TRUE(cpu.supports_op(*out_r));
  auto backend = cpu.create_backend({.n_threads = threads});
  Tensor* outs[] = {out_r, out_p};
  Graph graph = Graph::build(outs);
  backend->compute(graph);
  const std::vector<float> r = tensor_to_floats(*out_r), p = tensor_to_floats(*out_p);
  float scale = 0.0f;
  for (float v : p) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t i = 0; i < p.size(); ++i)
    if (!(std::fabs(r[i] - p[i]) <= 1e-5f * scale) && bad++ < 5)
      ADD_FAILURE() << "dst[" << i % M << ", " << i / M << "] = " << r[i] << " repacked, " << p[i] << " plain";
  EXPECT_EQ(bad, 0);
}

TEST_P(RepackTest, MulMatMatchesPlainWeights) {
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    for (int threads : {1, 2}) {
      compare(GetParam(), 96, 48, 1, isa, threads);     // mat-vec
      compare(GetParam(), 32 * 21, 160, 3, isa, threads);  // few columns, several chunks
      compare(GetParam(), 64, 32, 37, isa, threads);    // gemm path
      compare(GetParam(), 64, 40, 2, isa, threads);     // stays plain
    }
  }
}

TEST_P(RepackTest, OnlyMulMatReadsARepackedWeight) {
  Context wctx, ctx;
  Tensor* w = wctx.new_tensor(GetParam(), {64, 32});
  auto walloc = allocate_tensors(wctx, repack_type(), BufferUsage::Weights);
  Tensor* b = ctx.new_tensor(DType::F32, {64, 4});
  Tensor* idx = ctx.new_tensor(DType::I32, {2});
  Device& cpu = Registry::get().cpu();
  EXPECT_TRUE(cpu.supports_buffer_type(repack_type()));
  // The CPU has both kernels (supports_op: op, types, shapes), but reads the
  // weight from CPU_Repack memory only as mul_mat's src0 (supports_operand).
  Tensor* mm = mul_mat(ctx, w, b);
  Tensor* rows = get_rows(ctx, w, idx);
  EXPECT_TRUE(cpu.supports_op(*mm));
  EXPECT_TRUE(cpu.supports_operand(*mm, 0, repack_type()));
  EXPECT_TRUE(cpu.supports_op(*rows));
  EXPECT_FALSE(cpu.supports_operand(*rows, 0, repack_type()));
  // A view sees interleaved bytes: not readable, even by mul_mat.
  Tensor* mm_view = mul_mat(ctx, reshape(ctx, w, {128, 16, 1, 1}), ctx.new_tensor(DType::F32, {128, 2}));
  EXPECT_FALSE(cpu.supports_operand(*mm_view, 0, repack_type()));
  // Asked before placement: mul_mat src0 of a repackable shape, where it pays.
  Tensor* fresh = ctx.new_tensor(GetParam(), {64, 32});
  Tensor* odd = ctx.new_tensor(GetParam(), {64, 40});
  EXPECT_EQ(repack_type().supports_op(*mul_mat(ctx, fresh, b)), cpu::mul_mat_isa() >= cpu::Isa::Avx2);
  EXPECT_FALSE(repack_type().supports_op(*mul_mat(ctx, odd, b)));
  EXPECT_FALSE(repack_type().supports_op(*get_rows(ctx, fresh, idx)));
}

// b after the kernels' quantization, in double: for K-quants Q8_K blocks of
// 256 (the 16-row kernels' activations), else 32-element blocks (d =
// amax/127 in float, q = rint(x/d)).
std::vector<double> quantize_like_kernels(DType type, const std::vector<float>& x) {
  std::vector<double> out(x.size());
  if (traits(type).block_size == kQK_K) {
    std::vector<BlockQ8_K> q(x.size() / kQK_K);
    std::vector<float> back(x.size());
    quantize_row_q8_k(x.data(), q.data(), static_cast<int64_t>(x.size()));
    dequantize_row_q8_k(q.data(), back.data(), static_cast<int64_t>(x.size()));
    std::copy(back.begin(), back.end(), out.begin());
    return out;
  }
  for (size_t b = 0; b < x.size(); b += cpu::kQBlock) {
    float amax = 0.0f;
    for (int i = 0; i < cpu::kQBlock; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f;
    const float inv = d != 0.0f ? 1.0f / d : 0.0f;
    for (int i = 0; i < cpu::kQBlock; ++i) out[b + i] = std::nearbyint(x[b + i] * inv) * static_cast<double>(d);
  }
  return out;
}

// mul_mat with a repacked weight against a double-precision reference: the
// dequantized weights times b quantized as the kernels do, so what remains
// is f32 rounding (tolerance 1e-4 of sum |a*b|, as in mul_mat_test).
void check_against_reference(DType type, int64_t K, int64_t M, int64_t N, cpu::Isa isa, int threads) {
  SCOPED_TRACE(fmt::format("{} K={} M={} N={} isa={} threads={}", type_name(type), K, M, N, cpu::isa_name(isa),
                           threads));
  cpu::set_mul_mat_isa(isa);
  Context wctx, ctx;
  Tensor* w = wctx.new_tensor(type, {K, M});
  auto walloc = allocate_tensors(wctx, repack_type(), BufferUsage::Weights);
  ASSERT_TRUE(cpu::is_repacked(*w));
  Tensor* b = ctx.new_tensor(DType::F32, {K, N});
  Tensor* out = mul_mat(ctx, w, b);
  ASSERT_TRUE(repack_type().supports_op(*out));
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(static_cast<uint32_t>(K * 5 + M * 11 + N));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> wv(K * M), bv(K * N);
  for (float& v : wv) v = dist(rng);
  for (float& v : bv) v = dist(rng);
  tensor_from_floats(*w, wv);
  tensor_from_floats(*b, bv);
  const std::vector<float> deq = tensor_to_floats(*w);  // the weights as stored, dequantized
  auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
  Graph graph = Graph::build(out);
  backend->compute(graph);
  const std::vector<float> got = tensor_to_floats(*out);
  int bad = 0;
  for (int64_t j = 0; j < N; ++j) {
    const std::vector<double> bq =
        quantize_like_kernels(type, std::vector<float>(bv.begin() + j * K, bv.begin() + (j + 1) * K));
    for (int64_t i = 0; i < M; ++i) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        ref += deq[i * K + k] * bq[k];
        mag += std::fabs(deq[i * K + k] * bq[k]);
      }
      const float v = got[i + M * j];
      if (!(std::fabs(v - ref) <= 1e-4 * mag + 1e-5) && bad++ < 5)
        ADD_FAILURE() << "dst[" << i << ", " << j << "] = " << v << ", expected " << ref << " (sum |a*b| " << mag
                      << ")";
    }
  }
  EXPECT_EQ(bad, 0);
}

// The interleaved kernels (gemm16) of the AVX2 level, forced on a CPU with
// AVX-512 too, and of AVX-512: every column count of one call (1..8) and
// past it (9), rows of 1 to 10 groups, short and long rows (TinyLlama's
// ffn_down has 5632).
TEST_P(RepackTest, Gemm16MatchesReference) {
  for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    ASSERT_NE(cpu::mul_mat_kernels(isa).gemm16[static_cast<int>(GetParam() == DType::Q4_0 ? cpu::WKind::Q4_0
                                                                                          : cpu::WKind::Q8_0)],
              nullptr);
    for (int threads : {1, 2})
      for (int64_t K : {32, 256, 5632})
        for (int64_t M : {16, 48, 160})
          for (int64_t N = 1; N <= 9; ++N) check_against_reference(GetParam(), K, M, N, isa, threads);
  }
}

// AMX tiles (mul_mat_amx.cpp) where the CPU has them: b with 16 columns or
// more takes the wide kernel, 16 columns a call (one call of each count
// 1..16 among these N), on short and long rows; Q4_0 from 256 columns the
// gemm path's AMX micro-kernel on the unpacked rows.
TEST_P(RepackTest, AmxMatchesReference) {
  if (!cpu::amx_int8_usable())
    GTEST_SKIP() << "no AMX int8 tiles on this CPU (or the OS did not grant them, or LOOM_CPU_AMX=0)";
  const auto kind = GetParam() == DType::Q4_0 ? cpu::WKind::Q4_0 : cpu::WKind::Q8_0;
  const cpu::MulMatKernels& kern = cpu::mul_mat_kernels(cpu::Isa::Avx512);
  ASSERT_NE(kern.gemm16_wide[static_cast<int>(kind)], nullptr);
  ASSERT_EQ(kern.gemm16_wide_min_n, 16);
  for (int threads : {1, 2})
    for (int64_t K : {32, 96, 5632})
      for (int64_t M : {16, 160})
        for (int64_t N : {16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 64})
          check_against_reference(GetParam(), K, M, N, cpu::Isa::Avx512, threads);
  for (int64_t K : {32, 96}) check_against_reference(GetParam(), K, 160, 257, cpu::Isa::Avx512, 2);
}

// On the AVX2 level the same as against the plain weights, which take the
// level's row dots (N < 8) and integer gemm (N >= 8).
TEST_P(RepackTest, Avx2MatchesPlainWeights) {
  if (cpu::best_isa() < cpu::Isa::Avx2) GTEST_SKIP() << "no AVX2";
  for (int threads : {1, 2})
    for (int64_t N : {1, 2, 3, 4, 5, 8, 9, 16, 33}) {
      compare(GetParam(), 2048, 64, N, cpu::Isa::Avx2, threads);
      compare(GetParam(), 5632, 32, N, cpu::Isa::Avx2, threads);
    }
}

// CPU_Repack wants a weight only where the level mul_mat runs at has kernels
// for interleaved rows: AVX2 and AVX-512, not scalar (which would unpack
// every row first).
TEST_P(RepackTest, WantedWhereTheLevelHasInterleavedKernels) {
  Context ctx;
  Tensor* mm = mul_mat(ctx, ctx.new_tensor(GetParam(), {64, 32}), ctx.new_tensor(DType::F32, {64, 1}));
  cpu::set_mul_mat_isa(cpu::Isa::Scalar);
  EXPECT_FALSE(repack_type().supports_op(*mm));
  for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    cpu::set_mul_mat_isa(isa);
    EXPECT_TRUE(repack_type().supports_op(*mm)) << cpu::isa_name(isa);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RepackTest, ::testing::Values(DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(Repack, OtherTypesAreNotRepacked) {
  Context ctx;
  Tensor* w = ctx.new_tensor(DType::F16, {64, 32});
  auto alloc = allocate_tensors(ctx, repack_type(), BufferUsage::Weights);
  EXPECT_FALSE(cpu::is_repacked(*w));
  EXPECT_FALSE(repack_type().supports_op(*mul_mat(ctx, w, ctx.new_tensor(DType::F32, {64, 1}))));
}

// A model of `type` loaded at `level` keeps its matrices interleaved in
// CPU_Repack; at the scalar level they stay in the mapping. At `level` the
// repacked model's logits (tokens one by one: mat-vec; a batch: several
// columns) are those of the same model kept in the mapping
// (-ot weight=CPU_Mapped) within f32 rounding.
void expect_model_repacked(DType type, cpu::Isa level, int64_t n_embd, int64_t n_ff) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("loom_repack_" + std::to_string(::getpid()) + ".gguf")).string();
  ModelSpec s;
  s.n_vocab = 300;
  s.n_embd = n_embd;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = n_ff;
  s.n_ctx = 96;
  write_random_model(s, type, 7, path);
  Device& cpu = Registry::get().cpu();
  for (cpu::Isa isa : {cpu::Isa::Scalar, level}) {
    SCOPED_TRACE(cpu::isa_name(isa));
    cpu::set_mul_mat_isa(isa);
    auto m = Model::load(path, {&cpu});
    int matrices = 0;
    for (const auto& p : m->placements()) {
      if (p.name.find("ffn_up.weight") == std::string::npos && p.name.find("ffn_down.weight") == std::string::npos &&
          p.name.find("attn_q.weight") == std::string::npos)
        continue;
      ++matrices;
      EXPECT_EQ(p.buffer_type == "CPU_Repack", isa == level) << p.name << " in " << p.buffer_type;
    }
    EXPECT_EQ(matrices, 3 * s.n_layer);
  }
  cpu::set_mul_mat_isa(level);
  auto repacked = Model::load(path, {&cpu});
  auto mapped = Model::load(path, {&cpu}, {.placement = {.overrides = {{"weight", "CPU_Mapped"}}}});
  EXPECT_NE(repacked->describe_buffers().find("CPU_Repack"), std::string::npos);
  EXPECT_EQ(mapped->describe_buffers().find("CPU_Repack"), std::string::npos);
  // 7 tokens: on both levels, below the column count where plain Q4_K
  // weights move to the integer gemm, whose activations are quantized in
  // blocks of 32 rather than 256 (compare() checks that case exactly).
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99, 42, 7};
  auto logits = [&](Model& m, bool one_by_one) {
    // An f32 cache: in f16, a last-bit difference of one K value (the
    // kernels add in another order) can round to another f16 value, which
    // random weights amplify past f32 rounding.
    Session session(m, {.n_ctx = 32, .type_k = DType::F32, .type_v = DType::F32});
    if (!one_by_one) return session.decode(tokens);
    std::vector<float> last;
    for (int32_t t : tokens) last = session.decode(std::span<const int32_t>(&t, 1));
    return last;
  };
  for (bool one_by_one : {true, false}) {
    SCOPED_TRACE(one_by_one ? "one by one" : "one batch");
    const std::vector<float> r = logits(*repacked, one_by_one), p = logits(*mapped, one_by_one);
    ASSERT_EQ(r.size(), p.size());
    const auto [lo, hi] = std::minmax_element(p.begin(), p.end());
    for (size_t i = 0; i < r.size(); ++i) EXPECT_NEAR(r[i], p[i], 1e-3f * (*hi - *lo)) << i;
  }
  cpu::set_mul_mat_isa(std::nullopt);
  std::filesystem::remove(path);
}

TEST(Repack, ModelMatricesAreRepackedOnTheAvx2Level) {
  if (cpu::best_isa() < cpu::Isa::Avx2) GTEST_SKIP() << "no AVX2";
  expect_model_repacked(DType::Q4_0, cpu::Isa::Avx2, 64, 96);
}

// K-quants (Q4_K, Q6_K): interleaved where mul_mat runs at AVX2 or AVX-512
// (quant_gemm16); the scalar level would only unpack the rows again, so there
// it stays plain. A weight written to CPU_Repack is interleaved anyway (a
// buffer does not know the level), and every level must still read it
// right: the 16-row kernels below 16 columns, the row dots on unpacked rows
// at the scalar level, the integer gemm on rows expanded 16 at a time from
// 16 columns on (unpacked one by one at chunk edges off the 16-row grid).
class RepackKQuant : public ::testing::TestWithParam<DType> {
 protected:
  void TearDown() override { cpu::set_mul_mat_isa(std::nullopt); }
};

TEST_P(RepackKQuant, ReadsBackWhatWasWritten) { expect_reads_back(GetParam(), 512, 48); }

TEST_P(RepackKQuant, WantedWhereTheLevelHasTheKernel) {
  Context ctx;
  Tensor* mm = mul_mat(ctx, ctx.new_tensor(GetParam(), {512, 32}), ctx.new_tensor(DType::F32, {512, 1}));
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    cpu::set_mul_mat_isa(isa);
    EXPECT_EQ(repack_type().supports_op(*mm), isa != cpu::Isa::Scalar) << cpu::isa_name(isa);
    EXPECT_EQ(cpu::quant_gemm16(isa, GetParam(), 1) != nullptr, isa != cpu::Isa::Scalar) << cpu::isa_name(isa);
  }
}

TEST_P(RepackKQuant, MulMatMatchesPlainWeights) {
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    for (int threads : {1, 2}) {
      for (int64_t N : {1, 2, 3, 4, 5, 8, 9, 16, 17, 33}) {
        compare(GetParam(), 256, 16, N, isa, threads);
        compare(GetParam(), 2048, 48, N, isa, threads);
      }
      // TinyLlama's ffn_down depth: a mat-vec, one and one-plus-one column
      // groups, the integer gemm (the other widths only split columns
      // differently, which the shapes above cover).
      for (int64_t N : {1, 4, 5, 16, 33}) compare(GetParam(), 5632, 32, N, isa, threads);
      compare(GetParam(), 512, 160, 1, isa, threads);  // several chunks
      compare(GetParam(), 512, 40, 2, isa, threads);   // stays plain
    }
  }
}

// The 16-row kernels against the double-precision reference, where the
// tolerance does not depend on the plain path (which may quantize b in
// blocks of 32): rows of 1 to 10 groups, 1 to 9 columns.
TEST_P(RepackKQuant, Gemm16MatchesReference) {
  for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    for (int64_t M : {16, 160})
      for (int64_t N : {1, 2, 3, 5, 9}) check_against_reference(GetParam(), 512, M, N, isa, 2);
  }
}

TEST_P(RepackKQuant, ModelMatricesAreRepackedOnTheAvx2AndAvx512Levels) {
  if (cpu::best_isa() < cpu::Isa::Avx2) GTEST_SKIP() << "no AVX2";
  for (cpu::Isa level : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (level > cpu::best_isa()) continue;
    SCOPED_TRACE(cpu::isa_name(level));
    expect_model_repacked(GetParam(), level, 256, 512);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, RepackKQuant, ::testing::Values(DType::Q4_K, DType::Q6_K),
                         [](const auto& info) { return std::string(type_name(info.param)); });

}  // namespace
}  // namespace loom
