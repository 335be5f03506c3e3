// Checks of a finished run that must hold whatever the scenario and policy: every task ended
// exactly once in a consistent state, no task started before its inputs were done, no GPU ran two
// tasks at once, times are ordered. simulate() runs them on every run; a failure is a bug in
// fleetsim and throws InternalError. (VRAM and link capacities are checked live, on every change.)
#pragma once

#include "fleetsim/scenario.hpp"
#include "fleetsim/simulation.hpp"

namespace fleetsim {

void check_invariants(const Scenario& scenario, const RunResult& run);

}  // namespace fleetsim
