#include <algorithm>

#include "fleetsim/error.hpp"
#include "fleetsim/memory.hpp"

namespace fleetsim {

GpuMemory::GpuMemory(std::vector<double> capacity_bytes, double offloadable) : offloadable_(offloadable) {
  gpus_.resize(capacity_bytes.size());
  for (std::size_t g = 0; g < gpus_.size(); ++g) gpus_[g].capacity = capacity_bytes[g];
}

double GpuMemory::used(GpuId g) const {
  const Gpu& gpu = gpus_[index(g)];
  return gpu.working + gpu.held + gpu.cached;
}

bool GpuMemory::resident(GpuId g, std::uint32_t model) const {
  if (model == kNoModel) return false;
  for (const Cached& c : gpus_[index(g)].models) {
    if (c.model == model) return true;
  }
  return false;
}

double GpuMemory::available(GpuId g) const {
  const Gpu& gpu = gpus_[index(g)];
  return gpu.capacity - gpu.working - gpu.held - gpu.pinned;
}

double GpuMemory::need(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes) const {
  // available() leaves out only referenced weights; a cached but unreferenced model is counted
  // there as evictable, so using it takes its bytes out of what is available.
  if (model == kNoModel) return working_set_bytes;
  for (const Cached& c : gpus_[index(g)].models) {
    if (c.model == model) return working_set_bytes + (c.refs > 0 ? 0.0 : c.bytes);
  }
  return weights_bytes + working_set_bytes;
}

double GpuMemory::offload_bytes(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes) const {
  if (offloadable_ <= 0) return 0;
  const double shortfall = need(g, model, weights_bytes, working_set_bytes) - available(g);
  return std::clamp(shortfall, 0.0, offloadable_ * working_set_bytes);
}

bool GpuMemory::admit(GpuId g, std::uint32_t model, double weights_bytes, double working_set_bytes, double now) {
  Gpu& gpu = gpus_[index(g)];
  integrate(gpu, now);
  FLEETSIM_CHECK(need(g, model, weights_bytes, working_set_bytes) <= available(g) * (1 + 1e-12) + 1e-3,
                 "admitted a task that does not fit");
  bool load = false;
  if (model != kNoModel) {
    auto it = std::find_if(gpu.models.begin(), gpu.models.end(), [&](const Cached& c) { return c.model == model; });
    if (it == gpu.models.end()) {
      FLEETSIM_CHECK(make_room(gpu, weights_bytes + working_set_bytes), "no model left to evict");
      gpu.models.push_back(Cached{model, weights_bytes, 0, 0, false});
      gpu.cached += weights_bytes;
      it = gpu.models.end() - 1;
      load = true;
    }
    if (it->refs++ == 0) gpu.pinned += it->bytes;
    it->last_use = ++clock_;
  }
  if (!load && !make_room(gpu, working_set_bytes)) FLEETSIM_CHECK(false, "no model left to evict");
  gpu.working += working_set_bytes;
  changed(g, now);
  return load;
}

bool GpuMemory::make_room(Gpu& gpu, double bytes) {
  while (gpu.capacity - gpu.working - gpu.held - gpu.cached < bytes * (1 - 1e-12) - 1e-3) {
    auto victim = gpu.models.end();
    for (auto c = gpu.models.begin(); c != gpu.models.end(); ++c) {
      if (c->refs == 0 && (victim == gpu.models.end() || c->last_use < victim->last_use)) victim = c;
    }
    if (victim == gpu.models.end()) return false;
    gpu.cached -= victim->bytes;
    gpu.models.erase(victim);
    ++evictions_;
  }
  return true;
}

bool GpuMemory::loaded(GpuId g, std::uint32_t model) const {
  for (const Cached& c : gpus_[index(g)].models) {
    if (c.model == model) return c.loaded;
  }
  return false;
}

void GpuMemory::mark_loaded(GpuId g, std::uint32_t model) {
  for (Cached& c : gpus_[index(g)].models) {
    if (c.model == model) c.loaded = true;
  }
}

void GpuMemory::release(GpuId g, std::uint32_t model, double working_set_bytes, double now) {
  Gpu& gpu = gpus_[index(g)];
  integrate(gpu, now);
  gpu.working = std::max(0.0, gpu.working - working_set_bytes);
  if (model != kNoModel) {
    const auto it = std::find_if(gpu.models.begin(), gpu.models.end(), [&](const Cached& c) { return c.model == model; });
    FLEETSIM_CHECK(it != gpu.models.end() && it->refs > 0, "released a model the GPU does not hold");
    if (--it->refs == 0) gpu.pinned -= it->bytes;
  }
  changed(g, now);
}

void GpuMemory::drop_unloaded(GpuId g, std::uint32_t model, double now) {
  Gpu& gpu = gpus_[index(g)];
  const auto it = std::find_if(gpu.models.begin(), gpu.models.end(), [&](const Cached& c) { return c.model == model; });
  if (it == gpu.models.end() || it->loaded || it->refs > 0) return;
  integrate(gpu, now);
  gpu.cached -= it->bytes;
  gpu.models.erase(it);
  changed(g, now);
}

void GpuMemory::wipe(GpuId g, double now) {
  Gpu& gpu = gpus_[index(g)];
  FLEETSIM_CHECK(gpu.working <= 1e-9 * gpu.capacity && gpu.pinned <= 1e-9 * gpu.capacity, "a failed GPU still runs a task");
  integrate(gpu, now);
  gpu.working = 0;
  gpu.pinned = 0;
  gpu.held = 0;
  gpu.cached = 0;
  gpu.models.clear();
  changed(g, now);
}

double GpuMemory::hold(GpuId g, double bytes, double now) {
  Gpu& gpu = gpus_[index(g)];
  integrate(gpu, now);
  make_room(gpu, bytes);
  const double in_vram = std::clamp(gpu.capacity - gpu.working - gpu.held - gpu.cached, 0.0, bytes);
  spilled_ += bytes - in_vram;
  gpu.held += in_vram;
  changed(g, now);
  return in_vram;
}

void GpuMemory::unhold(GpuId g, double bytes, double now) {
  Gpu& gpu = gpus_[index(g)];
  integrate(gpu, now);
  gpu.held = std::max(0.0, gpu.held - bytes);
  changed(g, now);
}

void GpuMemory::integrate(Gpu& gpu, double now) {
  gpu.used_integral += (gpu.working + gpu.held + gpu.cached) * (now - gpu.changed_s);
  gpu.changed_s = now;
}

void GpuMemory::changed(GpuId g, double now) {
  Gpu& gpu = gpus_[index(g)];
  const double total = gpu.working + gpu.held + gpu.cached;
  FLEETSIM_CHECK(total <= gpu.capacity * (1 + 1e-9) + 1.0, "VRAM use above capacity");
  gpu.peak = std::max(gpu.peak, total);
  if (recording_ && total != gpu.last_recorded) {
    gpu.last_recorded = total;
    samples_.push_back(VramSample{now, g, total});
  }
}

}  // namespace fleetsim
