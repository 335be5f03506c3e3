// A serving run for people (text) and for programs (JSON).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {

std::string seconds(double v) { return format_quantity(v, Dimension::time); }
std::string bytes(double v) { return format_quantity(v, Dimension::bytes); }

std::string lengths(const TokenCount& c) {
  return c.low == c.high ? format_number(static_cast<double>(c.low)) : format_number(static_cast<double>(c.low)) + "-" + format_number(static_cast<double>(c.high));
}

const char* policy_name(BatchPolicy p) { return p == BatchPolicy::chunked_prefill ? "chunked-prefill" : p == BatchPolicy::prefill_first ? "prefill-first" : "orca"; }
const char* router_name(Router r) { return r == Router::round_robin ? "round-robin" : r == Router::least_requests ? "least-requests" : "least-tokens"; }

std::string slo_text(const ServingDeployment::Slo& s) {
  char line[96];
  std::snprintf(line, sizeof line, "%s p%.0f <= %s", s.metric.c_str(), s.percentile, seconds(s.target_s).c_str());
  return line;
}

nlohmann::ordered_json percentiles_json(const Percentiles& p) {
  return {{"p50", p.p50}, {"p90", p.p90}, {"p95", p.p95}, {"p99", p.p99}, {"mean", p.mean}, {"max", p.max}};
}

}  // namespace

void write_serving_text(std::ostream& out, const ServingDeployment& d, const ServingResult& r) {
  const NodeGroup& g = d.cluster.groups.front();
  const KvCapacity& c = r.capacity;
  char line[512];
  out << "deployment  " << d.name << "  (" << d.engine.name << ", " << policy_name(d.policy) << ", seed " << d.seed << ")\n";
  std::snprintf(line, sizeof line, "model       %s: %s weights, %s KV cache; %d replica%s x TP %d on %s (%s router)\n", d.model.id.c_str(),
                std::string(dtype_name(d.weights)).c_str(), std::string(dtype_name(d.kv_cache)).c_str(), d.replicas, d.replicas == 1 ? "" : "s", d.tp,
                g.gpu.id.c_str(), router_name(d.router));
  out << line;
  out << "engine      max " << d.engine.max_num_seqs << " sequences and " << format_number(d.engine.max_num_batched_tokens) << " tokens an iteration, blocks of "
      << d.engine.block_size << " tokens, " << seconds(d.engine.iteration_host_s) << " host time an iteration\n";
  out << "kv cache    " << format_number(static_cast<double>(c.tokens)) << " tokens a replica (" << format_number(static_cast<double>(c.blocks)) << " blocks, "
      << bytes(c.kv_bytes_per_token) << " a token a GPU): " << bytes(c.usable_bytes) << " of " << bytes(g.gpu.vram_bytes) << " after " << bytes(c.weights_per_gpu_bytes)
      << " of weights, " << bytes(c.activation_bytes) << " of activations, " << bytes(c.reserved_bytes) << " reserved\n";
  if (!d.trace.empty()) {
    out << "requests    " << format_number(static_cast<double>(r.requests)) << " replayed from the trace\n";
  } else {
    out << "requests    " << format_number(static_cast<double>(r.requests))
        << (d.rate_per_s > 0 ? " at " + format_number(d.rate_per_s) + " /s (Poisson)" : std::string(" at once")) << ", prompts of "
        << lengths(d.prompt_tokens) << " tokens, outputs of " << lengths(d.output_tokens) << "\n";
  }
  std::snprintf(line, sizeof line, "served      %s in %s: %s requests/s, %s tokens/s in, %s tokens/s out\n",
                format_number(static_cast<double>(r.completed)).c_str(), seconds(r.makespan_s).c_str(), format_number(r.requests_per_s).c_str(), format_number(r.input_tokens_per_s).c_str(),
                format_number(r.output_tokens_per_s).c_str());
  out << line;
  std::snprintf(line, sizeof line, "iterations  %s, %s sequences each on average; KV cache at most %.0f%% full; %s preemption%s\n",
                format_number(static_cast<double>(r.iterations)).c_str(), format_number(r.mean_batch).c_str(), 100 * r.peak_kv_use,
                format_number(static_cast<double>(r.preemptions)).c_str(), r.preemptions == 1 ? "" : "s");
  out << line;
  const auto share = [&](double part) { return r.busy.total_s > 0 ? 100 * part / r.busy.total_s : 0.0; };
  std::snprintf(line, sizeof line, "            iteration time: linear layers %.0f%%, attention %.0f%%, TP all-reduces %.0f%%, logits %.0f%%, host %.0f%%\n\n",
                share(r.busy.linear_s), share(r.busy.attention_s), share(r.busy.allreduce_s), share(r.busy.logits_s), share(r.busy.host_s));
  out << line;
  std::snprintf(line, sizeof line, "%-6s %10s %10s %10s %10s %10s %10s\n", "", "p50", "p90", "p95", "p99", "mean", "max");
  out << line;
  for (const auto& [name, p] : {std::pair<const char*, const Percentiles*>{"ttft", &r.ttft_s}, {"tpot", &r.tpot_s}, {"e2e", &r.e2e_s}}) {
    std::snprintf(line, sizeof line, "%-6s %10s %10s %10s %10s %10s %10s\n", name, seconds(p->p50).c_str(), seconds(p->p90).c_str(), seconds(p->p95).c_str(),
                  seconds(p->p99).c_str(), seconds(p->mean).c_str(), seconds(p->max).c_str());
    out << line;
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
  out << "\nnot modelled yet: pipeline parallelism, TP across nodes, MoE, int4 weights, prefix caching, swap preemption, prefill/decode\n"
         "disaggregation, serving beside other work in a scenario (docs/serving.md)\n";
}

std::string serving_json(const ServingDeployment& d, const ServingResult& r) {
  nlohmann::ordered_json verdicts = nlohmann::ordered_json::array();
  for (const auto& v : r.verdicts) {
    verdicts.push_back({{"metric", v.slo.metric}, {"percentile", v.slo.percentile}, {"target_s", v.slo.target_s}, {"achieved_s", v.achieved_s}, {"met", v.met}});
  }
  const KvCapacity& c = r.capacity;
  const nlohmann::ordered_json j{
      {"deployment", d.name},
      {"engine", d.engine.id},
      {"scheduler", policy_name(d.policy)},
      {"model", d.model.id},
      {"gpu", d.cluster.groups.front().gpu.id},
      {"tp", d.tp},
      {"replicas", d.replicas},
      {"router", router_name(d.router)},
      {"seed", d.seed},
      {"kv_cache", {{"tokens", c.tokens}, {"blocks", c.blocks}, {"bytes_per_token", c.kv_bytes_per_token}, {"usable_bytes", c.usable_bytes},
                    {"weights_per_gpu_bytes", c.weights_per_gpu_bytes}, {"activation_bytes", c.activation_bytes}, {"reserved_bytes", c.reserved_bytes}}},
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
      {"ttft_s", percentiles_json(r.ttft_s)},
      {"tpot_s", percentiles_json(r.tpot_s)},
      {"e2e_s", percentiles_json(r.e2e_s)},
      {"slos", verdicts},
      {"assumed", r.notes}};
  return j.dump(2) + "\n";
}

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

}  // namespace

void write_serving_plan_text(std::ostream& out, const ServingPlan& plan, const ServingPlanResult& r) {
  out << "serving plan  " << plan.file << "  (" << plan.base_file << "; " << plan.seeds << " seed" << (plan.seeds == 1 ? "" : "s") << " a point, "
      << format_number(static_cast<double>(r.points.size())) << " points simulated)\n";
  char line[512];
  for (std::size_t k = 0; k < plan.rates_per_s.size(); ++k) {
    const double rate = plan.rates_per_s[k];
    out << "\nat " << format_number(rate) << " requests/s\n";
    std::snprintf(line, sizeof line, "  %-16s %-14s %3s %9s %6s %6s %12s  %-10s %s\n", "node type", "engine", "tp", "replicas", "GPUs", "nodes", "$/month", "verdict", "SLOs (mean +- 95% CI over seeds)");
    out << line;
    for (const ServingPoint& p : r.lines) {
      if (p.rate_per_s != rate) continue;
      std::snprintf(line, sizeof line, "  %-16s %-14s %3d %9d %6d %6d %12s  %-10s %s\n", p.node_type.c_str(), p.engine.c_str(), p.tp, p.replicas, p.gpus, p.nodes,
                    format_number(p.usd_per_month).c_str(), verdict_name(p.verdict),
                    p.verdict == ServingPoint::Verdict::does_not_fit ? p.why.c_str() : (point_slos(p) + (p.verdict == ServingPoint::Verdict::met ? "" : " (at the most replicas searched)")).c_str());
      out << line;
    }
    if (const auto& pick = r.recommended[k]) {
      out << "  recommended: " << pick->replicas << " replica" << (pick->replicas == 1 ? "" : "s") << " of " << pick->engine << " at TP " << pick->tp << " on "
          << pick->nodes << " " << pick->node_type << " node" << (pick->nodes == 1 ? "" : "s") << " (" << pick->gpus << " GPUs), $" << format_number(pick->usd_per_month)
          << " a month: " << point_slos(*pick) << "\n";
    } else {
      out << "  recommended: none; no deployment searched meets every SLO at this rate (more replicas, other GPUs or looser targets)\n";
    }
  }
}

std::string serving_plan_json(const ServingPlan& plan, const ServingPlanResult& r) {
  const auto point = [](const ServingPoint& p) {
    nlohmann::ordered_json slos = nlohmann::ordered_json::array();
    for (const auto& s : p.slos) {
      slos.push_back({{"metric", s.slo.metric}, {"percentile", s.slo.percentile}, {"target_s", s.slo.target_s}, {"mean_s", s.mean_s}, {"ci95_s", s.ci95_s}});
    }
    return nlohmann::ordered_json{{"rate_per_s", p.rate_per_s}, {"node_type", p.node_type}, {"engine", p.engine}, {"tp", p.tp}, {"replicas", p.replicas},
                                  {"gpus", p.gpus}, {"nodes", p.nodes}, {"usd_per_month", p.usd_per_month}, {"verdict", verdict_name(p.verdict)},
                                  {"why", p.why}, {"slos", slos}};
  };
  nlohmann::ordered_json lines = nlohmann::ordered_json::array(), points = nlohmann::ordered_json::array(), picks = nlohmann::ordered_json::array();
  for (const ServingPoint& p : r.lines) lines.push_back(point(p));
  for (const ServingPoint& p : r.points) points.push_back(point(p));
  for (const auto& p : r.recommended) picks.push_back(p ? point(*p) : nlohmann::ordered_json());
  const nlohmann::ordered_json j{{"plan", plan.file}, {"serving", plan.base_file}, {"seeds", plan.seeds}, {"recommended", picks}, {"lines", lines}, {"points", points}};
  return j.dump(2) + "\n";
}

}  // namespace fleetsim
