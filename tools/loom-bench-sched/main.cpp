// loom-bench-sched: the scheduler on a llama-shaped graph (tests/alloc/
// test_graphs.h) with the weights and KV cache of the first half of the
// layers in OpenCL0 memory and the rest on the CPU.
//  1. Splits, copies and compute buffer sizes on the real devices
//     (allocation only: nothing is computed, weights stay uninitialized).
//  2. The scheduler's own time per token: a 1-token graph, rebuilt every
//     iteration as a model runtime does, scheduled on backends whose compute
//     and copies do nothing (memory never touched), with plan reuse on and
//     off. Kernel time is excluded by construction.
// --dot FILE writes the Graphviz picture of the splits of part 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "alloc/test_graphs.h"
#include "loom/error.h"
#include "loom/registry.h"
#include "loom/scheduler.h"
#include "loom/tensor_alloc.h"

namespace {

using namespace loom;

// Memory that is never touched; host or not.
class NullBufferType final : public BufferType {
 public:
  NullBufferType(std::string name, bool host) : name_(std::move(name)), host_(host) {}
  std::string_view name() const override { return name_; }
  size_t alignment() const override { return 64; }
  bool is_host() const override { return host_; }
  Device* device() const override { return nullptr; }

 protected:
  std::shared_ptr<Buffer> alloc_impl(size_t size) override { return std::make_shared<NullBuffer>(*this, size); }

 private:
  class NullBuffer final : public Buffer {
   public:
    using Buffer::Buffer;
    void* base() override { return reinterpret_cast<void*>(uintptr_t{1} << 40); }
    void set_tensor(Tensor&, const void*, size_t, size_t) override {}
    void get_tensor(const Tensor&, void*, size_t, size_t) override {}
    void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
    void clear(uint8_t) override {}
  };
  std::string name_;
  bool host_;
};

class NullDevice;
class NullBackend final : public Backend {
 public:
  explicit NullBackend(NullDevice& d) : device_(d) {}
  Device& device() const override;
  void compute(Graph&) override {}
  bool copy_tensor_async(const Tensor&, Tensor&) override { return true; }

 private:
  NullDevice& device_;
};

class NullDevice final : public Device {
 public:
  NullDevice(std::string name, DeviceType type) : name_(std::move(name)), type_(type), bt_(name_, type == DeviceType::CPU) {}
  std::string_view name() const override { return name_; }
  std::string description() const override { return "does nothing"; }
  DeviceType type() const override { return type_; }
  MemoryInfo memory_impl() const override { return {}; }
  DeviceCaps caps() const override { return {.async = true}; }
  std::unique_ptr<Backend> create_backend(const BackendOptions&) override { return std::make_unique<NullBackend>(*this); }
  BufferType& default_buffer_type() override { return bt_; }
  bool supports_op(const Tensor&) const override { return true; }
  bool supports_buffer_type(const BufferType& t) const override { return &t == &bt_ || (type_ == DeviceType::CPU && t.is_host()); }

 private:
  std::string name_;
  DeviceType type_;
  NullBufferType bt_;
};

Device& NullBackend::device() const { return device_; }

struct Model {
  Context ctx;
  testing::LlamaGraph g;
  std::vector<std::shared_ptr<Buffer>> buffers;
};

int layer_of(const std::string& name) {
  if (name.rfind("blk.", 0) == 0) return std::atoi(name.c_str() + 4);
  if (name.rfind("cache_", 0) == 0) return std::atoi(name.c_str() + 8);
  return -1;
}

// Weights and cache of layers < n_layer/2 in `dev`, the rest in `host`.
std::unique_ptr<Model> build(const testing::LlamaShape& s, BufferType& dev, BufferType& host) {
  auto m = std::make_unique<Model>();
  m->g = testing::build_llama_graph(m->ctx, s);
  std::vector<Tensor*> on_dev, on_host;
  for (auto* list : {&m->g.weights, &m->g.cache})
    for (Tensor* t : *list) {
      const int l = layer_of(t->name);
      (l >= 0 && l < s.n_layer / 2 ? on_dev : on_host).push_back(t);
    }
  for (auto [ts, type] : {std::pair{&on_dev, &dev}, std::pair{&on_host, &host}}) {
    auto a = allocate_tensors(*ts, *type, BufferUsage::Weights);
    m->buffers.insert(m->buffers.end(), a.buffers.begin(), a.buffers.end());
  }
  return m;
}

double overhead_us(const testing::LlamaShape& s, bool reuse, int iters) {
  NullDevice dev("Null0", DeviceType::ACCEL), cpu("NullCPU", DeviceType::CPU);
  auto bd = dev.create_backend({}), bc = cpu.create_backend({});
  SchedulerOptions o;
  o.reuse = reuse;
  o.debug = 0;
  Scheduler sched({bd.get(), bc.get()}, o);
  double total = 0;
  for (int i = 0; i < iters + 3; ++i) {
    auto m = build(s, dev.default_buffer_type(), cpu.default_buffer_type());
    const auto t0 = std::chrono::steady_clock::now();
    sched.allocate(m->g.graph);
    sched.compute(m->g.graph);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 3) total += std::chrono::duration<double, std::micro>(t1 - t0).count();  // 3 warm-up tokens
  }
  const auto& r = sched.report();
  std::printf("  reuse %-3s: %9.1f us per token  (%zu splits, %zu copies; plans built %zu, reused %zu)\n",
              reuse ? "on" : "off", total / iters, r.n_splits(), r.n_copies, r.n_plan_builds, r.n_plan_reuses);
  return total / iters;
}

void usage() {
  std::printf(
      "usage: loom-bench-sched [options]\n"
      "  --layers N   llama layers (default 22; the first half on OpenCL0)\n"
      "  --embd N     embedding width (default 2048), --ff N (default 5632)\n"
      "  --tokens N   tokens of the split report (default 512); the overhead uses 1\n"
      "  --iters N    tokens timed per setting (default 200)\n"
      "  --dot FILE   write the splits of the report graph as Graphviz\n"
      "  --json       print the report as JSON\n");
}

}  // namespace

int main(int argc, char** argv) try {
  testing::LlamaShape s;
  int iters = 200;
  std::string dot;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> int {
      if (i + 1 >= argc) fail("{} needs a value", a);
      return std::atoi(argv[++i]);
    };
    if (a == "--layers") s.n_layer = value();
    else if (a == "--embd") s.n_embd = value(), s.head_dim = s.n_embd / s.n_head;
    else if (a == "--ff") s.n_ff = value();
    else if (a == "--tokens") s.n_tokens = value();
    else if (a == "--iters") iters = value();
    else if (a == "--dot") {
      if (i + 1 >= argc) fail("--dot needs a file name");
      dot = argv[++i];
    } else if (a == "--json") json = true;
    else if (a == "-h" || a == "--help") return usage(), 0;
    else fail("unknown option '{}' (see --help)", a);
  }
  if (s.n_layer < 1 || s.n_tokens < 1 || iters < 1) fail("--layers, --tokens and --iters must be positive");
  std::printf("llama-shaped graph: %d layers, embd %d, ff %d, %d heads (%d kv), layers 0-%d on the accelerator\n",
              s.n_layer, s.n_embd, s.n_ff, s.n_head, s.n_head_kv, s.n_layer / 2 - 1);

  Device* cl0 = Registry::get().find("OpenCL0");
  for (int tokens : {s.n_tokens, 1}) {
    testing::LlamaShape st = s;
    st.n_tokens = tokens;
    std::unique_ptr<Backend> accel;
    NullDevice null_dev("Null0", DeviceType::ACCEL);
    Device& dev = cl0 ? *cl0 : static_cast<Device&>(null_dev);
    accel = dev.create_backend({});
    auto cpu = Registry::get().cpu().create_backend();
    Scheduler sched({accel.get(), cpu.get()});
    auto m = build(st, dev.default_buffer_type(), Registry::get().cpu().default_buffer_type());
    sched.allocate(m->g.graph);
    std::printf("\n%s + CPU, %d tokens:\n", std::string(dev.name()).c_str(), tokens);
    if (json) std::printf("%s\n", sched.report().to_json().c_str());
    else std::printf("%s", sched.report().to_string().c_str());
    if (!dot.empty() && tokens == s.n_tokens) {
      sched.write_dot(dot);
      std::printf("wrote %s\n", dot.c_str());
    }
  }

  testing::LlamaShape one = s;
  one.n_tokens = 1;
  std::printf("\nscheduler overhead per 1-token graph (backends that do nothing, %d tokens):\n", iters);
  const double on = overhead_us(one, true, iters);
  const double off = overhead_us(one, false, iters);
  std::printf("  reuse saves %.1f us per token (%.1fx)\n", off - on, on > 0 ? off / on : 0.0);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "loom-bench-sched: %s\n", e.what());
  return 1;
}
