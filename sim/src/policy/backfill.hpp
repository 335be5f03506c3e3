// Gang scheduling with backfilling over user run-time estimates, as batch schedulers (Slurm, LSF)
// do it: EASY (Lifka 1995; Mu'alem & Feitelson 2001) and conservative backfilling. docs/policies.md
// says what was simplified.
#pragma once

#include <memory>

#include "fleetsim/policy.hpp"

namespace fleetsim::policies {

std::unique_ptr<Policy> make_easy_backfill(const PolicyParams& params);
std::unique_ptr<Policy> make_conservative_backfill(const PolicyParams& params);

}  // namespace fleetsim::policies
