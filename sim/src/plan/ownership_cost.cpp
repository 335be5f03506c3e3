#include <algorithm>
#include <tuple>

#include "../loaders.hpp"
#include "fleetsim/catalog.hpp"
#include "fleetsim/cost.hpp"
#include "fleetsim/suggest.hpp"

namespace fleetsim {
namespace {

// A server's price over its GPUs' (Epoch AI, training-cost-trends: server cost = GPU price x 1.64), for node
// types the catalog has card prices but no server price for.
constexpr double kServerToGpuCost = 1.64;
// Hosts, NICs and fans where no system power is known: half again the GPUs' TDP (a guess).
constexpr double kSystemPowerOverGpus = 1.5;
constexpr double kHoursPerMonth = 730;

const OwnershipCost::Node* given_node(const OwnershipCost& cost, const std::string& node_type) {
  const auto it = std::find_if(cost.nodes.begin(), cost.nodes.end(), [&](const auto& n) { return n.first == node_type; });
  return it == cost.nodes.end() ? nullptr : &it->second;
}

}  // namespace

std::pair<double, bool> node_purchase_usd(const OwnershipCost& cost, const std::string& node_type) {
  if (const auto* n = given_node(cost, node_type); n != nullptr && n->purchase_usd > 0) return {n->purchase_usd, false};
  const NodeType* node = Catalog::builtin().node(node_type);
  if (node == nullptr) return {0, false};
  if (node->purchase_usd > 0) return {node->purchase_usd, false};
  const GpuType* gpu = Catalog::builtin().gpu(node->gpu);
  if (gpu != nullptr && gpu->purchase_usd > 0) return {kServerToGpuCost * gpu->purchase_usd * node->gpus, true};
  return {0, false};
}

MonthlyCost monthly_cost(const OwnershipCost& cost, const ClusterSpec& cluster, double utilization) {
  MonthlyCost m;
  m.rent_usd = cluster.usd_per_month();
  m.reserved_usd = (1 - cost.reserved_discount) * m.rent_usd * (cost.reserved_discount > 0);
  m.spot_usd = (1 - cost.spot_discount) * m.rent_usd * (cost.spot_discount > 0);
  bool priced = true;
  double drawn_w = 0, provisioned_w = 0;
  for (const NodeGroup& g : cluster.groups) {
    const auto [purchase, estimated] = node_purchase_usd(cost, g.node.id);
    priced = priced && purchase > 0;
    m.purchase_estimated = m.purchase_estimated || estimated;
    m.capital_usd += g.count * purchase / (cost.years * 12);
    const auto* given = given_node(cost, g.node.id);
    double system_w = given != nullptr && given->system_power_w > 0 ? given->system_power_w : g.node.system_power_w;
    const double gpus_tdp = g.node.gpus * g.gpu.tdp_w;
    if (system_w <= 0) {
      system_w = kSystemPowerOverGpus * gpus_tdp;
      m.power_estimated = true;
    }
    // The GPUs between idle and TDP as busy as the run found them; the rest of the system at its share of
    // the maximum (an upper bound: hosts idle below it).
    const double gpus_w = g.node.gpus * (g.gpu.idle_power_w + utilization * (g.gpu.tdp_w - g.gpu.idle_power_w));
    drawn_w += g.count * (gpus_w + std::max(0.0, system_w - gpus_tdp));
    provisioned_w += g.count * system_w;
  }
  m.energy_usd = drawn_w / 1000 * kHoursPerMonth * cost.pue * cost.usd_per_kwh;
  m.space_usd = provisioned_w / 1000 * cost.colocation_usd_per_kw_month;
  m.own_usd = priced ? m.capital_usd + m.energy_usd + m.space_usd : 0;
  if (!priced) m.capital_usd = 0;
  return m;
}

void detail::read_ownership_cost(const Json& value, const std::string& pointer, Problems& problems, const std::vector<std::string>& node_types,
                                 const std::string& node_types_pointer, OwnershipCost& cost) {
  ObjectReader c(value, pointer, problems);
  if (!c.ok()) return;
  cost.given = true;
  cost.basis = static_cast<OwnershipCost::Basis>(c.choice("basis", {"rent", "reserved", "spot", "own"}, 0));
  cost.reserved_discount = c.number("reserved_discount", Need::optional, 0, 0.99).value_or(0);
  cost.spot_discount = c.number("spot_discount", Need::optional, 0, 0.99).value_or(0);
  for (const auto& [basis, discount, name] : {std::tuple{OwnershipCost::Basis::reserved, cost.reserved_discount, "reserved_discount"},
                                              std::tuple{OwnershipCost::Basis::spot, cost.spot_discount, "spot_discount"}}) {
    if (cost.basis != basis || discount > 0) continue;
    const Json* given = c.field(name);
    if (given != nullptr && !(given->is_number() && given->get<double>() == 0)) continue;  // out of range or not a number: said at the field
    c.problem(name, std::string(given == nullptr ? "required beside \"basis\": " : "expected above 0: ") +
                        "the fraction off the on-demand price your provider quoted (the catalog holds on-demand prices only; commitments and spare "
                        "capacity are priced per quote)");
  }
  cost.years = c.number("years", Need::optional, 0.1, 50).value_or(cost.years);
  cost.pue = c.number("pue", Need::optional, 1, 5).value_or(cost.pue);
  cost.usd_per_kwh = c.number("usd_per_kwh", Need::optional, 0, 10).value_or(cost.usd_per_kwh);
  cost.colocation_usd_per_kw_month = c.number("colocation_usd_per_kw_month", Need::optional, 0, 1e5).value_or(cost.colocation_usd_per_kw_month);
  if (const Json* nodes = c.field("nodes")) {
    ObjectReader n(*nodes, c.pointer("nodes"), problems);
    if (n.ok()) {
      for (const auto& [id, entry] : nodes->items()) {
        n.field(id);
        if (Catalog::builtin().node(id) == nullptr) {
          n.problem(id, "unknown node type \"" + id + "\" (fleetsim catalog lists them)" + did_you_mean_key(id, Catalog::builtin().nodes()));
        }
        ObjectReader e(entry, n.pointer(id), problems);
        OwnershipCost::Node node;
        node.purchase_usd = e.number("purchase_usd", Need::optional, 1, 1e12).value_or(0);
        node.system_power_w = e.quantity_or("system_power", Dimension::power, 0);
        e.finish();
        cost.nodes.emplace_back(id, node);
      }
      n.finish();
    }
  }
  c.finish();
  if (cost.basis != OwnershipCost::Basis::own) return;
  for (std::size_t i = 0; i < node_types.size(); ++i) {
    if (Catalog::builtin().node(node_types[i]) == nullptr || node_purchase_usd(cost, node_types[i]).first > 0) continue;
    problems.add(child_pointer(node_types_pointer, i), "no purchase price for \"" + node_types[i] + "\" in the catalog: expected \"cost\": {\"nodes\": {\"" +
                                                           node_types[i] + "\": {\"purchase_usd\": ...}}} to own it");
  }
}

}  // namespace fleetsim
