// The numbers a run is judged by, computed from its trace: task and workflow counts (nothing is
// lost: every task is completed, failed, running or queued at the end), end-to-end latency
// percentiles overall and per tenant, GPU utilization, cost, and SLO attainment.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fleetsim/serving.hpp"
#include "fleetsim/trace.hpp"

namespace fleetsim {

struct Scenario;
struct TrainingIteration;
class Cluster;
class Topology;

struct Counts {
  std::uint64_t submitted = 0, completed = 0, failed = 0, running = 0, queued = 0;
};

struct LatencyStats {
  std::uint64_t count = 0;
  double mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;
};

struct TenantSummary {
  std::string name;
  Counts workflows;
  LatencyStats latency_s;
  double mean_wait_s = 0;      // tasks' time from ready to placed, averaged over placed tasks
  double mean_slowdown = 0;    // completed workflows' latency / their critical path run alone
  double throughput_per_s = 0; // completed workflows per second of the run
  double gpu_s = 0;            // GPU-seconds its tasks held
};

struct SloResult {
  std::string tenant;  // "" for all tenants (or all of a class); with a deployment, one of its request tenants
  std::string deployment;  // a serving deployment's SLO ("ttft_p95", "tpot_p99", "e2e_p50" in seconds); "" for workflows
  std::string work_class;  // "" for every class
  std::string metric;
  double target = 0;  // in the metric's unit: seconds, workflows per second, or a fraction
  double actual = 0;
  bool at_least = false;  // met when actual >= target (throughput, attainment), else actual <= target
  double within_s = 0;    // attainment's latency bound
  bool met = false;
};
// Whose an SLO is, as the summary and page name it: "all", a tenant, "C (class)", "chat (serving)" or
// "chat pro (serving)" (a serving tenant's).
std::string slo_scope(const SloResult& slo);

// A leaf switch whose uplinks ECMP loaded unevenly: the busiest carried over 1.5 times their mean.
struct UnevenUplinks {
  std::string leaf;
  int uplinks = 0;
  double min_bytes = 0, max_bytes = 0, mean_bytes = 0;
};

// A workflow that carries a recorded run (a WfCommons instance's execution): its makespan as recorded
// beside the mean makespan of its completed instances here.
struct RecordedCheck {
  std::string workflow;
  double recorded_s = 0;
  double simulated_s = 0;      // mean over `instances`
  std::uint64_t instances = 0;  // completed instances of it (0: none, and simulated_s means nothing)
  std::string machines;        // what the recording ran on, as the instance says ("" where it does not)
};

// A training job of the scenario's workload (docs/training.md#inside-a-scenario), over its arrivals.
struct TrainingResult {
  std::shared_ptr<const TrainingIteration> iteration;  // the job, its gang and its iteration alone
  std::string gpu;                  // the GPU type its first iteration ran on
  std::uint64_t iterations = 0;     // submitted, over its arrivals
  std::uint64_t completed = 0;      // of those, completed
  LatencyStats iteration_s;         // each completed iteration, from the previous one's end (the first: its start)
  double alone_s = 0;               // one iteration alone on that GPU type, its reduction on one switch (train's figure)
  double slowdown = 0;              // mean iteration / alone
  double tokens_per_s = 0;          // the job's, at its mean iteration
  double mfu = 0;                   // model FLOP / (mean iteration x GPUs x peak)
  // Its own checkpoint, where it keeps one: saves completed, what one holds an iteration up and what reading
  // it back costs (on that GPU type); failures and preemptions rolled back to it, and the iterations lost so.
  std::uint64_t checkpoints = 0;
  double checkpoint_s = 0, checkpoint_load_s = 0;
  std::uint64_t rollbacks = 0, iterations_rolled_back = 0;
  // An elastic job (iteration->elastic_dp): its completed iterations at each DP degree it may run at (in that
  // order), and the runs of its iterations that paid the restart (placed on other GPUs than the iteration
  // before them ran on; a retry moved again pays again).
  std::vector<std::uint64_t> completed_at_dp;
  std::uint64_t restarts = 0;
};

struct Summary {
  std::string scenario;
  std::string policy;
  bool one_gpu_instances = false;  // instance_placement one-gpu: each instance ran on one GPU, a task at a time
  std::optional<double> max_min_tolerance;  // the scenario's, where it gave one: links shared max-min within it
  std::uint64_t seed = 0;
  std::uint32_t gpus = 0;
  std::uint32_t nodes = 0;
  double makespan_s = 0;   // time of the last task completion
  double end_s = 0;        // when the run stopped: the makespan, or the horizon with work left
  bool horizon_reached = false;
  bool stalled = false;    // the run ran out of events with tasks still waiting for GPUs
  bool diverged = false;   // stopped early: more workflows in flight than RunOptions::max_in_flight
  Counts tasks;
  Counts workflows;
  LatencyStats latency_s;  // workflow instance: arrival to last task completed
  double gpu_utilization = 0;  // busy GPU-seconds / (GPUs x end_s)
  double gpu_busy_s = 0;
  double bytes_transferred = 0;  // edge tensors received from other GPUs
  // Bytes carried, summed over the links of each class (a flow counts once per link it crosses).
  double gpu_link_bytes = 0, host_link_bytes = 0, nic_bytes = 0, fabric_bytes = 0, storage_bytes = 0;
  std::vector<UnevenUplinks> uneven_uplinks;  // leaves whose uplinks ECMP loaded unevenly, most uneven first
  double cost_usd = 0;     // every GPU of the cluster rented until end_s
  // Model swapping: loads of weights not resident on a GPU, their bytes and summed durations.
  std::uint64_t weight_loads = 0;
  double weight_bytes_loaded = 0;
  double weight_load_s = 0;
  std::uint64_t storage_reads = 0;   // of those, loads read from a node's storage (not yet in its host memory)
  std::uint64_t evictions = 0;        // cached models dropped to make room
  double spilled_bytes = 0;           // output tensors that did not fit in VRAM, kept in host memory
  std::uint64_t batches = 0;          // batches of two or more tasks run together (serving-style batching)
  std::uint64_t batched_tasks = 0;    // tasks that ran in them
  std::uint64_t offloaded_tasks = 0;  // runs that kept part of their working set in host memory
  double offload_bytes = 0;           // those parts, summed (each crossed the host link out and back)
  double vram_peak_utilization = 0;   // highest use / capacity of any GPU
  double vram_utilization = 0;        // time-averaged use / capacity over all GPUs
  double energy_j = 0;                // busy GPU-seconds at TDP plus idle GPU-seconds at idle power
  double fairness = 1;                // Jain's index over tenants of GPU-seconds per unit of quota
  // Faults: GPU failures (a node's count once per GPU), tasks stopped by them, retries made; GPU-seconds
  // of stopped runs not saved by a checkpoint; the share of GPU-time the GPUs were up; the share of
  // held GPU-time whose work was kept; mean time from a stop to the task's next start.
  std::uint64_t gpu_failures = 0, spot_preemptions = 0, tasks_stopped = 0, retries = 0;
  std::uint64_t tasks_preempted = 0;  // by the policy (each run again at once)
  // Link faults: cables that failed (both directions count once), and sending flows moved to a new
  // route when a link of theirs failed.
  std::uint64_t link_failures = 0, flows_rerouted = 0;
  std::uint64_t resizes = 0;          // elastic tasks moved onto a larger or smaller gang
  double restart_gpu_s = 0;           // GPU-time their new gangs spent restarting (busy, not computing)
  double lost_gpu_s = 0, availability = 1, goodput = 1, mean_recovery_s = 0;
  // Autoscaling: node-seconds on (billed; cost_usd then counts only these), nodes started and stopped.
  double node_s_on = 0;
  std::uint64_t nodes_started = 0, nodes_stopped = 0;
  std::uint64_t events = 0;
  // The network's max-min work (not in the outputs, for benchmarks): re-levellings, flows they re-solved,
  // whole-component solves among them.
  std::uint64_t relevellings = 0, flows_solved = 0, component_solves = 0;
  std::vector<TenantSummary> tenants;
  // Per work class (batch, interactive), when the scenario has interactive tenants; mean_slowdown unset.
  std::vector<TenantSummary> classes;
  std::vector<SloResult> slos;
  std::vector<ServingResult> serving;  // per serving deployment of the scenario, in its order
  std::vector<TrainingResult> training;  // per training job of the workload, in its order
  std::vector<RecordedCheck> recorded_runs;  // per workflow with a recorded run, in the scenario's order
};

// An SLO metric's value as text in its unit: "12.5 s", "2.5 /s", "95.0%".
std::string format_slo_value(const std::string& metric, double value);

// Percentile by linear interpolation between closest ranks (the "type 7" definition); p in [0, 100].
double percentile(std::vector<double> values, double p);
LatencyStats latency_stats(std::vector<double> values);

// A workflow instance's end-to-end latency as the summary measures it: completed, and arrived past the
// warm-up; none otherwise.
std::optional<double> measured_latency(const Scenario& scenario, const InstanceRecord& instance);

// The summary of a run, summed over its instances and their tasks in id order. A run that keeps every
// record adds them all at its end; one that drops ended instances' records as it goes adds each prefix
// before it is dropped and the rest at its end: the same additions in the same order, so the same summary.
class SummaryFold {
 public:
  SummaryFold(const Scenario& scenario, const Cluster& cluster);
  // The first `instances` instances held in `trace` and their tasks. A task still running counts its
  // GPU time to `end_s`. GPUs shared by several tasks (time slicing, batches) and gangs left (resizes,
  // stops) are shared out over the tasks added together: add them all at once.
  void add(const Trace& trace, std::size_t instances, double end_s);
  // Everything else, from what the run kept to its end (weight loads, gangs left, the training jobs'
  // iterations from the records still held, the links' bytes).
  Summary finish(const Trace& trace, const Topology& topology, const std::vector<double>& link_bytes, double end_s,
                 bool horizon_reached, std::uint64_t seed, std::uint64_t events);

 private:
  const Scenario& sc_;
  const Cluster& cluster_;
  Summary s_;                                   // the counts and sums so far
  std::vector<double> busy_per_gpu_;            // seconds each GPU held a task
  std::vector<std::vector<double>> latencies_;  // per tenant: its instances' measured latencies
  std::vector<double> waited_, placed_;         // per tenant: ready-to-start seconds and tasks placed
  std::vector<std::uint64_t> slo_submitted_, slo_within_;  // per SLO (attainment)
  std::vector<double> recorded_s_;              // per workflow with a recorded run: its instances' latencies
  std::vector<std::uint64_t> recorded_n_;
};

// The summary of a trace holding every record (a measured run's): a SummaryFold of all of it.
Summary summarize(const Scenario& scenario, const Cluster& cluster, const Topology& topology, const Trace& trace,
                  const std::vector<double>& link_bytes, double end_s, bool horizon_reached, std::uint64_t seed,
                  std::uint64_t events);

}  // namespace fleetsim
