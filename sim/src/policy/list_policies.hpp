// List-scheduling policies: each is the greedy placement loop with its own order, GPU cost and
// blocking rule. References are in docs/policies.md.
#pragma once

#include <memory>

#include "fleetsim/policy.hpp"

namespace fleetsim::policies {

std::unique_ptr<Policy> make_fifo(const PolicyParams& params);
std::unique_ptr<Policy> make_sjf(const PolicyParams& params);
std::unique_ptr<Policy> make_priority(const PolicyParams& params);
std::unique_ptr<Policy> make_least_loaded(const PolicyParams& params);
std::unique_ptr<Policy> make_memory_aware(const PolicyParams& params);
std::unique_ptr<Policy> make_locality(const PolicyParams& params);
std::unique_ptr<Policy> make_critical_path(const PolicyParams& params);
std::unique_ptr<Policy> make_heft(const PolicyParams& params);
std::unique_ptr<Policy> make_drf(const PolicyParams& params);
std::unique_ptr<Policy> make_ftf(const PolicyParams& params);

}  // namespace fleetsim::policies
