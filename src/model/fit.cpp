#include "loom/fit.h"

#include <algorithm>

#include <fmt/ranges.h>

#include "loom/error.h"
#include "loom/tensor_alloc.h"

namespace loom {
namespace {

std::string mib(size_t bytes) { return fmt::format("{:.1f} MiB", bytes / 1048576.0); }

// The device whose memory a buffer type's allocations take: its own, or the
// host's for host memory without a device or of a non-CPU device (pinned).
Device& owner(const BufferType& type, Device& host) {
  Device* d = type.device();
  if (!d || (type.is_host() && d->type() != DeviceType::CPU)) return host;
  return *d;
}

void add(std::vector<std::pair<std::string, size_t>>& list, std::string_view name, size_t bytes) {
  auto it = std::find_if(list.begin(), list.end(), [name](const auto& p) { return p.first == name; });
  if (it == list.end()) it = list.insert(list.end(), {std::string(name), 0});
  it->second += bytes;
}

}  // namespace

const DeviceBytes& MemoryPrediction::of(const Device& d) const {
  for (const DeviceBytes& b : devices)
    if (b.device == &d) return b;
  fail("memory prediction: device {} was not given", d.name());
}

MemoryPrediction predict_memory(const std::string& path, const std::vector<Device*>& devices, const LoadOptions& load,
                                const SessionOptions& session) {
  Device& host = host_device(devices);
  MemoryPrediction p;
  const auto entry = [](Device* d) {
    DeviceBytes b;
    b.device = d;
    return b;
  };
  for (Device* d : devices) p.devices.push_back(entry(d));
  const auto slot = [&p, &host, &entry](const BufferType& type) -> DeviceBytes& {
    Device& d = owner(type, host);
    for (DeviceBytes& b : p.devices)
      if (b.device == &d) return b;
    p.devices.push_back(entry(&d));
    return p.devices.back();
  };
  DryRun dry;
  LoadOptions quiet = load;
  quiet.progress = false;
  std::unique_ptr<Model> model = Model::load(path, devices, quiet);
  const size_t n_weights = dry.allocations().size();
  // The prediction is the worst case, whichever way the session sizes its
  // compute buffers (a growing one reaches it with a full context).
  SessionOptions worst = session;
  worst.compute_buffers = ComputeBuffers::Worst;
  const Session s(*model, worst);
  const auto& all = dry.allocations();
  for (size_t i = 0; i < all.size(); ++i) {
    DeviceBytes& b = slot(*all[i].type);
    const auto buffer = all[i].buffer.lock();
    if (i < n_weights)
      b.weights += all[i].size;
    else if (buffer && buffer->usage() == BufferUsage::Compute)
      b.compute += all[i].size;
    else
      b.kv_cache += all[i].size;
    add(b.by_buffer_type, all[i].type->name(), all[i].size);
  }
  if (const BufferType* mapped = host.host_ptr_buffer_type())
    for (const WeightPlacement& w : model->placements())
      if (w.buffer_type == mapped->name()) slot(*mapped).mapped += w.bytes;
  const HParams& h = model->hparams();
  p.n_ctx = s.n_ctx();
  p.n_layer = h.n_layer;
  p.n_ctx_train = h.n_ctx_train;
  p.n_expert = h.n_expert;
  return p;
}

namespace {

// One candidate placement and whether it fits.
struct Trial {
  MemoryPrediction prediction;
  bool fits = false;
  std::string over;  // the first device over its budget: "OpenCL0 needs X, has Y free less a margin of Z"
};

class Fitter {
 public:
  Fitter(const std::string& path, const std::vector<Device*>& devices, const LoadOptions& load,
         const SessionOptions& session, const FitOptions& options)
      : path_(path), devices_(devices), load_(load), session_(session), options_(options) {
    for (Device* d : offload_devices(devices)) {
      const bool used = std::find(options.offload.begin(), options.offload.end(), d) != options.offload.end();
      const int64_t budget = used ? this->budget(*d) : 0;
      split_.push_back(budget > 0 ? static_cast<float>(budget) / 1048576.0f : 0.0f);  // MiB
    }
    if (std::none_of(split_.begin(), split_.end(), [](float x) { return x > 0; })) split_.clear();
    // Split none and row keep the main device: choose the largest allowed one.
    if (!split_.empty() && load.placement.split_mode != SplitMode::Layer)
      main_ = static_cast<int>(std::max_element(split_.begin(), split_.end()) - split_.begin());
  }

  int64_t budget(const Device& d) const {
    size_t margin = 0;
    for (const auto& [dev, bytes] : options_.margin)
      if (dev == &d) margin = bytes;
    return static_cast<int64_t>(d.memory().free) - static_cast<int64_t>(margin);
  }
  bool can_offload() const { return !split_.empty(); }
  const std::vector<float>& split() const { return split_; }

  PlacementOptions placement(int ngl, int n_expert_layers_on_host) const {
    PlacementOptions p = load_.placement;
    p.n_gpu_layers = ngl;
    if (ngl > 0) {
      p.tensor_split = split_;
      p.main_gpu = main_;
    }
    if (n_expert_layers_on_host > 0) {
      std::vector<std::string> layers;
      for (int i = 0; i < n_expert_layers_on_host; ++i) layers.push_back(std::to_string(i));
      p.overrides.insert(p.overrides.begin(),
                         TensorOverride{fmt::format("^blk\\.({})\\.ffn_(up|down|gate|gate_up)_(ch|)exps",
                                                    fmt::join(layers, "|")),
                                        std::string(host_device(devices_).default_buffer_type().name())});
    }
    return p;
  }

  Trial trial(int ngl, int64_t n_ctx, int n_expert_layers_on_host = 0) const {
    LoadOptions lo = load_;
    lo.placement = placement(ngl, n_expert_layers_on_host);
    SessionOptions so = session_;
    so.n_ctx = n_ctx;
    Trial t;
    t.prediction = predict_memory(path_, devices_, lo, so);
    t.fits = true;
    for (const DeviceBytes& b : t.prediction.devices) {
      const int64_t budget = this->budget(*b.device);
      if (static_cast<int64_t>(b.total()) <= budget) continue;
      t.fits = false;
      size_t margin = 0;
      for (const auto& [dev, bytes] : options_.margin)
        if (dev == b.device) margin = bytes;
      t.over = fmt::format("{} would need {}, has {} free less a margin of {}", b.device->name(), mib(b.total()),
                           mib(b.device->memory().free), mib(margin));
      break;
    }
    return t;
  }

 private:
  const std::string& path_;
  const std::vector<Device*>& devices_;
  const LoadOptions& load_;
  const SessionOptions& session_;
  const FitOptions& options_;
  std::vector<float> split_;  // per offload device given: its budget, 0 for those fit may not use
  int main_ = 0;
};

}  // namespace

FitResult fit_model(const std::string& path, const std::vector<Device*>& devices, const LoadOptions& load,
                    const SessionOptions& session, const FitOptions& options) {
  const Fitter fitter(path, devices, load, session, options);
  FitResult r;
  // The model's shape, from a dry run that offloads nothing.
  const Trial none = fitter.trial(0, session.n_ctx);
  const int n_all = static_cast<int>(none.prediction.n_layer) + 1;  // every layer and the output layer
  std::vector<int64_t> ctxs{session.n_ctx};
  if (options.choose_ctx && session.n_ctx == 0) {
    const int64_t train = std::max<int64_t>(none.prediction.n_ctx_train, 1);
    const int64_t lowest = std::min(options.min_ctx, train);
    ctxs = {train};
    while (ctxs.back() / 2 >= lowest) ctxs.push_back(ctxs.back() / 2);
    if (ctxs.back() != lowest) ctxs.push_back(lowest);
  }
  const auto finish = [&](int ngl, int64_t n_ctx, int expert_layers, Trial t, std::string reason) {
    r.placement = fitter.placement(ngl, expert_layers);
    r.n_ctx = n_ctx;
    r.prediction = std::move(t.prediction);
    r.fits = t.fits;
    r.reason = std::move(reason);
    return r;
  };
  const std::string where = fitter.can_offload() ? fmt::format(" (tensor split {:.1f})", fmt::join(fitter.split(), ","))
                                                  : std::string();
  // Everything offloaded, at the largest context that allows it.
  if (fitter.can_offload())
    for (int64_t ctx : ctxs) {
      Trial t = fitter.trial(n_all, ctx);
      if (!t.fits) continue;
      std::string why = fmt::format("all {} layers and the output layer offloaded{}, context {}", n_all - 1, where,
                                    t.prediction.n_ctx);
      return finish(n_all, ctx, 0, std::move(t), std::move(why));
    }
  const int64_t ctx = ctxs.back();
  Trial best = ctx == session.n_ctx ? none : fitter.trial(0, ctx);
  if (!best.fits) {
    std::string why = fmt::format("does not fit even with nothing offloaded: {}", best.over);
    return finish(0, ctx, 0, std::move(best), std::move(why));
  }
  if (!fitter.can_offload()) {
    std::string why =
        fmt::format("nothing offloaded (no offload device with free memory), context {}", best.prediction.n_ctx);
    return finish(0, ctx, 0, std::move(best), std::move(why));
  }
  // Mixture of experts: every layer offloaded, the expert weights of the
  // fewest first layers on the host.
  if (none.prediction.n_expert > 0) {
    int lo = 0, hi = n_all - 1;  // hi: all layers' experts on the host
    Trial at_hi = fitter.trial(n_all, ctx, hi);
    if (at_hi.fits) {
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        Trial t = fitter.trial(n_all, ctx, mid);
        if (t.fits) {
          hi = mid;
          at_hi = std::move(t);
        } else {
          lo = mid;
        }
      }
      return finish(n_all, ctx, hi, std::move(at_hi),
                    fmt::format("all {} layers offloaded{}, the expert weights of the first {} on the host, context "
                                "{}",
                                n_all - 1, where, hi, ctx));
    }
  }
  // The most layers that fit: fewer layers never need more on any device, so
  // search from the top down for the first that fits.
  Trial above = fitter.trial(n_all, ctx);
  for (int ngl = n_all - 1; ngl > 0; --ngl) {
    Trial t = fitter.trial(ngl, ctx);
    if (t.fits) {
      std::string why = fmt::format("-ngl {} of at most {} offloaded{}, context {}: -ngl {} would not fit ({})", ngl,
                                    n_all, where, t.prediction.n_ctx, ngl + 1, above.over);
      return finish(ngl, ctx, 0, std::move(t), std::move(why));
    }
    above = std::move(t);
  }
  std::string why =
      fmt::format("nothing offloaded, context {}: one layer would not fit ({})", best.prediction.n_ctx, above.over);
  return finish(0, ctx, 0, std::move(best), std::move(why));
}

}  // namespace loom
