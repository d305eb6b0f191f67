// cont of a transposed F16 / BF16 tensor (the V cache viewed slot-minor) is
// copied 16 rows per pass: rows that do not fill a tile, split between
// threads, and a second matrix must all land where a plain transpose puts them.
#include <gtest/gtest.h>

#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

TEST(CpuCopy, TransposedHalfTiles) {
  for (DType type : {DType::F16, DType::BF16})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(fmt::format("{} threads={}", type_name(type), threads));
      Context ctx;
      const int64_t rows = 37, cols = 41, mats = 2;  // leaf [cols, rows, mats]
      Tensor* leaf = ctx.new_tensor(type, {cols, rows, mats});
      Tensor* out = cont(ctx, permute(ctx, leaf, {1, 0, 2, 3}));  // [rows, cols, mats]
      auto alloc = allocate_tensors(ctx, Registry::get().cpu().default_buffer_type());
      std::vector<float> v(cols * rows * mats);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 251);  // exact in f16 and bf16
      tensor_from_floats(*leaf, v);
      auto backend = Registry::get().cpu().create_backend({.n_threads = threads});
      Graph graph = Graph::build(out);
      backend->compute(graph);
      const std::vector<float> got = tensor_to_floats(*out);
      int bad = 0;
      for (int64_t m = 0; m < mats; ++m)
        for (int64_t c = 0; c < cols; ++c)
          for (int64_t r = 0; r < rows; ++r) {
            const float want = v[c + cols * (r + rows * m)];
            const float have = got[r + rows * (c + cols * m)];
            if (have != want && bad++ < 5) ADD_FAILURE() << "out[" << r << ", " << c << ", " << m << "] = " << have;
          }
      EXPECT_EQ(bad, 0);
    }
}

}  // namespace
}  // namespace loom
