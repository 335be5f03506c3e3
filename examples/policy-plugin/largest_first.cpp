// A worked example of a policy plugin: "largest-first" places the ready task that needs the most
// GPU-seconds first, on the free GPUs with the most available VRAM. The build makes it a shared
// library (build/examples/policy-plugin/liblargest_first.so); pass it to fleetsim with
// --policy-plugin and choose it with --set /policy/name=largest-first (or in the scenario).
// A plugin sees exactly what built-in policies see (fleetsim/policy.hpp) and answers the same way.
#include <algorithm>
#include <numeric>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/policy.hpp"

namespace {

class LargestFirst final : public fleetsim::Policy {
 public:
  void schedule(const fleetsim::ClusterView& view, std::span<const fleetsim::ReadyTask> ready,
                fleetsim::Decisions& out) override {
    order_.resize(ready.size());
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      return ready[a].job_s * ready[a].gpus > ready[b].job_s * ready[b].gpus;
    });
    const fleetsim::Cluster& cluster = view.cluster();
    taken_.assign(cluster.gpu_count(), 0);
    for (std::uint32_t i : order_) {
      // The usable GPUs with the most available VRAM, wherever they are.
      free_.clear();
      for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
        const auto gpu = fleetsim::make_id<fleetsim::GpuId>(g);
        if (taken_[g] == 0 && view.is_free(gpu) && view.fits(gpu, ready[i])) free_.push_back(gpu);
      }
      if (free_.size() < ready[i].gpus) continue;
      std::stable_sort(free_.begin(), free_.end(), [&](fleetsim::GpuId a, fleetsim::GpuId b) {
        return view.available_vram_bytes(a) > view.available_vram_bytes(b);
      });
      free_.resize(ready[i].gpus);
      for (fleetsim::GpuId g : free_) taken_[fleetsim::index(g)] = 1;
      out.place(i, free_);
    }
  }

 private:
  std::vector<std::uint32_t> order_;
  std::vector<std::uint8_t> taken_;
  std::vector<fleetsim::GpuId> free_;
};

}  // namespace

extern "C" const fleetsim::PolicyInfo* fleetsim_policy_plugin() {
  static const fleetsim::PolicyInfo info{
      "largest-first",
      "example plugin: the ready task needing the most GPU-seconds first, on the GPUs with the most free VRAM",
      "examples/policy-plugin in the fleetsim repository",
      {},
      [](const fleetsim::PolicyParams&) -> std::unique_ptr<fleetsim::Policy> { return std::make_unique<LargestFirst>(); }};
  return &info;
}
