// Tests of the conformance checker itself: it must fail a wrong result, a
// wrong reference, an unwritten output and a write into the guard bytes; it
// must count unsupported cases; and the mul_mat thresholds must leave room
// for what a device may legitimately lose by rounding b internally.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "conformance/conformance.h"
#include "conformance/reference.h"
#include "loom/ops.h"
#include "loom/registry.h"

namespace loom::conformance {
namespace {

const Case& find_case(const std::string& name) {
  for (const Case& c : all_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no case " + name);
}

CaseResult run_on_cpu(const Case& c, const RunHooks& hooks = {}) {
  auto backend = Registry::get().cpu().create_backend();
  return run_case(*backend, c, hooks);
}

const char* kAddCase = "add(a=[17,3,2,1],b=[1,3,2,1])";
const char* kArgmaxCase = "argmax(a=[33,3,1,1])";

TEST(Nmse, Metric) {
  const std::vector<double> ref{1.0, -2.0, 3.0};
  EXPECT_EQ(nmse(ref, std::vector<float>{1.0f, -2.0f, 3.0f}), 0.0);
  EXPECT_DOUBLE_EQ(nmse(ref, std::vector<float>{2.0f, -2.0f, 3.0f}), 1.0 / 14.0);
  // An all-zero reference falls back to the mean squared error.
  EXPECT_DOUBLE_EQ(nmse(std::vector<double>{0.0, 0.0}, std::vector<float>{1.0f, 0.0f}), 0.5);
  EXPECT_EQ(nmse(std::vector<double>{0.0, 0.0}, std::vector<float>{0.0f, 0.0f}), 0.0);
  EXPECT_TRUE(std::isinf(nmse(ref, std::vector<float>{NAN, -2.0f, 3.0f})));
}

TEST(Thresholds, EveryCaseHasOne) {
  for (const Case& c : all_cases()) EXPECT_NO_THROW(threshold_for(c.op, c.type)) << c.name;
  EXPECT_EQ(threshold_for(Op::GetRows, DType::F16), 0.0);
  EXPECT_EQ(threshold_for(Op::Argmax, DType::F32), 0.0);
  EXPECT_GT(threshold_for(Op::MulMat, DType::Q4_0), threshold_for(Op::MulMat, DType::F32));
}

TEST(Checker, PassesACorrectCase) {
  const CaseResult r = run_on_cpu(find_case(kAddCase));
  EXPECT_EQ(r.status, CaseStatus::Passed) << r.message;
  EXPECT_EQ(r.device, "CPU");
}

TEST(Checker, FailsAWrongReference) {
  Case c = find_case(kAddCase);
  c.reference = [](const Tensor& out, const RefMemory& memory) {
    std::vector<double> v = memory.read(*out.src[0]);  // a alone: forgets b
    return v;
  };
  const CaseResult r = run_on_cpu(c);
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_GT(r.nmse, r.threshold);
  EXPECT_NE(r.message.find("nmse"), std::string::npos) << r.message;
}

TEST(Checker, FailsAWrongResult) {
  const CaseResult r = run_on_cpu(find_case(kAddCase), {[](Tensor& out) {
                                    auto* x = static_cast<float*>(out.data);
                                    x[5] += 0.5f;  // one element of 102 off by 0.5
                                  }});
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_NE(r.message.find("element 5"), std::string::npos) << r.message;
}

TEST(Checker, ExactOpsMustMatchExactly) {
  const CaseResult r = run_on_cpu(find_case(kArgmaxCase), {[](Tensor& out) {
                                    auto* idx = static_cast<int32_t*>(out.data);
                                    idx[1] = idx[1] == 0 ? 1 : 0;
                                  }});
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_NE(r.message.find("1 of 3 elements differ"), std::string::npos) << r.message;
}

TEST(Checker, FailsAnUnwrittenOutput) {
  // An output left as the buffer's fill bytes (NaN) must not pass.
  const CaseResult r = run_on_cpu(find_case(kAddCase), {[](Tensor& out) {
                                    std::memset(out.data, kGuardByte, out.nbytes());
                                  }});
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_TRUE(std::isinf(r.nmse));
}

TEST(Checker, DetectsAWriteAfterTheOutput) {
  const CaseResult r = run_on_cpu(find_case(kAddCase), {[](Tensor& out) {
                                    static_cast<uint8_t*>(out.data)[out.nbytes() + 3] = 0;
                                  }});
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_NE(r.message.find("out-of-bounds write"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("4 bytes after the end"), std::string::npos) << r.message;
}

TEST(Checker, DetectsAWriteBeforeTheOutput) {
  const CaseResult r = run_on_cpu(find_case(kAddCase), {[](Tensor& out) {
                                    // The first guard byte. Subtracted, not indexed with
                                    // -kGuardBytes: negating a size_t gives an index near
                                    // 2^64, an out-of-bounds pointer under ASan.
                                    *(static_cast<uint8_t*>(out.data) - kGuardBytes) = 0;
                                  }});
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_NE(r.message.find("256 bytes before"), std::string::npos) << r.message;
}

TEST(Checker, GuardsInPlaceDestinations) {
  // set_rows writes into its dst, an input: that buffer is guarded too.
  const Case& c = find_case("set_rows(type=f16,dst=[3,10,1,1],src=[3,4,1,1])");
  EXPECT_EQ(run_on_cpu(c).status, CaseStatus::Passed);
  const CaseResult r = run_on_cpu(c, {[](Tensor& out) {
                                    static_cast<uint8_t*>(out.view_src->data)[out.view_src->nbytes()] = 1;
                                  }});
  EXPECT_EQ(r.status, CaseStatus::Failed);
  EXPECT_NE(r.message.find("out-of-bounds write"), std::string::npos) << r.message;
}

// A CPU that claims not to support mul_mat: those cases are unsupported, not failed.
class NoMulMatDevice final : public Device {
 public:
  explicit NoMulMatDevice(Device& cpu) : cpu_(cpu) {}
  std::string_view name() const override { return "NoMulMat"; }
  std::string description() const override { return "CPU without mul_mat"; }
  DeviceType type() const override { return DeviceType::CPU; }
  MemoryInfo memory_impl() const override { return cpu_.memory(); }
  DeviceCaps caps() const override { return cpu_.caps(); }
  std::unique_ptr<Backend> create_backend(const BackendOptions& options) override;
  BufferType& default_buffer_type() override { return cpu_.default_buffer_type(); }
  bool supports_op(const Tensor& node) const override { return node.op != Op::MulMat && cpu_.supports_op(node); }
  bool supports_buffer_type(const BufferType& type) const override { return cpu_.supports_buffer_type(type); }

 private:
  Device& cpu_;
};

class WrappedBackend final : public Backend {
 public:
  WrappedBackend(Device& device, std::unique_ptr<Backend> inner) : device_(device), inner_(std::move(inner)) {}
  Device& device() const override { return device_; }
  void compute(Graph& graph) override { inner_->compute(graph); }

 private:
  Device& device_;
  std::unique_ptr<Backend> inner_;
};

std::unique_ptr<Backend> NoMulMatDevice::create_backend(const BackendOptions& options) {
  return std::make_unique<WrappedBackend>(*this, cpu_.create_backend(options));
}

TEST(Checker, CountsUnsupportedCases) {
  NoMulMatDevice device(Registry::get().cpu());
  const std::vector<CaseResult> mm = run_conformance(device, Filter{Op::MulMat});
  ASSERT_FALSE(mm.empty());
  for (const CaseResult& r : mm) {
    EXPECT_EQ(r.status, CaseStatus::Unsupported) << r.name;
    EXPECT_EQ(r.device, "NoMulMat");
  }
  const std::vector<CaseResult> add = run_conformance(device, Filter{Op::Add});
  for (const CaseResult& r : add) EXPECT_EQ(r.status, CaseStatus::Passed) << r.name << ": " << r.message;
}

TEST(Filter, ViewOpsSelectTheCasesThatUseThem) {
  size_t n = 0;
  for (const Case& c : all_cases())
    if (Filter{Op::Transpose}.matches(c)) {
      ++n;
      EXPECT_NE(c.name.find(":T"), std::string::npos) << c.name;
    }
  EXPECT_GT(n, 10u);
}

// The reference reads views through their strides: a transposed leaf.
TEST(Reference, ReadsViewsThroughStrides) {
  CaseGraph g;
  Tensor* leaf = g.input(DType::F32, {3, 2, 1, 1});
  Tensor* t = transpose(g.ctx, leaf);
  RefMemory m;
  m.set_root(*leaf, {0, 1, 2, 10, 11, 12});  // leaf[i0, i1] = 10 * i1 + i0
  EXPECT_EQ(m.at(*t, 1, 2, 0, 0), 12.0);     // t[i0, i1] = leaf[i1, i0]
  EXPECT_EQ(m.read(*t), (std::vector<double>{0, 10, 1, 11, 2, 12}));
}

// Rounds a row of b through `type` as a device may do inside mul_mat.
std::vector<double> round_row(const std::vector<double>& x, DType type) {
  std::vector<float> f(x.begin(), x.end()), back(x.size());
  std::vector<uint8_t> bytes(row_size(type, static_cast<int64_t>(x.size())));
  traits(type).from_float(f.data(), bytes.data(), static_cast<int64_t>(f.size()));
  traits(type).to_float(bytes.data(), back.data(), static_cast<int64_t>(back.size()));
  return {back.begin(), back.end()};
}

// Rounds a row of b through q8_K blocks (the activations of the CPU's dots
// for 256-element weight types).
std::vector<double> round_row_q8_k(const std::vector<double>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<float> f(x.begin(), x.end()), back(x.size());
  std::vector<BlockQ8_K> blocks(x.size() / kQK_K);
  quantize_row_q8_k(f.data(), blocks.data(), n);
  dequantize_row_q8_k(blocks.data(), back.data(), n);
  return {back.begin(), back.end()};
}

// What a device loses by rounding b to f16 (f16 weights), bf16 (bf16
// weights), q8_0 blocks (Q8_0, Q4_0 and the other 32-element types) or q8_K
// blocks (256-element types): the threshold must leave at
// least 3x room above the worst case over the suite's mul_mat shapes.
TEST(Thresholds, MulMatLeavesRoomForRoundingB) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  std::map<DType, double> worst;
  for (const Case& c : all_cases()) {
    if (c.op != Op::MulMat) continue;
    const bool q8_k = traits(c.type).is_quantized && traits(c.type).block_size == kQK_K;
    const DType b_format = c.type == DType::BF16            ? DType::BF16
                           : traits(c.type).is_quantized ? DType::Q8_0
                                                         : DType::F16;
    CaseGraph g;
    const Tensor* out = c.build(g);
    RefMemory m;
    for (const auto& in : g.inputs()) {
      std::vector<double> v(static_cast<size_t>(in.tensor->nelements()));
      for (double& x : v) x = normal(rng);
      m.set_root(*in.tensor, v);
    }
    const Tensor& a = *out->src[0];
    const Tensor& b = *out->src[1];
    const int64_t K = a.ne[0];
    if (K % traits(b_format).block_size) continue;
    double err = 0.0, norm = 0.0;
    for (int64_t j3 = 0; j3 < b.ne[3]; ++j3)
      for (int64_t j2 = 0; j2 < b.ne[2]; ++j2)
        for (int64_t j = 0; j < b.ne[1]; ++j) {
          std::vector<double> brow(static_cast<size_t>(K));
          for (int64_t k = 0; k < K; ++k) brow[k] = m.at(b, k, j, j2, j3);
          const std::vector<double> rounded = q8_k ? round_row_q8_k(brow) : round_row(brow, b_format);
          for (int64_t i = 0; i < a.ne[1]; ++i) {
            double exact = 0.0, lossy = 0.0;
            for (int64_t k = 0; k < K; ++k) {
              const double av = m.at(a, k, i, j2 / (b.ne[2] / a.ne[2]), j3 / (b.ne[3] / a.ne[3]));
              exact += av * brow[k];
              lossy += av * rounded[k];
            }
            err += (lossy - exact) * (lossy - exact);
            norm += exact * exact;
          }
        }
    worst[c.type] = std::max(worst[c.type], err / norm);
  }
  for (const auto& [type, w] : worst) {
    std::printf("mul_mat %s: b rounded internally costs nmse up to %.2g (threshold %.2g)\n",
                std::string(type_name(type)).c_str(), w, threshold_for(Op::MulMat, type));
    EXPECT_LT(3.0 * w, threshold_for(Op::MulMat, type)) << type_name(type);
  }
}

}  // namespace
}  // namespace loom::conformance
