// A standalone smoke test of the non-matrix CUDA kernels (rows.cu, copy.cu,
// elementwise.cu, reduce.cu, rope.cu through launch_node), for a machine
// with a GPU before the CUDA backend's host side exists. Not part of the
// CMake build; build and run it from the repository root:
//
//   for f in op op_params tensor types quants quants_k log; do
//     g++ -std=c++20 -O1 -I include -c src/core/$f.cpp -o /tmp/core_$f.o; done
//   nvcc -std=c++20 -O2 -arch=sm_90 -I include -I backends/cuda -I . tests/cuda/kernel_smoke.cu
//     backends/cuda/kernels/{cuda_ops,rows,copy,elementwise,reduce,rope,mul_mat,mul_mat_id,flash_attn}.cu
//     /tmp/core_*.o -lfmt -lcublas -o /tmp/kernel_smoke && /tmp/kernel_smoke
// (one command line).
//
// Prints one line per check and exits non-zero if any fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/cuda_launch.h"
#include "loom/op_params.h"

namespace loom::cuda {
[[noreturn]] void throw_cuda_error(cudaError_t s, const char* what) {
  throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorString(s) + " while " + what);
}
[[noreturn]] void throw_cublas_error(cublasStatus_t s, const char* what) {
  throw std::runtime_error("cuBLAS error " + std::to_string(static_cast<int>(s)) + " while " + std::string(what));
}
}  // namespace loom::cuda

using namespace loom;

namespace {

int g_failures = 0;
std::mt19937 g_rng(1234);
std::vector<std::string> g_labels;
int add_label(void*, const std::string& m) {
  g_labels.push_back(m);
  return static_cast<int>(g_labels.size() - 1);
}

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A tensor whose data is in device memory, with a host copy of its bytes.
struct Dev {
  Tensor t;
  std::vector<char> host;
  Dev(DType type, std::array<int64_t, 4> ne) {
    t.type = type;
    t.ne = ne;
    set_contiguous_strides(t);
    host.resize(t.nbytes());
    ck(cudaMalloc(&t.data, host.size() + 64), "cudaMalloc");
    ck(cudaMemset(t.data, 0, host.size() + 64), "cudaMemset");
  }
  Dev(const Dev&) = delete;
  ~Dev() { cudaFree(t.data); }
  void upload() { ck(cudaMemcpy(t.data, host.data(), host.size(), cudaMemcpyHostToDevice), "upload"); }
  void download() { ck(cudaMemcpy(host.data(), t.data, host.size(), cudaMemcpyDeviceToHost), "download"); }
  float* f() { return reinterpret_cast<float*>(host.data()); }
  int32_t* i() { return reinterpret_cast<int32_t*>(host.data()); }
  void randn(float scale = 1.0f) {
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> x(t.nelements());
    for (float& v : x) v = nd(g_rng);
    if (t.type == DType::F32) std::memcpy(host.data(), x.data(), x.size() * 4);
    else traits(t.type).from_float(x.data(), host.data(), t.nelements());
    upload();
  }
  // Element (logical index k) as float (contiguous tensors).
  float at(int64_t k) const {
    if (t.type == DType::F32) return reinterpret_cast<const float*>(host.data())[k];
    if (t.type == DType::I32) return static_cast<float>(reinterpret_cast<const int32_t*>(host.data())[k]);
    const int bs = traits(t.type).block_size;
    std::vector<float> blk(bs);
    traits(t.type).to_float(host.data() + (k / bs) * traits(t.type).type_size, blk.data(), bs);
    return blk[k % bs];
  }
};

struct Ctx {
  cuda::LaunchContext ctx;
  int* errors = nullptr;
  Ctx() {
    ck(cudaMalloc(&errors, 16), "errors");
    ck(cudaMemset(errors, 0, 16), "errors");
    ctx.errors = errors;
    ctx.add_error_label = add_label;
  }
  ~Ctx() { cudaFree(errors); }
  // Runs the node; returns the error flag and value the kernels reported.
  std::pair<int, int> run(const Tensor& node) {
    if (!cuda::kernel_supports(node)) throw std::runtime_error("kernel_supports refused " + node.name);
    if (!cuda::launch_node(node, ctx)) throw std::runtime_error("launch_node refused " + node.name);
    ck(cudaDeviceSynchronize(), ("running " + node.name).c_str());
    int e[4];
    ck(cudaMemcpy(e, errors, 16, cudaMemcpyDeviceToHost), "errors");
    ck(cudaMemset(errors, 0, 16), "errors");
    return {e[0], e[2]};
  }
};

void report(const char* name, double max_err, double tol) {
  const bool ok = max_err <= tol;  // false for NaN
  if (!ok) ++g_failures;
  std::printf("%-34s %s (max error %.3g, allowed %.3g)\n", name, ok ? "ok  " : "FAIL", max_err, tol);
}

Tensor node_of(Op op, DType type, std::array<int64_t, 4> ne, std::initializer_list<Tensor*> src, Dev& out) {
  Tensor n = out.t;
  n.type = type;
  n.ne = ne;
  n.op = op;
  n.name = std::string(op_name(op));
  int i = 0;
  for (Tensor* s : src) n.src[i++] = s;
  return n;
}

void test_get_rows(Ctx& c, DType type) {
  Dev a(type, {256, 40, 1, 1}), idx(DType::I32, {5, 1, 1, 1}), out(DType::F32, {256, 5, 1, 1});
  a.randn();
  for (int k = 0; k < 5; ++k) idx.i()[k] = (k * 17 + 3) % 40;
  idx.upload();
  Tensor n = node_of(Op::GetRows, DType::F32, out.t.ne, {&a.t, &idx.t}, out);
  c.run(n);
  out.download();
  double err = 0;
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 256; ++i) err = std::max(err, double(std::fabs(out.f()[r * 256 + i] - a.at(idx.i()[r] * 256 + i))));
  // Plain types are exact; dequantization may fuse a multiply-add (one rounding less).
  report(("get_rows " + std::string(type_name(type))).c_str(), err, traits(type).is_quantized ? 1e-5 : 0.0);
  idx.i()[2] = 40;  // out of range: reported, nothing written out of bounds
  idx.upload();
  const auto e = c.run(n);
  report("get_rows bad index reported", e.first == 1 && e.second == 40 ? 0.0 : 1.0, 0.0);
}

void test_set_rows(Ctx& c, DType type) {
  Dev dst(type, {64, 10, 1, 1}), src(DType::F32, {64, 3, 1, 1}), idx(DType::I32, {3, 1, 1, 1});
  src.randn();
  idx.i()[0] = 7, idx.i()[1] = 0, idx.i()[2] = 4;
  idx.upload();
  Tensor n = node_of(Op::SetRows, type, dst.t.ne, {&src.t, &idx.t, &dst.t}, dst);
  c.run(n);
  dst.download();
  std::vector<char> want(traits(type).type_size * 64 / traits(type).block_size);
  double bad = 0;
  for (int r = 0; r < 3; ++r) {
    traits(type).from_float(src.f() + r * 64, want.data(), 64);
    if (std::memcmp(want.data(), dst.host.data() + idx.i()[r] * dst.t.nb[1], want.size()) != 0) bad = 1;
  }
  report(("set_rows " + std::string(type_name(type)) + " (bytes)").c_str(), bad, 0.0);
}

void test_cpy_transposed() {
  Ctx c;
  Dev a(DType::F32, {48, 33, 1, 1}), out(DType::F16, {33, 48, 1, 1});
  a.randn();
  Tensor at = a.t;  // transpose view of a
  at.ne = {33, 48, 1, 1};
  at.nb = {a.t.nb[1], a.t.nb[0], a.t.nb[2], a.t.nb[3]};
  Tensor n = node_of(Op::Cont, DType::F16, out.t.ne, {&at}, out);
  n.op = Op::Cpy;
  n.src[1] = &out.t;
  c.run(n);
  out.download();
  double err = 0;
  for (int i1 = 0; i1 < 48; ++i1)
    for (int i0 = 0; i0 < 33; ++i0)
      err = std::max(err, double(std::fabs(out.at(i1 * 33 + i0) - fp16_to_fp32(fp32_to_fp16(a.f()[i0 * 48 + i1])))));
  report("cpy f32 transposed -> f16", err, 0.0);
}

void test_cpy_quant(Ctx& c, DType from, DType to) {
  Dev a(from, {512, 3, 1, 1}), out(to, {512, 3, 1, 1});
  a.randn();
  Tensor n = node_of(Op::Cpy, to, out.t.ne, {&a.t, &out.t}, out);
  c.run(n);
  out.download();
  double err = 0;
  if (traits(to).is_quantized) {
    std::vector<float> x(512 * 3);
    for (int64_t k = 0; k < 512 * 3; ++k) x[k] = a.at(k);
    std::vector<char> want(out.host.size());
    traits(to).from_float(x.data(), want.data(), 512 * 3);
    err = std::memcmp(want.data(), out.host.data(), want.size()) == 0 ? 0.0 : 1.0;
  } else {
    for (int64_t k = 0; k < 512 * 3; ++k) err = std::max(err, std::fabs(double(out.at(k)) - a.at(k)));
  }
  report(("cpy " + std::string(type_name(from)) + " -> " + std::string(type_name(to))).c_str(), err, 0.0);
}

void test_binary_unary(Ctx& c) {
  Dev a(DType::F32, {70, 6, 4, 1}), b(DType::F32, {70, 1, 2, 1}), out(DType::F32, {70, 6, 4, 1});
  a.randn(), b.randn();
  Tensor n = node_of(Op::Mul, DType::F32, out.t.ne, {&a.t, &b.t}, out);
  c.run(n);
  out.download();
  double err = 0;
  for (int i2 = 0; i2 < 4; ++i2)
    for (int i1 = 0; i1 < 6; ++i1)
      for (int i0 = 0; i0 < 70; ++i0)
        err = std::max(err, double(std::fabs(out.f()[(i2 * 6 + i1) * 70 + i0] -
                                              a.f()[(i2 * 6 + i1) * 70 + i0] * b.f()[(i2 % 2) * 70 + i0])));
  report("mul with broadcast", err, 0.0);
  n = node_of(Op::Gelu, DType::F32, out.t.ne, {&a.t}, out);
  c.run(n);
  out.download();
  err = 0;
  for (int64_t k = 0; k < a.t.nelements(); ++k) {
    const double x = a.f()[k];
    const double want = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    err = std::max(err, std::fabs(out.f()[k] - want));
  }
  report("gelu", err, 1e-5);
}

void test_norm_softmax(Ctx& c) {
  Dev a(DType::F32, {1000, 7, 3, 1}), out(DType::F32, {1000, 7, 3, 1});
  a.randn(3.0f);
  Tensor n = node_of(Op::RmsNorm, DType::F32, out.t.ne, {&a.t}, out);
  set_norm_params(n, {1e-6f});
  c.run(n);
  out.download();
  double err = 0;
  for (int r = 0; r < 21; ++r) {
    double ss = 0;
    for (int i = 0; i < 1000; ++i) ss += double(a.f()[r * 1000 + i]) * a.f()[r * 1000 + i];
    const double s = 1.0 / std::sqrt(ss / 1000 + 1e-6);
    for (int i = 0; i < 1000; ++i) err = std::max(err, std::fabs(out.f()[r * 1000 + i] - a.f()[r * 1000 + i] * s));
  }
  report("rms_norm", err, 1e-5);

  Dev mask(DType::F16, {1000, 8, 1, 1}), sinks(DType::F32, {3, 1, 1, 1});
  std::vector<float> m(8000);
  for (int i = 0; i < 8000; ++i) m[i] = (i % 1000) > 500 + (i / 1000) * 50 ? -INFINITY : 0.1f * (i % 7);
  for (int i = 0; i < 1000; ++i) m[3 * 1000 + i] = -INFINITY;  // row 3 masked entirely
  traits(DType::F16).from_float(m.data(), mask.host.data(), 8000);
  mask.upload();
  sinks.f()[0] = 0.5f, sinks.f()[1] = -1.0f, sinks.f()[2] = 2.0f;
  sinks.upload();
  for (int with_sinks = 0; with_sinks < 2; ++with_sinks) {
    n = node_of(Op::SoftMax, DType::F32, out.t.ne, {&a.t, &mask.t, with_sinks ? &sinks.t : nullptr}, out);
    set_soft_max_params(n, {0.3f});
    c.run(n);
    out.download();
    err = 0;
    for (int i2 = 0; i2 < 3; ++i2)
      for (int i1 = 0; i1 < 7; ++i1) {
        const float* x = a.f() + (i2 * 7 + i1) * 1000;
        std::vector<double> v(1000);
        double mx = with_sinks ? sinks.f()[i2] : -INFINITY;
        for (int i = 0; i < 1000; ++i) {
          v[i] = x[i] * 0.3 + fp16_to_fp32(fp32_to_fp16(m[i1 * 1000 + i]));
          mx = std::max(mx, v[i]);
        }
        double sum = with_sinks ? std::exp(sinks.f()[i2] - mx) : 0.0;
        for (int i = 0; i < 1000; ++i) sum += std::exp(v[i] - mx);
        for (int i = 0; i < 1000; ++i) {
          const double want = mx == -INFINITY ? 0.0 : std::exp(v[i] - mx) / sum;
          err = std::max(err, std::fabs(out.f()[(i2 * 7 + i1) * 1000 + i] - want));
        }
      }
    report(with_sinks ? "soft_max f16 mask + sinks" : "soft_max f16 mask", err, 1e-6);
  }
}

void test_rope(Ctx& c, bool neox) {
  Dev a(DType::F32, {128, 4, 5, 1}), pos(DType::I32, {5, 1, 1, 1}), ff(DType::F32, {48, 1, 1, 1}),
      out(DType::F32, {128, 4, 5, 1});
  a.randn();
  for (int i = 0; i < 5; ++i) pos.i()[i] = 100 * i + 7;
  pos.upload();
  for (int i = 0; i < 48; ++i) ff.f()[i] = 1.0f + 0.25f * i;
  ff.upload();
  Tensor n = node_of(Op::Rope, DType::F32, out.t.ne, {&a.t, &pos.t, &ff.t}, out);
  RopeParams p;
  p.n_dims = 96;
  p.mode = neox ? RopeMode::NeoX : RopeMode::Normal;
  p.freq_base = 500000.0f;
  p.attn_factor = 0.9f;
  set_rope_params(n, p);
  c.run(n);
  out.download();
  double err = 0;
  for (int i2 = 0; i2 < 5; ++i2)
    for (int i1 = 0; i1 < 4; ++i1) {
      const float* x = a.f() + (i2 * 4 + i1) * 128;
      const float* y = out.f() + (i2 * 4 + i1) * 128;
      for (int k = 0; k < 48; ++k) {
        const double theta = pos.i()[i2] * std::pow(500000.0, -2.0 * k / 96) / ff.f()[k];
        const int j0 = neox ? k : 2 * k, j1 = neox ? k + 48 : 2 * k + 1;
        err = std::max(err, std::fabs(y[j0] - 0.9 * (x[j0] * std::cos(theta) - x[j1] * std::sin(theta))));
        err = std::max(err, std::fabs(y[j1] - 0.9 * (x[j0] * std::sin(theta) + x[j1] * std::cos(theta))));
      }
      for (int j = 96; j < 128; ++j) err = std::max(err, double(std::fabs(y[j] - x[j])));
    }
  // theta up to ~400 in f32: a few 1e-5 of absolute error; a wrong pairing costs O(1).
  report(neox ? "rope neox + freq factors" : "rope normal + freq factors", err, 1e-3);
}

void test_argsort(Ctx& c, int64_t n_cols, bool descending) {
  Dev a(DType::F32, {n_cols, 3, 1, 1}), out(DType::I32, {n_cols, 3, 1, 1});
  std::uniform_int_distribution<int> ud(0, 20);
  for (int64_t k = 0; k < a.t.nelements(); ++k) a.f()[k] = k % 11 == 5 ? NAN : static_cast<float>(ud(g_rng));
  a.upload();
  Tensor n = node_of(Op::Argsort, DType::I32, out.t.ne, {&a.t}, out);
  set_argsort_params(n, {descending ? SortOrder::Descending : SortOrder::Ascending});
  c.run(n);
  out.download();
  double bad = 0;
  for (int r = 0; r < 3; ++r) {
    std::vector<int32_t> idx(n_cols);
    for (int64_t i = 0; i < n_cols; ++i) idx[i] = static_cast<int32_t>(i);
    const float* x = a.f() + r * n_cols;
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t l, int32_t q) {
      if (std::isnan(x[l])) return false;
      if (std::isnan(x[q])) return true;
      return descending ? x[l] > x[q] : x[l] < x[q];
    });
    if (std::memcmp(idx.data(), out.i() + r * n_cols, n_cols * 4) != 0) bad = 1;
  }
  report(("argsort " + std::to_string(n_cols) + (descending ? " desc" : " asc")).c_str(), bad, 0.0);
}

void test_argmax_sum_concat(Ctx& c) {
  Dev a(DType::F32, {3000, 5, 1, 1}), out(DType::I32, {5, 1, 1, 1}), sums(DType::F32, {1, 5, 1, 1});
  a.randn();
  a.f()[2 * 3000 + 10] = 50.0f, a.f()[2 * 3000 + 20] = 50.0f;  // a tie: the first wins
  a.upload();
  Tensor n = node_of(Op::Argmax, DType::I32, out.t.ne, {&a.t}, out);
  c.run(n);
  out.download();
  double bad = 0;
  for (int r = 0; r < 5; ++r) {
    int best = 0;
    for (int i = 1; i < 3000; ++i)
      if (a.f()[r * 3000 + i] > a.f()[r * 3000 + best]) best = i;
    if (out.i()[r] != best) bad = 1;
  }
  report("argmax", bad, 0.0);
  n = node_of(Op::SumRows, DType::F32, sums.t.ne, {&a.t}, sums);
  c.run(n);
  sums.download();
  double err = 0;
  for (int r = 0; r < 5; ++r) {
    double s = 0;
    for (int i = 0; i < 3000; ++i) s += a.f()[r * 3000 + i];
    err = std::max(err, std::fabs(sums.f()[r] - s));
  }
  report("sum_rows", err, 1e-3);
  Dev x(DType::F16, {8, 3, 2, 1}), y(DType::F16, {8, 3, 5, 1}), z(DType::F16, {8, 3, 7, 1});
  x.randn(), y.randn();
  n = node_of(Op::Concat, DType::F16, z.t.ne, {&x.t, &y.t}, z);
  set_concat_params(n, {2});
  c.run(n);
  z.download();
  bad = std::memcmp(z.host.data(), x.host.data(), x.host.size()) != 0 ||
        std::memcmp(z.host.data() + x.host.size(), y.host.data(), y.host.size()) != 0;
  report("concat f16 dim 2", bad, 0.0);
}

}  // namespace

int main() {
  try {
    Ctx c;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::Q4_K,
                    DType::Q6_K, DType::IQ4_XS, DType::MXFP4})
      test_get_rows(c, t);
    for (DType t : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1})
      test_set_rows(c, t);
    test_cpy_transposed();
    test_cpy_quant(c, DType::F32, DType::Q8_0);
    test_cpy_quant(c, DType::F16, DType::Q4_1);
    test_cpy_quant(c, DType::Q4_K, DType::Q5_0);
    test_cpy_quant(c, DType::Q6_K, DType::Q6_K);
    test_cpy_quant(c, DType::Q4_0, DType::F32);
    test_cpy_quant(c, DType::Q8_0, DType::F16);
    test_binary_unary(c);
    test_norm_softmax(c);
    test_rope(c, false);
    test_rope(c, true);
    test_argsort(c, 1, false);
    test_argsort(c, 100, false);
    test_argsort(c, 1000, true);
    test_argsort(c, 4096, true);
    test_argsort(c, 5000, false);
    test_argmax_sum_concat(c);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 2;
  }
  std::printf("%d failure(s)\n", g_failures);
  return g_failures == 0 ? 0 : 1;
}
