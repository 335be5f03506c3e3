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

}  // namespace fleetsim
