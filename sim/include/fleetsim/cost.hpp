// What a month of a cluster costs: rented (on demand, or reserved or spot at a quoted discount), or owned
// (docs/plan.md#cost). Both plans, of scenarios and of serving deployments, price their points with it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fleetsim/scenario.hpp"

namespace fleetsim {

// What a month of a cluster costs a buyer who owns it: the purchase spread over its years, the energy its
// GPUs draw at the run's utilization (plus the hosts' share of the system power) times the PUE, and
// colocation space by the kilowatt provisioned. Defaults, each from its source (docs/plan.md#cost):
struct OwnershipCost {
  // What a plan ranks by: renting on demand (every GPU at its catalog hourly price, 730 h), reserved or spot
  // (the same at the discount given), or owning.
  enum class Basis : std::uint8_t { rent, reserved, spot, own } basis = Basis::rent;
  bool given = false;             // the plan file has a "cost" object: outputs show every way
  // The fractions off the on-demand price a provider quoted for committed (reserved) and preemptible (spot)
  // capacity; 0: none given. Never catalog figures: such prices vary by provider, term, region and month, so
  // a plan shows them only as its file gives them.
  double reserved_discount = 0, spot_discount = 0;
  double years = 5;               // Epoch AI's server lifetime from 2023 (training-cost-trends)
  double pue = 1.58;              // Uptime Institute's 2023 industry average
  double usd_per_kwh = 0.0806;    // EIA's 2023 average US industrial price
  double colocation_usd_per_kw_month = 184.06;  // CBRE, North American primary markets, H2 2024 asking rate
  struct Node {
    double purchase_usd = 0, system_power_w = 0;  // 0: the catalog's
  };
  std::vector<std::pair<std::string, Node>> nodes;  // per node type, in the file's order
};

// One configuration's month, both ways.
struct MonthlyCost {
  double rent_usd = 0;
  double own_usd = 0;                // capital + energy + space; 0 where the purchase is unknown
  double capital_usd = 0, energy_usd = 0, space_usd = 0;
  bool purchase_estimated = false;   // cards times the server-to-GPU cost ratio, not a server's price
  bool power_estimated = false;      // no system power known: 1.5 times the GPUs' TDP
  double reserved_usd = 0, spot_usd = 0;  // rented at the discounts given; 0 where none is
  double ranked_usd(const OwnershipCost& cost) const {  // what a plan ranks by
    switch (cost.basis) {
      case OwnershipCost::Basis::reserved: return reserved_usd;
      case OwnershipCost::Basis::spot: return spot_usd;
      case OwnershipCost::Basis::own: return own_usd;
      case OwnershipCost::Basis::rent: break;
    }
    return rent_usd;
  }
};
// `utilization`: the GPUs' busy share, which sets what they draw between idle power and TDP.
MonthlyCost monthly_cost(const OwnershipCost& cost, const ClusterSpec& cluster, double utilization);
// A node type's purchase price under `cost` (0: none known), and whether it is the cards-times-ratio estimate.
std::pair<double, bool> node_purchase_usd(const OwnershipCost& cost, const std::string& node_type);

}  // namespace fleetsim
