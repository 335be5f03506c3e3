// One simulation of one scenario: load, build, run until done (or the horizon), report.
// A Simulation owns all of its state, so several run side by side on threads.
#pragma once

#include <functional>

#include <cstdint>
#include <optional>

#include "fleetsim/cluster.hpp"
#include "fleetsim/memory.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/trace.hpp"

namespace fleetsim {

struct RunOptions {
  std::optional<std::uint64_t> seed = {};  // the scenario's seed when absent
  bool record_link_samples = false;   // every change of every link's load and GPU's VRAM, for timelines
  // Stop early once more workflow instances than this have arrived and not finished (0: never): a
  // queue that grows without bound shows itself here long before the horizon. The summary says
  // `diverged`, and what had arrived and not ended counts as running or queued.
  std::uint64_t max_in_flight = 0;
  // Called now and then (every 2^16 events) with the workflow instances ended so far and in all.
  std::function<void(std::size_t done, std::size_t total)> progress = {};
  // Keep every instance's and task's record in the trace to the end (what outputs that list tasks read).
  // False lets a run fold the records of ended instances into its summary and drop them as it goes, so
  // that its memory grows with the instances in flight rather than with all of them; the summary is the
  // same. Runs whose summary needs records read together keep them all anyway: GPUs time-sliced or
  // batched, runs that may stop tasks (failures, spot, preemption, elastic resizes), training jobs.
  bool keep_records = true;
};

// The cluster's billing rate from `time_s` on: the nodes billed then, at their hourly prices (spot
// nodes at their factor; with an autoscaler, only nodes on or provisioning).
struct CostSample {
  double time_s;
  double usd_per_hour;
};

struct RunResult {
  Cluster cluster;
  Topology topology;
  Trace trace;
  Summary summary;
  std::vector<double> link_bytes;        // per topology link
  std::vector<LinkSample> link_samples;  // when recorded
  std::vector<VramSample> vram_samples;  // when recorded
  std::vector<CostSample> cost_samples = {};  // when recorded: at the start and at every change
  // A hash of every event popped, in order (time, kind, subject): a refactor that keeps it keeps the run.
  std::uint64_t event_digest = 0;
};

RunResult simulate(const Scenario& scenario, const RunOptions& options = {});

}  // namespace fleetsim
