// What fails, when, and for how long. Every source of failures is a row of one table: the
// scenario's scripted events, then (when their mean times are set) each cable, each GPU, each node
// and each spot node, the random ones with a random stream of their own. An event's subject is its
// source's row. What a failure does to the tasks is the run's business (stop, retry, checkpoint);
// this component also keeps the counts and down time the summary reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/engine.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"
#include "fleetsim/topology.hpp"
#include "occupancy.hpp"

namespace fleetsim::run {

struct FaultSource {
  enum class Kind : std::uint8_t { scripted, cable, gpu, node, spot };
  Kind kind;
  std::uint32_t target;     // scripted: its index in the scenario's events; cable: its link; gpu; node, spot: the node
  std::optional<Rng> rng;   // random sources: their failure and repair times
};

// One failure or repair: a cable (both of its directions), or a range of GPUs.
struct Fault {
  std::optional<std::uint32_t> link = std::nullopt;
  std::uint32_t first_gpu = 0, gpus = 0;
  std::string event = {};  // "GPU n0.g1 failed", "spot node n3 was preempted" (GPU faults)
  double down_s = 0;       // how long it lasts (failures)
  bool preemption = false;  // a spot node taken back, not a failure
  bool node = false;        // a whole node: its host memory is lost too
};

class Faults {
 public:
  Faults(const Scenario& scenario, const Cluster& cluster, const Topology& topology, const Occupancy& occupancy,
         std::uint64_t seed, EventQueue& queue);

  // Schedules the scripted failures and each random source's first one.
  void start();
  const std::vector<FaultSource>& sources() const { return sources_; }
  // kFault: what fails now, drawing how long it lasts. After its effects, schedule_repair.
  Fault fail(std::uint32_t subject);
  void schedule_repair(std::uint32_t subject, double down_s);
  // kRepair: what comes back now. After its effects, schedule_next.
  Fault repair(std::uint32_t subject) const;
  // A random source's next failure.
  void schedule_next(std::uint32_t subject);

  // What the summary reports: GPUs failing and coming back, cables failing.
  void gpu_down(std::uint32_t gpu, bool preemption);
  void gpu_up(std::uint32_t gpu);
  void link_down() { ++link_failures_; }
  void summarize(double end_s, Summary& summary);

 private:
  Fault describe(std::uint32_t subject) const;

  const Scenario& sc_;
  const Cluster& cluster_;
  const Topology& topology_;
  const Occupancy& occupancy_;
  std::uint64_t seed_;
  EventQueue& queue_;
  std::vector<FaultSource> sources_;
  std::vector<double> down_since_;  // per GPU: when it went down
  double down_gpu_s_ = 0;
  std::uint64_t gpu_failures_ = 0, link_failures_ = 0, preemptions_ = 0;
};

}  // namespace fleetsim::run
