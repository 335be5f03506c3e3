// What both real backends share: sizes read off the plan, and the measured trace turned into a run
// result with its summary, in the simulator's schema.
#pragma once

#include <cmath>
#include <cstddef>

#include "fleetsim/simulation.hpp"

namespace fleetsim::replay {

// Floats in one member's collective buffer: the data as sent (compression included).
inline std::size_t collective_floats(const TaskSpec& s) {
  return static_cast<std::size_t>(std::ceil(s.collective->bytes * s.collective->compression / sizeof(float)));
}

// The plan's cluster and topology with the measured trace: instance ends and failures from their
// tasks, and the summary of the measured run (no link traffic is recorded).
RunResult measured_result(const Scenario& scenario, const RunResult& plan, Trace trace);

}  // namespace fleetsim::replay
