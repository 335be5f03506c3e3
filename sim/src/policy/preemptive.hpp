// Preemptive policies of the GPU-cluster papers besides Tiresias': Gandiva's time slicing (Xiao et
// al., OSDI 2018) and shortest remaining time first, the oracle baseline of Tiresias and Helios.
// docs/policies.md says what was simplified.
#pragma once

#include <memory>

#include "fleetsim/policy.hpp"

namespace fleetsim::policies {

std::unique_ptr<Policy> make_time_slice(const PolicyParams& params);
std::unique_ptr<Policy> make_srtf(const PolicyParams& params);

}  // namespace fleetsim::policies
