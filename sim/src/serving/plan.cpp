// The cheapest serving deployment that meets the SLOs (see fleetsim/serving.hpp).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>

#include "fleetsim/suggest.hpp"
#include "../import/job_log.hpp"
#include "../loaders.hpp"
#include "../parallel.hpp"
#include "fleetsim/compare.hpp"
#include "fleetsim/serving.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

// What a deployment edited by a search refused, as "pointer: message" (or the whole text without one).
std::string first_problem(const InputError& e) {
  return e.problems().empty() ? e.what() : e.problems().front().pointer + ": " + e.problems().front().message;
}

// One line of the search: a rate, a node type, a TP size and stages, an engine, a prefill share (with the
// decode replicas' TP and the KV transfer) and a knob setting; only the replicas change.
struct Line {
  double rate_per_s;
  std::string node_type, engine;
  int tp, pp;
  bool dp_attention;
  double prefill_share;
  int decode_tp;      // 0: tp
  bool kv_by_layer;
  std::size_t knobs;  // into the plan's knob_settings
};

ServingPoint point_of(const ServingPlan& plan, const Line& line) {
  ServingPoint p;
  p.rate_per_s = line.rate_per_s;
  p.node_type = line.node_type;
  p.engine = line.engine;
  p.tp = line.tp;
  p.pp = line.pp;
  p.dp_attention = line.dp_attention;
  p.prefill_share = line.prefill_share;
  p.decode_tp = line.decode_tp;
  p.kv_by_layer = line.kv_by_layer;
  p.knobs = plan.knob_settings[line.knobs].label;
  return p;
}

ServingPoint evaluate(const ServingPlan& plan, const Line& line, int replicas) {
  ServingPoint p = point_of(plan, line);
  p.replicas = replicas;
  if (line.prefill_share > 0 && replicas >= 2) p.prefill_replicas = std::clamp(static_cast<int>(std::lround(replicas * line.prefill_share)), 1, replicas - 1);
  const NodeType* node = Catalog::builtin().node(line.node_type);
  // The nodes the replicas take as a scenario places them (a shape the deployment refuses comes back as its
  // reason below).
  p.nodes = replica_nodes(line.tp, line.pp, node->gpus, replicas, p.prefill_replicas, line.decode_tp);
  p.gpus = p.nodes * node->gpus;
  const ClusterSpec cluster = cluster_of(line.node_type, p.nodes);
  // The month both ways; owning's energy follows the GPUs' busy share over the seeds (idle where none ran).
  const auto price = [&](double utilization) {
    p.cost = monthly_cost(plan.cost, cluster, utilization);
    p.usd_per_month = p.cost.ranked_usd(plan.cost);
  };
  price(0);
  if (line.prefill_share > 0 && replicas < 2) {
    p.why = "a prefill/decode split needs 2 replicas at least";
    return p;
  }
  std::vector<ScenarioEdit> edits{{"/cluster", R"({"nodes": [{"type": ")" + line.node_type + R"(", "count": )" + std::to_string(p.nodes) + "}]}"},
                                  {"/tp", std::to_string(line.tp)},
                                  {"/pp", std::to_string(line.pp)},
                                  {"/dp_attention", line.dp_attention ? "true" : "false"},
                                  {"/replicas", std::to_string(replicas)},
                                  {"/engine", "\"" + line.engine + "\""},
                                  {"/requests/rate", "\"" + detail::shortest_text(line.rate_per_s) + " /s\""}};
  if (!plan.knob_settings[line.knobs].json.empty()) edits.push_back({"/knobs", plan.knob_settings[line.knobs].json});
  if (p.prefill_replicas > 0) {
    edits.push_back({"/disaggregation", R"({"prefill": )" + std::to_string(p.prefill_replicas) + R"(, "decode": )" + std::to_string(replicas - p.prefill_replicas) +
                                            (line.decode_tp > 0 ? R"(, "decode_tp": )" + std::to_string(line.decode_tp) : "") +
                                            (line.kv_by_layer ? R"(, "kv_transfer": "by_layer")" : "") + "}"});
  }
  ServingDeployment base;
  try {
    base = parse_serving(plan.base_text, plan.base_file, edits);
  } catch (const InputError& e) {
    p.verdict = ServingPoint::Verdict::does_not_fit;
    p.why = first_problem(e);
    return p;
  }
  std::vector<std::vector<double>> achieved;
  double busy_share = 0;
  for (int s = 0; s < plan.seeds; ++s) {
    ServingDeployment d = base;
    d.seed += static_cast<std::uint64_t>(s);
    const ServingResult r = simulate_serving(d);
    if (r.makespan_s > 0) busy_share += std::min(1.0, r.gpu_busy_s / (p.gpus * r.makespan_s)) / plan.seeds;
    achieved.resize(r.verdicts.size());
    for (std::size_t i = 0; i < r.verdicts.size(); ++i) achieved[i].push_back(r.verdicts[i].achieved_s);
    if (s == 0) {
      for (const auto& v : r.verdicts) p.slos.push_back({v.slo, 0, 0});
    }
  }
  price(busy_share);
  p.verdict = ServingPoint::Verdict::met;
  for (std::size_t i = 0; i < p.slos.size(); ++i) {
    const MetricStats m = mean_ci95(achieved[i]);
    p.slos[i].mean_s = m.mean;
    p.slos[i].ci95_s = m.ci95;
    const double target = p.slos[i].slo.target_s;
    const auto verdict = m.mean - m.ci95 > target ? ServingPoint::Verdict::missed : m.mean + m.ci95 > target ? ServingPoint::Verdict::not_sure : ServingPoint::Verdict::met;
    if (verdict != ServingPoint::Verdict::met && p.verdict == ServingPoint::Verdict::met) {
      p.verdict = verdict;
      p.why = p.slos[i].slo.metric + " p" + std::to_string(static_cast<int>(p.slos[i].slo.percentile)) + " " +
              (verdict == ServingPoint::Verdict::missed ? "missed" : "not sure");
    }
  }
  return p;
}

// search.knobs: {"max_num_batched_tokens": [2048, 8192], "policy": ["chunked-prefill", "orca"]}, every
// combination tried, each over the deployment's own knobs; each value checked as the deployment reads it.
void read_knob_search(const Json& knobs, ServingPlan& plan, detail::Problems& problems) {
  if (!knobs.is_object() || knobs.empty()) {
    problems.add("/search/knobs", "expected an object of knobs, each with an array of values to try, found " + detail::describe(knobs));
    return;
  }
  if (plan.base_text.empty()) return;  // the deployment did not load (said under /serving)
  const Json base = Json::parse(plan.base_text, nullptr, false);
  const Json own = base.is_object() && base.contains("knobs") ? base["knobs"] : Json::object();
  std::vector<std::pair<Json, std::string>> settings{{own, ""}};
  for (const auto& [name, values] : knobs.items()) {
    const std::string pointer = detail::child_pointer("/search/knobs", name);
    if (!values.is_array() || values.empty()) {
      problems.add(pointer, "expected a non-empty array of values to try, found " + detail::describe(values));
      continue;
    }
    std::vector<std::pair<Json, std::string>> grown;
    for (std::size_t i = 0; i < values.size(); ++i) {
      Json one = own;
      one[name] = values[i];
      try {
        parse_serving(plan.base_text, plan.base_file, std::vector<ScenarioEdit>{{"/knobs", one.dump()}});
      } catch (const InputError& e) {
        problems.add(detail::child_pointer(pointer, i), first_problem(e));
        continue;
      }
      const std::string value = values[i].is_string() ? values[i].get<std::string>() : values[i].dump();
      for (const auto& [setting, label] : settings) {
        Json next = setting;
        next[name] = values[i];
        grown.emplace_back(std::move(next), label + (label.empty() ? "" : ", ") + name + " " + value);
      }
    }
    if (!grown.empty()) settings = std::move(grown);
  }
  plan.knob_settings.clear();
  for (const auto& [setting, label] : settings) plan.knob_settings.push_back({setting.dump(), label});
}

}  // namespace

bool is_serving_plan(std::string_view json_text) {
  const Json doc = Json::parse(json_text, nullptr, false);
  return doc.is_object() && doc.contains("serving");
}

ServingPlan parse_serving_plan(std::string_view json_text, const std::string& file) {
  detail::Problems problems(file);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  ServingPlan plan;
  plan.file = file;
  if (!top.ok()) problems.throw_if_any();
  if (const auto base = top.string("serving", Need::required)) {
    const std::filesystem::path dir = std::filesystem::path(file).parent_path();
    plan.base_file = (std::filesystem::path(*base).is_absolute() ? std::filesystem::path(*base) : dir / *base).string();
    try {
      plan.base_text = read_text_file(plan.base_file);
      const ServingDeployment d = parse_serving(plan.base_text, plan.base_file);
      if (d.slos.empty()) top.problem("serving", plan.base_file + " has no \"slos\": a plan needs targets to meet");
      if (!d.trace.empty()) top.problem("serving", plan.base_file + " replays a trace; a plan varies the rate of generated requests");
      if (d.prefill_replicas > 0) {
        top.problem("serving", plan.base_file + " fixes its replicas with \"disaggregation\"; a plan varies them: give the split as search.disaggregation (prefill shares)");
      }
      plan.engines = {d.engine.id};
      plan.dp_attentions = {d.dp_attention};
      plan.tps = {d.tp};
      plan.pps = {d.pp};
      plan.rates_per_s = {d.rate_per_s};
      if (!(d.rate_per_s > 0)) top.problem("serving", plan.base_file + " sends every request at once; a plan needs a \"rate\"");
    } catch (const InputError& e) {
      top.problem("serving", "cannot use \"" + plan.base_file + "\": " + e.what());
    }
  }
  if (const Json* search = top.field("search", Need::required)) {
    ObjectReader s(*search, "/search", problems);
    const auto strings = [&](std::string_view key, std::vector<std::string>& into, bool required) {
      const Json* v = s.field(key, required ? Need::required : Need::optional);
      if (v == nullptr) return;
      if (!v->is_array() || v->empty() || !std::all_of(v->begin(), v->end(), [](const Json& x) { return x.is_string(); })) {
        s.problem(key, "expected a non-empty array of names, found " + detail::describe(*v));
        return;
      }
      into.clear();
      for (const Json& x : *v) into.push_back(x.get<std::string>());
    };
    strings("node_types", plan.node_types, true);
    for (std::size_t i = 0; i < plan.node_types.size(); ++i) {
      if (Catalog::builtin().node(plan.node_types[i]) == nullptr) {
        problems.add(detail::child_pointer("/search/node_types", i), "unknown node type \"" + plan.node_types[i] + "\" (see `fleetsim catalog`)" +
                                                                                   did_you_mean_key(plan.node_types[i], Catalog::builtin().nodes()));
      }
    }
    strings("engines", plan.engines, false);
    for (std::size_t i = 0; i < plan.engines.size(); ++i) {
      if (find_engine(plan.engines[i]) == nullptr) problems.add(detail::child_pointer("/search/engines", i), "unknown engine \"" + plan.engines[i] + "\"");
    }
    // search.tp and search.pp: degrees from 1 to 64, replacing the deployment's own.
    const auto degrees = [&](std::string_view key, const std::string& what, std::vector<int>& into) {
      const Json* v = s.field(key);
      if (v == nullptr) return;
      if (!v->is_array() || v->empty() ||
          !std::all_of(v->begin(), v->end(), [](const Json& x) { return x.is_number_integer() && x.get<std::int64_t>() >= 1 && x.get<std::int64_t>() <= 64; })) {
        s.problem(key, "expected a non-empty array of " + what + " from 1 to 64, found " + detail::describe(*v));
        return;
      }
      into.clear();
      for (const Json& x : *v) into.push_back(x.get<int>());
    };
    degrees("tp", "TP sizes", plan.tps);
    degrees("pp", "pipeline stages a replica, each", plan.pps);
    if (const Json* dp = s.field("dp_attention")) {  // [false, true]: TP attention, data-parallel attention
      if (!dp->is_array() || dp->empty() || !std::all_of(dp->begin(), dp->end(), [](const Json& x) { return x.is_boolean(); })) {
        s.problem("dp_attention", "expected a non-empty array of true (data-parallel attention) and false (attention over TP), found " + detail::describe(*dp));
      } else {
        plan.dp_attentions.clear();
        for (std::size_t i = 0; i < dp->size(); ++i) {
          const bool on = (*dp)[i].get<bool>();
          plan.dp_attentions.push_back(on);
          if (plan.base_text.empty()) continue;
          try {  // as the deployment reads it (true: a mixture of experts, no pipeline stages; false: no "moe" that needs it)
            parse_serving(plan.base_text, plan.base_file, std::vector<ScenarioEdit>{{"/dp_attention", on ? "true" : "false"}});
          } catch (const InputError& e) {
            problems.add(detail::child_pointer("/search/dp_attention", i), first_problem(e));
          }
        }
      }
    }
    bool shares_ok = true;
    if (const Json* shares = s.field("disaggregation")) {  // prefill shares of the replicas, 0 for none
      if (!shares->is_array() || shares->empty() ||
          !std::all_of(shares->begin(), shares->end(), [](const Json& x) { return x.is_number() && x.get<double>() >= 0 && x.get<double>() < 1; })) {
        shares_ok = false;
        s.problem("disaggregation", "expected a non-empty array of prefill shares of the replicas, each from 0 (no split) to below 1, found " + detail::describe(*shares));
      } else {
        plan.prefill_shares.clear();
        for (const Json& x : *shares) plan.prefill_shares.push_back(x.get<double>());
      }
    }
    degrees("decode_tp", "the decode replicas' TP sizes", plan.decode_tps);
    if (s.field("decode_tp") != nullptr && shares_ok && std::all_of(plan.prefill_shares.begin(), plan.prefill_shares.end(), [](double share) { return share == 0; })) {
      s.problem("decode_tp", "the decode replicas' TP applies to prefill/decode splits: expected \"disaggregation\" with a share above 0 beside it");
    } else if (s.field("decode_tp") != nullptr && std::all_of(plan.dp_attentions.begin(), plan.dp_attentions.end(), [](bool dp) { return dp; })) {
      s.problem("decode_tp", "decode replicas of another TP beside data-parallel attention are not modelled yet: expected false in search.dp_attention, or no \"decode_tp\"");
    }
    if (const Json* kv = s.field("kv_transfer")) {  // ["after_prefill", "by_layer"]
      const auto known = [](const Json& x) { return x.is_string() && (x.get<std::string>() == "after_prefill" || x.get<std::string>() == "by_layer"); };
      if (!kv->is_array() || kv->empty() || !std::all_of(kv->begin(), kv->end(), known)) {
        s.problem("kv_transfer", "expected a non-empty array of \"after_prefill\" and \"by_layer\", found " + detail::describe(*kv));
      } else if (shares_ok && std::all_of(plan.prefill_shares.begin(), plan.prefill_shares.end(), [](double share) { return share == 0; })) {
        s.problem("kv_transfer", "a KV transfer applies to prefill/decode splits: expected \"disaggregation\" with a share above 0 beside it");
      } else {
        plan.kv_by_layer.clear();
        for (const Json& x : *kv) {
          const bool by_layer = x.get<std::string>() == "by_layer";
          if (std::find(plan.kv_by_layer.begin(), plan.kv_by_layer.end(), by_layer) == plan.kv_by_layer.end()) plan.kv_by_layer.push_back(by_layer);
        }
      }
    }
    if (const Json* knobs = s.field("knobs")) read_knob_search(*knobs, plan, problems);
    if (const Json* r = s.field("replicas")) {
      ObjectReader rr(*r, "/search/replicas", problems);
      plan.min_replicas = static_cast<int>(rr.integer_or("min", 1, 1, 100000));
      plan.max_replicas = static_cast<int>(rr.integer_or("max", 64, 1, 100000));
      if (plan.max_replicas < plan.min_replicas) rr.problem("max", "expected at least min (" + std::to_string(plan.min_replicas) + ")");
      rr.finish();
    }
    s.finish();
  }
  if (const Json* rates = top.field("rates")) {
    if (!rates->is_array() || rates->empty()) {
      top.problem("rates", "expected a non-empty array of rates such as \"20 /s\", found " + detail::describe(*rates));
    } else {
      plan.rates_per_s.clear();
      for (std::size_t i = 0; i < rates->size(); ++i) {
        const auto rate = detail::read_quantity((*rates)[i], Dimension::rate, detail::child_pointer("/rates", i), problems);
        if (rate && !(*rate > 0)) problems.add(detail::child_pointer("/rates", i), "expected a positive rate");
        plan.rates_per_s.push_back(rate.value_or(1));
      }
    }
  }
  if (const Json* cost = top.field("cost")) detail::read_ownership_cost(*cost, top.pointer("cost"), problems, plan.node_types, "/search/node_types", plan.cost);
  plan.seeds = static_cast<int>(top.integer_or("seeds", 3, 1, 30));
  top.finish();
  problems.throw_if_any();
  return plan;
}

ServingPlan load_serving_plan(const std::string& path) { return parse_serving_plan(read_text_file(path), path); }

ServingPlanResult plan_serving(const ServingPlan& plan, unsigned threads) {
  std::vector<Line> lines;
  for (double rate : plan.rates_per_s) {
    for (const std::string& node : plan.node_types) {
      for (int tp : plan.tps) {
        for (int pp : plan.pps) {
          for (const bool dp : plan.dp_attentions) {
            for (const std::string& engine : plan.engines) {
              for (double share : plan.prefill_shares) {
                // A split's decode replicas at each TP searched (one equal to tp is the split's own shape,
                // tried once); no split, or data-parallel attention (its ranks one GPU each), one line.
                std::vector<int> decode_tps;
                for (int d : share > 0 && !dp ? plan.decode_tps : std::vector<int>{0}) {
                  if (d == tp) d = 0;
                  if (std::find(decode_tps.begin(), decode_tps.end(), d) == decode_tps.end()) decode_tps.push_back(d);
                }
                for (int decode_tp : decode_tps) {
                  for (const bool by_layer : share > 0 ? plan.kv_by_layer : std::vector<bool>{false}) {  // no split, no transfer: one line
                    for (std::size_t k = 0; k < plan.knob_settings.size(); ++k) lines.push_back({rate, node, engine, tp, pp, dp, share, decode_tp, by_layer, k});
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  // Each line by bisection: the most replicas first (if they miss, so does the line), then halving towards
  // the fewest that meet every SLO. Lines run side by side; each writes only its own results.
  std::vector<std::vector<ServingPoint>> tried(lines.size());
  std::vector<ServingPoint> best(lines.size());
  detail::parallel_for(lines.size(), threads, [&](std::size_t i) {
    const Line& line = lines[i];
    int lo = plan.min_replicas, hi = plan.max_replicas;
    ServingPoint top = evaluate(plan, line, hi);
    tried[i].push_back(top);
    best[i] = top;
    if (top.verdict != ServingPoint::Verdict::met) return;
    while (lo < hi) {  // hi meets the SLOs
      const int mid = lo + (hi - lo) / 2;
      ServingPoint p = evaluate(plan, line, mid);
      tried[i].push_back(p);
      if (p.verdict == ServingPoint::Verdict::met) {
        hi = mid;
        best[i] = std::move(p);
      } else {
        lo = mid + 1;
      }
    }
  });
  ServingPlanResult out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    out.points.insert(out.points.end(), tried[i].begin(), tried[i].end());
    out.lines.push_back(best[i]);
  }
  for (double rate : plan.rates_per_s) {
    std::optional<ServingPoint> pick;
    for (const ServingPoint& p : out.lines) {
      if (p.rate_per_s != rate || p.verdict != ServingPoint::Verdict::met) continue;
      if (!pick || p.usd_per_month < pick->usd_per_month || (p.usd_per_month == pick->usd_per_month && p.gpus < pick->gpus)) pick = p;
    }
    out.recommended.push_back(pick);
  }
  for (const std::string& type : plan.node_types) {
    const bool ran = std::any_of(out.points.begin(), out.points.end(), [&](const ServingPoint& p) { return p.node_type == type && p.verdict != ServingPoint::Verdict::does_not_fit; });
    if (!ran) continue;  // no times on it to qualify
    for (std::string& why : borrowed_kernel_constants(cluster_of(type, 1), {}, true)) out.kernel_guesses.emplace_back(type, std::move(why));
  }
  return out;
}

}  // namespace fleetsim
