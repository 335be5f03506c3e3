// A plan's cost in words, for the plans of scenarios and of serving deployments alike (docs/plan.md#cost).
#pragma once

#include <string>
#include <nlohmann/json.hpp>

#include "fleetsim/cost.hpp"

namespace fleetsim {

// How the plan prices a month, where its file says ("cost"); "" where it rents by default.
std::string cost_basis_text(const OwnershipCost& cost);
// A point's month both ways, owning's parts named; "" where the plan does not price ownership.
std::string cost_text(const OwnershipCost& basis, const MonthlyCost& c);
nlohmann::ordered_json monthly_cost_json(const MonthlyCost& c);

}  // namespace fleetsim
