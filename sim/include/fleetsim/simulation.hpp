// One simulation of one scenario: load, build, run until done (or the horizon), report.
// A Simulation owns all of its state, so several run side by side on threads.
#pragma once

#include <cstdint>
#include <optional>

#include "fleetsim/cluster.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/summary.hpp"
#include "fleetsim/trace.hpp"

namespace fleetsim {

struct RunResult {
  Cluster cluster;
  Trace trace;
  Summary summary;
};

// Runs the scenario with its own seed, or with `seed` when given.
RunResult simulate(const Scenario& scenario, std::optional<std::uint64_t> seed = std::nullopt);

}  // namespace fleetsim
