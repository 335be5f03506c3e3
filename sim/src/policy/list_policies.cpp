#include "list_policies.hpp"

#include <algorithm>

#include "fleetsim/cluster.hpp"
#include "fleetsim/workflow.hpp"
#include "greedy.hpp"

namespace fleetsim::policies {
namespace {

class Fifo final : public Greedy {
  bool blocks() const override { return true; }
};

class ShortestJobFirst final : public Greedy {
  bool orders_by_key() const override { return true; }
  bool keys_fixed() const override { return true; }
  double order_key(const ClusterView&, const ReadyTask& t) const override { return t.job_s; }
};

class Priority final : public Greedy {
 public:
  Priority(bool backfill, bool preempt) : backfill_(backfill), preempt_(preempt) {}

 private:
  bool orders_by_key() const override { return true; }
  bool keys_fixed() const override { return true; }
  double order_key(const ClusterView&, const ReadyTask& t) const override { return -ClusterView::rank_of(t.priority, t.interactive); }
  bool blocks() const override { return !backfill_; }
  bool makes_room() const override { return preempt_; }
  bool backfill_, preempt_;
};

class LeastLoaded final : public Greedy {
  bool cost_is_gpu_number() const override { return false; }
  Cost cost(const ClusterView& view, const ReadyTask&, GpuId gpu) const override {
    // The node with the most free GPUs first; within it, the lowest-numbered GPU.
    return {-static_cast<double>(view.free_gpus(view.cluster().node_of(gpu))), static_cast<double>(index(gpu)), 0};
  }
};

class MemoryAware final : public Greedy {
  bool cost_is_gpu_number() const override { return false; }
  Cost cost(const ClusterView& view, const ReadyTask& task, GpuId gpu) const override {
    // Model affinity first (no load at all), then the fewest cached bytes evicted, then best fit:
    // the least VRAM left over.
    const bool resident = task.model != kNoModel && view.resident(gpu, task.model);
    const double working_set = task.working_set_on(view.cluster().gpu_type(gpu).vram_bytes);
    const double need = resident ? working_set : task.weights_per_gpu_bytes + working_set;
    const double evicted = std::max(0.0, need - view.unused_vram_bytes(gpu));
    return {resident ? 0.0 : 1.0, evicted, view.available_vram_bytes(gpu) - need};
  }
};

class Locality final : public Greedy {
  bool cost_is_gpu_number() const override { return false; }
  Cost cost(const ClusterView& view, const ReadyTask& task, GpuId gpu) const override {
    if (task.input_gpu == kNoGpu) return {0, static_cast<double>(index(gpu)), 0};
    const GpuId input = make_id<GpuId>(task.input_gpu);
    const double distance = gpu == input ? 0 : view.cluster().node_of(gpu) == view.cluster().node_of(input) ? 1 : 2;
    return {distance, static_cast<double>(index(gpu)), 0};
  }
};

class CriticalPath final : public Greedy {
  bool orders_by_key() const override { return true; }
  bool keys_fixed() const override { return true; }
  double order_key(const ClusterView&, const ReadyTask& t) const override { return -t.rank_s; }
};

// Online HEFT: tasks by upward rank; each on the free GPU where it would finish earliest, counting
// its compute on that GPU's type, its inputs' transfer and a weights load if the model is not there.
class Heft final : public Greedy {
  bool cost_is_gpu_number() const override { return false; }
  bool orders_by_key() const override { return true; }
  bool keys_fixed() const override { return true; }
  double order_key(const ClusterView&, const ReadyTask& t) const override { return -t.rank_s; }
  Cost cost(const ClusterView& view, const ReadyTask& task, GpuId gpu) const override {
    const Cluster& cluster = view.cluster();
    const NodeGroup& group = cluster.group(cluster.node_of(gpu));
    double finish = view.compute_estimate_s(task, gpu);
    if (task.input_gpu != kNoGpu && task.input_gpu != index(gpu)) {
      const bool same_node = cluster.node_of(make_id<GpuId>(task.input_gpu)) == cluster.node_of(gpu);
      finish += task.input_bytes / (same_node ? group.gpu_link.bandwidth_Bps : group.nic.bandwidth_Bps);
    }
    if (task.model != kNoModel && !view.resident(gpu, task.model)) {
      finish += task.weights_per_gpu_bytes / group.host_link.bandwidth_Bps;
    }
    return {finish, static_cast<double>(index(gpu)), 0};
  }
};

// Dominant resource fairness over one resource, GPUs: the tenant holding the smallest share of GPUs
// for its quota goes first.
class Drf final : public Greedy {
  bool orders_by_key() const override { return true; }
  bool keys_per_tenant() const override { return true; }
  double order_key(const ClusterView& view, const ReadyTask& t) const override { return view.tenant_gpus(t.tenant) / view.tenant_quota(t.tenant); }
};

// Finish-time fairness (Themis): the instance whose predicted finish time, shared, is the largest
// multiple of its run time alone goes first: rho = (waited so far + remaining) / alone.
class FinishTimeFair final : public Greedy {
  bool orders_by_key() const override { return true; }
  double order_key(const ClusterView& view, const ReadyTask& t) const override {
    const double alone = std::max(t.job_s, 1e-9);
    return -(view.now() - t.arrival_s + t.rank_s) / alone;
  }
};

}  // namespace

std::unique_ptr<Policy> make_drf(const PolicyParams&) { return std::make_unique<Drf>(); }
std::unique_ptr<Policy> make_ftf(const PolicyParams&) { return std::make_unique<FinishTimeFair>(); }

std::unique_ptr<Policy> make_fifo(const PolicyParams&) { return std::make_unique<Fifo>(); }
std::unique_ptr<Policy> make_sjf(const PolicyParams&) { return std::make_unique<ShortestJobFirst>(); }
std::unique_ptr<Policy> make_priority(const PolicyParams& p) { return std::make_unique<Priority>(p.boolean("backfill"), p.boolean("preempt")); }
std::unique_ptr<Policy> make_least_loaded(const PolicyParams&) { return std::make_unique<LeastLoaded>(); }
std::unique_ptr<Policy> make_memory_aware(const PolicyParams&) { return std::make_unique<MemoryAware>(); }
std::unique_ptr<Policy> make_locality(const PolicyParams&) { return std::make_unique<Locality>(); }
std::unique_ptr<Policy> make_critical_path(const PolicyParams&) { return std::make_unique<CriticalPath>(); }
std::unique_ptr<Policy> make_heft(const PolicyParams&) { return std::make_unique<Heft>(); }

}  // namespace fleetsim::policies
