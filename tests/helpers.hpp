// Test helpers: scenarios built from inline JSON over the round-number test catalog.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "fleetsim/plan.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim::test {

// Directory of tests/data in the source tree.
std::string data_dir();
// Directory of the source tree.
std::string source_dir();
// The shipped scenarios (scenarios/*.json, not its folders), sorted by path.
std::vector<std::string> shipped_scenarios();

// A scenario whose "catalog" is the test catalog; `body` is the rest of the scenario object's fields.
Scenario unit_scenario(const std::string& body);
// A scenario over the built-in catalog alone; `body` is the rest of its fields.
Scenario builtin_scenario(const std::string& body);

// The message of the InputError that loading this scenario JSON throws ("" if it loads).
std::string scenario_error(const std::string& json);
// The message of the InputError that reading this serving deployment JSON (as "d.json") throws ("" if it reads).
std::string serving_error(const std::string& json);

// An exhaustive plan over 1 to `max_nodes` nodes of `node_type` (one seed a point, one to confirm) of the
// scenario `base_json`, written to a temporary folder for the run and removed after it.
PlanResult plan_over_node_counts(const std::string& base_json, const std::string& node_type, int max_nodes);
// The searched (not confirmation) point of `result` at `nodes` nodes; none if the plan has none.
const PlanPoint* searched_point(const PlanResult& result, int nodes);

// Every process's text to every process, in rank order (an all-gather), as plan, compare and train --search take it.
using Exchange = std::function<std::vector<std::string>(const std::string& mine)>;
// Runs `run` as ranks 0 and 1 on two threads, their exchange an all-gather through shared slots (what MPI does
// between processes), and waits for both.
void on_two_ranks(const std::function<void(unsigned rank, const Exchange& exchange)>& run);

}  // namespace fleetsim::test
