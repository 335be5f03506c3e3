// A serving run for people (text) and for programs (JSON).
#include <cstdio>
#include <sstream>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

#include "cost_text.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"
#include "serving_parts.hpp"
#include "svg_chart.hpp"

namespace fleetsim {
namespace {

std::string seconds(double v) { return format_quantity(v, Dimension::time); }
std::string bytes(double v) { return format_quantity(v, Dimension::bytes); }

std::string lengths(const TokenCount& c) {
  return c.low == c.high ? format_number(static_cast<double>(c.low)) : format_number(static_cast<double>(c.low)) + "-" + format_number(static_cast<double>(c.high));
}

const char* policy_name(BatchPolicy p) { return p == BatchPolicy::chunked_prefill ? "chunked-prefill" : p == BatchPolicy::prefill_first ? "prefill-first" : "orca"; }
const char* router_name(Router r) {
  switch (r) {
    case Router::round_robin: return "round-robin";
    case Router::least_requests: return "least-requests";
    case Router::least_tokens: return "least-tokens";
    case Router::prefix_aware: return "prefix-aware";
  }
  return "";
}

std::string slo_text(const ServingDeployment::Slo& s) {
  char line[96];
  std::snprintf(line, sizeof line, "%s p%.0f <= %s", s.metric.c_str(), s.percentile, seconds(s.target_s).c_str());
  return s.tenant.empty() ? std::string(line) : s.tenant + "'s " + line;
}

// Disaggregated, each pool's bounds and decisions apart.
nlohmann::ordered_json autoscale_json(const ServingDeployment& d, const ServingResult& r) {
  if (!d.autoscale.on()) return nlohmann::ordered_json();
  const auto pool = [](int min, int max, const ServingResult::Scaling& s) {
    return nlohmann::ordered_json{{"min", min}, {"max", max}, {"added", s.ups}, {"removed", s.downs}, {"wanted_without_gpus", s.ups_without_gpus}};
  };
  nlohmann::ordered_json out;
  if (d.prefill_replicas > 0) {
    out = {{"prefill", pool(d.autoscale.min, d.autoscale.max, r.scaled)}, {"decode", pool(d.autoscale.decode_min, d.autoscale.decode_max, r.decode_scaled)}};
  } else {
    out = pool(d.autoscale.min, d.autoscale.max, r.scaled);
  }
  out["replica_s"] = r.replica_s;
  return out;
}

nlohmann::ordered_json percentiles_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p95", p.p95}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}};
}

}  // namespace

void write_serving_results(std::ostream& out, const ServingDeployment& d, const ServingResult& r) {
  const NodeGroup& g = d.cluster.groups.front();
  const KvCapacity& c = r.capacity;
  char line[512];
  // In a scenario the run's seed draws the requests; the summary's head says it.
  out << "deployment  " << d.name << "  (" << d.engine.name << ", " << policy_name(d.policy) << (r.deployment ? std::string() : ", seed " + std::to_string(d.seed)) << ")\n";
  const std::string pp = d.pp > 1 ? " x PP " + std::to_string(d.pp) + (d.expert_parallel ? " (experts over each stage's " + std::to_string(d.tp) + (d.decode_tp > 0 ? ", a decode replica's " + std::to_string(d.decode_tp) : "") + ")" : "")
                         : d.dp_attention ? " (attention data-parallel, experts over the " + std::to_string(d.tp) + ")"
                         : d.expert_parallel ? " (experts over the " + std::to_string(d.tp) + (d.decode_tp > 0 ? ", a decode replica's " + std::to_string(d.decode_tp) : "") + ", expert parallel)"
                                             : "";
  const std::string hot = d.expert_imbalance != 1 ? "; hot experts: the busiest GPU " + format_number(d.expert_imbalance) + "x the mean tokens" : "";
  const std::string tp = std::to_string(d.tp) + (d.decode_tp > 0 ? " (decode replicas: TP " + std::to_string(d.decode_tp) + ")" : "");
  std::snprintf(line, sizeof line, "model       %s: %s weights, %s KV cache; %s%d replica%s x TP %s%s on %s (%s router)%s\n", d.model.id.c_str(),
                d.weights_name().c_str(), std::string(dtype_name(d.kv_cache)).c_str(), d.autoscale.on() ? "up to " : "", d.replicas, d.replicas == 1 ? "" : "s", tp.c_str(), pp.c_str(),
                g.gpu.id.c_str(), router_name(d.router), hot.c_str());
  out << line;
  // Alone, the deployment's GPU is said here when its kernel constants are a guess (in a scenario, its summary's head says it).
  if (!r.deployment) {
    for (const std::string& b : borrowed_kernel_constants(d.cluster, {}, true)) out << "borrowed    " << b << "\n";
  }
  if (!d.placement.empty()) {  // in a scenario, or disaggregated: where the replicas run, a replica's pieces (one a node) joined by +
    out << "placed      ";
    std::size_t placed = 0;  // autoscaled, the first of each pool's slots (ServingDeployment::starts_placed)
    for (std::size_t k = 0; k < static_cast<std::size_t>(d.replicas); ++k) {
      if (!d.starts_placed(k) || placed++ >= 8) continue;
      const std::size_t first = d.first_piece(k);
      for (std::size_t i = first; i < first + d.pieces_a_replica(k); ++i) {
        const auto& p = d.placement[i];
        out << (i == first ? (placed > 1 ? ", " : "") : " + ") << "node " << p.node << " GPU"
            << (p.gpus > 1 ? "s " + std::to_string(p.first_gpu) + "-" + std::to_string(p.first_gpu + p.gpus - 1) : " " + std::to_string(p.first_gpu));
      }
    }
    if (placed > 8) out << " and " << placed - 8 << " more";
    out << "\n";
  }
  const int lane_budget = d.engine.lane_token_budget(d.dp_attention, d.tp);
  out << "engine      max " << d.engine.max_num_seqs << " sequences and " << format_number(d.engine.max_num_batched_tokens) << " tokens an iteration"
      << (lane_budget != d.engine.max_num_batched_tokens ? " (" + format_number(lane_budget) + " a data-parallel rank)" : "") << ", blocks of "
      << d.engine.block_size << " tokens, " << seconds(d.engine.iteration_host_s) << " host time an iteration\n";
  const auto kv_cache = [&](const KvCapacity& k, const std::string& whose) {
    out << "kv cache    " << format_number(static_cast<double>(k.tokens)) << " tokens a" << whose << " replica (" << format_number(static_cast<double>(k.blocks)) << " blocks, "
        << bytes(k.kv_bytes_per_token) << " a token a GPU): " << bytes(k.usable_bytes) << " of " << bytes(g.gpu.vram_bytes) << " after " << bytes(k.weights_per_gpu_bytes)
        << " of weights, " << bytes(k.activation_bytes) << " of activations, " << bytes(k.reserved_bytes) << " reserved\n";
  };
  kv_cache(c, r.decode_capacity ? " prefill" : "");
  if (r.decode_capacity) kv_cache(*r.decode_capacity, " decode");
  if (d.pp > 1) {
    std::string layers;
    for (int n : stage_layers(static_cast<int>(d.model.number("layers", 0)), d.pp)) layers += (layers.empty() ? "" : " + ") + std::to_string(n);
    const std::string decode_lanes = r.decode_capacity ? " (a decode replica's " + format_number(static_cast<double>(r.decode_capacity->lane_tokens)) + ")" : "";
    out << "pipeline    " << d.pp << " stages of " << layers << " layers (vLLM's split); stage "
        << c.bound_stage << " holds the fewest blocks (above); " << d.pp << " lanes a replica (vLLM's virtual engines), each with "
        << format_number(static_cast<double>(c.lane_tokens)) << decode_lanes << " tokens of it and a batch in flight, taken as perfectly staggered\n";
  }
  if (d.dp_attention) {
    out << "dp ranks    " << d.tp << " a replica (lanes), each a GPU with its own scheduler and " << format_number(static_cast<double>(c.lane_tokens))
        << " tokens of KV, attention and the dense layers whole; each GPU holds 1/" << d.tp << " of the routed experts\n";
  }
  if (!d.trace.empty()) {
    out << "requests    " << format_number(static_cast<double>(r.requests)) << " replayed from the trace\n";
  } else {
    out << "requests    " << format_number(static_cast<double>(r.requests))
        << (d.rate_per_s > 0 ? " at " + format_number(d.rate_per_s) + " /s (Poisson)" : std::string(" at once")) << ", prompts of "
        << (d.shared_prefix.tokens > 0 ? format_number(static_cast<double>(d.shared_prefix.tokens)) + " shared (one of " +
                                             format_number(static_cast<double>(d.shared_prefix.groups)) + " prefixes) + "
                                       : std::string())
        << lengths(d.prompt_tokens) << " tokens, outputs of " << lengths(d.output_tokens) << "\n";
  }
  if (!d.tenants.empty()) {
    out << "tenants    ";
    for (const ServingDeployment::Tenant& t : d.tenants) out << " " << t.name << " " << format_number(100 * t.share) << "%" << (&t == &d.tenants.back() ? "" : ",");
    out << " of the requests, drawn by share\n";
  }
  if (r.completed < r.requests) {
    out << "unfinished  " << format_number(static_cast<double>(r.requests - r.completed)) << " requests had not completed when the run stopped: not in the figures below; the SLO verdicts count them at their wait so far\n";
  }
  std::snprintf(line, sizeof line, "served      %s in %s: %s requests/s, %s tokens/s in, %s tokens/s out\n",
                format_number(static_cast<double>(r.completed)).c_str(), seconds(r.makespan_s).c_str(), format_number(r.requests_per_s).c_str(), format_number(r.input_tokens_per_s).c_str(),
                format_number(r.output_tokens_per_s).c_str());
  out << line;
  std::snprintf(line, sizeof line, "iterations  %s, %s sequences each on average; KV cache at most %.0f%% full; %s preemption%s\n",
                format_number(static_cast<double>(r.iterations)).c_str(), format_number(r.mean_batch).c_str(), 100 * r.peak_kv_use,
                format_number(static_cast<double>(r.preemptions)).c_str(), r.preemptions == 1 ? "" : "s");
  out << line;
  if (d.engine.swap) {
    out << "swap        " << format_number(static_cast<double>(r.swapped_out)) << " preempted request" << (r.swapped_out == 1 ? "" : "s") << " swapped to host memory and back ("
        << bytes(r.swap_bytes) << " copied over the GPUs' host links, timed alone); " << format_number(static_cast<double>(r.swap_space_full))
        << " recomputed with the " << bytes(d.engine.swap_space_bytes) << " swap space a GPU full (vLLM's V0 engine aborts there)\n";
  }
  if (d.autoscale.on()) {
    const auto pool = [&](int min, int max, const ServingResult::Scaling& s) {
      out << min << " to " << max << " replicas: " << s.ups << " added, " << s.downs << " removed"
          << (s.ups_without_gpus > 0 ? ", " + std::to_string(s.ups_without_gpus) + " more wanted but no GPUs were free" : std::string()) << "; ";
    };
    out << "autoscale   ";
    if (d.prefill_replicas > 0) {
      out << "prefill ";
      pool(d.autoscale.min, d.autoscale.max, r.scaled);
      out << "decode ";
      pool(d.autoscale.decode_min, d.autoscale.decode_max, r.decode_scaled);
    } else {
      pool(d.autoscale.min, d.autoscale.max, r.scaled);
    }
    out << format_number(r.replica_s / 3600) << " replica-hours (" << format_number(r.replica_s / std::max(r.makespan_s, 1e-9)) << " on average)\n";
  }
  if (d.prefill_replicas > 0) {
    out << "split       " << (d.autoscale.on() ? "up to " : "") << d.prefill_replicas << " prefill and " << d.replicas - d.prefill_replicas << " decode replicas: " << format_number(static_cast<double>(r.kv_transfers))
        << " KV caches moved (" << bytes(r.kv_transfer_bytes) << ", " << seconds(r.kv_transfers > 0 ? r.kv_transfer_s / static_cast<double>(r.kv_transfers) : 0)
        << " each on average, " << (d.kv_by_layer ? "layer by layer as the prompt's last pass ran, timed from its end, " : "")
        << (r.kv_on_shared_network ? "on the shared network"
            : d.decode_tp > 0      ? "timed alone on the links between the replicas, the busiest GPU's ending each"
            : d.pp > 1             ? "timed alone, stage by stage, on the links between the replicas"
                                   : "timed alone on the link between the replicas")
        << ")\n";
  }
  if (r.replica_failures > 0) {
    out << "failures    " << format_number(static_cast<double>(r.replica_failures)) << " replica" << (r.replica_failures == 1 ? "" : "s")
        << " taken down by GPU failures or preemptions sent " << format_number(static_cast<double>(r.requests_rerouted))
        << " requests back to the router (their KV lost and recomputed)\n";
  }
  if (r.prefix_hit_tokens > 0 || d.prefix_segment_tokens > 0) {
    std::snprintf(line, sizeof line, "prefix      %.1f%% of the prompt tokens admitted found in the prefix cache (%s of %s)%s; %s cached prefixes evicted\n",
                  r.prompt_tokens > 0 ? 100.0 * static_cast<double>(r.prefix_hit_tokens) / static_cast<double>(r.prompt_tokens) : 0.0,
                  format_number(static_cast<double>(r.prefix_hit_tokens)).c_str(), format_number(static_cast<double>(r.prompt_tokens)).c_str(),
                  d.engine.prefix_caching ? "" : " (prefix caching off)", format_number(static_cast<double>(r.prefix_evictions)).c_str());
    out << line;
  }
  const auto share = [&](double part) { return r.busy.total_s > 0 ? 100 * part / r.busy.total_s : 0.0; };
  std::snprintf(line, sizeof line, "            iteration time: linear layers %.0f%%, attention %.0f%%, TP all-reduces %.0f%%, logits %.0f%%, host %.0f%%",
                share(r.busy.linear_s), share(r.busy.attention_s), share(r.busy.allreduce_s), share(r.busy.logits_s), share(r.busy.host_s));
  out << line;
  if (r.busy.swap_s > 0) {
    std::snprintf(line, sizeof line, ", KV swaps %.0f%%", share(r.busy.swap_s));
    out << line;
  }
  if (r.busy.stage_send_s > 0) {
    std::snprintf(line, sizeof line, ", stage sends %.0f%%", share(r.busy.stage_send_s));
    out << line;
  }
  if (r.busy.expert_alltoall_s > 0) {
    std::snprintf(line, sizeof line, ", expert all-to-alls %.0f%%", share(r.busy.expert_alltoall_s));
    out << line;
  }
  if (r.busy.lockstep_s > 0) {
    std::snprintf(line, sizeof line, ", waiting for the step's slowest rank %.0f%%", share(r.busy.lockstep_s));
    out << line;
  }
  out << "\n\n";
  std::snprintf(line, sizeof line, "%-6s %10s %10s %10s %10s %10s %10s\n", "", "p50", "p90", "p95", "p99", "mean", "max");
  out << line;
  for (const auto& [name, p] : {std::pair<const char*, const Percentiles*>{"ttft", &r.ttft_s}, {"tpot", &r.tpot_s}, {"e2e", &r.e2e_s}}) {
    std::snprintf(line, sizeof line, "%-6s %10s %10s %10s %10s %10s %10s\n", name, seconds(p->p50).c_str(), seconds(p->p90).c_str(), seconds(p->p95).c_str(),
                  seconds(p->p99).c_str(), seconds(p->mean).c_str(), seconds(p->max).c_str());
    out << line;
  }
  if (!r.tenants.empty()) {  // per tenant: its share of the requests, its percentiles and goodput
    out << "\n";
    std::snprintf(line, sizeof line, "%-12s %-5s %10s %10s %10s %10s %12s\n", "tenant", "", "p50", "p90", "p99", "served", "goodput /s");
    out << line;
    for (const ServingResult::TenantResult& t : r.tenants) {
      std::snprintf(line, sizeof line, "%-12s %-5s %10s %10s %10s %10s %12s\n", t.name.c_str(), "ttft", seconds(t.ttft_s.p50).c_str(), seconds(t.ttft_s.p90).c_str(),
                    seconds(t.ttft_s.p99).c_str(), format_number(static_cast<double>(t.completed)).c_str(), format_number(t.goodput_per_s).c_str());
      out << line;
      for (const auto& [name, p] : {std::pair<const char*, const Percentiles*>{"tpot", &t.tpot_s}, {"e2e", &t.e2e_s}}) {
        std::snprintf(line, sizeof line, "%-12s %-5s %10s %10s %10s\n", "", name, seconds(p->p50).c_str(), seconds(p->p90).c_str(), seconds(p->p99).c_str());
        out << line;
      }
    }
  }
  if (!r.verdicts.empty()) {
    out << "\n";
    for (const auto& v : r.verdicts) {
      out << "slo         " << slo_text(v.slo) << ": " << (v.met ? "met" : "MISSED") << " (" << seconds(v.achieved_s) << ")\n";
    }
    std::snprintf(line, sizeof line, "goodput     %s requests/s met every TTFT and TPOT target (of %s served)\n", format_number(r.goodput_per_s).c_str(),
                  format_number(r.requests_per_s).c_str());
    out << line;
  }
  if (!r.notes.empty()) {
    out << "\nassumed (check it):\n";
    for (const std::string& n : r.notes) out << "  " << n << "\n";
  }
}

void write_serving_text(std::ostream& out, const ServingDeployment& d, const ServingResult& r) {
  write_serving_results(out, d, r);
  out << "\nnot modelled yet: redundant copies of hot experts (EPLB), cascade attention over shared prefixes (docs/serving.md)\n";
}

nlohmann::ordered_json serving_results_json(const ServingDeployment& d, const ServingResult& r) {
  nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
  for (const auto& v : r.verdicts) {
    verdicts.push_back({{"metric", v.slo.metric}, {"percentile", v.slo.percentile}, {"target_s", v.slo.target_s}, {"achieved_s", v.achieved_s}, {"met", v.met}});
    if (!v.slo.tenant.empty()) verdicts.back()["tenant"] = v.slo.tenant;
  }
  nlohmann::ordered_json tenants = nlohmann::ordered_json::array();
  for (std::size_t t = 0; t < r.tenants.size(); ++t) {
    const ServingResult::TenantResult& tr = r.tenants[t];
    tenants.push_back({{"name", tr.name}, {"share", d.tenants[t].share}, {"completed", tr.completed}, {"goodput_per_s", tr.goodput_per_s},
                       {"ttft_s", percentiles_json(tr.ttft_s)}, {"tpot_s", percentiles_json(tr.tpot_s)}, {"e2e_s", percentiles_json(tr.e2e_s)}});
  }
  const auto kv_cache_json = [](const KvCapacity& c) {
    return nlohmann::ordered_json{{"tokens", c.tokens}, {"blocks", c.blocks}, {"bytes_per_token", c.kv_bytes_per_token}, {"usable_bytes", c.usable_bytes},
                                  {"weights_per_gpu_bytes", c.weights_per_gpu_bytes}, {"activation_bytes", c.activation_bytes}, {"reserved_bytes", c.reserved_bytes},
                                  {"lane_tokens", c.lane_tokens}, {"lane_blocks", c.lane_blocks}, {"bound_stage", c.bound_stage}};
  };
  nlohmann::ordered_json j{
      {"deployment", d.name},
      {"engine", d.engine.id},
      {"scheduler", policy_name(d.policy)},
      {"model", d.model.id},
      {"gpu", d.cluster.groups.front().gpu.id},
      {"tp", d.tp},
      {"pp", d.pp},
      {"dp_attention", d.dp_attention},
      {"expert_parallel", d.experts_spread()},
      {"expert_imbalance", d.expert_imbalance},
      {"replicas", d.replicas},
      {"router", router_name(d.router)},
      {"kv_cache", kv_cache_json(r.capacity)},
      {"requests", r.requests},
      {"completed", r.completed},
      {"makespan_s", r.makespan_s},
      {"requests_per_s", r.requests_per_s},
      {"input_tokens_per_s", r.input_tokens_per_s},
      {"output_tokens_per_s", r.output_tokens_per_s},
      {"goodput_per_s", r.goodput_per_s},
      {"iterations", r.iterations},
      {"mean_batch", r.mean_batch},
      {"peak_kv_use", r.peak_kv_use},
      {"preemptions", r.preemptions},
      {"swap", {{"on", d.engine.swap}, {"swap_space_bytes", d.engine.swap_space_bytes}, {"swapped_out", r.swapped_out}, {"bytes", r.swap_bytes}, {"recomputed_swap_full", r.swap_space_full}}},
      {"prefill_replicas", d.prefill_replicas},
      {"kv_transfers", {{"count", r.kv_transfers}, {"bytes", r.kv_transfer_bytes}, {"seconds", r.kv_transfer_s}, {"shared_network", r.kv_on_shared_network}, {"by_layer", d.kv_by_layer}}},
      {"autoscale", autoscale_json(d, r)},
      {"replica_failures", r.replica_failures},
      {"requests_rerouted", r.requests_rerouted},
      {"prefix_cache", {{"on", d.engine.prefix_caching}, {"prompt_tokens", r.prompt_tokens}, {"hit_tokens", r.prefix_hit_tokens}, {"evictions", r.prefix_evictions}}},
      {"ttft_s", percentiles_json(r.ttft_s)},
      {"tpot_s", percentiles_json(r.tpot_s)},
      {"e2e_s", percentiles_json(r.e2e_s)},
      {"tenants", tenants},
      {"slos", verdicts},
      {"assumed", r.notes}};
  if (!r.deployment) j["seed"] = d.seed;  // in a scenario the run's seed draws the requests
  if (r.decode_capacity) j["decode"] = {{"tp", d.decode_tp}, {"kv_cache", kv_cache_json(*r.decode_capacity)}};  // decode replicas of another TP
  return j;
}

std::string serving_json(const ServingDeployment& d, const ServingResult& r) { return serving_results_json(d, r).dump(2) + "\n"; }

namespace {

const char* verdict_name(ServingPoint::Verdict v) {
  switch (v) {
    case ServingPoint::Verdict::met: return "met";
    case ServingPoint::Verdict::missed: return "missed";
    case ServingPoint::Verdict::not_sure: return "not sure";
    case ServingPoint::Verdict::does_not_fit: return "cannot run";
  }
  return "";
}

std::string point_slos(const ServingPoint& p) {
  std::string text;
  for (const auto& s : p.slos) {
    text += (text.empty() ? "" : ", ") + s.slo.metric + " p" + std::to_string(static_cast<int>(s.slo.percentile)) + " " + seconds(s.mean_s) +
            (s.ci95_s > 0 ? " +- " + seconds(s.ci95_s) : "");
  }
  return text;
}

// What a point sets beyond node type, engine, TP and replicas: its attention, prefill/decode split and knobs.
std::string point_setup(const ServingPoint& p) {
  std::string split = p.prefill_replicas > 0 ? std::to_string(p.prefill_replicas) + "P+" + std::to_string(p.replicas - p.prefill_replicas) + "D"
                      : p.prefill_share > 0  ? format_number(100 * p.prefill_share) + "% P"
                                             : "together";
  if (p.decode_tp > 0) split += ", D at TP " + std::to_string(p.decode_tp);
  if (p.kv_by_layer) split += ", KV by layer";
  if (p.dp_attention) split = "DP attention; " + split;
  return p.knobs.empty() ? split : split + "; " + p.knobs;
}

}  // namespace

void write_serving_plan_text(std::ostream& out, const ServingPlan& plan, const ServingPlanResult& r) {
  out << "serving plan  " << plan.file << "  (" << plan.base_file << "; " << plan.seeds << " seed" << (plan.seeds == 1 ? "" : "s") << " a point, "
      << format_number(static_cast<double>(r.points.size())) << " points simulated)\n";
  if (plan.cost.given) out << cost_basis_text(plan.cost) << "\n";
  if (!r.kernel_guesses.empty()) {
    out << "node types whose GPU's kernel constants are a guess (and so are the times below on them):\n";
    for (const auto& [type, why] : r.kernel_guesses) out << "  " << type << ": " << why << "\n";
  }
  char line[1024];
  // A column for the split and knobs where the plan searches them.
  const bool setups = plan.prefill_shares.size() > 1 || plan.prefill_shares.front() > 0 || plan.knob_settings.size() > 1 || plan.dp_attentions.size() > 1 ||
                      plan.dp_attentions.front();
  int setup_width = 5;
  for (const ServingPoint& p : r.lines) setup_width = std::max(setup_width, static_cast<int>(point_setup(p).size()));
  // A column for the stages where the plan searches them (or its deployment has them).
  const bool stages = plan.pps.size() > 1 || (!plan.pps.empty() && plan.pps.front() > 1);
  const auto stages_cell = [&](const ServingPoint& p) { return stages ? " " + std::string(p.pp < 10 ? "  " : " ") + std::to_string(p.pp) : std::string(); };
  for (std::size_t k = 0; k < plan.rates_per_s.size(); ++k) {
    const double rate = plan.rates_per_s[k];
    out << "\nat " << format_number(rate) << " requests/s\n";
    std::snprintf(line, sizeof line, "  %-16s %-14s %3s%s %9s %6s %6s %12s  %-10s %s\n", "node type", "engine", "tp", stages ? "  pp" : "", "replicas", "GPUs", "nodes", "$/month", "verdict",
                  ((setups ? std::string("setup") + std::string(static_cast<std::size_t>(setup_width - 5) + 2, ' ') : std::string()) + "SLOs (mean +- 95% CI over seeds)").c_str());
    out << line;
    std::vector<std::string> rows;  // printed at this rate: two prefill shares that round to one split give the same row
    for (const ServingPoint& p : r.lines) {
      if (p.rate_per_s != rate) continue;
      std::string setup = setups ? point_setup(p) : std::string();
      if (setups) setup += std::string(static_cast<std::size_t>(setup_width) - setup.size() + 2, ' ');
      std::snprintf(line, sizeof line, "  %-16s %-14s %3d%s %9d %6d %6d %12s  %-10s %s%s\n", p.node_type.c_str(), p.engine.c_str(), p.tp, stages_cell(p).c_str(), p.replicas, p.gpus, p.nodes,
                    format_number(p.usd_per_month).c_str(), verdict_name(p.verdict), setup.c_str(),
                    p.verdict == ServingPoint::Verdict::does_not_fit ? p.why.c_str() : (point_slos(p) + (p.verdict == ServingPoint::Verdict::met ? "" : " (at the most replicas searched)")).c_str());
      if (std::find(rows.begin(), rows.end(), line) != rows.end()) continue;
      rows.emplace_back(line);
      out << line;
    }
    if (const auto& pick = r.recommended[k]) {
      out << "  recommended: " << pick->replicas << " replica" << (pick->replicas == 1 ? "" : "s") << " of " << pick->engine << " at TP " << pick->tp << (pick->pp > 1 ? " x PP " + std::to_string(pick->pp) : std::string()) << " on "
          << pick->nodes << " " << pick->node_type << " node" << (pick->nodes == 1 ? "" : "s") << " (" << pick->gpus << " GPUs)"
          << (setups ? " (" + point_setup(*pick) + ")" : std::string()) << ", $" << format_number(pick->usd_per_month)
          << " a month: " << point_slos(*pick) << (kernel_guess(r.kernel_guesses, pick->node_type) != nullptr ? " (its GPU's kernel constants a guess: above)" : "") << "\n";
      if (plan.cost.given) out << "    " << cost_text(plan.cost, pick->cost) << "\n";
    } else {
      out << "  recommended: none; no deployment searched meets every SLO at this rate (more replicas, other GPUs or looser targets)\n";
    }
  }
}

std::string serving_plan_json(const ServingPlan& plan, const ServingPlanResult& r) {
  const auto point = [&](const ServingPoint& p) {
    nlohmann::ordered_json slos = nlohmann::ordered_json::array();
    for (const auto& s : p.slos) {
      slos.push_back({{"metric", s.slo.metric}, {"percentile", s.slo.percentile}, {"target_s", s.slo.target_s}, {"mean_s", s.mean_s}, {"ci95_s", s.ci95_s}});
    }
    nlohmann::ordered_json j{{"rate_per_s", p.rate_per_s}, {"node_type", p.node_type}, {"engine", p.engine}, {"tp", p.tp}, {"pp", p.pp}, {"dp_attention", p.dp_attention}, {"replicas", p.replicas},
                             {"gpus", p.gpus}, {"nodes", p.nodes}, {"prefill_replicas", p.prefill_replicas}, {"decode_tp", p.decode_tp},
                             {"kv_transfer", p.prefill_share == 0 ? "none" : p.kv_by_layer ? "by_layer" : "after_prefill"}, {"knobs", p.knobs},
                             {"usd_per_month", p.usd_per_month}, {"verdict", verdict_name(p.verdict)},
                             {"why", p.why}, {"slos", slos}};
    if (plan.cost.given) j["cost"] = monthly_cost_json(p.cost);
    return j;
  };
  nlohmann::ordered_json lines = nlohmann::ordered_json::array(), points = nlohmann::ordered_json::array(), picks = nlohmann::ordered_json::array();
  for (const ServingPoint& p : r.lines) lines.push_back(point(p));
  for (const ServingPoint& p : r.points) points.push_back(point(p));
  for (const auto& p : r.recommended) picks.push_back(p ? point(*p) : nlohmann::ordered_json());
  nlohmann::ordered_json guesses = nlohmann::ordered_json::array();
  for (const auto& [type, why] : r.kernel_guesses) guesses.push_back({{"node_type", type}, {"why", why}});
  const nlohmann::ordered_json j{{"plan", plan.file},      {"serving", plan.base_file}, {"seeds", plan.seeds},         {"recommended", picks},
                                 {"lines", lines},         {"points", points},          {"kernel_guesses", guesses}};
  return j.dump(2) + "\n";
}

namespace {

// A cumulative distribution of per-request times, on a log axis where they spread over decades.
void time_cdf(std::ostream& out, const std::string& id, const std::string& title, const std::string& what, std::vector<double> v,
              const std::vector<ServingDeployment::Slo>& targets, std::string_view metric) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !(x > 0); }), v.end());
  if (v.empty()) {
    out << "<p class=\"note\">No request has a " << html::escape(what) << ".</p>\n";
    return;
  }
  std::sort(v.begin(), v.end());
  double lo = v.front(), hi = v.back();
  for (const auto& t : targets) {
    if (t.metric != metric) continue;
    lo = std::min(lo, t.target_s);
    hi = std::max(hi, t.target_s);
  }
  const html::Axis x = html::time_axis(lo, hi, what);
  html::SvgChart chart(id, title, x, {.lo = 0, .hi = 1, .label = "fraction of requests"});
  chart.polyline(html::cdf_points(v), html::color(0), what);
  std::vector<std::pair<std::string, const char*>> legend{{what, html::color(0)}};
  for (const auto& t : targets) {
    if (t.metric != metric) continue;
    chart.guide(t.target_s, 0, t.target_s, t.percentile / 100, html::color(3), true);
    chart.guide(x.lo, t.percentile / 100, t.target_s, t.percentile / 100, html::color(3), true);
    legend.emplace_back("target: p" + std::to_string(static_cast<int>(t.percentile)) + " within " + seconds(t.target_s), html::color(3));
  }
  chart.legend(legend);
  chart.write(out);
}

void over_time(std::ostream& out, const ServingResult& r, const std::string& id_suffix) {
  if (r.timeline.size() < 2) return;
  const double end = std::max(r.timeline.back().time_s, 1e-9);
  std::vector<std::pair<double, double>> sequences, kv;
  double top = 1;
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    const auto& p = r.timeline[i];
    if (i > 0) {  // steps: a value holds until the next sample
      sequences.emplace_back(p.time_s, r.timeline[i - 1].sequences);
      kv.emplace_back(p.time_s, 100 * r.timeline[i - 1].kv_use);
    }
    sequences.emplace_back(p.time_s, p.sequences);
    kv.emplace_back(p.time_s, 100 * p.kv_use);
    top = std::max(top, p.sequences);
  }
  html::SvgChart batch("batch" + id_suffix, "Sequences in the running iterations, all replicas", html::seconds_axis(end, "simulated time"),
                       {.lo = 0, .hi = html::nice_ceiling(top * 1.05), .label = "sequences"});
  batch.polyline(sequences, html::color(1), "sequences");
  batch.write(out);
  html::SvgChart cache("kv-cache" + id_suffix, "KV cache in use, mean over the replicas", html::seconds_axis(end, "simulated time"),
                       {.lo = 0, .hi = 100, .label = "% of the blocks"});
  cache.polyline(kv, html::color(2), "KV blocks in use");
  cache.write(out);
}

}  // namespace

void write_serving_sections(std::ostream& out, const ServingDeployment& d, const ServingResult& r, const std::string& id_suffix, const char* heading) {
  if (!r.verdicts.empty()) {
    bool all = true;
    for (const auto& v : r.verdicts) all = all && v.met;
    out << "<p><b>" << (all ? "Every SLO is met." : "Not every SLO is met.") << "</b> ";
    for (const auto& v : r.verdicts) out << html::escape(slo_text(v.slo)) << ": " << (v.met ? "met" : "missed") << " (" << html::escape(seconds(v.achieved_s)) << "). ";
    out << "</p>\n";
  }
  std::ostringstream text;
  write_serving_results(text, d, r);
  out << "<" << heading << ">Summary</" << heading << ">\n<pre style=\"white-space: pre-wrap\">" << html::escape(text.str()) << "</pre>\n";
  out << "<" << heading << ">Latency</" << heading << ">\n";
  time_cdf(out, "ttft-cdf" + id_suffix, "Time to first token, cumulative distribution", "time to first token", r.ttft_samples_s, d.slos, "ttft");
  time_cdf(out, "tpot-cdf" + id_suffix, "Time per output token, cumulative distribution", "time per output token", r.tpot_samples_s, d.slos, "tpot");
  out << "<" << heading << ">Batches and KV cache over time</" << heading << ">\n";
  over_time(out, r, id_suffix);
}

void write_serving_html(std::ostream& out, const ServingDeployment& d, const ServingResult& r) {
  html::page_begin(out, "fleetsim serve: " + d.name);
  if (!d.description.empty()) out << "<p>" << html::escape(d.description) << "</p>\n";
  for (const std::string& b : borrowed_kernel_constants(d.cluster, {}, true)) out << "<p class=\"note\">Borrowed constants: " << html::escape(b) << ".</p>\n";
  write_serving_sections(out, d, r, "", "h2");
  html::page_end(out);
}

}  // namespace fleetsim
