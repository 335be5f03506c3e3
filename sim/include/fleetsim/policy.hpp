// The scheduling policy boundary. A policy is told when something changed, sees a read-only view
// of the cluster and the ready queue, and answers with decisions; the simulation validates and
// applies them. Policies are listed in one registry table (policy/registry.cpp) with their parameters.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/ids.hpp"
#include "fleetsim/memory.hpp"

namespace fleetsim {

class Cluster;
struct TaskSpec;

inline constexpr std::uint32_t kNoGpu = 0xFFFFFFFFu;

// A task whose inputs are all done, waiting for GPUs.
struct ReadyTask {
  TaskId task;
  InstanceId instance;
  TenantId tenant;
  const TaskSpec* spec;
  std::uint32_t gpus;         // gang size (an elastic task's: the GPUs free for it now, within its range)
  std::uint32_t model;        // interned model id, kNoModel when the task loads no weights
  double weights_per_gpu_bytes;
  double working_set_bytes;   // per GPU
  double ready_s;
  double arrival_s;           // of its workflow instance
  int priority;               // of its tenant; larger is more important
  bool interactive;           // its tenant's class is interactive
  // Its working set depends on the GPU's size (a decode tiled only on smaller GPUs: TaskSpec::working_set_on);
  // false: working_set_bytes on every GPU.
  bool working_set_by_gpu;
  double rank_s;              // predicted time from this task's start to its workflow's end (critical path)
  double job_s;               // predicted compute time of its whole workflow instance
  double known_scale;         // work declared for this instance over the workflow's (trace jobs); 1 otherwise
  std::uint32_t input_gpu;    // GPU holding most of its input bytes, kNoGpu when it has none
  double input_bytes;         // from other tasks
  // The queue's count of tasks joined when this one joined (set by the queue, from 1): it grows along the queue,
  // so a policy that keeps its own order between rounds finds the tasks that joined since its last round at the
  // end, and a task's place by binary search. A task that leaves and comes back joins again, with a new count.
  // The built-in policies rely on it: a caller of Policy::schedule passes the run's ready queue as it is.
  std::uint64_t joined;
  // Its working set on a GPU of `vram_bytes`.
  double working_set_on(double vram_bytes) const { return working_set_by_gpu ? spec_working_set_on(vram_bytes) : working_set_bytes; }

 private:
  double spec_working_set_on(double vram_bytes) const;  // the spec's (policy.cpp: TaskSpec is whole there)
};

// A task holding GPUs now (a batch's members count as their leader).
struct RunningTask {
  TaskId task;
  InstanceId instance;
  GpuId first_gpu;     // preempting this GPU stops the whole gang
  std::uint32_t gpus;
  double started_s;    // when its gang started (or was last resized)
  double ready_s;      // when it last became ready (joined the queue)
  // The restore (or an elastic restart) its run pays before it computes forward again, once it has begun: from
  // resume_from_s for resume_s (0: none). It holds the GPUs without moving the job on, so it is not service.
  double resume_from_s = 0;
  double resume_s = 0;
  // Of the time since its gang started, what moved the job forward (the restore paid so far left out).
  double served_s(double now_s) const { return (now_s - started_s) - std::clamp(now_s - resume_from_s, 0.0, resume_s); }
  // What is left of the restore it is paying (0 where none is, or it is paid).
  double restore_left_s(double now_s) const { return std::clamp(resume_from_s + resume_s - now_s, 0.0, resume_s); }
};

// What a policy may look at: the cluster's shape, which GPUs are free, their VRAM and which model
// weights they hold.
class ClusterView {
 public:
  // Read-only windows on the run's live arrays.
  struct State {
    std::span<const std::uint8_t> gpu_busy;
    std::span<const std::uint32_t> free_gpus_per_node;
    std::span<const std::uint64_t> nodes_with_free_gpus;  // a bit per node
    std::span<const double> gpu_free_at_s;         // predicted time each GPU is free again (now when free)
    std::span<const std::uint32_t> tenant_gpus;    // GPUs each tenant holds now
    std::span<const double> tenant_quota;          // each tenant's share weight
    std::span<const double> instance_attained_s;   // GPU-seconds each workflow instance has received
    std::span<const double> job_sizes_gpu_s;       // sorted sample of the workload's predicted job sizes
    std::span<const std::uint8_t> tenant_node_allowed;  // tenants x nodes: pinning and exclusive nodes
    std::span<const std::int32_t> gpu_rank;        // what runs on each GPU: its preemption rank (kNoRank when nothing)
    std::span<const double> gpu_started_s;         // when that task started
    std::span<const std::int32_t> gpu_tenant;      // tenant of the task on each GPU (-1: none)
    std::span<const std::uint8_t> tenant_private;  // tenants that share no physical GPU (MIG instances) with others
    std::span<const RunningTask> running;          // in no particular order
    const std::uint32_t* free_gpu_total = nullptr;  // the sum of free_gpus_per_node, kept as GPUs change state
    std::span<const InstanceId> attained_changed;   // instances whose attained service grew since the last round
  };
  static constexpr std::int32_t kNoRank = std::numeric_limits<std::int32_t>::max();
  // Preemption rank of a task: its tenant's priority, interactive above batch at equal priority.
  static std::int32_t rank_of(int priority, bool interactive) { return 2 * priority + (interactive ? 1 : 0); }

  ClusterView(const Cluster& cluster, const GpuMemory& memory, const ComputeModel& compute, State state, double now_s)
      : cluster_(cluster), memory_(memory), compute_(compute), state_(state), now_s_(now_s) {}

  const Cluster& cluster() const { return cluster_; }
  double now() const { return now_s_; }
  // Free: it can take a task now. A time-sliced GPU is free while it runs fewer tasks than it may;
  // idle: free and running nothing.
  bool is_free(GpuId gpu) const { return state_.gpu_busy[index(gpu)] == 0; }
  bool is_idle(GpuId gpu) const { return is_free(gpu) && state_.gpu_rank[index(gpu)] == kNoRank; }
  // Whether any GPU of the cluster is time-sliced (may run several tasks at once).
  bool any_time_sliced() const;
  std::uint32_t free_gpus(NodeId node) const { return state_.free_gpus_per_node[index(node)]; }
  std::uint32_t free_gpu_count() const { return *state_.free_gpu_total; }
  // The first node numbered `from` or higher with a free GPU; node_count() or more when there is none.
  std::uint32_t next_node_with_free(std::uint32_t from) const {
    const auto words = state_.nodes_with_free_gpus;
    for (std::size_t w = from / 64; w < words.size(); ++w) {
      std::uint64_t bits = words[w];
      if (w == from / 64) bits &= ~std::uint64_t{0} << (from % 64);
      if (bits != 0) return static_cast<std::uint32_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(bits)));
    }
    return static_cast<std::uint32_t>(words.size() * 64);
  }
  // When the GPU is predicted to be free: now if it is; never earlier than now.
  double free_at_s(GpuId gpu) const {
    return is_free(gpu) ? now_s_ : std::max(now_s_, state_.gpu_free_at_s[index(gpu)]);
  }
  std::uint32_t tenant_gpus(TenantId tenant) const { return state_.tenant_gpus[index(tenant)]; }
  std::uint32_t tenant_count() const { return static_cast<std::uint32_t>(state_.tenant_quota.size()); }
  // Whether the tenant may run on the node at all: among its pinned nodes and not kept by another tenant.
  bool tenant_may_use(TenantId tenant, NodeId node) const;
  // Whether the tenant may run on this GPU: its node is among its pinned nodes and not kept by another
  // tenant, and, with MIG or time slicing, the same physical GPU runs no other tenant's task where
  // either tenant wants private GPUs.
  // `placed` (optional, per GPU, -1 where none) adds the tenants a policy has placed in this round.
  bool allowed(TenantId tenant, GpuId gpu, std::span<const std::int32_t> placed = {}) const;
  // The preemption rank of the task running on a busy GPU (kNoRank when none runs there: free, down
  // or off), and when it started.
  std::int32_t running_rank(GpuId gpu) const { return state_.gpu_rank[index(gpu)]; }
  double running_since_s(GpuId gpu) const { return state_.gpu_started_s[index(gpu)]; }
  double tenant_quota(TenantId tenant) const { return state_.tenant_quota[index(tenant)]; }
  // GPU-seconds the instance has received from tasks that have released their GPUs.
  double attained_s(InstanceId instance) const { return state_.instance_attained_s[index(instance)]; }
  // The instances whose attained_s grew since the last round's view was taken (a task gave GPUs back, or an
  // elastic one was resized: an instance once or more, in no order, some with nothing added), so a policy that keys waiting tasks by their instance's service can keep its keys between
  // rounds. A round in which the policy is not asked (no task waits, or every GPU is busy under
  // Policy::idle_when_full) counts: such a policy is asked in every round where a task waits.
  std::span<const InstanceId> attained_changed() const { return state_.attained_changed; }
  // The tasks running now; with attained_now_s, what their instance has received up to now.
  std::span<const RunningTask> running() const { return state_.running; }
  double attained_now_s(const RunningTask& t) const { return attained_s(t.instance) + t.served_s(now_s_) * t.gpus; }
  // The distribution of job sizes (GPU-seconds), as a sorted sample of at most 512 quantiles.
  std::span<const double> job_sizes_gpu_s() const { return state_.job_sizes_gpu_s; }
  // VRAM a new task could use: capacity less working sets, held tensors and weights in use.
  double available_vram_bytes(GpuId gpu) const { return memory_.available(gpu); }
  // VRAM free without evicting any cached model.
  double unused_vram_bytes(GpuId gpu) const { return memory_.capacity(gpu) - memory_.used(gpu); }
  bool resident(GpuId gpu, std::uint32_t model) const { return memory_.resident(gpu, model); }
  // Whether the task's share fits this GPU's VRAM (its weights count only if not resident), with
  // as much of its working set offloaded to host memory as the scenario allows.
  bool fits(GpuId gpu, const ReadyTask& task) const {
    return memory_.fits(gpu, task.model, task.weights_per_gpu_bytes, task.working_set_on(memory_.capacity(gpu)));
  }
  // Whether the task's share would fit once the task running there has gone: only held tensors stay
  // (the running task's working set and weights leave, idle cached models can be evicted).
  bool fits_when_free(GpuId gpu, const ReadyTask& task) const {
    return memory_.least_need(gpu, task.model, task.weights_per_gpu_bytes, task.working_set_on(memory_.capacity(gpu))) <= memory_.capacity(gpu) - memory_.held(gpu);
  }
  // The roofline compute time of the task's share on this GPU's type.
  double compute_estimate_s(const ReadyTask& task, GpuId gpu) const;
  double compute_estimate_s(const ReadyTask& task, const GpuType& gpu) const;

 private:
  const Cluster& cluster_;
  const GpuMemory& memory_;
  const ComputeModel& compute_;
  State state_;
  double now_s_;
};

// The answer of one scheduling round. Storage is reused between rounds.
class Decisions {
 public:
  struct Placement {
    std::uint32_t ready_index;
    std::uint32_t gpu_begin, gpu_count;  // into gpus()
  };
  struct Failure {
    std::uint32_t ready_index;
    std::string reason;
  };

  void place(std::size_t ready_index, std::span<const GpuId> gpus);
  void fail(std::size_t ready_index, std::string reason);
  // Stops the task running on this GPU (all its gang) so that its GPUs come free; it is ready again
  // at once and resumes from its last checkpoint, if the scenario keeps checkpoints.
  void preempt(GpuId gpu, std::string reason) { preemptions_.push_back({gpu, std::move(reason), false, 0}); }
  // Preempts as a deep-learning scheduler does, at an iteration boundary: the task saves all it has
  // computed as it stops, and pays `restore_s` to load it back when it runs again.
  void suspend(GpuId gpu, std::string reason, double restore_s) { preemptions_.push_back({gpu, std::move(reason), true, restore_s}); }
  // Asks for a round at this time even if nothing else happens then (a running job crossing a
  // priority threshold). The earliest asked in a round counts; each round asks anew.
  void wake_at(double at_s) { wake_at_s_ = std::min(wake_at_s_, at_s); }
  void clear() {
    placements_.clear();
    failures_.clear();
    preemptions_.clear();
    gpus_.clear();
    wake_at_s_ = std::numeric_limits<double>::infinity();
  }
  struct Preemption {
    GpuId gpu;
    std::string reason;
    bool suspend;      // saves everything computed
    double restore_s;  // paid when it runs again (suspend only)
  };

  const std::vector<Placement>& placements() const { return placements_; }
  const std::vector<Failure>& failures() const { return failures_; }
  const std::vector<Preemption>& preemptions() const { return preemptions_; }
  double wake_at_s() const { return wake_at_s_; }
  std::span<const GpuId> gpus(const Placement& p) const { return {gpus_.data() + p.gpu_begin, p.gpu_count}; }

 private:
  std::vector<Placement> placements_;
  std::vector<Failure> failures_;
  std::vector<Preemption> preemptions_;
  std::vector<GpuId> gpus_;
  double wake_at_s_ = std::numeric_limits<double>::infinity();
};

class Policy {
 public:
  virtual ~Policy() = default;
  // `ready` is in the order tasks became ready (ascending `joined`). Place, fail, or leave (hold) each of them; preempt
  // running tasks (only a policy whose may_preempt() says so).
  virtual void schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) = 0;
  virtual bool may_preempt() const { return false; }
  // Whether a round with no GPU free decides nothing (the policy only places tasks, on free GPUs, and
  // keeps no state that depends on when rounds happen): the run then skips its rounds until one is.
  virtual bool idle_when_full() const { return false; }
};

// ---- The registry ----

using ParamValue = std::variant<double, std::int64_t, bool, std::string>;
// A path is a string naming a file relative to the scenario's directory; the scenario resolves it.
enum class ParamType { number, integer, boolean, string, path };

struct ParamInfo {
  std::string name;
  ParamType type;
  ParamValue default_value;
  std::string help;
};

// A policy's parameters: the scenario's values over the registry's defaults, types checked at load.
class PolicyParams {
 public:
  void set(std::string name, ParamValue value) { values_[std::move(name)] = std::move(value); }
  double number(std::string_view name) const;
  // A number that must be finite and at least 0 (a time, a factor); InputError naming it otherwise.
  double non_negative(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  bool boolean(std::string_view name) const;
  const std::string& string(std::string_view name) const;
  const std::map<std::string, ParamValue, std::less<>>& values() const { return values_; }

 private:
  const ParamValue& at(std::string_view name) const;
  std::map<std::string, ParamValue, std::less<>> values_;
};

struct PolicyInfo {
  std::string name;
  std::string summary;
  std::string reference;
  std::vector<ParamInfo> params;
  std::unique_ptr<Policy> (*make)(const PolicyParams& params);
};

// Every policy: the registry table's, then those registered from plugins. Entries never move, so
// pointers to them stay valid.
const std::deque<PolicyInfo>& policy_registry();

// Adds a policy (from a plugin); a name already taken is an InputError. Call before simulating:
// the registry is not guarded against runs on other threads.
void register_policy(PolicyInfo info, const std::string& origin);

// Loads a shared library that defines
//   extern "C" const fleetsim::PolicyInfo* fleetsim_policy_plugin();
// and registers the policy it returns. Failures are InputErrors naming the file.
void load_policy_plugin(const std::string& path);
// nullptr when no policy has this name.
const PolicyInfo* find_policy(std::string_view name);
// "fifo, sjf, ..." for error messages.
std::string policy_names();
std::vector<std::string> policy_ids();  // the registered names, in order
std::string_view param_type_name(ParamType type);

}  // namespace fleetsim
