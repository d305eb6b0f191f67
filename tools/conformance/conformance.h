// The op conformance suite: every op x type x shape (odd sizes, non-contiguous
// views, broadcasting), run on a Device and compared with a scalar reference
// written for clarity (reference.h), by normalized mean squared error against
// a documented per-op threshold (thresholds.cpp, README.md). Every tensor a
// kernel writes sits in its own buffer between guard regions, so an
// out-of-bounds write fails the case even when the values are right.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "loom/backend.h"
#include "loom/context.h"

namespace loom::conformance {

// How an input tensor is filled (seeded per case, so every run is the same).
struct Fill {
  enum class Kind {
    Normal,         // N(0, 1)
    Positive,       // uniform [0.1, 4): sqrt operands
    AwayFromZero,   // +-uniform [0.5, 2): divisors
    Ints,           // integers in [-1000, 1000] (I32 data)
    Indices,        // integers in [0, range), repeats allowed (get_rows)
    UniqueIndices,  // per group of ne0 values, distinct integers in [0, range) (set_rows)
    Positions,      // integers in [0, range) (rope)
    CausalMask,     // 0 or N(0,1) where i0 <= i1 + (ne0-1)/2, -inf after (soft_max)
  };
  Kind kind = Kind::Normal;
  int64_t range = 0;
};

// A case's graph under construction: a Context plus how each input is filled.
class CaseGraph {
 public:
  Context ctx;
  // A new contiguous leaf tensor that is filled before compute.
  Tensor* input(DType type, std::array<int64_t, 4> ne, Fill fill = {});
  struct Input {
    Tensor* tensor;
    Fill fill;
  };
  const std::vector<Input>& inputs() const { return inputs_; }

 private:
  std::vector<Input> inputs_;
};

class RefMemory;

struct Case {
  std::string name;  // "mul_mat(type=q4_0,a=[64,17,2,1],b=[64,9,6,1])"
  Op op;             // the op under test (the output's op)
  DType type;        // the type under test (weights, source or destination)
  // Builds the inputs and the graph; returns the output node.
  std::function<Tensor*(CaseGraph&)> build;
  // Overrides the threshold table (checker tests only).
  std::optional<double> threshold;
  // Overrides the reference (checker tests only): given the leaf values,
  // returns the output's expected values in logical order.
  std::function<std::vector<double>(const Tensor& output, const RefMemory& memory)> reference;
};

// Every case of the suite, built once.
const std::vector<Case>& all_cases();

// Ops that are the op under test of some case (excludes the view ops, which
// appear as operands).
std::vector<Op> tested_ops();

enum class CaseStatus { Passed, Failed, Unsupported };
std::string_view status_name(CaseStatus status);

struct CaseResult {
  std::string device;
  std::string name;
  Op op = Op::None;
  DType type = DType::F32;
  CaseStatus status = CaseStatus::Failed;
  double nmse = 0.0;
  double threshold = 0.0;
  std::string message;  // why it failed or is unsupported
};

// Which cases to run. `op` selects the cases whose op under test it is; for a
// view op (view, reshape, permute, transpose) the cases that use it.
struct Filter {
  std::optional<Op> op;
  bool matches(const Case& c) const;
};

// Hooks for testing the checker itself: called after compute and before the
// checks, with the output tensor (a test may corrupt its data or guards).
struct RunHooks {
  std::function<void(Tensor& output)> after_compute;
};

// Runs one case on `backend`'s device.
CaseResult run_case(Backend& backend, const Case& c, const RunHooks& hooks = {});
// Runs every case that passes the filter, with one backend of the device.
std::vector<CaseResult> run_conformance(Device& device, const Filter& filter = {});
// Whether `device` supports every node of the case's graph: run_case's first
// check, without running it (a case it passes can still be Unsupported when,
// once placed, an operand is not readable where the device put it).
bool case_supported(const Device& device, const Case& c);

// Bytes kept before and after every written tensor, and their fill byte
// (0xff reads as NaN in every float type, so an unwritten output also fails).
inline constexpr size_t kGuardBytes = 256;
inline constexpr uint8_t kGuardByte = 0xff;

// sum((out - ref)^2) / sum(ref^2); for an all-zero reference the plain mean
// squared error. Any non-finite output where the reference is finite gives
// infinity.
double nmse(std::span<const double> ref, std::span<const float> out);

struct ThresholdRule {
  Op op;
  std::optional<DType> type;  // nullopt: every type
  double max_nmse;            // 0: the output must equal the reference exactly
  std::string_view why;
};
// The documented table (most specific rule first).
std::span<const ThresholdRule> threshold_table();
double threshold_for(Op op, DType type);

}  // namespace loom::conformance
