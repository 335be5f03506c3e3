// Compute time of a task on one GPU. A task that names a model step runs that step's kernels through
// the kernel-time model (fleetsim/kernel_model.hpp): their fixed costs, compute-bound and memory-bound
// times, back to back. Any other task is a roofline: launch overhead plus the larger of the FLOP time at
// the dtype's peak and the memory-traffic time at the HBM bandwidth (their sum on a device that runs
// them back to back). The breakdown says why a task took as long as it did.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fleetsim/catalog.hpp"

namespace fleetsim {

struct ClusterSpec;
class Workflow;

struct TaskSpec;
struct KernelConstants;

struct ComputeEstimate {
  double launch_s = 0;
  double flop_s = 0;    // FLOP / peak
  double memory_s = 0;  // bytes / bandwidth
  bool sequential = false;
  double total_s() const { return launch_s + (sequential ? flop_s + memory_s : std::max(flop_s, memory_s)); }
  bool memory_bound() const { return memory_s > flop_s; }
  // total_s() in parts: time bound by compute, time bound by memory, and the fixed part (launch_s).
  double compute_part_s() const { return sequential || !memory_bound() ? flop_s : 0; }
  double memory_part_s() const { return sequential || memory_bound() ? memory_s : 0; }
};

ComputeEstimate estimate_compute(const GpuType& gpu, double flop, double bytes, Dtype dtype,
                                 std::uint32_t launches);

// How long a trace job recorded on one GPU takes on `gpu`, as a multiple of its recorded duration: the ratio
// of their training throughputs in its precision; none where either has no throughput in the catalog (the
// task's work then runs at `gpu`'s bf16 peak, as any FLOP do).
std::optional<double> recorded_time_factor(const TaskSpec& task, const GpuType& gpu);

// Task compute times for one run: `share` of a task's work on a GPU type (a gang's member does
// 1 / gang of it), a model step's kernels timed once per (task, GPU type, batch) and kept. Not for
// sharing between threads: each run has its own.
// The GPU types of `cluster` whose kernel constants are a guess (KernelModel::guess: borrowed from another
// architecture, or fitted on a GPU unlike it), each with why ("l40s (ada): ..."), where the kernel model times
// something: a workflow's model steps or training iterations, or serving deployments (`serving`). For a run's
// notes and a plan's, never silent.
std::vector<std::string> borrowed_kernel_constants(const ClusterSpec& cluster, const std::vector<Workflow>& workflows, bool serving = false);
// A plan's node types whose GPU's kernel constants are a guess where its workload is timed by them, each with
// why ("l40s (ada): ...", borrowed_kernel_constants of a cluster of that type), in the search's order: its pages
// say so beside the numbers timed on them.
using KernelGuesses = std::vector<std::pair<std::string, std::string>>;
const std::string* kernel_guess(const KernelGuesses& guesses, const std::string& node_type);  // nullptr: none

class ComputeModel {
 public:
  explicit ComputeModel(std::shared_ptr<const KernelConstants> kernels = nullptr);
  ComputeEstimate of(const TaskSpec& task, const GpuType& gpu, double share = 1) const;
  // `members` instances of a model-step task run as one batch: the step at members times its batch.
  ComputeEstimate batched(const TaskSpec& task, const GpuType& gpu, double members) const;

 private:
  ComputeEstimate step(const TaskSpec& task, const GpuType& gpu, double batch_factor) const;
  std::shared_ptr<const KernelConstants> kernels_;
  mutable std::map<std::tuple<const TaskSpec*, const GpuType*, double>, ComputeEstimate> steps_;
};

}  // namespace fleetsim
