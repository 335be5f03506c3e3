#include "fleetsim/plan.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <tuple>

#include "../json_reader.hpp"
#include "../loaders.hpp"
#include "../parallel.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/policy.hpp"
#include "fleetsim/serving.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/suggest.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

constexpr std::uint64_t kConfirmSeedOffset = 1'000'000;  // confirmation seeds never repeat the search's

std::vector<std::string> strings(ObjectReader& r, std::string_view key) {
  std::vector<std::string> out;
  const Json* list = r.field(key);
  if (list == nullptr) return out;
  if (!list->is_array() || list->empty()) {
    r.problem(key, "expected a non-empty array of names, found " + detail::describe(*list));
    return out;
  }
  for (std::size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_string()) {
      r.problems().add(detail::child_pointer(r.pointer(key), i), "expected a name, found " + detail::describe((*list)[i]));
    } else if (std::find(out.begin(), out.end(), (*list)[i].get<std::string>()) != out.end()) {  // a line searched twice
      r.problems().add(detail::child_pointer(r.pointer(key), i), "\"" + (*list)[i].get<std::string>() + "\" is listed twice");
    } else {
      out.push_back((*list)[i].get<std::string>());
    }
  }
  return out;
}

// Whether a point's scenario was refused only because its serving replicas do not fit the nodes the
// search gave it ("/serving/K/replicas"): that refusal keeps a verdict of its own.
bool serving_replicas_do_not_fit(const InputError& e) {
  return !e.problems().empty() && std::all_of(e.problems().begin(), e.problems().end(), [](const Problem& p) {
    return p.pointer.starts_with("/serving/") && p.pointer.ends_with("/replicas");
  });
}

}  // namespace

PlanSpec parse_plan(std::string_view json_text, const std::string& file_name, const std::string& base_dir) {
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  PlanSpec p;
  p.file = file_name;
  if (top.ok()) {
    if (auto base = top.string("base", Need::required)) {
      const std::filesystem::path path(*base);
      p.base = path.is_absolute() || base_dir.empty() ? *base : (std::filesystem::path(base_dir) / path).string();
      if (!std::filesystem::exists(p.base)) top.problem("base", "expected a scenario file, found no file at \"" + p.base + "\"");
    }
    if (const Json* search = top.field("search", Need::required)) {
      ObjectReader s(*search, top.pointer("search"), problems);
      if (s.ok()) {
        p.node_types = strings(s, "node_types");
        if (p.node_types.empty() && s.field("node_types") == nullptr) s.problem("node_types", "expected a list of catalog node types");
        for (std::size_t i = 0; i < p.node_types.size(); ++i) {
          if (Catalog::builtin().node(p.node_types[i]) == nullptr) {
            problems.add(detail::child_pointer(s.pointer("node_types"), i), "unknown node type \"" + p.node_types[i] + "\" (fleetsim catalog lists them)" +
                                                                                 did_you_mean_key(p.node_types[i], Catalog::builtin().nodes()));
          }
        }
        if (const Json* nodes = s.field("nodes", Need::required)) {
          ObjectReader n(*nodes, s.pointer("nodes"), problems);
          p.min_nodes = static_cast<int>(n.integer("min", Need::required, 1, 100000).value_or(1));
          p.max_nodes = static_cast<int>(n.integer("max", Need::required, 1, 100000).value_or(1));
          if (p.max_nodes < p.min_nodes) n.problem("max", "expected at least min (" + std::to_string(p.min_nodes) + ")");
          n.finish();
        }
        if (const Json* fabrics = s.field("fabrics")) {
          if (!fabrics->is_array() || fabrics->empty()) s.problem("fabrics", "expected a non-empty array of fabric objects, found " + detail::describe(*fabrics));
          for (std::size_t i = 0; fabrics->is_array() && i < fabrics->size(); ++i) {
            if (!(*fabrics)[i].is_object()) {
              problems.add(detail::child_pointer(s.pointer("fabrics"), i), "expected a fabric object, found " + detail::describe((*fabrics)[i]));
            } else {
              p.fabrics.push_back((*fabrics)[i].dump());
            }
          }
        }
        p.policies = strings(s, "policies");
        for (std::size_t i = 0; i < p.policies.size(); ++i) {
          if (find_policy(p.policies[i]) == nullptr) {
            problems.add(detail::child_pointer(s.pointer("policies"), i), "unknown policy \"" + p.policies[i] + "\" (expected one of " + policy_names() + ")" +
                                                                              did_you_mean(p.policies[i], policy_ids()));
          }
        }
        s.finish();
      }
    }
    if (const Json* slos = top.field("slos")) {
      if (!slos->is_array() || slos->empty()) top.problem("slos", "expected a non-empty array of SLOs, found " + detail::describe(*slos));
      else p.slos = slos->dump();
    }
    if (const Json* growth = top.field("load_growth")) {
      p.load_growth.clear();
      if (!growth->is_array() || growth->empty()) top.problem("load_growth", "expected a non-empty array of factors, found " + detail::describe(*growth));
      for (std::size_t i = 0; growth->is_array() && i < growth->size(); ++i) {
        const Json& f = (*growth)[i];
        if (!f.is_number() || !(f.get<double>() > 0)) {
          problems.add(detail::child_pointer(top.pointer("load_growth"), i), "expected a positive factor such as 1.5, found " + detail::describe(f));
        } else {
          p.load_growth.push_back(f.get<double>());
        }
      }
    }
    if (const Json* cost = top.field("cost")) detail::read_ownership_cost(*cost, top.pointer("cost"), problems, p.node_types, "/search/node_types", p.cost);
    p.seeds = static_cast<unsigned>(top.integer_or("seeds", 3, 1, 1000));
    p.confirm_seeds = static_cast<unsigned>(top.integer_or("confirm_seeds", 5, 1, 1000));
    p.settle_seeds = static_cast<unsigned>(top.integer_or("settle_seeds", 0, 0, 1000));
    if (p.settle_seeds > 0 && (p.settle_seeds <= p.seeds || p.seeds < 2)) {
      top.problem("settle_seeds", p.seeds < 2 ? "expected 0 with one seed a point (one seed has no interval to settle)"
                                              : "expected more than \"seeds\" (" + std::to_string(p.seeds) + "), or 0 for none");
    }
    p.max_in_flight = static_cast<std::uint64_t>(top.integer_or("max_in_flight", 2000, 1, std::numeric_limits<std::int64_t>::max()));
    top.finish();
  }
  problems.throw_if_any();
  return p;
}

PlanSpec load_plan(const std::string& path) {
  return parse_plan(read_text_file(path), path, std::filesystem::path(path).parent_path().string());
}

Scenario scale_load(Scenario scenario, double factor) {
  auto scaled_count = [&](std::int64_t n) { return std::max<std::int64_t>(1, std::llround(static_cast<double>(n) * factor)); };
  for (Stream& s : scenario.streams) {
    ArrivalSpec& a = s.arrival;
    switch (a.process) {
      case ArrivalProcess::once: a.count = a.count < 0 ? a.count : scaled_count(a.count); break;
      case ArrivalProcess::periodic: a.interval_s /= factor; break;
      case ArrivalProcess::poisson:
      case ArrivalProcess::diurnal: a.rate_per_s *= factor; break;
      case ArrivalProcess::bursty:
        a.rate_per_s *= factor;
        a.off_rate_per_s *= factor;
        break;
      case ArrivalProcess::times:
        for (double& t : a.times_s) t /= factor;
        break;
      case ArrivalProcess::closed: a.users = scaled_count(a.users); break;
    }
  }
  for (auto& deployment : scenario.serving) {
    auto d = std::make_shared<ServingDeployment>(*deployment);
    d->rate_per_s *= factor;  // 0 (every request at once) stays so
    for (auto& r : d->trace) r.arrival_s /= factor;
    deployment = std::move(d);
  }
  return scenario;
}

namespace {

nlohmann::json stats_json(const MetricStats& m) { return {m.mean, m.ci95}; }
MetricStats stats_from(const nlohmann::json& j) { return {j.at(0).get<double>(), j.at(1).get<double>()}; }

// Points as every rank exchanges them: exact doubles (the shortest text that reads back the same).
nlohmann::json points_json(const std::vector<PlanPoint>& points) {
  nlohmann::json out = nlohmann::json::array();
  for (const PlanPoint& p : points) {
    nlohmann::json slos = nlohmann::json::array();
    for (const SloStats& s : p.slos) slos.push_back({s.name, s.metric, s.target, s.at_least, stats_json(s.actual)});
    out.push_back({p.load, p.node_type, p.nodes, p.gpus, p.fabric, p.policy, p.monthly_usd, p.confirmation, p.seeds,
                   stats_json(p.p95_s), stats_json(p.p99_s), stats_json(p.mean_s), stats_json(p.utilization), slos, p.passes, p.verdict,
                   p.fabric_index,
                   {p.cost.rent_usd, p.cost.own_usd, p.cost.capital_usd, p.cost.energy_usd, p.cost.space_usd, p.cost.purchase_estimated, p.cost.power_estimated,
                    p.cost.reserved_usd, p.cost.spot_usd}});
  }
  return out;
}

std::vector<PlanPoint> points_from_json(const nlohmann::json& list) {
  std::vector<PlanPoint> out;
  for (const nlohmann::json& j : list) {
    PlanPoint p;
    p.load = j.at(0).get<double>();
    p.node_type = j.at(1).get<std::string>();
    p.nodes = j.at(2).get<int>();
    p.gpus = j.at(3).get<std::uint32_t>();
    p.fabric = j.at(4).get<std::string>();
    p.policy = j.at(5).get<std::string>();
    p.monthly_usd = j.at(6).get<double>();
    p.confirmation = j.at(7).get<bool>();
    p.seeds = j.at(8).get<unsigned>();
    p.p95_s = stats_from(j.at(9));
    p.p99_s = stats_from(j.at(10));
    p.mean_s = stats_from(j.at(11));
    p.utilization = stats_from(j.at(12));
    for (const nlohmann::json& s : j.at(13)) {
      p.slos.push_back({s.at(0).get<std::string>(), s.at(1).get<std::string>(), s.at(2).get<double>(), s.at(3).get<bool>(), stats_from(s.at(4))});
    }
    p.passes = j.at(14).get<bool>();
    p.verdict = j.at(15).get<std::string>();
    p.fabric_index = j.at(16).get<std::size_t>();
    const nlohmann::json& c = j.at(17);
    p.cost = {c.at(0).get<double>(), c.at(1).get<double>(), c.at(2).get<double>(), c.at(3).get<double>(), c.at(4).get<double>(), c.at(5).get<bool>(),
              c.at(6).get<bool>(), c.at(7).get<double>(), c.at(8).get<double>()};
    out.push_back(std::move(p));
  }
  return out;
}

// One line of the search: everything but the node count.
struct Line {
  double load;
  std::string node_type;
  std::size_t fabric;  // index into the spec's fabrics (0 when the base's is kept)
  std::string policy;
};

// Arrivals that run up to the horizon leave workflows in flight when it comes; that is no failure.
// A queue that grows is: some of those have waited longer than any completed workflow took. How many.
std::size_t waiting_too_long(const RunResult& run) {
  double longest = 0;
  for (const InstanceRecord& i : run.trace.instances) {
    if (i.arrival_s != kNever && i.end_s != kNever && !i.failed) longest = std::max(longest, i.end_s - i.arrival_s);
  }
  std::size_t stale = 0;
  for (const InstanceRecord& i : run.trace.instances) {
    if (i.arrival_s != kNever && i.end_s == kNever && !i.failed && run.summary.end_s - i.arrival_s > longest) ++stale;
  }
  return stale;
}

class Planner {
 public:
  Planner(const PlanSpec& spec, const PlanOptions& options) : spec_(spec), options_(options) {
    // A candidate of a node type the base's cluster has keeps that group's settings (overrides, MIG,
    // time-slicing): the base says what those nodes are.
    const Json base = Json::parse(read_text_file(spec.base), nullptr, false);
    if (const Json* nodes = base.is_object() && base.contains("cluster") && base["cluster"].is_object() && base["cluster"].contains("nodes")
                                ? &base["cluster"]["nodes"] : nullptr;
        nodes != nullptr && nodes->is_array()) {
      for (const Json& group : *nodes) {
        if (group.is_object() && group.contains("type") && group["type"].is_string()) base_groups_.emplace(group["type"].get<std::string>(), group);
      }
    }
    const std::size_t fabrics = std::max<std::size_t>(1, spec.fabrics.size());
    // The base's policy when the plan names none.
    std::vector<std::string> policies = spec.policies;
    // (At the most nodes, where serving replicas fit if they ever do.)
    if (policies.empty()) policies.push_back(load_point(spec.node_types.front(), spec.max_nodes, 0).policy.name);
    for (double load : spec.load_growth) {
      for (const std::string& type : spec.node_types) {
        for (std::size_t f = 0; f < fabrics; ++f) {
          for (const std::string& policy : policies) lines_.push_back({load, type, f, policy});
        }
      }
    }
  }

  PlanResult run() {
    const int range = spec_.max_nodes - spec_.min_nodes + 1;
    const std::size_t per_line = options_.exhaustive ? static_cast<std::size_t>(range)
                                                     : static_cast<std::size_t>(std::ceil(std::log2(range))) + 1;
    const unsigned ranks = std::max(1u, options_.ranks);
    std::vector<std::size_t> mine;
    for (std::size_t i = options_.rank; i < lines_.size(); i += ranks) mine.push_back(i);
    estimated_ = mine.size() * per_line + spec_.load_growth.size();
    // Lines are independent; within a line the bisection is sequential.
    std::vector<std::vector<PlanPoint>> per_line_points(lines_.size());
    detail::parallel_for(mine.size(), options_.threads, [&](std::size_t k) { per_line_points[mine[k]] = search(lines_[mine[k]]); });
    if (ranks > 1) {
      FLEETSIM_CHECK(static_cast<bool>(options_.exchange), "a plan over several ranks needs an exchange");
      nlohmann::json local = nlohmann::json::array();
      for (std::size_t i : mine) local.push_back({{"line", i}, {"points", points_json(per_line_points[i])}});
      for (const std::string& text : options_.exchange(local.dump())) {
        for (const nlohmann::json& entry : nlohmann::json::parse(text)) {
          per_line_points.at(entry.at("line").get<std::size_t>()) = points_from_json(entry.at("points"));
        }
      }
    }

    const bool none_ran = std::all_of(per_line_points.begin(), per_line_points.end(), [](const std::vector<PlanPoint>& pts) {
      return pts.size() == 1 && pts[0].verdict.starts_with("cannot run");
    });
    if (none_ran && first_error_) std::rethrow_exception(first_error_);
    if (none_ran) throw InputError({Problem{spec_.file, "", per_line_points.front().front().verdict}});  // another rank's lines
    PlanResult result;
    for (auto& pts : per_line_points) {
      std::sort(pts.begin(), pts.end(), [](const PlanPoint& a, const PlanPoint& b) { return a.nodes < b.nodes; });
      for (PlanPoint& p : pts) result.points.push_back(std::move(p));
    }
    recommend(result);
    for (const std::string& type : spec_.node_types) {
      const auto ran = std::find_if(result.points.begin(), result.points.end(), [&](const PlanPoint& p) { return p.node_type == type && p.ran(); });
      if (ran == result.points.end()) continue;  // no times on it to qualify
      for (std::string& why : kernel_guesses(*ran)) result.kernel_guesses.emplace_back(type, std::move(why));
    }
    return result;
  }

 private:
  Scenario load_point(const std::string& node_type, int nodes, std::size_t fabric) const {
    std::vector<ScenarioEdit> edits;
    Json group = Json{{"type", node_type}};
    if (const auto it = base_groups_.find(node_type); it != base_groups_.end()) group = it->second;
    group["count"] = nodes;
    edits.push_back({"/cluster/nodes", Json::array({group}).dump()});
    if (!spec_.fabrics.empty()) edits.push_back({"/cluster/fabric", spec_.fabrics[fabric]});
    if (!spec_.slos.empty()) edits.push_back({"/slos", spec_.slos});
    try {
      Scenario sc = load_scenario(spec_.base, edits);
      if (options_.profile != nullptr) apply_profile(sc.cluster, *options_.profile);
      return sc;
    } catch (const InputError& e) {
      // Name the plan as well as the base: the search's edits may be what the base refuses.
      std::vector<Problem> problems = e.problems();
      for (Problem& p : problems) p.message += " (with " + std::to_string(nodes) + " x " + node_type + " from " + spec_.file + ")";
      throw InputError(std::move(problems));
    }
  }

  // Why a node type's kernel constants are a guess for this workload, as a run's summary says it: of the scenario a
  // point of that node type ran.
  std::vector<std::string> kernel_guesses(const PlanPoint& ran) const {
    const Scenario sc = load_point(ran.node_type, ran.nodes, ran.fabric_index);
    return borrowed_kernel_constants(sc.cluster, sc.workflows, !sc.serving.empty());
  }

  // A point's month both ways; it is ranked by the plan's basis.
  void price(PlanPoint& p, const ClusterSpec& cluster, double utilization) const {
    p.cost = monthly_cost(spec_.cost, cluster, utilization);
    p.monthly_usd = p.cost.ranked_usd(spec_.cost);
  }

  // The point's SLO statistics over the seeds so far; true if one is met on average but its interval
  // crosses the target (not sure) while none is missed on average (then more seeds cannot save it).
  static bool judge_slos(PlanPoint& p, const std::vector<SloResult>& slos, const std::vector<std::vector<double>>& values) {
    p.slos.clear();
    bool unsure = false, missed = false;
    for (std::size_t i = 0; i < slos.size(); ++i) {
      const SloResult& slo = slos[i];
      SloStats st;
      st.metric = slo.metric;
      st.name = (!slo.deployment.empty() ? slo.deployment + " " : std::string()) + (!slo.tenant.empty() ? slo.tenant + " " : std::string()) + st.metric;
      if (slo.metric == "attainment") st.name += " within " + format_quantity(slo.within_s, Dimension::time);
      st.target = slo.target;
      st.at_least = slo.at_least;
      st.actual = mean_ci95(values[i]);
      unsure = unsure || (st.met_on_average() && !st.surely_met());
      missed = missed || !st.met_on_average();
      p.slos.push_back(std::move(st));
    }
    return unsure && !missed;
  }

  PlanPoint evaluate(const Line& line, int nodes, unsigned seeds, std::uint64_t seed_offset) {
    PlanPoint p;
    p.load = line.load;
    p.node_type = line.node_type;
    p.nodes = nodes;
    p.policy = line.policy;
    p.seeds = seeds;
    p.fabric_index = line.fabric;
    Scenario sc;
    try {
      sc = scale_load(with_policy(load_point(line.node_type, nodes, line.fabric), *find_policy(line.policy)), line.load);
    } catch (const InputError& e) {
      // Too few nodes (for the serving replicas, a gang, a training job): a point that fails, as one that
      // misses its SLOs does. Any other refusal is the input's, and stops the line.
      if (!refused_for_want_of_nodes(line)) throw;
      const ClusterSpec cluster = cluster_of(line.node_type, nodes);
      p.fabric = std::string(fabric_kind_name(cluster.fabric.kind));
      p.gpus = static_cast<std::uint32_t>(cluster.gpu_count());
      price(p, cluster, 0);
      p.seeds = 0;
      const std::string where = std::to_string(nodes) + " x " + line.node_type;
      p.verdict = serving_replicas_do_not_fit(e) ? "the serving replicas do not fit " + where : "does not fit " + where + ": " + without_plan_note(e);
      tick();
      return p;
    }
    if (sc.slos.empty() && std::none_of(sc.serving.begin(), sc.serving.end(), [](const auto& d) { return !d->slos.empty(); })) {
      throw InputError({Problem{spec_.file, "/slos", "expected SLOs to plan for: none here and none in " + spec_.base}});
    }
    p.fabric = std::string(fabric_kind_name(sc.cluster.fabric.kind));
    if (spec_.fabrics.size() > 1) p.fabric += "#" + std::to_string(line.fabric);
    p.gpus = static_cast<std::uint32_t>(sc.cluster.gpu_count());

    std::vector<double> p95, p99, mean, util;
    std::vector<SloResult> slos;  // each SLO as the first run met it: the workflows', then each serving deployment's
    std::vector<std::vector<double>> slo_values;
    std::string failure;
    bool diverged = false;
    // A point not sure of an SLO (met on average, its interval across the target) runs more seeds, twice
    // as many each time, up to settle_seeds.
    for (unsigned want = seeds, ran = 0;;) {
      for (unsigned k = ran; k < want && !diverged; ++k, ++ran) {
        const RunResult run = simulate(sc, {.seed = sc.seed + seed_offset + k, .max_in_flight = spec_.max_in_flight});
        const Summary& s = run.summary;
        p95.push_back(s.latency_s.p95);
        p99.push_back(s.latency_s.p99);
        mean.push_back(s.latency_s.mean);
        util.push_back(s.gpu_utilization);
        if (k == 0) {
          slos = s.slos;
          slo_values.resize(slos.size());
        }
        for (std::size_t i = 0; i < s.slos.size(); ++i) slo_values[i].push_back(s.slos[i].actual);
        if (failure.empty()) {
          const std::string seed = " (seed " + std::to_string(sc.seed + seed_offset + k) + ")";
          if (s.diverged) {
            failure = "queue grew past " + std::to_string(spec_.max_in_flight) + " workflows in flight" + seed;
          } else if (s.stalled) {
            failure = "stalled: tasks that no GPU can take" + seed;
          } else if (s.workflows.failed > 0) {
            failure = std::to_string(s.workflows.failed) + " workflows failed" + seed;
          } else if (const std::size_t stale = waiting_too_long(run); stale > 0) {
            failure = std::to_string(stale) + " workflows unfinished at the horizon had waited longer than any completed one took" + seed;
          }
        }
        diverged = s.diverged;  // the point fails; more seeds would only cost time
      }
      p.seeds = ran;
      const bool unsure = judge_slos(p, slos, slo_values);
      if (!unsure || !failure.empty() || want >= spec_.settle_seeds) break;
      want = std::min(spec_.settle_seeds, 2 * want);
    }
    p.p95_s = mean_ci95(p95);
    p.p99_s = mean_ci95(p99);
    p.mean_s = mean_ci95(mean);
    p.utilization = mean_ci95(util);
    price(p, sc.cluster, p.utilization.mean);
    for (const SloStats& st : p.slos) {
      // The confidence interval's far end must be on the right side of the target.
      if (!failure.empty() || st.surely_met()) continue;
      // Say which: the SLO missed on average, or met on average but not surely enough over these seeds
      // (and about how many would settle it).
      const unsigned settle_at = seeds_to_settle(st.actual.sd, std::abs(st.target - st.actual.mean), p.seeds);
      const std::string settle = settle_at > 0 ? "about " + std::to_string(settle_at) + " seeds would settle it" : "more seeds may settle it";
      failure = st.name + " " + format_slo_value(st.metric, st.actual.mean) + " +- " + format_slo_value(st.metric, st.actual.ci95) +
                (!st.met_on_average() ? std::string(st.at_least ? ", under" : ", over") + " its target " + format_slo_value(st.metric, st.target)
                             : ": within its target " + format_slo_value(st.metric, st.target) + " on average, but its 95% interval reaches " +
                                   format_slo_value(st.metric, st.far_end()) + " over " + std::to_string(p.seeds) + " seeds (" + settle + ")");
    }
    p.passes = failure.empty();
    p.verdict = p.passes ? "meets every SLO" : failure;
    tick();
    return p;
  }

  // A node type the workload cannot run on (a task that fits no GPU of it) fails its lines with the
  // reason; the plan fails only if no line can run at all (then the input itself is wrong).
  std::vector<PlanPoint> search(const Line& line) {
    try {
      return bisect(line);
    } catch (const InputError& e) {
      const std::lock_guard lock(progress_mutex_);
      if (!first_error_) first_error_ = std::current_exception();
      PlanPoint p;
      p.load = line.load;
      p.node_type = line.node_type;
      p.policy = line.policy;
      p.fabric_index = line.fabric;
      p.nodes = spec_.max_nodes;
      p.verdict = "cannot run: " + (e.problems().empty() ? std::string(e.what()) : e.problems().front().message);
      return {p};
    }
  }

  std::vector<PlanPoint> bisect(const Line& line) {
    std::vector<PlanPoint> points;
    auto at = [&](int n) -> const PlanPoint& {
      for (const PlanPoint& p : points) {
        if (p.nodes == n) return p;
      }
      points.push_back(evaluate(line, n, spec_.seeds, 0));
      return points.back();
    };
    if (options_.exhaustive) {
      for (int n = spec_.min_nodes; n <= spec_.max_nodes; ++n) at(n);
      return points;
    }
    // Smallest passing count in [lo, hi], knowing hi passes.
    int lo = spec_.min_nodes, hi = spec_.max_nodes;
    if (!at(hi).passes) return points;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (at(mid).passes) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return points;
  }

  // The search ran `nodes` of this line.
  static bool ran(const PlanResult& result, const Line& line, int nodes) {
    return std::any_of(result.points.begin(), result.points.end(), [&](const PlanPoint& p) {
      return !p.confirmation && p.nodes == nodes && p.load == line.load && p.node_type == line.node_type && p.fabric_index == line.fabric &&
             p.policy == line.policy;
    });
  }

  void recommend(PlanResult& result) {
    for (double load : spec_.load_growth) {
      PlanRecommendation rec;
      rec.load = load;
      std::vector<std::size_t> candidates;
      for (std::size_t i = 0; i < result.points.size(); ++i) {
        if (result.points[i].load == load && result.points[i].passes) candidates.push_back(i);
      }
      // Cheapest first; then fewer GPUs, lower p95 and the search order.
      std::stable_sort(candidates.begin(), candidates.end(), [&](std::size_t a, std::size_t b) {
        const PlanPoint &x = result.points[a], &y = result.points[b];
        return std::tie(x.monthly_usd, x.gpus, x.p95_s.mean) < std::tie(y.monthly_usd, y.gpus, y.p95_s.mean);
      });
      // Confirmed with fresh seeds; a point that fails its confirmation gives way to the next.
      auto cheaper = [&](std::size_t a, std::size_t b) {
        const PlanPoint &x = result.points[a], &y = result.points[b];
        return std::tie(x.monthly_usd, x.gpus, x.p95_s.mean) < std::tie(y.monthly_usd, y.gpus, y.p95_s.mean);
      };
      for (std::size_t k = 0; k < candidates.size(); ++k) {
        const std::size_t c = candidates[k];
        const Line line{result.points[c].load, result.points[c].node_type, result.points[c].fabric_index, result.points[c].policy};
        const int nodes = result.points[c].nodes;
        PlanPoint check = evaluate(line, nodes, spec_.confirm_seeds, kConfirmSeedOffset);
        check.confirmation = true;
        result.points.push_back(std::move(check));
        if (result.points.back().passes) {
          rec.point = c;
          rec.confirmed = result.points.size() - 1;
          break;
        }
        // It does not meet the SLOs after all: the table says so beside it, not only at its confirmation.
        result.points[c].passes = false;
        result.points[c].verdict = "met every SLO on its seeds but not on fresh ones: " + result.points.back().verdict;
        // The bisection skipped the counts above it on its line, taking them to pass: search them now,
        // up to the next count it did run.
        for (int n = nodes + 1; n <= spec_.max_nodes && !ran(result, line, n); ++n) {
          result.points.push_back(evaluate(line, n, spec_.seeds, 0));
          if (!result.points.back().passes) continue;
          const std::size_t found = result.points.size() - 1;
          candidates.insert(std::upper_bound(candidates.begin() + static_cast<std::ptrdiff_t>(k) + 1, candidates.end(), found, cheaper), found);
          break;
        }
      }
      // Pareto frontier of cost against p95 over the search's points that meet every SLO: a failing point is
      // no trade-off to offer, however cheap (the page shows those apart).
      std::vector<std::size_t> pts;
      for (std::size_t i = 0; i < result.points.size(); ++i) {
        const PlanPoint& p = result.points[i];
        if (p.load == load && !p.confirmation && p.ran() && p.passes) pts.push_back(i);
      }
      std::sort(pts.begin(), pts.end(), [&](std::size_t a, std::size_t b) {
        return std::tie(result.points[a].monthly_usd, result.points[a].p95_s.mean) <
               std::tie(result.points[b].monthly_usd, result.points[b].p95_s.mean);
      });
      // A dearer point joins only if it is faster beyond both confidence intervals (and by 1 % at least,
      // where the seeds agree): 10 us faster for twice the price is noise, not a trade-off.
      const PlanPoint* best = nullptr;
      for (std::size_t i : pts) {
        const PlanPoint& p = result.points[i];
        const bool faster = best == nullptr || p.p95_s.mean + p.p95_s.ci95 < std::min(best->p95_s.mean - best->p95_s.ci95, 0.99 * best->p95_s.mean);
        if (faster) {
          rec.frontier.push_back(i);
          best = &p;
        }
      }
      // Per node type, its cheapest passing point, or the one closest to passing (the lowest p95).
      for (const std::string& type : spec_.node_types) {
        PlanOption& o = rec.per_node_type.emplace_back();
        o.node_type = type;
        for (std::size_t i = 0; i < result.points.size(); ++i) {
          const PlanPoint& p = result.points[i];
          if (p.load != load || p.confirmation || !p.ran() || p.node_type != type) continue;
          if (p.passes && (!o.point || cheaper(i, *o.point))) o.point = i;
          if (!o.closest || p.p95_s.mean < result.points[*o.closest].p95_s.mean) o.closest = i;
        }
        if (o.point) o.closest.reset();
      }
      result.loads.push_back(std::move(rec));
    }
  }

  // Whether the line's refusals depend on the node count: its scenario loads with the most nodes the
  // search allows (asked once per node type and fabric).
  bool refused_for_want_of_nodes(const Line& line) {
    const auto key = std::make_pair(line.node_type, line.fabric);
    {
      const std::lock_guard lock(progress_mutex_);
      if (const auto it = loads_with_most_nodes_.find(key); it != loads_with_most_nodes_.end()) return it->second;
    }
    bool loads = true;
    try {
      load_point(line.node_type, spec_.max_nodes, line.fabric);
    } catch (const InputError&) {
      loads = false;
    }
    const std::lock_guard lock(progress_mutex_);
    return loads_with_most_nodes_.emplace(key, loads).first->second;
  }

  // The first problem of a point's refusal, without the note load_point adds (the verdict names the point).
  static std::string without_plan_note(const InputError& e) {
    if (e.problems().empty()) return e.what();
    const std::string& m = e.problems().front().message;
    return m.substr(0, m.rfind(" (with "));
  }

  void tick() {
    const std::lock_guard lock(progress_mutex_);
    ++done_;
    if (options_.progress) options_.progress(done_, std::max(done_, estimated_));
  }

  const PlanSpec& spec_;
  std::map<std::string, Json, std::less<>> base_groups_;  // the base's node groups by type
  const PlanOptions& options_;
  std::vector<Line> lines_;
  std::mutex progress_mutex_;
  std::size_t done_ = 0, estimated_ = 0;
  std::exception_ptr first_error_;
  std::map<std::pair<std::string, std::size_t>, bool> loads_with_most_nodes_;
};

}  // namespace

PlanResult run_plan(const PlanSpec& spec, const PlanOptions& options) {
  if (spec.node_types.empty()) throw InputError({Problem{spec.file, "/search/node_types", "expected at least one node type"}});
  return Planner(spec, options).run();
}

}  // namespace fleetsim
