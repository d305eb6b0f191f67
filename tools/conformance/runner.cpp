// Running one case on a device: place the inputs, put every tensor a kernel
// writes in its own buffer between guard regions, fill the inputs with seeded
// random data, compute, then check the guards and compare the output with the
// reference computed from the values the device actually holds.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_set>

#include <fmt/format.h>

#include "conformance/conformance.h"
#include "conformance/reference.h"
#include "loom/align.h"
#include "loom/error.h"
#include "loom/graph.h"
#include "loom/tensor_alloc.h"

namespace loom::conformance {
namespace {

uint64_t seed_of(std::string_view name) {  // FNV-1a: the same data for a case on every run
  uint64_t h = 1469598103934665603ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

std::vector<float> fill_values(const Tensor& t, const Fill& fill, std::mt19937_64& rng) {
  const auto n = static_cast<size_t>(t.nelements());
  std::vector<float> v(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto uniform = [&rng](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto integer = [&rng](int64_t lo, int64_t hi) {  // [lo, hi]
    return static_cast<float>(std::uniform_int_distribution<int64_t>(lo, hi)(rng));
  };
  using K = Fill::Kind;
  switch (fill.kind) {
    case K::Normal:
      for (float& x : v) x = normal(rng);
      break;
    case K::Positive:
      for (float& x : v) x = static_cast<float>(uniform(0.1, 4.0));
      break;
    case K::AwayFromZero:
      for (float& x : v) x = static_cast<float>(uniform(0.5, 2.0) * (integer(0, 1) ? 1.0 : -1.0));
      break;
    case K::Ints:
      for (float& x : v) x = integer(-1000, 1000);
      break;
    case K::Indices:
    case K::Positions:
      for (float& x : v) x = integer(0, fill.range - 1);
      break;
    case K::UniqueIndices: {
      const auto group = static_cast<size_t>(t.ne[0]);
      if (t.ne[0] > fill.range) fail("conformance: {} distinct indices from [0, {})", t.ne[0], fill.range);
      std::vector<int64_t> all(static_cast<size_t>(fill.range));
      for (size_t k = 0; k < n; k += group) {
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        for (size_t i = 0; i < group; ++i) v[k + i] = static_cast<float>(all[i]);
      }
      break;
    }
    case K::CausalMask: {
      size_t k = 0;
      for (int64_t r = 0; r < t.nrows(); ++r) {
        const int64_t i1 = r % t.ne[1];
        for (int64_t i0 = 0; i0 < t.ne[0]; ++i0, ++k)
          v[k] = i0 <= i1 + (t.ne[0] - 1) / 2 ? normal(rng) : -std::numeric_limits<float>::infinity();
      }
      break;
    }
  }
  return v;
}

// A tensor that kernels write, alone in a buffer: [guard | tensor | padding | guard].
// `whole` covers the entire buffer so the bytes around the tensor can be
// read through the ordinary tensor path, on any kind of buffer.
struct Guarded {
  Tensor* tensor;
  std::shared_ptr<Buffer> buffer;
  Tensor* whole;
  size_t begin, end;          // the tensor's bytes within the buffer
  std::vector<uint8_t> before;  // the buffer before compute
};

Guarded place_guarded(Tensor& t, BufferType& type, Context& helpers) {
  const size_t align = std::lcm(type.alignment(), size_t{4});
  const size_t guard = align_up(kGuardBytes, align);
  const size_t padded = align_up(type.alloc_size(t), align);
  const size_t size = guard + padded + guard;
  Guarded g{&t, type.alloc(size), nullptr, guard, guard + t.nbytes(), {}};
  g.buffer->clear(kGuardByte);
  g.buffer->place(t, guard);
  g.whole = helpers.new_tensor(DType::I32, {static_cast<int64_t>(size / 4)});
  g.whole->name = fmt::format("guard({})", t.name);
  g.buffer->place(*g.whole, 0);
  return g;
}

std::vector<uint8_t> read_bytes(const Tensor& t) {
  std::vector<uint8_t> bytes(t.nbytes());
  tensor_get(t, bytes.data(), 0, bytes.size());
  return bytes;
}

// Describes the first write outside [begin, end), or "" if there is none.
std::string guard_violation(const Guarded& g) {
  const std::vector<uint8_t> after = read_bytes(*g.whole);
  size_t changed = 0, first = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    if (i >= g.begin && i < g.end) continue;
    if (after[i] != g.before[i] && changed++ == 0) first = i;
  }
  if (changed == 0) return {};
  const std::string where = first < g.begin ? fmt::format("{} bytes before", g.begin - first)
                                            : fmt::format("{} bytes after the end of", first - g.end + 1);
  return fmt::format("out-of-bounds write: {} guard bytes changed around '{}' {}, the first {} it", changed,
                     g.tensor->name, g.tensor->shape_string(), where);
}

// Index and values of the element with the largest error, for messages.
std::string worst_element(std::span<const double> ref, std::span<const float> out) {
  size_t worst = 0;
  double worst_err = -1.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::isfinite(out[i]) ? std::fabs(out[i] - ref[i]) : std::numeric_limits<double>::infinity();
    if (e > worst_err) worst_err = e, worst = i;
  }
  if (ref.empty()) return {};
  return fmt::format("element {}: got {}, expected {}", worst, out[worst], ref[worst]);
}

// The device has a kernel for every node (op, params, types, shapes).
bool supported(const Device& device, const Graph& graph, std::string& why) {
  for (const Tensor* n : graph.nodes()) {
    if (op_is_view(n->op) || device.supports_op(*n)) continue;
    why = fmt::format("{} does not support {} {}", device.name(), op_name(n->op), n->shape_string());
    return false;
  }
  return true;
}

// Once placed: the device can read every operand from its memory.
bool operands_readable(const Device& device, const Graph& graph, std::string& why) {
  for (const Tensor* n : graph.nodes()) {
    if (op_is_view(n->op)) continue;
    for (int i = 0; i < kMaxSrc; ++i) {
      const Tensor* s = n->src[i];
      if (!s || !s->buffer || device.supports_operand(*n, i, s->buffer->type())) continue;
      why = fmt::format("{} cannot read operand {} of {} from {} memory", device.name(), i, op_name(n->op),
                        s->buffer->type().name());
      return false;
    }
  }
  return true;
}

void compare(const Case& c, std::span<const double> ref, std::span<const float> out, CaseResult& r) {
  r.nmse = nmse(ref, out);
  if (r.threshold == 0.0) {  // exact: every element equal
    size_t differ = 0;
    for (size_t i = 0; i < ref.size(); ++i) differ += out[i] != static_cast<float>(ref[i]);
    r.status = differ == 0 ? CaseStatus::Passed : CaseStatus::Failed;
    if (differ) r.message = fmt::format("{} of {} elements differ (must be exact); {}", differ, ref.size(),
                                        worst_element(ref, out));
    return;
  }
  r.status = r.nmse <= r.threshold ? CaseStatus::Passed : CaseStatus::Failed;
  if (r.status == CaseStatus::Failed)
    r.message = fmt::format("nmse {:.3g} > {:.3g}; worst {}", r.nmse, r.threshold, worst_element(ref, out));
  (void)c;
}

}  // namespace

std::string_view status_name(CaseStatus status) {
  switch (status) {
    case CaseStatus::Passed: return "passed";
    case CaseStatus::Failed: return "failed";
    case CaseStatus::Unsupported: return "unsupported";
  }
  return "?";
}

CaseResult run_case(Backend& backend, const Case& c, const RunHooks& hooks) {
  Device& device = backend.device();
  CaseResult r;
  r.device = device.name();
  r.name = c.name;
  r.op = c.op;
  r.type = c.type;
  try {
    r.threshold = c.threshold.value_or(threshold_for(c.op, c.type));
    CaseGraph g;
    Tensor* out = c.build(g);
    out->flags |= kFlagOutput;
    if (out->name.empty()) out->name = "out";
    Graph graph = Graph::build(out);
    if (!supported(device, graph, r.message)) {
      r.status = CaseStatus::Unsupported;
      return r;
    }
    // Every root that a node writes (the node, or the tensor it writes into).
    BufferType& type = device.default_buffer_type();
    Context helpers;
    std::vector<Guarded> guarded;
    std::unordered_set<const Tensor*> written;
    for (Tensor* n : graph.nodes()) {
      if (op_is_view(n->op)) continue;
      Tensor* root = n->view_src ? n->view_src : n;
      if (root->name.empty()) root->name = fmt::format("{}#{}", op_name(n->op), guarded.size());
      if (written.insert(root).second) guarded.push_back(place_guarded(*root, type, helpers));
    }
    std::vector<Tensor*> leaves;
    for (const auto& in : g.inputs())
      if (!written.count(in.tensor)) leaves.push_back(in.tensor);
    TensorAllocation inputs = allocate_tensors(leaves, type);
    for (Tensor* n : graph.nodes())
      if (n->view_src) Buffer::place_view(*n);
    if (!operands_readable(device, graph, r.message)) {  // now that operands have memory
      r.status = CaseStatus::Unsupported;
      return r;
    }
    // Inputs: random data, then read back what the device holds.
    std::mt19937_64 rng(seed_of(c.name));
    RefMemory memory;
    for (const auto& in : g.inputs()) {
      if (!in.tensor->buffer) continue;  // not used by the graph
      tensor_from_floats(*in.tensor, fill_values(*in.tensor, in.fill, rng));
      const std::vector<float> held = tensor_to_floats(*in.tensor);
      memory.set_root(*in.tensor, std::vector<double>(held.begin(), held.end()));
    }
    for (Guarded& gt : guarded) gt.before = read_bytes(*gt.whole);

    backend.compute(graph);
    backend.synchronize();
    if (hooks.after_compute) hooks.after_compute(*out);

    for (const Guarded& gt : guarded) {
      r.message = guard_violation(gt);
      if (!r.message.empty()) {
        r.status = CaseStatus::Failed;
        return r;
      }
    }
    std::vector<double> expected;
    if (c.reference) {
      expected = c.reference(*out, memory);
    } else {
      evaluate(graph, memory);
      expected = memory.read(*out);
    }
    const std::vector<float> got = tensor_to_floats(*out);
    compare(c, expected, got, r);
  } catch (const std::exception& e) {
    r.status = CaseStatus::Failed;
    r.message = e.what();
  }
  return r;
}

bool case_supported(const Device& device, const Case& c) {
  CaseGraph g;
  std::string why;
  return supported(device, Graph::build(c.build(g)), why);
}

std::vector<CaseResult> run_conformance(Device& device, const Filter& filter) {
  std::unique_ptr<Backend> backend = device.create_backend();
  std::vector<CaseResult> results;
  for (const Case& c : all_cases())
    if (filter.matches(c)) results.push_back(run_case(*backend, c));
  return results;
}

}  // namespace loom::conformance
