#include "fleetsim/policy.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"
#include "fleetsim/workflow.hpp"

namespace fleetsim {

double ReadyTask::spec_working_set_on(double vram_bytes) const { return spec->working_set_on(vram_bytes); }

bool ClusterView::tenant_may_use(TenantId tenant, NodeId node) const {
  return state_.tenant_node_allowed[index(tenant) * cluster_.node_count() + index(node)] != 0;
}

bool ClusterView::allowed(TenantId tenant, GpuId gpu, std::span<const std::int32_t> placed) const {
  const NodeId node = cluster_.node_of(gpu);
  if (!tenant_may_use(tenant, node)) return false;
  const auto slices = static_cast<std::uint32_t>(cluster_.group(node).mig_slices);
  if (slices == 1 && cluster_.group(node).time_sliced_tasks == 1) return true;
  const std::uint32_t first = index(cluster_.first_gpu(node)) + (index(gpu) - index(cluster_.first_gpu(node))) / slices * slices;
  const auto conflicts = [&](std::int32_t other) {
    return other >= 0 && static_cast<std::uint32_t>(other) != index(tenant) &&
           (state_.tenant_private[index(tenant)] != 0 || state_.tenant_private[static_cast<std::uint32_t>(other)] != 0);
  };
  for (std::uint32_t s = first; s < first + slices; ++s) {
    if (conflicts(state_.gpu_tenant[s]) || (!placed.empty() && conflicts(placed[s]))) return false;
  }
  return true;
}

bool ClusterView::any_time_sliced() const {
  const auto& groups = cluster_.spec().groups;
  return std::any_of(groups.begin(), groups.end(), [](const NodeGroup& g) { return g.time_sliced_tasks > 1; });
}

double ClusterView::compute_estimate_s(const ReadyTask& task, GpuId gpu) const {
  return compute_estimate_s(task, cluster_.gpu_type(gpu));
}

double ClusterView::compute_estimate_s(const ReadyTask& task, const GpuType& gpu) const {
  const double share = task.known_scale / static_cast<double>(task.gpus);  // an elastic task's degree this round
  return compute_.of(task.spec->as_run_on(task.gpus), gpu, share).total_s();  // a training job's timed at that degree
}

void Decisions::place(std::size_t ready_index, std::span<const GpuId> gpus) {
  placements_.push_back(Placement{static_cast<std::uint32_t>(ready_index), static_cast<std::uint32_t>(gpus_.size()),
                                  static_cast<std::uint32_t>(gpus.size())});
  gpus_.insert(gpus_.end(), gpus.begin(), gpus.end());
}

void Decisions::fail(std::size_t ready_index, std::string reason) {
  failures_.push_back(Failure{static_cast<std::uint32_t>(ready_index), std::move(reason)});
}

const ParamValue& PolicyParams::at(std::string_view name) const {
  const auto it = values_.find(name);
  FLEETSIM_CHECK(it != values_.end(), "policy parameter \"" + std::string(name) + "\" not set");
  return it->second;
}

double PolicyParams::number(std::string_view name) const {
  const ParamValue& v = at(name);
  if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}
std::int64_t PolicyParams::integer(std::string_view name) const { return std::get<std::int64_t>(at(name)); }
bool PolicyParams::boolean(std::string_view name) const { return std::get<bool>(at(name)); }
const std::string& PolicyParams::string(std::string_view name) const { return std::get<std::string>(at(name)); }

double PolicyParams::non_negative(std::string_view name) const {
  const double v = number(name);
  if (!(v >= 0) || !(v <= kLongestSeconds)) {
    char found[32];
    std::snprintf(found, sizeof found, "%g", v);
    throw InputError({Problem{"", std::string(name), std::string("expected a number from 0 to 1e9, found ") + found}});
  }
  return v;
}

std::string_view param_type_name(ParamType type) {
  switch (type) {
    case ParamType::number: return "a number";
    case ParamType::integer: return "an integer";
    case ParamType::boolean: return "true or false";
    case ParamType::string: return "a string";
    case ParamType::path: return "a file path";
  }
  return "?";
}

const PolicyInfo* find_policy(std::string_view name) {
  for (const PolicyInfo& info : policy_registry()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

std::vector<std::string> policy_ids() {
  std::vector<std::string> ids;
  for (const PolicyInfo& info : policy_registry()) ids.push_back(info.name);
  return ids;
}

std::string policy_names() {
  std::string names;
  for (const PolicyInfo& info : policy_registry()) names += (names.empty() ? "\"" : ", \"") + info.name + "\"";
  return names;
}

}  // namespace fleetsim
