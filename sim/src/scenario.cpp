#include "fleetsim/scenario.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <tuple>
#include <utility>

#include "catalog_readers.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/import.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/serving.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/units.hpp"
#include "import/job_log.hpp"
#include "loaders.hpp"
#include "fleetsim/suggest.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;
using detail::Problems;

std::string resolve(const std::string& base_dir, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / p).lexically_normal().string();
}

// Runs a loader of another file; its problems join this file's list instead of stopping the load.
template <typename Load>
auto absorbing(Problems& problems, Load load) -> std::optional<decltype(load())> {
  try {
    return load();
  } catch (const InputError& e) {
    problems.absorb(e);
    return std::nullopt;
  }
}

// A file the scenario names at `pointer`: when it cannot be read, the problem is that field's, with
// the file's path and the reason.
std::string read_named_file(const Problems& scenario, const std::string& pointer, const std::string& path) {
  try {
    return read_text_file(path);
  } catch (const InputError& e) {
    throw InputError({Problem{scenario.file(), pointer, "cannot use \"" + path + "\": " + e.problems().front().message}});
  }
}

}  // namespace

namespace {

// MIG: every GPU of the group becomes `slices` instances, each with an even share of its compute,
// memory bandwidth, power and price, and `vram` (default an even share) of its memory.
void read_mig(const Json& value, const std::string& pointer, Problems& problems, NodeGroup& group) {
  ObjectReader m(value, pointer, problems);
  if (!m.ok()) return;
  const auto slices = static_cast<int>(m.integer("slices", Need::required, 1, 7).value_or(1));
  const double vram = m.quantity_or("vram", Dimension::bytes, group.gpu.vram_bytes / slices);
  // NVIDIA's smallest MIG profile holds 5 GB (A100 40GB's 1g.5gb); below a gigabyte an instance holds no model.
  if (!(vram >= 1e9)) {
    m.problem("vram", "expected at least 1 GB for each instance (NVIDIA's smallest MIG profile holds 5 GB), found " + format_number(vram) + " B" +
                          (m.field("vram") == nullptr ? " (the default: an even share of the GPU's " + format_quantity(group.gpu.vram_bytes, Dimension::bytes) + ")" : ""));
  } else if (vram * slices > group.gpu.vram_bytes * (1 + 1e-9)) {
    m.problem("vram", std::to_string(slices) + " slices of " + format_quantity(vram, Dimension::bytes) + " exceed the GPU's " +
                          format_quantity(group.gpu.vram_bytes, Dimension::bytes));
  }
  m.finish();
  GpuType& g = group.gpu;
  const double share = 1.0 / slices;
  for (double& peak : g.peak_flop_per_s) peak *= share;
  g.memory_bandwidth_Bps *= share;
  g.tdp_w *= share;
  g.idle_power_w *= share;
  g.price_usd_per_hour *= share;
  g.vram_bytes = vram;
  group.node.gpus *= slices;
  group.mig_slices = slices;
}

// Time slicing: up to `tasks` tasks share each GPU in turns, losing `interference` of the GPU's
// throughput per extra task.
void read_time_slicing(const Json& value, const std::string& pointer, Problems& problems, NodeGroup& group) {
  ObjectReader t(value, pointer, problems);
  if (!t.ok()) return;
  group.time_sliced_tasks = static_cast<int>(t.integer("tasks", Need::required, 2, 64).value_or(1));
  group.interference = t.number("interference", Need::optional, 0.0, 1.0).value_or(0.0);
  t.finish();
}

}  // namespace

namespace detail {

void read_cluster(const Json& value, const std::string& pointer, Problems& problems, const Catalog& catalog,
                  ClusterSpec& cluster) {
  ObjectReader c(value, pointer, problems);
  if (const Json* nodes = c.field("nodes", Need::required)) {
    if (!nodes->is_array() || nodes->empty()) {
      c.problem("nodes", "expected a non-empty array of node groups, found " + detail::describe(*nodes));
    } else {
      for (std::size_t i = 0; i < nodes->size(); ++i) {
        ObjectReader g((*nodes)[i], detail::child_pointer(c.pointer("nodes"), i), problems);
        if (!g.ok()) continue;
        NodeGroup group;
        group.count = static_cast<int>(g.integer("count", Need::required, 1, 100'000).value_or(0));
        const auto type = g.string("type", Need::required);
        const NodeType* node = type ? catalog.node(*type) : nullptr;
        if (type && node == nullptr) g.problem("type", "unknown node type \"" + *type + "\" (see `fleetsim catalog`)" + did_you_mean_key(*type, catalog.nodes()));
        if (node != nullptr) {
          group.node = *node;
          if (const Json* o = g.field("node_overrides")) {
            ObjectReader r(*o, g.pointer("node_overrides"), problems);
            if (r.ok()) group.node = detail::read_node(r, node->id, node);
            r.finish();
          }
          const GpuType* gpu = catalog.gpu(group.node.gpu);
          if (gpu == nullptr) g.problem("node_overrides", "unknown GPU type \"" + group.node.gpu + "\"" + did_you_mean_key(group.node.gpu, catalog.gpus()));
          if (gpu != nullptr) {
            group.gpu = *gpu;
            if (const Json* o = g.field("gpu_overrides")) {
              ObjectReader r(*o, g.pointer("gpu_overrides"), problems);
              if (r.ok()) group.gpu = detail::read_gpu(r, gpu->id, gpu);
              r.finish();
            }
          }
          auto link = [&](const std::string& id, LinkType& into) {
            if (const LinkType* l = catalog.link(id)) {
              into = *l;
            } else {
              g.problem("node_overrides", "unknown link type \"" + id + "\"");
            }
          };
          // A node priced whole (a cloud instance) charges its price over its GPUs, so that every cost
          // (run, plan, elastic billing) that counts GPU-hours counts the node's.
          if (group.node.price_usd_per_hour > 0) group.gpu.price_usd_per_hour = group.node.price_usd_per_hour / group.node.gpus;
          link(group.node.gpu_link, group.gpu_link);
          link(group.node.host_link, group.host_link);
          link(group.node.nic, group.nic);
          if (const Json* m = g.field("mig")) read_mig(*m, g.pointer("mig"), problems, group);
          if (const Json* t = g.field("time_slicing")) read_time_slicing(*t, g.pointer("time_slicing"), problems, group);
          if (group.time_sliced_tasks > 1 && (group.node.memory_bus_Bps > 0 || group.node.compute_pool_devices > 0)) {
            g.problem("time_slicing", "a node type whose devices share a memory bus or compute (memory_bus, compute_pool) cannot also be time-sliced");
          }
        }
        g.field("gpu_overrides");
        g.field("node_overrides");
        g.field("mig");
        g.field("time_slicing");
        g.finish();
        cluster.groups.push_back(std::move(group));
      }
    }
  }
  if (const Json* fabric = c.field("fabric")) {
    ObjectReader f(*fabric, c.pointer("fabric"), problems);
    FabricSpec& spec = cluster.fabric;
    const std::string topology = f.string_or("topology", "single-switch");
    bool known = false;
    for (FabricKind k : {FabricKind::single_switch, FabricKind::fat_tree, FabricKind::rail_optimized}) {
      if (topology == fabric_kind_name(k)) {
        spec.kind = k;
        known = true;
      }
    }
    if (!known) {
      f.problem("topology", "expected one of \"single-switch\", \"fat-tree\", \"rail-optimized\", found \"" + topology + "\"");
    }
    if (auto link = f.string("link", Need::optional)) {
      if (const LinkType* l = catalog.link(*link)) {
        spec.link = *l;
      } else {
        f.problem("link", "unknown link type \"" + *link + "\" (see `fleetsim catalog`)");
      }
    }
    spec.nodes_per_leaf = static_cast<int>(f.integer_or("nodes_per_leaf", 0, 0, 100'000));
    spec.oversubscription = f.number("oversubscription", Need::optional, 1.0, 1000.0).value_or(1.0);
    spec.spines = static_cast<int>(f.integer_or("spines", 0, 0, 100'000));
    if (known && spec.kind == FabricKind::single_switch) {
      for (const char* key : {"nodes_per_leaf", "oversubscription", "spines", "link"}) {
        if (f.field(key) != nullptr) f.problem(key, "only fat-tree and rail-optimized fabrics have leaves and spines");
      }
    }
    f.finish();
  }
  if (const Json* storage = c.field("storage")) {
    ObjectReader s(*storage, c.pointer("storage"), problems);
    StorageSpec spec;
    spec.bandwidth_Bps = s.quantity("bandwidth", Dimension::bandwidth, Need::required).value_or(0);
    spec.latency_s = s.quantity_or("latency", Dimension::time, 0);
    if (s.field("bandwidth") != nullptr && spec.bandwidth_Bps <= 0) s.problem("bandwidth", "expected a bandwidth above 0");
    cluster.storage = spec;
    s.finish();
  }
  c.finish();
}

}  // namespace detail

namespace {

// Returns the ids of workflows that failed to load, so references to them raise no second error.
std::vector<std::string> read_workflows(ObjectReader& top, const Catalog& catalog, const ClusterSpec& cluster,
                                        const std::string& base_dir, std::vector<Workflow>& workflows) {
  std::vector<std::string> broken;
  // Optional: a workload of job traces alone needs none.
  const Json* value = top.field("workflows", Need::optional);
  if (value == nullptr) return broken;
  ObjectReader list(*value, top.pointer("workflows"), top.problems());
  if (!list.ok()) return broken;
  // A ComfyUI graph's VAE decodes whole where the cluster's smallest GPU (or MIG slice) that runs bf16 holds them:
  // a prompt may run on any of them (on one GPU throughout, as stock ComfyUI runs it), and tiles fit wherever the
  // whole would. Where only larger GPUs hold a decode whole, they decode it whole and the others in tiles. (A CPU
  // device, with no bf16, runs no ComfyUI model.)
  const NodeGroup *smallest_group = nullptr, *largest_group = nullptr;
  for (const NodeGroup& g : cluster.groups) {
    if (g.gpu.vram_bytes <= 0 || !(g.gpu.peak_for(Dtype::bf16) > 0)) continue;
    if (smallest_group == nullptr || g.gpu.vram_bytes < smallest_group->gpu.vram_bytes) smallest_group = &g;
    if (largest_group == nullptr || g.gpu.vram_bytes > largest_group->gpu.vram_bytes) largest_group = &g;
  }
  // A MIG instance keeps its GPU's id; the decode's note names it as a slice.
  const auto by_name = [](const NodeGroup* g) {
    std::optional<GpuType> gpu;
    if (g == nullptr) return gpu;
    gpu = g->gpu;
    if (g->mig_slices > 1) gpu->id += " MIG slice (one of " + std::to_string(g->mig_slices) + ")";
    return gpu;
  };
  const std::optional<GpuType> smallest_gpu = by_name(smallest_group), largest_gpu = by_name(largest_group);
  const GpuType* smallest = smallest_gpu ? &*smallest_gpu : nullptr;
  const GpuType* largest = largest_gpu ? &*largest_gpu : nullptr;
  for (const auto& [id, entry] : value->items()) {
    const std::string at = list.pointer(id);
    std::optional<Workflow> wf;
    if (entry.is_string()) {
      // A fleetsim workflow file, or a ComfyUI API-format prompt, told apart by its content.
      const std::string path = resolve(base_dir, entry.get<std::string>());
      wf = absorbing(top.problems(), [&] {
        const std::string text = read_named_file(top.problems(), at, path);
        if (is_comfyui_prompt(text)) return import_comfyui(text, path, catalog, {.gpu = smallest, .largest_gpu = largest});
        // WfCommons runtimes become work on the cluster's first GPU type.
        if (is_wfcommons_instance(text) && !cluster.groups.empty()) return import_wfcommons(text, path, cluster.groups[0].gpu);
        return parse_workflow(text, path, catalog);
      });
    } else if (entry.is_object() && entry.contains("comfyui")) {
      // {"comfyui": "graph.json", "node_costs": "costs.json", "registry": "families.json", "attention": "cudnn"}: costs
      // for node types fleetsim does not know, additions to the importer's registry, whose kernels run attention.
      ObjectReader r(entry, at, top.problems());
      const auto graph = r.string("comfyui", Need::required);
      const auto costs = r.string("node_costs", Need::optional);
      const auto registry = r.string("registry", Need::optional);
      const std::string attention_name = r.string_or("attention", "flash2");
      const auto attention = parse_attention_backend(attention_name);
      if (!attention) r.problem("attention", "expected " + attention_backend_choices() + ", found \"" + attention_name + "\"");
      r.finish();
      if (graph) {
        wf = absorbing(top.problems(), [&] {
          const auto named = [&](const std::optional<std::string>& name, std::string_view key) {
            const std::string path = name ? resolve(base_dir, *name) : "";
            return std::pair{path, name ? read_named_file(top.problems(), r.pointer(key), path) : ""};
          };
          const auto [costs_path, costs_text] = named(costs, "node_costs");
          const auto [registry_path, registry_text] = named(registry, "registry");
          const std::string graph_path = resolve(base_dir, *graph);
          return import_comfyui(read_named_file(top.problems(), r.pointer("comfyui"), graph_path), graph_path, catalog,
                                {.node_costs_json = costs_text, .node_costs_file = costs_path, .registry_json = registry_text,
                                 .registry_file = registry_path, .gpu = smallest, .largest_gpu = largest,
                                 .attention = attention.value_or(AttentionBackend::flash2)});
        });
      }
    } else if (entry.is_object()) {
      Problems own(top.problems().file());
      wf = detail::read_workflow(entry, at, own, catalog);
      if (own.empty()) {
        if (!absorbing(top.problems(), [&] { wf->finalize(); return true; })) wf.reset();
      } else {
        absorbing(top.problems(), [&] { own.throw_if_any(); return true; });
        wf.reset();
      }
    } else {
      top.problems().add(at, "expected a workflow file path or an inline workflow object, found " +
                                 detail::describe(entry));
    }
    if (wf) {
      wf->id = id;
      if (wf->name.empty()) wf->name = id;
      workflows.push_back(std::move(*wf));
    } else {
      broken.push_back(id);
    }
  }
  return broken;
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> find_device(const ClusterSpec& cluster, const std::string& name, bool gpu);

void read_tenants(ObjectReader& top, const ClusterSpec& cluster, std::vector<Tenant>& tenants) {
  if (const Json* value = top.field("tenants")) {
    if (!value->is_array() || value->empty()) {
      top.problem("tenants", "expected a non-empty array of tenants, found " + detail::describe(*value));
    } else {
      std::set<std::string> names;
      for (std::size_t i = 0; i < value->size(); ++i) {
        ObjectReader t((*value)[i], detail::child_pointer(top.pointer("tenants"), i), top.problems());
        Tenant tenant;
        tenant.name = t.string("name", Need::required).value_or("");
        tenant.priority = static_cast<int>(t.integer_or("priority", 0, -1000, 1000));
        tenant.quota = t.number("quota", Need::optional, 1e-9, 1e9).value_or(1.0);
        tenant.work_class = static_cast<WorkClass>(t.choice("class", {"batch", "interactive"}, 0));
        if (const Json* nodes = t.field("nodes")) {
          if (!nodes->is_array() || nodes->empty()) t.problem("nodes", "expected a non-empty array of node names (\"n0\"), found " + detail::describe(*nodes));
          for (std::size_t k = 0; nodes->is_array() && k < nodes->size(); ++k) {
            const Json& n = (*nodes)[k];
            const auto node = n.is_string() ? find_device(cluster, n.get<std::string>(), false) : std::nullopt;
            const std::string at = detail::child_pointer(t.pointer("nodes"), k);
            if (!node) {
              t.problems().add(at, "expected a node of the cluster, \"n0\" to \"n" + std::to_string(cluster.node_count() - 1) + "\", found " + detail::describe(n));
              continue;
            }
            const auto index = static_cast<std::uint32_t>(std::stoul(n.get<std::string>().substr(1)));  // "n3", checked above
            if (std::find(tenant.nodes.begin(), tenant.nodes.end(), index) != tenant.nodes.end()) {
              t.problems().add(at, "node " + n.get<std::string>() + " is listed twice");
            }
            tenant.nodes.push_back(index);
          }
        }
        tenant.exclusive = t.boolean_or("exclusive", false);
        tenant.private_gpus = t.boolean_or("private_gpus", false);
        if (tenant.exclusive && tenant.nodes.empty()) t.problem("exclusive", "an exclusive tenant needs \"nodes\" to keep for itself");
        t.finish();
        for (const Tenant& other : tenants) {
          if (!tenant.exclusive || !other.exclusive) continue;
          for (std::uint32_t n : tenant.nodes) {
            if (std::find(other.nodes.begin(), other.nodes.end(), n) != other.nodes.end()) {
              t.problem("nodes", "node n" + std::to_string(n) + " is already kept by exclusive tenant \"" + other.name + "\"");
            }
          }
        }
        // Each repeat once (not once per earlier namesake), and a thousand of them summarized.
        if (!names.insert(tenant.name).second) {
          t.problems().add_repeated("duplicate tenant names", t.pointer("name"), "duplicate tenant \"" + tenant.name + "\"");
        }
        tenants.push_back(std::move(tenant));
      }
    }
  }
  if (tenants.empty()) tenants.emplace_back().name = "default";
}

std::optional<std::uint32_t> find_tenant(const std::vector<Tenant>& tenants, std::string_view name) {
  for (std::uint32_t i = 0; i < tenants.size(); ++i) {
    if (tenants[i].name == name) return i;
  }
  return std::nullopt;
}

std::string tenant_names(const std::vector<Tenant>& tenants) {
  std::string names;
  for (const Tenant& t : tenants) names += (names.empty() ? "\"" : ", \"") + t.name + "\"";
  return names;
}

// A large count as "3.6 x 10^12".
std::string about(double n) {
  const int exponent = static_cast<int>(std::floor(std::log10(n)));
  char text[48];
  std::snprintf(text, sizeof text, "%.2g x 10^%d", n / std::pow(10.0, exponent), exponent);
  return text;
}

// The most arrivals one stream may make: its count, or what its rate implies until the horizon.
constexpr std::int64_t kMaxArrivals = 100'000'000;

// Until the horizon, the busiest rate the process reaches bounds how many arrivals it makes.
double peak_rate(const ArrivalSpec& a) {
  return a.process == ArrivalProcess::periodic ? 1 / a.interval_s
         : a.process == ArrivalProcess::poisson ? a.rate_per_s
         : a.process == ArrivalProcess::bursty  ? std::max(a.rate_per_s, a.off_rate_per_s)
         : a.process == ArrivalProcess::diurnal ? a.rate_per_s * (1 + a.amplitude)
                                                : 0;
}

// The most arrivals a stream can make: its count (per user, closed), its list of times, or what its busiest
// rate makes until the horizon.
double most_arrivals(const ArrivalSpec& a, double horizon_s) {
  if (a.process == ArrivalProcess::times) return static_cast<double>(a.times_s.size());
  if (a.process == ArrivalProcess::closed) return static_cast<double>(a.users) * static_cast<double>(std::max<std::int64_t>(a.count, 0));
  if (a.count >= 0) return static_cast<double>(a.count);
  return std::isfinite(horizon_s) ? peak_rate(a) * std::max(0.0, horizon_s - a.start_s) : 0;
}

// A run holds some 80 bytes a task in its tables to its end (more where it keeps every task's record: see
// simulation.cpp): past this many, a workload is refused at load rather than run out of memory.
constexpr double kMaxTasks = 200'000'000;

// `horizon_given`: the scenario has a "horizon" field, well formed or not (a malformed one is reported
// at itself, not again here as a missing horizon).
ArrivalSpec read_arrival(ObjectReader& s, double horizon_s, bool horizon_given, Need need = Need::required) {
  const bool has_horizon = std::isfinite(horizon_s);
  ArrivalSpec a;
  const Json* value = s.field("arrival", need);
  if (value == nullptr) return a;
  ObjectReader r(*value, s.pointer("arrival"), s.problems());
  const std::string process = r.string("process", Need::required).value_or("once");
  a.start_s = r.quantity_or("start", Dimension::time, 0);
  const bool until_horizon = r.field("count") == nullptr;
  a.count = r.integer_or("count", -1, 0, kMaxArrivals);
  if (process == "once") {
    a.process = ArrivalProcess::once;
    if (until_horizon) a.count = 1;
  } else if (process == "periodic") {
    a.process = ArrivalProcess::periodic;
    a.interval_s = r.quantity("interval", Dimension::time, Need::required).value_or(1);
    if (a.interval_s <= 0 && r.field("interval") != nullptr) r.problem("interval", "expected a positive duration");
  } else if (process == "poisson") {
    a.process = ArrivalProcess::poisson;
    a.rate_per_s = r.quantity("rate", Dimension::rate, Need::required).value_or(1);
    if (a.rate_per_s <= 0 && r.field("rate") != nullptr) r.problem("rate", "expected a positive rate");
  } else if (process == "times") {
    a.process = ArrivalProcess::times;
    const Json* times = r.field("times", Need::required);
    if (times != nullptr && !times->is_array()) {
      r.problem("times", "expected an array of times such as [\"0 s\", \"1.5 s\"], found " + detail::describe(*times));
    } else if (times != nullptr) {
      for (std::size_t i = 0; i < times->size(); ++i) {
        if (auto t = detail::read_quantity((*times)[i], Dimension::time,
                                           detail::child_pointer(r.pointer("times"), i), s.problems())) {
          a.times_s.push_back(*t);
        }
      }
      std::sort(a.times_s.begin(), a.times_s.end());
      if (!until_horizon) r.problem("count", "\"times\" arrivals take their count from the list");
      a.count = static_cast<std::int64_t>(a.times_s.size());
    }
  } else if (process == "bursty") {
    a.process = ArrivalProcess::bursty;
    a.rate_per_s = r.quantity("rate", Dimension::rate, Need::required).value_or(1);
    a.off_rate_per_s = r.quantity_or("off_rate", Dimension::rate, 0);
    a.on_s = r.quantity("on", Dimension::time, Need::required).value_or(1);
    a.off_s = r.quantity("off", Dimension::time, Need::required).value_or(1);
    if (a.rate_per_s <= 0 && r.field("rate") != nullptr) r.problem("rate", "expected a positive rate");
    if (a.on_s <= 0 && r.field("on") != nullptr) r.problem("on", "expected a positive duration");
    if (a.off_s <= 0 && r.field("off") != nullptr) r.problem("off", "expected a positive duration");
  } else if (process == "diurnal") {
    a.process = ArrivalProcess::diurnal;
    a.rate_per_s = r.quantity("rate", Dimension::rate, Need::required).value_or(1);
    a.amplitude = r.number("amplitude", Need::required, 0.0, 1.0).value_or(0);
    a.period_s = r.quantity_or("period", Dimension::time, 86400);
    a.peak_s = r.quantity_or("peak", Dimension::time, 0);
    if (a.rate_per_s <= 0 && r.field("rate") != nullptr) r.problem("rate", "expected a positive rate");
    if (a.period_s <= 0) r.problem("period", "expected a positive duration");
  } else if (process == "closed") {
    a.process = ArrivalProcess::closed;
    a.users = r.integer("users", Need::required, 1, 1'000'000).value_or(1);
    a.think_s = r.quantity("think", Dimension::time, Need::required).value_or(0);
    if (until_horizon) r.problem("count", "missing: a closed loop needs a count of workflows per user");
    if (a.users * std::max<std::int64_t>(a.count, 0) > 10'000'000) {
      r.problem("users", "expected users x count of at most 10,000,000 workflows");
    }
  } else {
    r.problem("process", "expected one of \"once\", \"periodic\", \"poisson\", \"times\", \"bursty\", \"diurnal\", "
                         "\"closed\", found \"" + process + "\"" +
                         did_you_mean(process, {"once", "periodic", "poisson", "times", "bursty", "diurnal", "closed"}));
    r.finish_without_unknowns();  // the process's own fields are not known when the process is not
  }
  if (until_horizon && !has_horizon && !horizon_given &&
      (a.process == ArrivalProcess::periodic || a.process == ArrivalProcess::poisson ||
       a.process == ArrivalProcess::bursty || a.process == ArrivalProcess::diurnal)) {
    r.problem("count", "missing: without a count, arrivals go on until the horizon, and the scenario has no \"horizon\"");
  }
  const double implied = peak_rate(a) * (horizon_s - a.start_s);
  if (until_horizon && has_horizon && r.ok() && implied > static_cast<double>(kMaxArrivals)) {
    r.problem(a.process == ArrivalProcess::periodic ? "interval" : "rate",
              "would make up to " + about(implied) + " arrivals before the horizon, over the 100,000,000 a stream may have: give a count, a slower rate or an earlier horizon");
  }
  r.finish();
  return a;
}

// How fast a trace's jobs (`job`, recorded on `ref`) run on each GPU type of the cluster other than the one they
// were recorded on, for the run's notes ("" when there is none): the ratio of training throughputs in the jobs'
// precision, each estimated figure said; the ratio of bf16 peaks, a guess, where either GPU has no throughput.
std::string trace_speed_note(const std::string& file, const GpuType& ref, const TaskSpec& job, const ClusterSpec& cluster) {
  const TaskSpec::Recorded& recorded = *job.recorded;
  const TrainingPrecision p = recorded.precision;
  std::vector<std::string> speeds, estimated, by_peaks;
  const auto add = [](std::vector<std::string>& to, const std::string& text) {
    if (std::find(to.begin(), to.end(), text) == to.end()) to.push_back(text);
  };
  for (const NodeGroup& group : cluster.groups) {
    const GpuType& gpu = group.gpu;
    const std::optional<double> factor = recorded_time_factor(job, gpu);
    const double by_peak = recorded.peak_flop_per_s > 0 ? gpu.peak_for(Dtype::bf16) / recorded.peak_flop_per_s : 0;
    // The recording GPU's own type runs the recorded durations, unless the scenario overrides its figures.
    if (gpu.id == ref.id && (factor ? *factor == 1 : by_peak == 1)) continue;
    if (factor) {
      const double throughput = gpu.training_throughput.of(p);
      add(speeds, gpu.id + " " + format_number(1 / *factor) + "x (" + format_number(throughput) + "/" + format_number(recorded.throughput) + ")");
      if (gpu.training_throughput.estimated_in(p)) add(estimated, gpu.id);
      if (ref.training_throughput.estimated_in(p)) add(estimated, ref.id);
    } else if (by_peak > 0) {
      add(by_peaks, gpu.id + " " + format_number(by_peak) + "x");
    }
  }
  if (speeds.empty() && by_peaks.empty()) return "";
  const auto joined = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  const std::string precision(training_precision_name(p));
  std::string note = "the jobs of " + file + " ran their durations on " + ref.id + " (reference_gpu) in " + precision +
                     " (precision); on the cluster's GPU types they run";
  if (!speeds.empty()) {
    note += " as fast as the ratio of training throughputs in " + precision + " (against a V100's, from the catalog) says: " + joined(speeds);
    if (!estimated.empty()) note += "; estimated, not measured (a guess): the figure of " + joined(estimated);
  }
  if (!by_peaks.empty()) {
    note += std::string(speeds.empty() ? "" : ";") + " at the ratio of bf16 tensor peaks, " + joined(by_peaks) +
            ": a guess, as the catalog has no training throughput for " + (recorded.throughput > 0 ? "them" : ref.id);
  }
  return note;
}

// A job trace (CSV: submit_time, gpus, duration, and optionally tenant) replayed as arrivals of
// single-task jobs: one synthetic workflow per gang size, whose work takes 1 s on the reference GPU
// (its bf16 peak's FLOP), scaled per job by its duration; other GPU types run it as trace_speed_note says.
void read_trace(ObjectReader& s, Scenario& sc, const std::string& base_dir) {
  const std::string file = resolve(base_dir, s.string("trace", Need::required).value_or(""));
  const std::optional<std::string> default_tenant = s.string("tenant", Need::optional);
  const std::string reference = s.string_or("reference_gpu", sc.cluster.groups.empty() ? "" : sc.cluster.groups[0].gpu.id);
  const GpuType* ref = sc.catalog.gpu(reference);
  if (ref == nullptr) s.problem("reference_gpu", "unknown GPU type \"" + reference + "\"" + did_you_mean_key(reference, sc.catalog.gpus()));
  // A public log is converted as `fleetsim import trace` converts it; its rows are then the CSV's.
  std::vector<std::string_view> formats{"csv", "philly"};
  for (const JobLogFormat& f : job_log_formats()) formats.push_back(f.name);
  const std::string_view format = formats[s.choice("format", formats, 0)];
  const auto precision = static_cast<TrainingPrecision>(s.choice("precision", {"fp32", "mixed"}, 0));
  std::string text = read_named_file(s.problems(), s.pointer("trace"), file);
  if (format == "philly") {
    text = import_philly_trace(text, file, default_tenant ? PhillyTenant::none : PhillyTenant::vc).csv;
  } else if (const JobLogFormat* log = find_job_log_format(format)) {
    JobCsvColumns columns = log->mapping();
    if (default_tenant) columns.tenant.clear();
    text = import_job_csv(text, file, columns).csv;
  }
  Problems csv(format == "csv" ? file : file + " (converted from the " + std::string(format) + " log)");
  std::vector<std::string> header;
  std::map<std::pair<std::uint32_t, int>, Stream> groups;  // (tenant, gpus) -> stream
  std::size_t line_no = 0, begin = 0;
  auto column = [&](const char* name) -> int {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? -1 : static_cast<int>(it - header.begin());
  };
  int c_submit = -1, c_gpus = -1, c_duration = -1, c_tenant = -1;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \r") == std::string::npos || line[0] == '#') continue;
    const auto cells = detail::csv_cells(line);
    const std::string at = "line " + std::to_string(line_no);
    if (header.empty()) {
      header = cells;
      if (const auto twice = detail::repeated_column(header)) {
        csv.add(at, "the column \"" + *twice + "\" is named twice in the header: name each column once");
        break;
      }
      c_submit = column("submit_time");
      c_gpus = column("gpus");
      c_duration = column("duration");
      c_tenant = column("tenant");
      if (c_submit < 0 || c_gpus < 0 || c_duration < 0) {
        csv.add(at, "expected a header with columns submit_time, gpus, duration (and optionally tenant)");
        break;
      }
      continue;
    }
    if (cells.size() != header.size()) {
      csv.add_repeated("rows with the wrong number of cells", at,
                       "expected " + std::to_string(header.size()) + " cells, found " + std::to_string(cells.size()));
      continue;
    }
    // Numbers in any standard form ("82.2", "2.24e+06"), or a duration with its unit.
    auto seconds = [&](int c) -> std::optional<double> {
      const std::string& v = cells[static_cast<std::size_t>(c)];
      std::optional<double> x = parse_number(v);
      if (!x) {
        try {
          x = parse_quantity(v, Dimension::time);
        } catch (const std::exception&) {
        }
      }
      if (x && *x >= 0 && *x <= kLongestSeconds) return x;
      const std::string& name = header[static_cast<std::size_t>(c)];
      csv.add_repeated(name + " cells that are not seconds", at + ", " + name,
                       "expected seconds from 0 to 1e9 or a duration such as \"90 s\", found \"" + v + "\"");
      return std::nullopt;
    };
    const auto submit = seconds(c_submit);
    const auto duration = seconds(c_duration);
    const bool positive = duration.has_value() && duration.value() > 0;
    if (duration.has_value() && !positive) {
      csv.add_repeated("durations of 0", at + ", duration", "expected a positive duration, found \"" + cells[static_cast<std::size_t>(c_duration)] + "\"");
    }
    // A whole number, also when written as one ("8.0", "8e0").
    int gpus = 0;
    const std::string& g = cells[static_cast<std::size_t>(c_gpus)];
    if (const std::optional<double> x = parse_number(g); x && *x >= 1 && *x <= 65536 && *x == std::floor(*x)) {
      gpus = static_cast<int>(*x);
    } else {
      csv.add_repeated("gpus cells that are not a whole number from 1 to 65536", at + ", gpus",
                       "expected a whole number of GPUs from 1 to 65536, found \"" + g + "\"");
    }
    std::optional<std::uint32_t> tenant;
    const std::string tenant_name = c_tenant >= 0 ? cells[static_cast<std::size_t>(c_tenant)] : default_tenant.value_or(sc.tenants[0].name);
    tenant = find_tenant(sc.tenants, tenant_name);
    if (!tenant) {
      csv.add_repeated("unknown tenants", at + ", tenant",
                       "unknown tenant \"" + tenant_name + "\" (expected one of " + tenant_names(sc.tenants) + ")");
    }
    if (!submit || !positive || gpus == 0 || !tenant) continue;
    Stream& stream = groups[{*tenant, gpus}];
    stream.tenant = *tenant;
    stream.arrival.process = ArrivalProcess::times;
    stream.arrival.times_s.push_back(*submit);
    stream.arrival.work_scales.push_back(*duration);
  }
  if (header.empty() && csv.empty()) csv.add("", "expected a CSV header with submit_time, gpus, duration");
  if (!csv.empty()) {
    absorbing(s.problems(), [&] { csv.throw_if_any(); return true; });
    return;
  }
  if (ref == nullptr) return;
  TaskSpec job;
  job.name = "job";
  job.recorded = TaskSpec::Recorded{ref->peak_for(Dtype::bf16), ref->training_throughput.of(precision), precision};
  const std::string speed_note = trace_speed_note(file, *ref, job, sc.cluster);
  bool noted = false;
  for (auto& [key, stream] : groups) {
    // One workflow per gang size, shared by the traces recorded alike; another trace's, recorded on another GPU
    // or in another precision, is its own: "trace/8gpu/p40-fp32".
    std::string id = "trace/" + std::to_string(key.second) + "gpu";
    const auto named = [&](const std::string& name) {
      return std::find_if(sc.workflows.begin(), sc.workflows.end(), [&](const Workflow& w) { return w.id == name; });
    };
    if (const auto same = named(id); same != sc.workflows.end() && same->tasks.front().recorded != job.recorded) {
      id += "/" + ref->id + "-" + std::string(training_precision_name(precision));
    }
    auto it = named(id);
    if (it == sc.workflows.end()) {
      Workflow wf;
      wf.id = id;
      wf.name = "trace job on " + std::to_string(key.second) + " GPUs";
      wf.file = file;
      TaskSpec t = job;
      t.gpus = key.second;
      t.flop = job.recorded->peak_flop_per_s * key.second;  // one second on each GPU of the gang
      wf.tasks.push_back(t);
      wf.finalize();
      sc.workflows.push_back(std::move(wf));
      it = sc.workflows.end() - 1;
    }
    if (!speed_note.empty() && !noted) {  // once a file, on its first gang size's workflow
      noted = true;
      if (std::find(it->assumptions.begin(), it->assumptions.end(), speed_note) == it->assumptions.end()) it->assumptions.push_back(speed_note);
    }
    stream.workflow = static_cast<std::uint32_t>(it - sc.workflows.begin());
    stream.arrival.count = static_cast<std::int64_t>(stream.arrival.times_s.size());
    sc.streams.push_back(std::move(stream));
  }
}

// A workload entry that is a training job: "training" a job file for `train` (its cluster unused) or an
// inline job object, "iterations" of it.
std::optional<Workflow> read_training(ObjectReader& s, const ClusterSpec& cluster, const std::string& base_dir) {
  const Json& value = *s.field("training");
  // Each iteration is a task held in memory with the workflow (a few hundred bytes): 100,000 of them, tens of MB.
  const auto iterations = s.integer("iterations", Need::required, 1, 100'000);
  std::optional<TrainingJob> job;
  if (value.is_string()) {
    const std::string path = resolve(base_dir, value.get<std::string>());
    job = absorbing(s.problems(), [&] {
      const std::string text = read_named_file(s.problems(), s.pointer("training"), path);
      Problems own(path);
      const Json doc = detail::parse_json(text, own);
      own.throw_if_any();
      TrainingJob j;
      detail::read_training_job(doc, "", own, true, j);
      own.throw_if_any();
      return j;
    });
  } else if (value.is_object()) {
    Problems own(s.problems().file());
    TrainingJob j;
    detail::read_training_job(value, s.pointer("training"), own, true, j);
    if (!value.contains("name")) own.add(s.pointer("training"), "missing \"name\": a training job written in a scenario needs one");
    if (own.empty()) job = std::move(j);
    else absorbing(s.problems(), [&] { own.throw_if_any(); return true; });
  } else {
    s.problem("training", "expected a training job file path or an inline training job object, found " + detail::describe(value));
  }
  // {"every": 100, "write": "20 GB/s", "async": false}: the job's own checkpoint (docs/training.md#checkpoints).
  TrainingCheckpoint checkpoint;
  const Json* c = s.field("checkpoint");
  if (c != nullptr) {
    ObjectReader r(*c, s.pointer("checkpoint"), s.problems());
    if (r.ok()) {
      checkpoint.every = static_cast<int>(r.integer("every", Need::required, 1, 100'000).value_or(0));
      const std::optional<double> write = r.quantity("write", Dimension::bandwidth, Need::required);
      checkpoint.write_Bps = write.value_or(0);
      if (write && !(*write > 0)) r.problem("write", "expected a positive rate at which a node writes the checkpoint, such as \"20 GB/s\"");
      checkpoint.async = r.boolean_or("async", false);
      if (iterations && checkpoint.every > *iterations) {
        r.problem("every", "expected at most the job's " + std::to_string(*iterations) + " iterations (a checkpoint never saved keeps nothing), found " + std::to_string(checkpoint.every));
      }
      r.finish();
    }
  }
  // {"min_dp": 1, "restart": "2 min"}: an elastic job (docs/training.md#elastic-jobs).
  TrainingElastic elastic;
  bool elastic_ok = true;
  if (const Json* e = s.field("elastic")) {
    ObjectReader r(*e, s.pointer("elastic"), s.problems());
    elastic_ok = r.ok();
    if (r.ok()) {
      const auto min_dp = r.integer("min_dp", Need::required, 1, 8192);
      const auto restart = r.quantity("restart", Dimension::time, Need::required);
      elastic.min_dp = static_cast<int>(min_dp.value_or(0));
      elastic.restart_s = restart.value_or(0);
      elastic_ok = min_dp && restart;
      if (job && min_dp && *min_dp > job->dp) {
        r.problem("min_dp", "expected at most the job's dp (" + std::to_string(job->dp) + ", the most replicas it runs), found " + std::to_string(*min_dp));
        elastic_ok = false;
      }
      if (job && min_dp && *min_dp == job->dp) elastic = {};  // elasticity off, as without the field (handy with --set)
      r.finish();
    }
    if (c != nullptr && elastic.min_dp > 0) {
      s.problem("elastic", "expected an elastic job or a job with its own checkpoint, not both (an elastic job's restart reads its state back)");
      elastic_ok = false;
    }
  }
  if (!job || !iterations || cluster.groups.empty() || !elastic_ok || (c != nullptr && !(checkpoint.every > 0 && checkpoint.write_Bps > 0))) return std::nullopt;
  // Before anything is timed: the job's gang on the scenario's cluster (in doubles, as read it may pass an int).
  const double gang = static_cast<double>(job->tp) * job->cp * job->pp * job->dp;
  if (gang > cluster.gpu_count()) {
    // An inline job's field; a job file's gang is refused where the scenario names the file.
    const bool inline_job = job->file == s.problems().file();
    s.problems().add(inline_job ? job->pointer + "/parallel" : s.pointer("training"), "tp x cp x pp x dp = " + format_number(gang) + " GPUs, more than the cluster's " + std::to_string(cluster.gpu_count()));
    return std::nullopt;
  }
  return absorbing(s.problems(), [&] {
    check_training_job(*job);
    Workflow wf = detail::training_workflow(*job, static_cast<int>(*iterations), cluster, checkpoint, elastic);
    if (elastic.min_dp > 0 && wf.tasks.front().elastic->sizes.size() < 2) {
      s.problems().add(s.pointer("elastic") + "/min_dp", "expected a DP degree from " + std::to_string(elastic.min_dp) + " to " + std::to_string(job->dp - 1) +
                                                             " that the global batch of " + std::to_string(job->global_batch) + " divides into (as train accepts it), found none");
    }
    wf.id = "training:" + job->name;
    return wf;
  });
}

void read_workload(ObjectReader& top, Scenario& sc, const std::vector<std::string>& broken_workflows,
                   const std::string& base_dir) {
  // A scenario of serving deployments alone has no workflows to arrive.
  const Json* value = top.field("workload", top.field("serving") != nullptr ? Need::optional : Need::required);
  if (value == nullptr) return;
  if (!value->is_array() || value->empty()) {
    top.problem("workload", "expected a non-empty array of arrival streams, found " + detail::describe(*value));
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    ObjectReader s((*value)[i], detail::child_pointer(top.pointer("workload"), i), top.problems());
    if (!s.ok()) continue;
    if ((*value)[i].contains("trace")) {
      absorbing(top.problems(), [&] { read_trace(s, sc, base_dir); return true; });
      s.finish();
      continue;
    }
    const bool training = (*value)[i].contains("training");
    Stream stream;
    if (auto tenant = s.string("tenant", sc.tenants.size() > 1 ? Need::required : Need::optional)) {
      if (auto t = find_tenant(sc.tenants, *tenant)) {
        stream.tenant = *t;
      } else {
        s.problem("tenant", "unknown tenant \"" + *tenant + "\" (expected one of " + tenant_names(sc.tenants) + ")");
      }
    }
    if (training) {
      if (auto wf = read_training(s, sc.cluster, base_dir)) {
        if (std::any_of(sc.workflows.begin(), sc.workflows.end(), [&](const Workflow& w) { return w.id == wf->id; })) {
          s.problem("training", "a second training job named \"" + wf->tasks.front().training->job + "\"; expected each job's name once");
        } else {
          stream.workflow = static_cast<std::uint32_t>(sc.workflows.size());
          sc.workflows.push_back(std::move(*wf));
        }
      }
      if (s.field("workflow") != nullptr) s.problem("workflow", "expected a training job or a workflow, not both");
    } else if (auto wf = s.string("workflow", Need::required)) {
      const auto it = std::find_if(sc.workflows.begin(), sc.workflows.end(),
                                   [&](const Workflow& w) { return w.id == *wf; });
      const bool broken = std::find(broken_workflows.begin(), broken_workflows.end(), *wf) != broken_workflows.end();
      if (it == sc.workflows.end() && !broken) {
        std::string names;
        for (const Workflow& w : sc.workflows) names += (names.empty() ? "\"" : ", \"") + w.id + "\"";
        s.problem("workflow", "unknown workflow \"" + *wf + "\" (expected one of " + names + ")");
      } else if (!broken) {
        stream.workflow = static_cast<std::uint32_t>(it - sc.workflows.begin());
      }
    }
    // A training job starts once, at 0, unless told otherwise.
    stream.arrival = read_arrival(s, sc.horizon_s, top.field("horizon") != nullptr, training ? Need::optional : Need::required);
    s.finish();
    sc.streams.push_back(std::move(stream));
  }
  // A stream over its own limit was reported there: not again here, through the tasks it would make.
  double records = 0;
  bool stream_over = false;
  for (const Stream& s : sc.streams) {
    const double arrivals = most_arrivals(s.arrival, sc.horizon_s);
    stream_over = stream_over || arrivals > static_cast<double>(kMaxArrivals);
    if (s.workflow < sc.workflows.size()) records += arrivals * static_cast<double>(sc.workflows[s.workflow].tasks.size());
  }
  if (records > kMaxTasks && !stream_over) {
    top.problem("workload", "would make up to " + about(records) + " tasks (each stream's arrivals times its workflow's tasks), over the 200,000,000 a run "
                            "holds in memory: fewer arrivals, a slower rate or an earlier horizon");
  }
}

void read_policy(ObjectReader& top, PolicySpec& policy, const std::string& base_dir) {
  const Json* value = top.field("policy");
  if (value == nullptr) {
    policy.name = "fifo";  // it has no parameters
    return;
  }
  ObjectReader p(*value, top.pointer("policy"), top.problems());
  policy.name = p.string("name", Need::required).value_or("fifo");
  const Json* params = p.field("params");
  p.finish();
  const PolicyInfo* info = find_policy(policy.name);
  if (info == nullptr) {
    p.problem("name", "unknown policy \"" + policy.name + "\" (expected one of " + policy_names() + ")" + did_you_mean(policy.name, policy_ids()));
    return;
  }
  static const Json kNoParams = Json::object();
  ObjectReader r(params != nullptr ? *params : kNoParams, p.pointer("params"), top.problems());
  for (const ParamInfo& param : info->params) {
    const Json* v = r.field(param.name);
    if (v == nullptr) continue;
    const bool ok = (param.type == ParamType::number && v->is_number()) ||
                    (param.type == ParamType::integer && v->is_number_integer()) ||
                    (param.type == ParamType::boolean && v->is_boolean()) ||
                    ((param.type == ParamType::string || param.type == ParamType::path) && v->is_string());
    if (!ok) {
      r.problem(param.name, "expected " + std::string(param_type_name(param.type)) + " for policy \"" +
                              policy.name + "\", found " + detail::describe(*v));
      continue;
    }
    switch (param.type) {
      case ParamType::number: policy.params.set(param.name, v->get<double>()); break;
      case ParamType::integer: policy.params.set(param.name, v->get<std::int64_t>()); break;
      case ParamType::boolean: policy.params.set(param.name, v->get<bool>()); break;
      case ParamType::string: policy.params.set(param.name, v->get<std::string>()); break;
      case ParamType::path: {
        const std::string path = v->get<std::string>();
        policy.params.set(param.name, path.empty() ? path : resolve(base_dir, path));
        break;
      }
    }
  }
  r.finish();
  for (const ParamInfo& param : info->params) {
    if (policy.params.values().count(param.name) == 0) policy.params.set(param.name, param.default_value);
  }
  // Values a type cannot rule out (a list in a string, a negative time) are checked by making the policy.
  if (r.ok()) {
    try {
      info->make(policy.params);
    } catch (const InputError& e) {
      for (const Problem& problem : e.problems()) r.problem(problem.pointer, problem.message + " for policy \"" + policy.name + "\"");
    }
  }
}

void read_slos(ObjectReader& top, Scenario& sc) {
  const Json* value = top.field("slos");
  if (value == nullptr) return;
  if (!value->is_array()) {
    top.problem("slos", "expected an array of SLOs, found " + detail::describe(*value));
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    ObjectReader r((*value)[i], detail::child_pointer(top.pointer("slos"), i), top.problems());
    Slo slo;
    if (auto tenant = r.string("tenant", Need::optional)) {
      slo.tenant = find_tenant(sc.tenants, *tenant);
      if (!slo.tenant) r.problem("tenant", "unknown tenant \"" + *tenant + "\" (expected one of " + tenant_names(sc.tenants) + ")");
    }
    if (r.field("class") != nullptr) {
      slo.work_class = static_cast<WorkClass>(r.choice("class", {"batch", "interactive"}, 0));
      if (slo.tenant) r.problem("class", "an SLO is for a tenant or for a class, not both");
    }
    if (r.field("metric", Need::required) != nullptr) {
      slo.metric = static_cast<SloMetric>(r.choice("metric", {"latency_p50", "latency_p95", "latency_p99", "throughput", "attainment"}, 1));
    }
    switch (slo.metric) {
      case SloMetric::throughput: slo.target = r.quantity("target", Dimension::rate, Need::required).value_or(0); break;
      case SloMetric::attainment:
        slo.within_s = r.quantity("within", Dimension::time, Need::required).value_or(0);
        slo.target = r.number("target", Need::required, 0.0, 1.0).value_or(0);
        break;
      default: slo.target = r.quantity("target", Dimension::time, Need::required).value_or(0);
    }
    r.finish();
    sc.slos.push_back(slo);
  }
}

// "n3.g5" (a GPU: with MIG, all its instances), "n3.g5.m2" (one MIG instance) or "n3" (a node) of the
// cluster: first GPU index and count, or nullopt.
std::optional<std::pair<std::uint32_t, std::uint32_t>> find_device(const ClusterSpec& cluster, const std::string& name, bool gpu) {
  unsigned node = 0, local = 0, slice = 0;
  int used = 0;
  bool one_slice = false;
  bool parsed = false;
  if (!gpu) {
    parsed = std::sscanf(name.c_str(), "n%u%n", &node, &used) == 1;
  } else if (std::sscanf(name.c_str(), "n%u.g%u.m%u%n", &node, &local, &slice, &used) == 3) {
    parsed = one_slice = true;
  } else {
    parsed = std::sscanf(name.c_str(), "n%u.g%u%n", &node, &local, &used) == 2;
  }
  if (!parsed || used != static_cast<int>(name.size())) return std::nullopt;
  std::uint32_t first = 0, seen = 0;
  for (const NodeGroup& g : cluster.groups) {
    for (int k = 0; k < g.count; ++k, ++seen) {
      if (seen == node) {
        if (!gpu) return std::pair{first, static_cast<std::uint32_t>(g.node.gpus)};
        const auto slices = static_cast<unsigned>(g.mig_slices);
        if (local >= static_cast<unsigned>(g.node.gpus) / slices || (one_slice && (slices == 1 || slice >= slices))) return std::nullopt;
        if (one_slice) return std::pair{first + local * slices + slice, 1u};
        return std::pair{first + local * slices, slices};
      }
      first += static_cast<std::uint32_t>(g.node.gpus);
    }
  }
  return std::nullopt;
}

// A cable of the cluster's fabric named as the topology names links ("leaf0>spine1", either way round).
void read_link_fault(ObjectReader& e, const Topology& topology, const std::string& name, FaultEvent& ev) {
  const std::optional<std::uint32_t> link = topology.find_link(name);
  if (!link) {
    e.problem("link", "no link \"" + name + "\" in this cluster (links are named \"from>to\" as in link_bytes, such as \"leaf0>spine1\" or \"n0.nic0>switch\")");
  } else if (!topology.is_cable(*link)) {
    e.problem("link", "expected a NIC or fabric link (NIC to switch or leaf, leaf to spine), found \"" + name +
                          "\" inside a node; links inside a node fail with their GPU or node");
  } else {
    ev.link = link;
    ev.gpu_count = 0;
    ev.what = "link " + name;
  }
}

// Random failures or preemptions faster than this across the cluster are a storm, not a what-if: each
// costs events, and at an mtbf of "1 ns" a run would spend them all on failures and never reach the work.
constexpr double kMaxRandomFailuresPerSecond = 1000;

// The problem with `count` things each failing once per `mtbf_s` on average, if they fail too often.
std::optional<std::string> storm(double count, const char* things, double mtbf_s) {
  if (!(mtbf_s > 0) || count / mtbf_s <= kMaxRandomFailuresPerSecond) return std::nullopt;
  return "a failure storm: " + format_number(count) + " " + things + " would fail " + about(count / mtbf_s) +
         " times per simulated second, over the 1,000 a run simulates: expected at least " +
         format_quantity(count / kMaxRandomFailuresPerSecond, Dimension::time);
}

void read_faults(ObjectReader& top, Scenario& sc, bool cluster_ok) {
  const Json* value = top.field("faults");
  if (value == nullptr) return;
  ObjectReader f(*value, top.pointer("faults"), top.problems());
  if (!f.ok()) return;
  FaultSpec& spec = sc.faults;
  std::optional<Cluster> cluster;  // built for the first link fault
  std::optional<Topology> topology;
  if (const Json* events = f.field("events")) {
    if (!events->is_array()) f.problem("events", "expected an array of failures, found " + detail::describe(*events));
    for (std::size_t i = 0; events->is_array() && i < events->size(); ++i) {
      ObjectReader e((*events)[i], detail::child_pointer(f.pointer("events"), i), top.problems());
      if (!e.ok()) continue;
      FaultEvent ev;
      ev.at_s = e.quantity("at", Dimension::time, Need::required).value_or(0);
      const auto gpu = e.string("gpu", Need::optional), node = e.string("node", Need::optional);
      const auto link = e.string("link", Need::optional);
      const int named = int{gpu.has_value()} + int{node.has_value()} + int{link.has_value()};
      if (named != 1) {
        e.problem(gpu ? (node ? "node" : "link") : node ? "link" : "gpu",
                  "expected exactly one of \"gpu\" (such as \"n0.g1\"), \"node\" (such as \"n0\") or \"link\" (such as \"leaf0>spine1\")");
      } else if (link) {
        if (cluster_ok && !topology) {
          cluster.emplace(sc.cluster);
          topology.emplace(*cluster, sc.cluster.fabric);
        }
        if (topology) read_link_fault(e, *topology, *link, ev);
      } else if (const auto found = find_device(sc.cluster, gpu ? *gpu : *node, gpu.has_value())) {
        std::tie(ev.gpu_first, ev.gpu_count) = *found;
        ev.what = (gpu ? "GPU " : "node ") + (gpu ? *gpu : *node);
      } else {
        e.problem(gpu ? "gpu" : "node", "no " + std::string(gpu ? "GPU" : "node") + " \"" + (gpu ? *gpu : *node) + "\" in this cluster");
      }
      if (auto down = e.quantity("for", Dimension::time, Need::optional)) ev.down_s = *down;
      e.finish();
      spec.events.push_back(ev);
    }
  }
  // `count`: how many things fail (for links, the nodes: a lower bound on the cables).
  auto random = [&](std::string_view key, double count, const char* things, double& mtbf, double& mttr) {
    if (const Json* r = f.field(key)) {
      ObjectReader o(*r, f.pointer(key), top.problems());
      const std::optional<double> between = o.quantity("mtbf", Dimension::time, Need::required);
      mtbf = between.value_or(0);
      mttr = o.quantity("mttr", Dimension::time, Need::required).value_or(0);
      if (between && *between <= 0) o.problem("mtbf", "expected a positive time");  // a bad or missing one is reported already
      if (const auto why = storm(count, things, mtbf)) o.problem("mtbf", *why);
      o.finish();
    }
  };
  random("gpu", sc.cluster.gpu_count(), "GPUs", spec.gpu_mtbf_s, spec.gpu_mttr_s);
  random("node", sc.cluster.node_count(), "nodes", spec.node_mtbf_s, spec.node_mttr_s);
  random("link", sc.cluster.node_count(), "nodes' cables (at least)", spec.link_mtbf_s, spec.link_mttr_s);
  if (const Json* retry = f.field("retry")) {
    ObjectReader r(*retry, f.pointer("retry"), top.problems());
    spec.max_attempts = static_cast<int>(r.integer_or("max_attempts", 1, 1, 1000));
    spec.backoff_s = r.quantity_or("backoff", Dimension::time, 0);
    r.finish();
  }
  if (const Json* checkpoint = f.field("checkpoint")) {
    ObjectReader c(*checkpoint, f.pointer("checkpoint"), top.problems());
    spec.checkpoint_interval_s = c.quantity("interval", Dimension::time, Need::required).value_or(0);
    if (spec.checkpoint_interval_s <= 0 && c.ok()) c.problem("interval", "expected a positive time");
    spec.restore_s = c.quantity_or("restore", Dimension::time, 0);
    c.finish();
  }
  f.finish();
}

void read_spot(ObjectReader& top, Scenario& sc) {
  const Json* value = top.field("spot");
  if (value == nullptr) return;
  ObjectReader s(*value, top.pointer("spot"), top.problems());
  if (!s.ok()) return;
  sc.spot.nodes = static_cast<int>(s.integer("nodes", Need::required, 1, sc.cluster.node_count()).value_or(0));
  sc.spot.price_factor = s.number("price_factor", Need::required, 0.0, 1.0).value_or(1);
  sc.spot.mtbp_s = s.quantity("mtbp", Dimension::time, Need::required).value_or(0);
  if (!(sc.spot.mtbp_s > 0) && s.field("mtbp") != nullptr) s.problem("mtbp", "expected a positive time");
  if (const auto why = storm(sc.spot.nodes, "spot nodes", sc.spot.mtbp_s)) s.problem("mtbp", *why);
  sc.spot.restock_s = s.quantity("restock", Dimension::time, Need::required).value_or(0);
  s.finish();
}

void read_autoscale(ObjectReader& top, Scenario& sc) {
  const Json* value = top.field("autoscale");
  if (value == nullptr) return;
  ObjectReader a(*value, top.pointer("autoscale"), top.problems());
  if (!a.ok()) return;
  AutoscaleSpec& spec = sc.autoscale;
  const int nodes = sc.cluster.node_count();
  spec.policy = static_cast<AutoscaleSpec::Policy>(a.choice("policy", {"none", "utilization", "queue", "schedule"}, 0));
  if (a.field("policy", Need::required) == nullptr) return;
  spec.min_nodes = static_cast<int>(a.integer_or("min_nodes", 1, 0, nodes));
  spec.initial_nodes = static_cast<int>(a.integer_or("initial_nodes", spec.min_nodes, spec.min_nodes, nodes));
  spec.interval_s = a.quantity_or("interval", Dimension::time, 60);
  // An autoscaler decides every 15 s to a few minutes; one that decides every nanosecond would spend a
  // run's events on its own ticks.
  if (!(spec.interval_s >= 1)) a.problem("interval", "expected at least 1 s (autoscalers decide every 15 s to a few minutes)");
  spec.provisioning_s = a.quantity_or("provisioning", Dimension::time, 0);
  spec.scale_in_window_s = a.quantity_or("scale_in_window", Dimension::time, 300);
  // Every policy's settings are known fields, so `--set /autoscale/policy=none` keeps a file valid.
  using P = AutoscaleSpec::Policy;
  const auto need = [&](P p) { return spec.policy == p ? Need::required : Need::optional; };
  spec.target_utilization = a.number("target_utilization", need(P::utilization), 0.0, 1.0).value_or(0.7);
  if (!(spec.target_utilization > 0)) a.problem("target_utilization", "expected a fraction above 0, at most 1");
  spec.target_wait_s = a.quantity("target_wait", Dimension::time, need(P::queue)).value_or(30);
  spec.period_s = a.quantity_or("period", Dimension::time, 86400);
  if (!(spec.period_s >= 1)) a.problem("period", "expected at least 1 s: the schedule repeats every period");
  for (const auto& [field, seconds] : {std::pair{"interval", spec.interval_s}, std::pair{"provisioning", spec.provisioning_s},
                                       std::pair{"scale_in_window", spec.scale_in_window_s}, std::pair{"target_wait", spec.target_wait_s},
                                       std::pair{"period", spec.period_s}}) {
    if (seconds > kLongestSeconds) a.problem(field, "expected at most 1e9 s (32 years), found " + format_quantity(seconds, Dimension::time));
  }
  if (const Json* table = a.field("schedule", need(P::schedule))) {
    if (!table->is_array() || table->empty()) a.problem("schedule", "expected a non-empty array of {at, nodes}");
    for (std::size_t i = 0; table->is_array() && i < table->size(); ++i) {
      ObjectReader e((*table)[i], detail::child_pointer(a.pointer("schedule"), i), top.problems());
      const double at = e.quantity("at", Dimension::time, Need::required).value_or(0);
      if (at >= spec.period_s && spec.period_s >= 1) {
        e.problem("at", "expected a time within the period (" + format_quantity(spec.period_s, Dimension::time) + "): the schedule repeats every period");
      } else if (at > sc.horizon_s) {
        e.problem("at", "after the horizon (" + format_quantity(sc.horizon_s, Dimension::time) + "): it would never take effect");
      } else if (std::any_of(spec.schedule.begin(), spec.schedule.end(), [&](const auto& entry) { return entry.first == at; })) {
        e.problem("at", "another entry is at " + format_quantity(at, Dimension::time) + ": expected one number of nodes at each time");
      }
      const int n = static_cast<int>(e.integer("nodes", Need::required, spec.min_nodes, nodes).value_or(spec.min_nodes));
      e.finish();
      spec.schedule.emplace_back(at, n);
    }
    std::sort(spec.schedule.begin(), spec.schedule.end());
  }
  a.finish();
}

// One GPU an instance runs its tasks one at a time on one GPU: none may want a gang, grow elastically or
// batch with other instances' tasks, and no autoscaler may turn off a node whose GPU it holds.
void check_one_gpu(ObjectReader& top, const Scenario& sc) {
  if (sc.autoscale.on()) {
    top.problem("instance_placement", "\"one-gpu\" holds a GPU for an instance between its tasks, which the cluster autoscaler would take for idle: expected \"spread\" beside \"autoscale\"");
    return;
  }
  for (const Workflow& wf : sc.workflows) {
    for (const TaskSpec& t : wf.tasks) {
      const char* why = t.gpus > 1 ? "needs a gang of GPUs" : t.elastic ? "is elastic" : t.batching ? "batches with other instances' tasks" : nullptr;
      if (why == nullptr) continue;
      top.problem("instance_placement", "\"one-gpu\" runs each workflow instance on one GPU, a task at a time (as stock ComfyUI runs a prompt), but task \"" + t.name +
                                            "\" of workflow \"" + wf.name + "\" " + why + ": expected \"spread\", or such tasks left out");
      return;
    }
  }
}

// A tenant pinned to nodes (or kept off others' exclusive nodes) must have room there for every
// task it submits.
void check_pinned_feasible(const Scenario& sc, Problems& problems) {
  if (std::all_of(sc.tenants.begin(), sc.tenants.end(), [](const Tenant& t) { return t.nodes.empty(); })) return;
  const auto nodes = static_cast<std::uint32_t>(sc.cluster.node_count());
  const std::vector<std::uint8_t> allowed = tenant_node_allowed(sc.tenants, nodes);
  std::vector<std::uint8_t> checked(sc.tenants.size() * sc.workflows.size(), 0);
  for (const Stream& s : sc.streams) {
    if (std::exchange(checked[s.tenant * sc.workflows.size() + s.workflow], 1) != 0) continue;
    const Workflow& wf = sc.workflows[s.workflow];
    for (const TaskSpec& task : wf.tasks) {
      const double need = task.vram_per_gpu_bytes(sc.max_offload);
      std::int64_t fitting = 0;
      std::uint32_t n = 0;
      for (const NodeGroup& g : sc.cluster.groups) {
        for (int c = 0; c < g.count; ++c, ++n) {
          if (allowed[s.tenant * nodes + n] != 0 && g.gpu.vram_bytes >= need) fitting += g.node.gpus;
        }
      }
      if (fitting < task.gpus) {
        problems.add("/tenants", "tenant \"" + sc.tenants[s.tenant].name + "\" may use " + std::to_string(fitting) +
                                     " GPUs that can hold task \"" + task.name + "\" of workflow \"" + wf.id + "\", which needs " +
                                     std::to_string(task.gpus) + " (its \"nodes\", less nodes kept by exclusive tenants)");
      }
    }
  }
}

// Impossible work is reported before the simulation starts: a task whose per-GPU VRAM exceeds every
// GPU of the cluster, or a gang larger than the GPUs that could hold it.
void check_feasible(const Scenario& sc, Problems& problems) {
  // GPUs the serving replicas hold all run, per node group: no task runs there.
  std::vector<std::int64_t> held(sc.cluster.groups.size(), 0);
  for (const auto& d : sc.serving) {
    for (const ServingDeployment::Placement& p : d->placement) {
      std::uint32_t first = 0;
      std::size_t g = 0;
      while (p.node >= first + static_cast<std::uint32_t>(sc.cluster.groups[g].count)) first += static_cast<std::uint32_t>(sc.cluster.groups[g++].count);
      held[g] += p.gpus;
    }
  }
  const std::int64_t held_total = std::accumulate(held.begin(), held.end(), std::int64_t{0});
  std::vector<std::uint32_t> used(sc.workflows.size(), 0);
  for (const Stream& s : sc.streams) used[s.workflow] = 1;
  for (std::size_t w = 0; w < sc.workflows.size(); ++w) {
    if (used[w] == 0) continue;
    const Workflow& wf = sc.workflows[w];
    for (std::size_t t = 0; t < wf.tasks.size(); ++t) {
      const TaskSpec& task = wf.tasks[t];
      const double need = task.vram_per_gpu_bytes(sc.max_offload);
      double largest = 0;
      std::int64_t fitting = 0, total = 0;
      for (std::size_t k = 0; k < sc.cluster.groups.size(); ++k) {
        const NodeGroup& g = sc.cluster.groups[k];
        largest = std::max(largest, g.gpu.vram_bytes);
        total += static_cast<std::int64_t>(g.count) * g.node.gpus;
        if (g.gpu.vram_bytes >= need) fitting += static_cast<std::int64_t>(g.count) * g.node.gpus - held[k];
      }
      const std::string at = detail::child_pointer(wf.pointer + "/tasks", t);
      for (const NodeGroup& g : sc.cluster.groups) {
        if (task.flop > 0 && g.gpu.peak_for(task.dtype) <= 0) {
          problems.absorb(InputError({Problem{
              wf.file, at, "task \"" + task.name + "\" computes in " + std::string(dtype_name(task.dtype)) +
                               ", which GPU type \"" + g.gpu.id + "\" of scenario " + sc.file +
                               " cannot run (its catalog entry has no peak for it or a wider format)"}}));
        }
      }
      if (need > largest) {
        problems.absorb(InputError({Problem{
            wf.file, at,
            "task \"" + task.name + "\" needs " + format_quantity(need, Dimension::bytes) +
                " of VRAM per GPU (weights " + format_quantity(task.weights_per_gpu_bytes(), Dimension::bytes) +
                " + working set " + format_quantity(task.working_set_bytes, Dimension::bytes) +
                (sc.max_offload > 0 ? ", less the " + format_quantity(sc.max_offload * task.working_set_bytes, Dimension::bytes) +
                                          " memory.max_offload lets it keep in host memory"
                                    : std::string()) +
                "), more than the largest GPU of scenario " + sc.file + " has (" +
                format_quantity(largest, Dimension::bytes) + ")"}}));
      } else if (task.gpus > fitting) {
        problems.absorb(InputError({Problem{
            wf.file, at,
            "task \"" + task.name + "\" needs a gang of " + std::to_string(task.gpus) + " GPUs with " +
                format_quantity(need, Dimension::bytes) + " of VRAM each, but the cluster of scenario " +
                sc.file + " has " + std::to_string(fitting) + " such GPUs (" + std::to_string(total) +
                " in all" + (held_total > 0 ? ", " + std::to_string(held_total) + " of them held by serving replicas" : std::string()) + ")"}}));
      }
    }
  }
  check_pinned_feasible(sc, problems);
}

}  // namespace

std::vector<std::uint8_t> tenant_node_allowed(const std::vector<Tenant>& tenants, std::uint32_t nodes) {
  std::vector<std::uint8_t> allowed(tenants.size() * nodes, 1);
  for (std::size_t t = 0; t < tenants.size(); ++t) {
    if (!tenants[t].nodes.empty()) {
      for (std::uint32_t n = 0; n < nodes; ++n) allowed[t * nodes + n] = 0;
      for (std::uint32_t n : tenants[t].nodes) allowed[t * nodes + n] = 1;
    }
    if (!tenants[t].exclusive) continue;
    for (std::size_t other = 0; other < tenants.size(); ++other) {
      if (other == t) continue;
      for (std::uint32_t n : tenants[t].nodes) allowed[other * nodes + n] = 0;
    }
  }
  return allowed;
}

std::string seed_use(const Scenario& sc) {
  for (const Stream& s : sc.streams) {
    const std::string of = " of workflow \"" + (s.workflow < sc.workflows.size() ? sc.workflows[s.workflow].id : std::string()) + "\"";
    switch (s.arrival.process) {
      case ArrivalProcess::poisson: return "poisson arrivals" + of;
      case ArrivalProcess::bursty: return "bursty arrivals" + of;
      case ArrivalProcess::diurnal: return "diurnal arrivals" + of;
      case ArrivalProcess::closed:
        if (s.arrival.think_s > 0) return "the think times of a closed loop" + of;
        break;
      case ArrivalProcess::once:
      case ArrivalProcess::periodic:
      case ArrivalProcess::times: break;
    }
  }
  for (const Workflow& w : sc.workflows) {
    for (const TaskSpec& t : w.tasks) {
      if (t.size == TaskSpec::Size::exponential) return "the drawn work sizes of task \"" + t.name + "\" of workflow \"" + w.id + "\"";
    }
  }
  if (sc.faults.gpu_mtbf_s > 0 || sc.faults.node_mtbf_s > 0 || sc.faults.link_mtbf_s > 0) return "random failures";
  if (sc.spot.any() && sc.spot.mtbp_s > 0) return "spot preemptions";
  if (!sc.serving.empty()) return "the requests of serving deployment \"" + sc.serving.front()->name + "\"";
  return "";
}

std::string_view work_class_name(WorkClass c) { return c == WorkClass::interactive ? "interactive" : "batch"; }

std::string_view fabric_kind_name(FabricKind kind) {
  switch (kind) {
    case FabricKind::single_switch: return "single-switch";
    case FabricKind::fat_tree: return "fat-tree";
    case FabricKind::rail_optimized: return "rail-optimized";
  }
  return "?";
}

std::string_view slo_metric_name(SloMetric metric) {
  switch (metric) {
    case SloMetric::latency_p50: return "latency_p50";
    case SloMetric::latency_p95: return "latency_p95";
    case SloMetric::latency_p99: return "latency_p99";
    case SloMetric::throughput: return "throughput";
    case SloMetric::attainment: return "attainment";
  }
  return "?";
}

namespace {

// Where an edit's pointer leads in `doc`, made as it goes: missing object members are added, and an
// array grows by one at its end (index == size, or "-"), never more: "/tenants/1000000" in a list of
// three is a problem, not a million nulls. nullptr (with a problem added) where the pointer cannot lead.
Json* edit_target(Json& doc, const std::string& pointer, Problems& problems) {
  const auto bad = [&](const std::string& why) {
    problems.add(pointer, "cannot set this field (--set): " + why);
    return nullptr;
  };
  if (pointer.empty()) return &doc;
  if (pointer[0] != '/') return bad("expected a JSON pointer starting with /, such as /cluster/nodes/0/count");
  Json* node = &doc;
  std::string at;
  for (std::size_t b = 1; b <= pointer.size();) {
    const std::size_t e = std::min(pointer.find('/', b), pointer.size());
    std::string token = pointer.substr(b, e - b);
    b = e + 1;
    for (std::size_t t = 0; (t = token.find('~', t)) != std::string::npos; ++t) {  // ~1 is "/", ~0 is "~"
      if (t + 1 >= token.size() || (token[t + 1] != '0' && token[t + 1] != '1')) return bad("a ~ in a pointer must be ~0 or ~1");
      token.replace(t, 2, token[t + 1] == '1' ? "/" : "~");
    }
    const bool index_like = !token.empty() && (token == "-" || token.find_first_not_of("0123456789") == std::string::npos);
    if (node->is_null()) *node = token == "0" || token == "-" ? Json::array() : Json::object();
    if (node->is_object()) {
      node = &(*node)[token];
    } else if (node->is_array()) {
      const std::size_t size = node->size();
      if (!index_like || (token.size() > 1 && token[0] == '0')) {
        return bad((at.empty() ? std::string("the document") : at) + " is an array: expected an index from 0 to " + std::to_string(size) +
                   " (or -) where \"" + token + "\" is");
      }
      if (token == "-" || (token.size() <= 9 && std::stoul(token) == size)) {
        node->push_back(nullptr);
        node = &node->back();
      } else if (token.size() <= 9 && std::stoul(token) < size) {
        node = &(*node)[std::stoul(token)];
      } else {
        return bad((at.empty() ? std::string("the document") : at) + " has " + std::to_string(size) + " elements: index " + token +
                   " is past its end (an edit may change one of them or add one at " + std::to_string(size) + " or -)");
      }
    } else {
      return bad(at + " is " + detail::describe(*node) + ", which has no field \"" + token + "\"");
    }
    at += "/" + token;
  }
  return node;
}

}  // namespace

void detail::apply_edits(Json& doc, std::span<const ScenarioEdit> edits, Problems& problems) {
  for (const ScenarioEdit& e : edits) {
    Json value = Json::parse(e.value, nullptr, false);
    if (value.is_discarded()) value = e.value;
    if (Json* target = edit_target(doc, e.pointer, problems)) *target = std::move(value);
  }
}

ClusterSpec load_cluster(const std::string& path) {
  const std::string text = read_text_file(path);
  Problems problems(path);
  const Json doc = detail::parse_json(text, problems);
  problems.throw_if_any();
  if (doc.is_object() && doc.contains("cluster")) {
    const Scenario sc = load_scenario(path);
    return sc.cluster;
  }
  ClusterSpec cluster;
  detail::read_cluster(doc, "", problems, Catalog::builtin(), cluster);
  problems.throw_if_any();
  return cluster;
}

ClusterSpec cluster_of(const std::string& node_type, int count) {
  const Catalog& catalog = Catalog::builtin();
  if (catalog.node(node_type) == nullptr) {
    std::string known;
    for (const auto& [id, node] : catalog.nodes()) known += (known.empty() ? "" : ", ") + id;
    throw InputError({Problem{"--cluster", "", "unknown node type \"" + node_type + "\" (expected one of " + known +
                                                   ", or a cluster file)" + did_you_mean_key(node_type, catalog.nodes())}});
  }
  Problems problems("--cluster");
  ClusterSpec cluster;
  detail::read_cluster(Json{{"nodes", Json::array({Json{{"type", node_type}, {"count", count}}})}}, "", problems, catalog, cluster);
  problems.throw_if_any();
  return cluster;
}

Scenario parse_scenario(std::string_view json_text, const std::string& file_name, const std::string& base_dir,
                        std::span<const ScenarioEdit> edits) {
  Problems problems(file_name);
  Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  detail::apply_edits(doc, edits, problems);
  problems.throw_if_any();

  Scenario sc;
  sc.file = file_name;
  ObjectReader top(doc, "", problems);
  if (!top.ok()) problems.throw_if_any();
  sc.name = top.string("name", Need::required).value_or("");
  sc.description = top.string_or("description", "");
  sc.seed = static_cast<std::uint64_t>(
      top.integer_or("seed", 1, 0, std::numeric_limits<std::int64_t>::max()));
  sc.horizon_s = top.quantity("horizon", Dimension::time, Need::optional).value_or(sc.horizon_s);
  if (sc.horizon_s <= 0) top.problem("horizon", "expected a positive duration");
  sc.warmup_s = top.quantity_or("warmup", Dimension::time, 0);
  if (sc.warmup_s >= sc.horizon_s) top.problem("warmup", "expected less than the horizon (" + format_quantity(sc.horizon_s, Dimension::time) + ")");
  sc.max_events = static_cast<std::uint64_t>(top.integer_or("max_events", static_cast<std::int64_t>(sc.max_events), 1, std::int64_t{1} << 62));
  // From the network's own rounding room (what it refuses below) to 1%.
  sc.max_min_tolerance = top.number("max_min_tolerance", Need::optional, Network::kExactTolerance, 0.01);

  sc.catalog = Catalog::builtin();
  if (const Json* files = top.field("catalog")) {
    if (!files->is_array()) {
      top.problem("catalog", "expected an array of catalog file paths, found " + detail::describe(*files));
    } else {
      for (std::size_t i = 0; i < files->size(); ++i) {
        if (!(*files)[i].is_string()) {
          problems.add(detail::child_pointer(top.pointer("catalog"), i),
                       "expected a file path, found " + detail::describe((*files)[i]));
          continue;
        }
        const std::string path = resolve(base_dir, (*files)[i].get<std::string>());
        absorbing(problems, [&] {
          sc.catalog.add_json(read_named_file(problems, detail::child_pointer(top.pointer("catalog"), i), path), path);
          return true;
        });
      }
    }
  }

  if (const Json* cluster = top.field("cluster", Need::required)) {
    detail::read_cluster(*cluster, top.pointer("cluster"), problems, sc.catalog, sc.cluster);
  }
  const bool cluster_ok = problems.empty();  // only a well-formed cluster has links to name
  const std::vector<std::string> broken = read_workflows(top, sc.catalog, sc.cluster, base_dir, sc.workflows);
  read_tenants(top, sc.cluster, sc.tenants);
  if (const Json* serving = top.field("serving")) detail::read_serving(*serving, top.pointer("serving"), problems, sc.cluster, cluster_ok, base_dir, sc.serving);
  read_workload(top, sc, broken, base_dir);
  read_policy(top, sc.policy, base_dir);
  read_slos(top, sc);
  read_faults(top, sc, cluster_ok);
  read_spot(top, sc);
  read_autoscale(top, sc);
  sc.instance_placement = static_cast<Scenario::InstancePlacement>(top.choice("instance_placement", {"spread", "one-gpu"}, 0));
  if (sc.instance_placement == Scenario::InstancePlacement::one_gpu) check_one_gpu(top, sc);
  if (const Json* memory = top.field("memory")) {
    ObjectReader m(*memory, top.pointer("memory"), problems);
    sc.on_stall = static_cast<Scenario::OnStall>(m.choice("on_stall", {"wait", "fail"}, 0));
    sc.max_offload = m.number("max_offload", Need::optional, 0.0, 1.0).value_or(0);
    m.finish();
  }
  top.finish();
  problems.throw_if_any();

  check_feasible(sc, problems);
  problems.throw_if_any();
  return sc;
}

Scenario load_scenario(const std::string& path, std::span<const ScenarioEdit> edits) {
  const std::string base_dir = std::filesystem::path(path).parent_path().string();
  return parse_scenario(read_text_file(path), path, base_dir, edits);
}

}  // namespace fleetsim
