// Builds and runs a tiny graph on the CPU through the installed headers and
// library, so static registration of the backends is exercised too.
#include <cstdio>

#include "loom/graph.h"
#include "loom/ops.h"
#include "loom/registry.h"
#include "loom/tensor_alloc.h"

int main() {
  loom::Context ctx;
  loom::Tensor* a = ctx.new_tensor(loom::DType::F32, {4, 2});
  loom::Tensor* b = loom::add(ctx, a, a);
  loom::Graph g = loom::Graph::build(b);
  loom::Device& cpu = loom::Registry::get().cpu();
  auto memory = loom::allocate_tensors(ctx, cpu.default_buffer_type());
  loom::tensor_from_floats(*a, {1, 2, 3, 4, 5, 6, 7, 8});
  cpu.create_backend()->compute(g);
  const auto out = loom::tensor_to_floats(*b);
  std::printf("consumer: %zu nodes, out[7] = %g\n", g.size(), out[7]);
  return out[7] == 16.0f ? 0 : 1;
}
