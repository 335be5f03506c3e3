// Test helpers: scenarios built from inline JSON over the round-number test catalog.
#pragma once

#include <string>

#include "fleetsim/scenario.hpp"

namespace fleetsim::test {

// Directory of tests/data in the source tree.
std::string data_dir();
// Directory of the source tree.
std::string source_dir();

// A scenario whose "catalog" is the test catalog; `body` is the rest of the scenario object's fields.
Scenario unit_scenario(const std::string& body);
// A scenario over the built-in catalog alone; `body` is the rest of its fields.
Scenario builtin_scenario(const std::string& body);

// The message of the InputError that loading this scenario JSON throws ("" if it loads).
std::string scenario_error(const std::string& json);

}  // namespace fleetsim::test
