// The op conformance suite on every registered device, one test per device
// and op so a failure names both. Every supported case must pass; cases a
// device does not support are counted and printed, not failed.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "conformance/conformance.h"
#include "loom/registry.h"

namespace loom::conformance {
namespace {

std::vector<std::string> device_names() {
  std::vector<std::string> names;
  for (Device* d : Registry::get().devices()) names.emplace_back(d->name());
  return names;
}

class Conformance : public ::testing::TestWithParam<std::tuple<std::string, Op>> {};

TEST_P(Conformance, SupportedCasesPass) {
  const auto& [device_name, op] = GetParam();
  Device* device = Registry::get().find(device_name);
  // Test names are listed once (ctest discovery); the devices at run time may differ.
  if (!device) GTEST_SKIP() << "device " << device_name << " is not registered in this run";
  const std::vector<CaseResult> results = run_conformance(*device, Filter{op});
  ASSERT_FALSE(results.empty());
  size_t passed = 0, unsupported = 0;
  for (const CaseResult& r : results) {
    EXPECT_NE(r.status, CaseStatus::Failed) << r.device << " " << r.name << ": " << r.message;
    passed += r.status == CaseStatus::Passed;
    unsupported += r.status == CaseStatus::Unsupported;
  }
  std::printf("[ %s %s ] %zu passed, %zu unsupported of %zu\n", device_name.c_str(), std::string(op_name(op)).c_str(),
              passed, unsupported, results.size());
}

std::string param_name(const ::testing::TestParamInfo<Conformance::ParamType>& info) {
  std::string name = std::get<0>(info.param) + "_" + std::string(op_name(std::get<1>(info.param)));
  std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Devices, Conformance,
                         ::testing::Combine(::testing::ValuesIn(device_names()), ::testing::ValuesIn(tested_ops())),
                         param_name);

// Every op of the op table that runs a kernel has cases, and every type each
// op accepts.
TEST(ConformanceCases, CoverEveryOpAndType) {
  std::map<Op, std::vector<DType>> types;
  for (const Case& c : all_cases()) {
    auto& v = types[c.op];
    if (std::find(v.begin(), v.end(), c.type) == v.end()) v.push_back(c.type);
  }
  for (const OpInfo& info : kOpTable)
    if (op_has_kernel(info.op)) EXPECT_TRUE(types.count(info.op)) << info.name;
  for (Op op : {Op::GetRows, Op::SetRows, Op::MulMat, Op::Cpy})
    for (DType t : kAllTypes)
      if (t != DType::I32)
        EXPECT_NE(std::find(types[op].begin(), types[op].end(), t), types[op].end()) << op_name(op) << " " << type_name(t);
  // Every view op is used as an operand somewhere.
  for (const OpInfo& info : kOpTable) {
    if (!info.is_view) continue;
    const Filter f{info.op};
    EXPECT_TRUE(std::any_of(all_cases().begin(), all_cases().end(), [&](const Case& c) { return f.matches(c); }))
        << info.name;
  }
}

// The builders give every node as many operands as the op table says.
TEST(ConformanceCases, OperandCountsMatchTheOpTable) {
  for (const Case& c : all_cases()) {
    CaseGraph g;
    Graph graph = Graph::build(c.build(g));
    for (const Tensor* n : graph.nodes()) {
      const OpInfo& info = op_info(n->op);
      for (int i = 0; i < kMaxSrc; ++i) {
        if (i < info.min_src) EXPECT_NE(n->src[i], nullptr) << c.name << ": " << info.name << " src " << i;
        if (i >= info.max_src) EXPECT_EQ(n->src[i], nullptr) << c.name << ": " << info.name << " src " << i;
      }
    }
  }
}

}  // namespace
}  // namespace loom::conformance
