// VRAM of every GPU of a run: model weights kept resident as a cache (reference counted while a
// task uses them, evicted least recently used otherwise), working sets of running tasks, and edge
// tensors held in the producer's VRAM until every consumer has read them. Use never exceeds
// capacity: a checked invariant on every change.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "fleetsim/ids.hpp"

namespace fleetsim {

inline constexpr std::uint32_t kNoModel = std::numeric_limits<std::uint32_t>::max();

// One change of a GPU's VRAM use, for timelines.
struct VramSample {
  double time_s;
  GpuId gpu;
  double used_bytes;
};

class GpuMemory {
 public:
  // Up to `offloadable` (0 to 1) of a task's working set may live in host memory when VRAM is
  // short: activation offload, paid for in transfers by the caller.
  explicit GpuMemory(std::vector<double> capacity_bytes, double offloadable = 0);

  double capacity(GpuId g) const { return gpus_[index(g)].capacity; }
  double used(GpuId g) const;
  bool resident(GpuId g, std::uint32_t model) const;
  // Bytes a task could have on this GPU if every unreferenced cached model were evicted.
  double available(GpuId g) const;
  // What placing a task needs of available(): its working set, plus its weights unless another
  // running task already holds them here (resident but idle weights are counted in available()).
  double need(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes) const;
  // need() with as much of the working set offloaded as allowed: the least a task can start with.
  double least_need(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes) const {
    return need(g, model, weights_bytes, (1 - offloadable_) * working_set_bytes);
  }
  bool fits(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes) const {
    return least_need(g, model, weights_bytes, working_set_bytes) <= available(g);
  }
  // The part of its working set a task placed here now keeps in host memory: what does not fit.
  double offload_bytes(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes) const;

  // Takes VRAM for a starting task: references its model (evicting least recently used unreferenced
  // models to make room for a load) and allocates its working set (the part kept in VRAM). Returns
  // true when the weights must be loaded. The caller has checked need() <= available().
  bool admit(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes, double now);
  // Gives back a finished task's working set and its reference on the model (which stays cached).
  void release(GpuId g, std::uint32_t model, double working_set_bytes, double now);

  // An output tensor waiting for its consumers, in VRAM as far as unreferenced cached models can be
  // evicted for it; the rest spills to host memory. Returns the bytes held in VRAM.
  double hold(GpuId g, double bytes, double now);
  void unhold(GpuId g, double bytes, double now);  // a consumer has read it

  // A load that was stopped before it finished: the unreferenced, unloaded copy goes.
  void drop_unloaded(GpuId g, std::uint32_t model, double now);
  // The GPU failed: everything in its VRAM is gone (no task may be running on it).
  void wipe(GpuId g, double now);

  // Whether a resident model's weights have finished loading (a peer may copy them).
  bool loaded(GpuId g, std::uint32_t model) const;
  void mark_loaded(GpuId g, std::uint32_t model);

  std::uint64_t evictions() const { return evictions_; }
  double spilled_bytes() const { return spilled_; }
  double held(GpuId g) const { return gpus_[index(g)].held; }
  double peak_used(GpuId g) const { return gpus_[index(g)].peak; }
  // The integral of use over time, in byte-seconds, up to `now`.
  double used_seconds(GpuId g, double now) const {
    const Gpu& gpu = gpus_[index(g)];
    return gpu.used_integral + (gpu.working + gpu.held + gpu.cached) * (now - gpu.changed_s);
  }
  void record_samples(bool on) { recording_ = on; }
  const std::vector<VramSample>& samples() const { return samples_; }

 private:
  struct Cached {
    std::uint32_t model;
    double bytes;
    std::uint32_t refs;
    std::uint64_t last_use;  // admission counter, for LRU
    bool loaded;
  };
  struct Gpu {
    double capacity = 0;
    double working = 0;  // working sets of running tasks
    double held = 0;     // output tensors not yet read by every consumer
    double cached = 0;   // resident weights, referenced or not
    double pinned = 0;   // resident weights some running task references
    double peak = 0;
    double last_recorded = 0;
    double used_integral = 0;  // byte-seconds up to changed_s
    double changed_s = 0;
    std::vector<Cached> models;
  };

  void changed(GpuId g, double now);
  void integrate(Gpu& gpu, double now);
  // Evicts least recently used unreferenced models until `bytes` are free; false if impossible.
  bool make_room(Gpu& gpu, double bytes);

  std::vector<Gpu> gpus_;
  double offloadable_ = 0;
  std::uint64_t clock_ = 0;
  std::uint64_t evictions_ = 0;
  double spilled_ = 0;
  bool recording_ = false;
  std::vector<VramSample> samples_;
};

}  // namespace fleetsim
