// graph_signature: the client's cheap key for "a graph sent before". Two
// graphs must have equal signatures exactly when encode_graph gives them
// the same message but for the tensors' names; otherwise the client would
// run a graph by the id of a different one.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "loom/context.h"
#include "loom/ops.h"
#include "rpc_graph.h"

namespace loom::rpc {
namespace {

// What a variant of the graph changes.
struct Variant {
  std::string what;
  float scale = 0.5f;
  int64_t rows = 2;
  size_t view_offset = 0;
  uint64_t buffer = 7, sum_offset = 256;
  uint32_t input_flags = 0;
  std::string prefix = "t";
  bool rms = false;
};

// scale(view(x) + y) or rms_norm(view(x) + y), x and y inputs on buffer 7.
struct Built {
  Context ctx;
  Tensor* out = nullptr;
  GraphSignature sig;
  std::string encoding;  // names cleared

  explicit Built(const Variant& v) {
    Tensor* x = ctx.new_tensor(DType::F32, {8, 4});
    Tensor* y = ctx.new_tensor(DType::F32, {8, v.rows});
    x->flags = v.input_flags;
    Tensor* xv = view_2d(ctx, x, 8, v.rows, x->nb[1], v.view_offset);
    Tensor* sum = add(ctx, xv, y);
    out = v.rms ? rms_norm(ctx, sum, 1e-5f) : scale(ctx, sum, v.scale);
    const std::vector<Tensor*> all = {x, y, xv, sum, out};
    std::map<const Tensor*, uint64_t> at;
    for (size_t i = 0; i < all.size(); ++i) {
      all[i]->name = v.prefix + std::to_string(i);
      at[all[i]] = i * 128;
    }
    at[sum] = v.sum_offset;
    at[xv] = v.view_offset;
    const RemoteRefOf ref = [&](const Tensor& t) { return RemoteRef{v.buffer, at.at(&t)}; };
    Tensor* nodes[] = {xv, sum, out};
    sig = graph_signature(nodes, ref, 0);
    GraphMsg msg;
    encode_graph(nodes, ref, 0, msg);
    for (TensorMsg& t : *msg.mutable_tensors()) t.clear_name();
    msg.SerializeToString(&encoding);
  }
};

TEST(GraphSignature, EqualExactlyWhenTheEncodingsDifferInNamesOnly) {
  const std::vector<Variant> variants = {
      {.what = "base"},
      {.what = "other names", .prefix = "renamed."},
      {.what = "an op parameter", .scale = 0.25f},
      {.what = "a shape", .rows = 3},
      {.what = "a view offset", .view_offset = 32},
      {.what = "a buffer", .buffer = 8},
      {.what = "a tensor's offset", .sum_offset = 512},
      {.what = "a flag", .input_flags = 1},
      {.what = "an op", .rms = true},
  };
  std::vector<std::unique_ptr<Built>> built;
  for (const Variant& v : variants) built.push_back(std::make_unique<Built>(v));
  // Two separate builds of the same graph (other tensors, same fields).
  EXPECT_EQ(built[0]->sig, Built(variants[0]).sig);
  EXPECT_EQ(built[0]->sig, built[1]->sig) << "names are not part of the signature";
  for (size_t i = 0; i < built.size(); ++i)
    for (size_t j = 0; j < built.size(); ++j)
      EXPECT_EQ(built[i]->sig == built[j]->sig, built[i]->encoding == built[j]->encoding)
          << variants[i].what << " vs " << variants[j].what;
  for (size_t i = 2; i < built.size(); ++i) EXPECT_NE(built[0]->sig, built[i]->sig) << variants[i].what;
}

}  // namespace
}  // namespace loom::rpc
