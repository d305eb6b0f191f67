// The f32 gemm path packs b panels 16 x 16 at a time (pack_f32_panel): K not
// a multiple of 16, partial panels and column strides must give the same
// products as a double-precision reference, on every ISA level.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/kernels/vec.h"
#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

void check(DType type, int64_t K, int64_t M, int64_t N, int64_t col_pad, cpu::Isa isa) {
  SCOPED_TRACE(fmt::format("{} K={} M={} N={} column padding {} isa={}", type_name(type), K, M, N, col_pad,
                           cpu::isa_name(isa)));
  cpu::set_mul_mat_isa(isa);
  Context ctx;
  Tensor* a = ctx.new_tensor(type, {K, M});
  // b's columns lie col_pad floats apart beyond K (a view of a wider tensor).
  Tensor* storage = ctx.new_tensor(DType::F32, {K + col_pad, N});
  Tensor* b = view_2d(ctx, storage, K, N, storage->nb[1], 0);
  Tensor* out = mul_mat(ctx, a, b);
  auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
  std::mt19937 rng(static_cast<uint32_t>(K * 31 + N));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> av(K * M), sv((K + col_pad) * N);
  for (float& v : av) v = dist(rng);
  for (float& v : sv) v = dist(rng);
  tensor_from_floats(*a, av);
  tensor_from_floats(*storage, sv);
  const std::vector<float> a_deq = tensor_to_floats(*a);
  auto backend = Registry::get().cpu().create_backend({.n_threads = 2});
  Graph graph = Graph::build(out);
  backend->compute(graph);
  const std::vector<float> got = tensor_to_floats(*out);
  int bad = 0;
  for (int64_t j = 0; j < N; ++j)
    for (int64_t i = 0; i < M; ++i) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double t = static_cast<double>(a_deq[i * K + k]) * sv[j * (K + col_pad) + k];
        ref += t;
        mag += std::fabs(t);
      }
      const float v = got[j * M + i];
      if (!(std::fabs(v - ref) <= 1e-5 * mag + 1e-6) && bad++ < 5)
        ADD_FAILURE() << "dst[" << i << ", " << j << "] = " << v << ", expected " << ref;
    }
  EXPECT_EQ(bad, 0);
}

TEST(GemmPack, OddKPartialPanelsAndStrides) {
  for (cpu::Isa isa : {cpu::Isa::Scalar, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (isa > cpu::best_isa()) continue;
    for (DType type : {DType::F32, DType::F16}) {
      check(type, 5, 9, 20, 0, isa);
      check(type, 37, 13, 40, 3, isa);
      check(type, 100, 8, 17, 0, isa);
      check(type, 64, 24, 33, 16, isa);
    }
  }
  cpu::set_mul_mat_isa(std::nullopt);
}

}  // namespace
}  // namespace loom
