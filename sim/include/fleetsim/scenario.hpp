// A scenario: one what-if, runnable as is. Cluster + workload + policy + SLOs + seed + horizon.
// Loading checks everything a simulation would trip over later (unknown references, cycles, a task
// that fits no GPU) and throws one InputError listing every problem with its file and field.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/policy.hpp"
#include "fleetsim/workflow.hpp"

namespace fleetsim {

struct ServingDeployment;

// `count` nodes of one node type, with the catalog entries resolved and overrides applied.
struct NodeGroup {
  NodeType node;  // with MIG, node.gpus counts slices
  GpuType gpu;    // with MIG, one slice: a share of the GPU's compute, bandwidth, power and price
  LinkType gpu_link;
  LinkType host_link;
  LinkType nic;
  int count = 0;
  int mig_slices = 1;  // each physical GPU split into this many MIG instances (1: not split)
  // Time slicing: each GPU (or MIG instance) runs up to this many tasks at once, taking turns; each
  // extra task costs this share of the GPU's throughput (1 task: exclusive; see docs/simulate.md).
  int time_sliced_tasks = 1;
  double interference = 0;
};

enum class FabricKind { single_switch, fat_tree, rail_optimized };
std::string_view fabric_kind_name(FabricKind kind);

// How nodes' NICs are joined. single-switch: one switch for all NICs. fat-tree: nodes grouped
// under leaf switches, leaves joined by spines. rail-optimized: NIC k of every node of a group
// on leaf (group, k), leaves joined by spines. A leaf's uplink bandwidth is its downlink
// bandwidth divided by the oversubscription ratio, spread over the spines.
struct FabricSpec {
  FabricKind kind = FabricKind::single_switch;
  std::optional<LinkType> link;  // switch-to-switch links; default: the first node group's NIC type
  int nodes_per_leaf = 0;        // 0: every node under one leaf
  double oversubscription = 1.0;
  int spines = 0;                // 0: one per uplink port (downlink ports / oversubscription)
};

// Each node's local storage, where model weights start: the first load of a model on a node reads
// it from there into host memory (which keeps it), over a link of this bandwidth and latency.
struct StorageSpec {
  double bandwidth_Bps = 0;
  double latency_s = 0;
};

struct ClusterSpec {
  std::vector<NodeGroup> groups;
  FabricSpec fabric;
  std::optional<StorageSpec> storage;  // none: weights start in host memory

  int node_count() const {
    int n = 0;
    for (const NodeGroup& g : groups) n += g.count;
    return n;
  }
  int gpu_count() const {
    int n = 0;
    for (const NodeGroup& g : groups) n += g.count * g.node.gpus;
    return n;
  }
  // Every GPU rented for a month (730 hours) at its hourly price (a node's own price is spread over its
  // GPUs when the cluster is read).
  double usd_per_month() const {
    double usd_per_hour = 0;
    for (const NodeGroup& g : groups) usd_per_hour += g.gpu.price_usd_per_hour * g.node.gpus * g.count;
    return usd_per_hour * 730;
  }
};

// once: `count` at start. periodic: every interval. poisson: exponential gaps at `rate`.
// times: at listed offsets. bursty: a two-state Markov-modulated Poisson process (on and off
// periods of exponential length, rate `rate` when on and `off_rate` when off). diurnal: Poisson
// whose rate follows rate x (1 + amplitude x cos(2 pi (t - peak) / period)). closed: `users`
// users, each submitting, waiting for the workflow to finish, thinking (exponential, mean `think`),
// and submitting again; `count` is per user.
enum class ArrivalProcess { once, periodic, poisson, times, bursty, diurnal, closed };

struct ArrivalSpec {
  ArrivalProcess process = ArrivalProcess::once;
  double start_s = 0;
  double interval_s = 0;   // periodic
  double rate_per_s = 0;   // poisson, bursty (on), diurnal (mean)
  double off_rate_per_s = 0, on_s = 0, off_s = 0;  // bursty
  double amplitude = 0, period_s = 86400, peak_s = 0;  // diurnal
  std::int64_t users = 0;  // closed
  double think_s = 0;      // closed
  std::int64_t count = 1;  // -1: until the horizon
  std::vector<double> times_s;  // times: offsets from start_s
  std::vector<double> work_scales;  // times: each arrival's work over the workflow's (trace replay); empty: 1
};

// Interactive work waits for answers (chat, a designer at a UI); batch work waits for throughput.
// Reported apart; a preemptive policy lets interactive work displace batch work of equal priority.
enum class WorkClass : std::uint8_t { batch, interactive };
std::string_view work_class_name(WorkClass c);

struct Tenant {
  std::string name;
  int priority = 0;
  double quota = 1;  // share weight for fair-share policies
  WorkClass work_class = WorkClass::batch;
  std::vector<std::uint32_t> nodes;  // pinned: its tasks run only on these nodes (empty: anywhere)
  bool exclusive = false;            // its nodes run no other tenant's tasks
  bool private_gpus = false;         // with MIG: no instance of a GPU it uses runs another tenant's task
};

// Whether each tenant may run on each node (row-major, tenants x nodes): among its pinned nodes, and
// not kept by another, exclusive tenant.
std::vector<std::uint8_t> tenant_node_allowed(const std::vector<Tenant>& tenants, std::uint32_t nodes);

// Arrivals of one workflow for one tenant.
struct Stream {
  std::uint32_t tenant = 0;
  std::uint32_t workflow = 0;
  ArrivalSpec arrival;
};

// Latency percentiles (at most the target), throughput in completed workflows per second of the run
// (at least), and attainment: the fraction of submitted workflows that completed within a latency
// bound (at least).
enum class SloMetric { latency_p50, latency_p95, latency_p99, throughput, attainment };
std::string_view slo_metric_name(SloMetric metric);

struct Slo {
  std::optional<std::uint32_t> tenant;  // none: every tenant together (or every tenant of the class)
  std::optional<WorkClass> work_class;  // none: every class
  SloMetric metric = SloMetric::latency_p95;
  double target = 0;    // seconds, workflows per second, or a fraction, as the metric reads
  double within_s = 0;  // attainment: the latency bound
  bool at_least() const { return metric == SloMetric::throughput || metric == SloMetric::attainment; }
};

// Failures of GPUs, nodes and the fabric's cables, scripted or random, and what happens to the tasks
// they hit. A failed GPU loses its VRAM and runs nothing until it is repaired; a task running on it
// stops and is retried (after a backoff) until its attempts run out, resuming from its last
// checkpoint. A failed cable carries nothing until it is repaired: flows on it are rerouted, and a
// task whose flow has no route left is stopped as a failure stops it.
struct FaultEvent {
  double at_s = 0;
  std::uint32_t gpu_first = 0, gpu_count = 1;  // a GPU, or a node's GPUs (none for a link)
  std::optional<std::uint32_t> link;           // a cable: the topology's link as named (both directions fail)
  std::string what;                            // "GPU n0.g1", "node n0" or "link leaf0>spine1", for reasons
  double down_s = std::numeric_limits<double>::infinity();  // until repaired; infinity: for good
};

struct FaultSpec {
  std::vector<FaultEvent> events;
  double gpu_mtbf_s = 0, gpu_mttr_s = 0;    // random GPU failures (exponential); 0: none
  double node_mtbf_s = 0, node_mttr_s = 0;  // random node failures
  double link_mtbf_s = 0, link_mttr_s = 0;  // random failures of each cable (NIC and fabric links)
  int max_attempts = 1;                     // runs of a task before it fails for good
  double backoff_s = 0;                     // wait before a retry is ready
  double checkpoint_interval_s = 0;         // of compute time; 0: no checkpoints
  double restore_s = 0;                     // paid when resuming from a checkpoint
  bool any() const { return !events.empty() || gpu_mtbf_s > 0 || node_mtbf_s > 0 || link_mtbf_s > 0; }
};

// Spot capacity: the last `nodes` nodes of the cluster cost `price_factor` of their price and are
// preempted at random (exponential times with mean `mtbp` per node), coming back after a time with
// mean `restock`. A preemption stops tasks as a node failure does (retries and checkpoints apply).
struct SpotSpec {
  int nodes = 0;
  double price_factor = 1;
  double mtbp_s = 0;
  double restock_s = 0;
  bool any() const { return nodes > 0; }
};

// An autoscaler over the cluster's nodes: the cluster lists the most nodes there can be; the
// autoscaler keeps some of them on. Every `interval` it picks a node count: `utilization` so that
// running and waiting tasks' GPUs fill `target_utilization` of the nodes on; `queue` one more node
// while the oldest waiting task has waited over `target_wait`, one fewer when nothing waits and a
// node's worth of GPUs is idle; `schedule` the count of the latest entry of a daily table. A node
// turned on is billed from then and usable after `provisioning`, with empty VRAM; a node turned off
// drains: it takes no new work and goes off as its tasks end. Only nodes on are billed. Scaling in
// waits out `scale_in_window` (the most nodes wanted over it), so a dip does not churn nodes.
struct AutoscaleSpec {
  enum class Policy : std::uint8_t { none, utilization, queue, schedule } policy = Policy::none;
  int min_nodes = 1, initial_nodes = 1;
  double interval_s = 60;
  double target_utilization = 0.7;
  double target_wait_s = 30;
  std::vector<std::pair<double, int>> schedule;  // (time of day, nodes), by time
  double period_s = 86400;
  double provisioning_s = 0;
  double scale_in_window_s = 300;  // scale in only to the most nodes wanted over this past window
  bool on() const { return policy != Policy::none; }
};

struct PolicySpec {
  std::string name = "fifo";
  PolicyParams params;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;
  std::uint64_t seed = 1;
  double horizon_s = std::numeric_limits<double>::infinity();
  // Workflows that arrive before this are run but not measured: latencies, their percentiles and SLOs
  // leave out the cold start of an open arrival stream.
  double warmup_s = 0;
  // A run that pops more events than this is stopped with an error: one that would not end (a fault
  // every nanosecond) ends in minutes, not never. A billion is over ten times the largest run measured.
  std::uint64_t max_events = 1'000'000'000;
  // The network's max-min sharing within this relative tolerance (Network: exact, up to rounding, unless given):
  // a bounded-error option that caps what a flow's start or end costs on a congested fabric.
  std::optional<double> max_min_tolerance;
  Catalog catalog;
  ClusterSpec cluster;
  std::vector<Workflow> workflows;
  std::vector<Tenant> tenants;
  std::vector<Stream> streams;
  PolicySpec policy;
  std::vector<Slo> slos;
  // When the run can no longer place a waiting task (its VRAM held by tensors that wait for it):
  // leave it queued and flag the run as stalled, or fail it with an out-of-memory reason.
  enum class OnStall { wait, fail } on_stall = OnStall::wait;
  // The largest share (0 to 1) of a task's working set that may be offloaded to host memory when it
  // does not fit in VRAM otherwise; the offloaded bytes cross the GPU's host link out and back.
  double max_offload = 0;
  FaultSpec faults;
  SpotSpec spot;
  AutoscaleSpec autoscale;
  // How an instance's tasks find GPUs: each placed by the policy wherever it fits (spread, as
  // workflow-native platforms run graphs), or the whole instance on the one GPU its first task got, a
  // task at a time, that GPU held for it until it ends (one_gpu: stock ComfyUI, a prompt to a GPU).
  enum class InstancePlacement { spread, one_gpu } instance_placement = InstancePlacement::spread;
  // LLM serving deployments beside the workflows (fleetsim/serving.hpp): replicas placed on the cluster
  // before anything else runs, holding their GPUs for the whole run.
  std::vector<std::shared_ptr<const ServingDeployment>> serving;
};

// The first thing the scenario's seed decides ("poisson arrivals of workflow \"chat\""): arrival draws,
// drawn work sizes, random failures, spot preemptions, serving requests; "" when it draws nothing at
// random (a trace replay, scripted arrivals), so that every seed gives the same run.
std::string seed_use(const Scenario& scenario);

// A what-if edit applied before the scenario is read: the value at a JSON pointer replaced (or
// created) with `value`, which is JSON text, or else taken as a plain string.
struct ScenarioEdit {
  std::string pointer;  // "/cluster/nodes/0/node_overrides/nic"
  std::string value;    // "\"ib-hdr\"", "ib-hdr", "4", "{...}"
};

Scenario load_scenario(const std::string& path, std::span<const ScenarioEdit> edits = {});
// `base_dir` resolves relative paths of workflow and catalog files.
Scenario parse_scenario(std::string_view json_text, const std::string& file_name, const std::string& base_dir,
                        std::span<const ScenarioEdit> edits = {});

// A cluster on its own: a file holding a scenario's "cluster" object (over the built-in catalog),
// or a whole scenario file, whose cluster is taken.
ClusterSpec load_cluster(const std::string& path);
// `count` nodes of a built-in node type on one switch; an unknown type is an InputError listing the known ones.
ClusterSpec cluster_of(const std::string& node_type, int count);

}  // namespace fleetsim
