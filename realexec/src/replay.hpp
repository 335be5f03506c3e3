// What both real backends share: sizes read off the plan, and the measured trace turned into a run
// result with its summary, in the simulator's schema.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "fleetsim/simulation.hpp"

namespace fleetsim::replay {

// Whether a replay runs the collective: not one that only groups split across nodes run (a training job's TP
// all-reduces, which its compute holds): a replay runs a task's collectives over its whole gang, knowing no
// nodes, so it runs none of those (where the plan split a group, the replayed iteration lacks them).
inline bool replays(const CollectiveSpec& c) { return !c.split_groups_only; }
// Whether a replay runs any of the task's collectives: its gang then meets for them.
inline bool communicates(const TaskSpec& s) { return std::any_of(s.collectives.begin(), s.collectives.end(), replays); }
// Floats in one member's collective buffer: the data as sent (compression included).
inline std::size_t collective_floats(const CollectiveSpec& c) { return static_cast<std::size_t>(std::ceil(c.bytes * c.compression / sizeof(float))); }
// The buffer the task's largest collective needs (0: it has none); its collectives run one after another.
inline std::size_t collective_floats(const TaskSpec& s) {
  std::size_t most = 0;
  for (const CollectiveSpec& c : s.collectives) {
    if (replays(c)) most = std::max(most, collective_floats(c));
  }
  return most;
}

// How a plan is replayed: each instance's first task record, each task's weight loads, and the
// tasks the plan completed (the only ones replayed) in the plan's start order, ties broken by position in
// the workflow's topological order (a task of no duration can start with its consumer), then by record.
// Those tasks' records in `trace` are reset to queued with no times; the others keep the plan's status
// and reason.
struct PlanIndex {
  std::vector<std::uint32_t> first_record;               // per instance
  std::vector<std::vector<std::uint32_t>> loads_of;      // per task: into trace.weight_loads
  std::vector<std::uint32_t> replayed;                   // task records, in the plan's start order
  std::uint32_t record_of(InstanceId instance, std::uint32_t task) const { return first_record[index(instance)] + task; }
};
PlanIndex index_plan(const Scenario& scenario, const RunResult& plan, Trace& trace);

// Blocks on `lock` (woken through `changed`) until the instance of task record `rec` has arrived (`t0`
// plus its arrival time) and each of its producers has `ended`; `producer` is called for each, in input
// order. Returns why the task cannot run: a producer that did not complete ("" when none).
std::string wait_for_inputs(const Scenario& scenario, const Trace& trace, const PlanIndex& plan, std::uint32_t rec,
                            std::chrono::steady_clock::time_point t0, std::unique_lock<std::mutex>& lock,
                            std::condition_variable& changed, const std::vector<std::uint8_t>& ended,
                            const std::function<void(std::uint32_t producer)>& producer);

// For times merged from members measured on different clocks (ranks.hpp; GPUs' event clocks): each
// replayed task is ready at its instance's arrival or its last producer's end, and no phase is put
// before the one it follows (a task cannot start before it was ready; clocks agree only to within
// microseconds). Weight loads not made (start kNever) are left alone.
void order_phases(const Scenario& scenario, const PlanIndex& plan, Trace& trace);

// The plan's cluster and topology with the measured trace: instance ends and failures from their
// tasks, and the summary of the measured run (no link traffic is recorded).
RunResult measured_result(const Scenario& scenario, const RunResult& plan, Trace trace);

}  // namespace fleetsim::replay
