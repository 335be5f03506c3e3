// What every replay of a plan must satisfy, whichever way it ran (one process, or ranks under mpirun).
#pragma once

#include <string>
#include <vector>

#include "fleetsim/simulation.hpp"

namespace fleetsim::test {

// The ways `measured` breaks the rules of a replay of `plan` (empty: none): the same task records on the
// same devices, completed where the plan completed them; phases in order (ready, start, compute,
// communication, end) and no start before the instance arrived; producers ended before their consumers
// started; no two tasks at once on a device; each weight load made again, inside its task's placement
// phase.
std::vector<std::string> replay_problems(const Scenario& scenario, const RunResult& plan, const RunResult& measured);

}  // namespace fleetsim::test
