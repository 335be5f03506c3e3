// Tiresias (Gu et al., NSDI 2019): discretized two-dimensional least attained service, and its
// Gittins-index variant. Both preempt. docs/policies.md says what was simplified.
#pragma once

#include <memory>

#include "fleetsim/policy.hpp"

namespace fleetsim::policies {

std::unique_ptr<Policy> make_las(const PolicyParams& params);
std::unique_ptr<Policy> make_gittins(const PolicyParams& params);

}  // namespace fleetsim::policies
