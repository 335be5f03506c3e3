// Reading a serving deployment (docs/serving.md), strictly: every problem with its file and field.
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "fleetsim/suggest.hpp"
#include "fleetsim/units.hpp"
#include "../import/job_log.hpp"
#include "../loaders.hpp"
#include "fleetsim/serving.hpp"
#include "serving_model.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

// Requests one deployment may have, and the longest prompt or output: beyond them a run is hours of
// work or no engine's context.
constexpr std::int64_t kMaxRequests = 10'000'000;
constexpr std::int64_t kMaxTokens = 1'048'576;
constexpr std::size_t kMaxTenants = 1000;

// 512, or {"uniform": [128, 1024]}.
TokenCount read_tokens(ObjectReader& r, std::string_view key, Need need) {
  TokenCount t;
  const Json* v = r.field(key, need);
  if (v == nullptr) return t;
  const auto in_range = [](const Json& x) { return x.is_number_integer() && x.get<std::int64_t>() >= 1 && x.get<std::int64_t>() <= kMaxTokens; };
  const std::string expected = "expected a whole number of tokens from 1 to 1,048,576, or {\"uniform\": [LOW, HIGH]}, found " + detail::describe(*v);
  if (in_range(*v)) {
    t.low = t.high = v->get<std::int64_t>();
  } else if (v->is_object() && v->size() == 1 && v->contains("uniform") && (*v)["uniform"].is_array() && (*v)["uniform"].size() == 2 &&
             in_range((*v)["uniform"][0]) && in_range((*v)["uniform"][1]) && (*v)["uniform"][0] <= (*v)["uniform"][1]) {
    t.low = (*v)["uniform"][0].get<std::int64_t>();
    t.high = (*v)["uniform"][1].get<std::int64_t>();
  } else {
    r.problem(key, expected);
  }
  return t;
}

// The request traces a deployment replays, by format: fleetsim's own CSV, and the public traces of
// LLM services as published.
enum class TraceFormat { fleetsim, azure, burstgpt, mooncake };

// One request of a trace as logged, before its times are made relative to the first.
struct LoggedRequest {
  double arrival_s;
  std::int64_t prompt, output;
};

// Reads `path` in `format`: each request's arrival (seconds from the first; times in order), prompt and
// output tokens. Rows a service logged without any output (failures) are dropped and counted in `notes`.
// Mooncake's traces name each 512-token block of a prompt by a hash (its README: block size 512).
constexpr std::int64_t kMooncakeBlockTokens = 512;

std::vector<ServingDeployment::Request> read_request_trace(const std::string& path, TraceFormat format, const std::string& pointer,
                                                           detail::Problems& problems, std::vector<std::string>& notes,
                                                           std::vector<std::uint64_t>& prefix_hashes) {
  std::vector<ServingDeployment::Request> rows;
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const InputError& e) {
    problems.add(pointer, "cannot use \"" + path + "\": " + (e.problems().empty() ? std::string("cannot read it") : e.problems().front().message));
    return rows;
  }
  static constexpr std::array<const char*, 4> kHeaders{"arrival_s,prompt_tokens,output_tokens", "TIMESTAMP,ContextTokens,GeneratedTokens",
                                                       "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type", ""};
  const std::string header = kHeaders[static_cast<std::size_t>(format)];
  std::size_t line = 0, at = 0, lines = 0, no_output = 0;
  double first_s = 0;
  std::vector<std::uint64_t> hashes;  // the row's prefix hashes
  const auto bad = [&](const std::string& why) { problems.add_repeated("bad request rows", pointer, path + " line " + std::to_string(line) + ": " + why); };
  const auto count = [&](std::optional<double> v, std::string_view shown, const char* column, bool zero_ok) -> std::optional<std::int64_t> {
    if (!v || *v < (zero_ok ? 0 : 1) || *v > kMaxTokens || *v != std::floor(*v)) {
      bad(std::string("column ") + column + ": expected a whole number of tokens up to 1,048,576, found \"" + std::string(shown.substr(0, 40)) + "\"");
      return std::nullopt;
    }
    return static_cast<std::int64_t>(*v);
  };
  const auto tokens = [&](std::string_view cell, const char* column, bool zero_ok) { return count(parse_number(cell), cell, column, zero_ok); };
  while (at < text.size()) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view row(text.data() + at, end - at);
    at = end + 1;
    ++line;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    if (line == 1 && !header.empty()) {
      if (row != header) bad("expected the header \"" + header + "\", found \"" + std::string(row.substr(0, 80)) + "\"");
      continue;
    }
    if (row.find_first_not_of(" \t") == std::string_view::npos) continue;
    ++lines;
    std::optional<double> when;
    std::optional<std::int64_t> prompt, output;
    const char* time_column = "arrival_s";
    if (format == TraceFormat::mooncake) {  // {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}
      time_column = "timestamp";
      const detail::Json j = detail::Json::parse(row, nullptr, false);
      const auto number = [&](const char* key) { return j.is_object() && j.contains(key) && j[key].is_number() ? std::optional(j[key].get<double>()) : std::nullopt; };
      if (!j.is_object()) {
        bad("expected a JSON object {\"timestamp\", \"input_length\", \"output_length\"}");
        continue;
      }
      if (const auto ms = number("timestamp"); ms && std::isfinite(*ms)) when = *ms / 1000;
      const auto shown = [&](const char* key) { return j.contains(key) ? j[key].dump() : std::string("nothing"); };
      prompt = count(number("input_length"), shown("input_length"), "input_length", false);
      output = count(number("output_length"), shown("output_length"), "output_length", true);
      hashes.clear();
      if (j.contains("hash_ids")) {
        const detail::Json& ids = j["hash_ids"];
        const bool listed = ids.is_array() && std::all_of(ids.begin(), ids.end(), [](const detail::Json& h) { return h.is_number_unsigned() || (h.is_number_integer() && h.get<std::int64_t>() >= 0); });
        if (!listed || (prompt && static_cast<std::int64_t>(ids.size()) > (*prompt + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens)) {
          bad("column hash_ids: expected an array of whole numbers, one for each 512-token block of the prompt, found " + ids.dump().substr(0, 60));
          continue;
        }
        for (const detail::Json& h : ids) hashes.push_back(h.get<std::uint64_t>());
      }
    } else {
      const std::vector<std::string> cells = detail::csv_cells(row);
      const std::size_t want = format == TraceFormat::burstgpt ? 6 : 3;
      if (cells.size() != want) {
        bad("expected " + std::to_string(want) + " cells, as the header names them");
        continue;
      }
      if (format == TraceFormat::azure) {  // "2023-11-16 18:15:46.6805900"
        time_column = "TIMESTAMP";
        when = detail::log_time(cells[0]);
        prompt = tokens(cells[1], "ContextTokens", false);
        output = tokens(cells[2], "GeneratedTokens", true);
      } else if (format == TraceFormat::burstgpt) {  // seconds from the trace's start
        time_column = "Timestamp";
        when = parse_number(cells[0]);
        prompt = tokens(cells[2], "Request tokens", false);
        output = tokens(cells[3], "Response tokens", true);
      } else {
        when = parse_number(cells[0]);
        prompt = tokens(cells[1], "prompt_tokens", false);
        output = tokens(cells[2], "output_tokens", false);
      }
    }
    // Seconds from the trace's start (Azure's are dates).
    if (!when || (format != TraceFormat::azure && !(*when >= 0 && *when <= kLongestSeconds))) {
      const std::string found = format == TraceFormat::mooncake ? "another value" : "\"" + detail::csv_cells(row).front() + "\"";
      bad(std::string("column ") + time_column + ": expected a time" + (format == TraceFormat::azure ? "" : " from 0 to 1e9 seconds") + ", found " + found);
      continue;
    }
    if (!prompt || !output) continue;
    if (rows.empty()) first_s = *when;
    const double t = *when - first_s;
    if (!rows.empty() && t < rows.back().arrival_s) {
      bad(std::string("column ") + time_column + ": expected times in order, found one " + format_quantity(rows.back().arrival_s - t, Dimension::time) + " before the row above");
      continue;
    }
    if (*output == 0) {  // a failed request: nothing was generated
      ++no_output;
      continue;
    }
    if (rows.size() >= static_cast<std::size_t>(kMaxRequests)) {
      bad("more than 10,000,000 requests");
      break;
    }
    rows.push_back({t, *prompt, *output, prefix_hashes.size(), static_cast<std::uint32_t>(hashes.size())});
    prefix_hashes.insert(prefix_hashes.end(), hashes.begin(), hashes.end());
  }
  if (rows.empty() && problems.empty()) problems.add(pointer, path + ": expected request rows, found none");
  if (format != TraceFormat::fleetsim) {
    notes.push_back("replayed " + format_number(static_cast<double>(rows.size())) + " of the trace's " + format_number(static_cast<double>(lines)) +
                    " requests, times from the first" + (no_output > 0 ? "; dropped " + format_number(static_cast<double>(no_output)) + " that generated no token" : ""));
  }
  return rows;
}

void read_engine(ObjectReader& top, ServingDeployment& d, bool cluster_ok) {
  const std::string id = top.string_or("engine", "vllm");
  if (const EngineProfile* e = find_engine(id)) {
    d.engine = cluster_ok ? engine_for_gpu(*e, d.cluster.groups.front().gpu) : *e;
  } else {
    std::string known;
    for (const EngineProfile& other : engine_profiles()) known += (known.empty() ? "" : ", ") + other.id;
    std::vector<std::string> ids;
    for (const EngineProfile& other : engine_profiles()) ids.push_back(other.id);
    top.problem("engine", "unknown engine \"" + id + "\" (expected one of " + known + ")" + did_you_mean(id, ids));
  }
  const Json* value = top.field("knobs");
  if (value == nullptr) return;
  ObjectReader s(*value, top.pointer("knobs"), top.problems());
  if (!s.ok()) return;
  EngineProfile& e = d.engine;
  e.scheduler = std::string(std::array<std::string_view, 3>{"chunked-prefill", "prefill-first", "orca"}[s.choice(
      "policy", {"chunked-prefill", "prefill-first", "orca"},
      e.scheduler == "prefill-first" ? 1 : e.scheduler == "orca" ? 2 : 0)]);
  e.max_num_seqs = static_cast<int>(s.integer_or("max_num_seqs", e.max_num_seqs, 1, 65536));
  e.max_num_batched_tokens = static_cast<int>(s.integer_or("max_num_batched_tokens", e.max_num_batched_tokens, 1, 1 << 20));
  e.block_size = static_cast<int>(s.integer_or("block_size", e.block_size, 1, 4096));
  d.utilization_set = s.field("gpu_memory_utilization") != nullptr;
  e.gpu_memory_utilization = s.number("gpu_memory_utilization", Need::optional, 0.0, 1.0).value_or(e.gpu_memory_utilization);
  if (!(e.gpu_memory_utilization > 0)) s.problem("gpu_memory_utilization", "expected a fraction above 0, at most 1");
  e.prefix_caching = s.boolean_or("prefix_caching", e.prefix_caching);
  e.swap = s.choice("preemption", {"recompute", "swap"}, e.swap ? 1 : 0) == 1;
  e.swap_space_bytes = s.quantity_or("swap_space", Dimension::bytes, e.swap_space_bytes);
  if (!(e.swap_space_bytes >= 0 && e.swap_space_bytes <= 1e15)) s.problem("swap_space", "expected a size from 0 B to 1 PB");
  e.iteration_host_s = s.quantity_or("iteration_host", Dimension::time, e.iteration_host_s);
  if (s.field("iteration_host") != nullptr) std::erase(e.assumed, "iteration_host");
  s.finish();
}

void read_requests(ObjectReader& top, ServingDeployment& d, const std::string& base_dir) {
  const Json* value = top.field("requests", Need::required);
  if (value == nullptr) return;
  ObjectReader r(*value, top.pointer("requests"), top.problems());
  if (!r.ok()) return;
  const auto format = static_cast<TraceFormat>(r.choice("format", {"fleetsim", "azure", "burstgpt", "mooncake"}, 0));
  if (const auto trace = r.string("trace", Need::optional)) {
    const std::filesystem::path path = std::filesystem::path(*trace).is_absolute() ? std::filesystem::path(*trace) : std::filesystem::path(base_dir) / *trace;
    d.trace = read_request_trace(path.string(), format, r.pointer("trace"), r.problems(), d.assumptions, d.prefix_hashes);
    if (format == TraceFormat::mooncake) d.prefix_segment_tokens = kMooncakeBlockTokens;
    for (const char* key : {"rate", "count", "prompt_tokens", "output_tokens", "shared_prefix"}) {
      if (r.field(key) != nullptr) r.problem(key, "goes with a generated workload, not with \"trace\" (the trace gives every request)");
    }
  } else {
    if (r.field("rate") != nullptr) {
      d.rate_per_s = r.quantity("rate", Dimension::rate, Need::required).value_or(0);
      if (!(d.rate_per_s > 0)) r.problem("rate", "expected a positive rate, such as \"20 /s\" (leave it out for every request at once)");
    }
    if (r.field("format") != nullptr) r.problem("format", "goes with \"trace\"");
    d.count = r.integer("count", Need::required, 1, kMaxRequests).value_or(0);
    d.prompt_tokens = read_tokens(r, "prompt_tokens", Need::required);
    d.output_tokens = read_tokens(r, "output_tokens", Need::required);
    if (const Json* shared = r.field("shared_prefix")) {  // {"tokens": 1024, "groups": 8}: before each prompt
      ObjectReader p(*shared, r.pointer("shared_prefix"), r.problems());
      if (p.ok()) {
        d.shared_prefix.tokens = p.integer("tokens", Need::required, 1, kMaxTokens).value_or(0);
        d.shared_prefix.groups = p.integer("groups", Need::optional, 1, 1'000'000).value_or(1);
        d.prefix_segment_tokens = d.shared_prefix.tokens;
        p.finish();
      }
    }
  }
  if (const Json* tenants = r.field("tenants")) {  // [{"name": "pro", "share": 0.2}, ...]
    if (!tenants->is_array() || tenants->empty() || tenants->size() > kMaxTenants) {
      r.problem("tenants", "expected an array of 1 to " + std::to_string(kMaxTenants) + " {name, share}, found " + detail::describe(*tenants));
    } else {
      double total = 0;
      for (std::size_t i = 0; i < tenants->size(); ++i) {
        ObjectReader t((*tenants)[i], detail::child_pointer(r.pointer("tenants"), i), r.problems());
        if (!t.ok()) continue;
        ServingDeployment::Tenant tenant{.name = t.string("name", Need::required).value_or(""), .share = t.number("share", Need::required, 0.0, 1.0).value_or(0)};
        if (!(tenant.share > 0) && t.field("share") != nullptr) t.problem("share", "expected a fraction above 0, at most 1");
        if (std::any_of(d.tenants.begin(), d.tenants.end(), [&](const ServingDeployment::Tenant& o) { return o.name == tenant.name; })) {
          t.problem("name", "expected a name no other tenant has, found \"" + tenant.name + "\" twice");
        }
        t.finish();
        total += tenant.share;
        d.tenants.push_back(std::move(tenant));
      }
      if (std::abs(total - 1) > 1e-9) r.problem("tenants", "expected shares summing to 1, found " + format_number(total));
    }
  }
  r.finish();
}

void read_slos(ObjectReader& top, ServingDeployment& d) {
  const Json* value = top.field("slos");
  if (value == nullptr) return;
  if (!value->is_array()) {
    top.problem("slos", "expected an array of {metric, percentile, target}, found " + detail::describe(*value));
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    ObjectReader s((*value)[i], detail::child_pointer(top.pointer("slos"), i), top.problems());
    if (!s.ok()) continue;
    ServingDeployment::Slo slo;
    slo.metric = std::string(std::array<std::string_view, 3>{"ttft", "tpot", "e2e"}[s.choice("metric", {"ttft", "tpot", "e2e"}, 0)]);
    if (s.field("metric", Need::required) == nullptr) continue;
    if (const Json* p = s.field("percentile"); p != nullptr) {
      const std::array<double, 4> allowed{50, 90, 95, 99};
      if (p->is_number() && std::find(allowed.begin(), allowed.end(), p->get<double>()) != allowed.end()) {
        slo.percentile = p->get<double>();
      } else {
        s.problem("percentile", "expected 50, 90, 95 or 99, found " + detail::describe(*p));
      }
    }
    slo.target_s = s.quantity("target", Dimension::time, Need::required).value_or(0);
    if (!(slo.target_s > 0) && s.field("target") != nullptr) s.problem("target", "expected a positive time");
    slo.tenant = s.string_or("tenant", "");
    if (s.field("tenant") != nullptr &&
        std::none_of(d.tenants.begin(), d.tenants.end(), [&](const ServingDeployment::Tenant& t) { return t.name == slo.tenant; })) {
      std::string known;
      for (const ServingDeployment::Tenant& t : d.tenants) known += (known.empty() ? "" : ", ") + t.name;
      s.problem("tenant", "expected one of the tenants in /requests/tenants (" + (known.empty() ? std::string("none") : known) + "), found \"" + slo.tenant + "\"");
    }
    s.finish();
    d.slos.push_back(slo);
  }
}

// With swap preemption each GPU's engine pins its swap space in its node's host memory: vLLM refuses one
// engine's past 70% of it, and the engines on one node share it. The problem when those on `node` pass it.
std::string swap_over_host_memory(const ServingDeployment& d, const NodeGroup& g, std::uint32_t node, bool with_others) {
  return "the replicas on node " + std::to_string(node) + (with_others ? " (with the deployments above)" : "") +
         " pin more swap space than 70% of its " + format_quantity(g.node.host_memory_bytes, Dimension::bytes) + " of host memory (" +
         format_quantity(d.engine.swap_space_bytes, Dimension::bytes) + " a GPU), which vLLM refuses for one engine and several on a node share: " +
         "expected a smaller swap_space or fewer replicas a node";
}

// The model and its GPUs: a transformer LLM whose heads the TP ranks split (unless attention is data-
// parallel), within one node or over whole nodes, and whose weights leave each GPU room for KV blocks.
// `decode_side`: d is the decode replicas' shape (decode_tp), its problems reported at "disaggregation".
void check_fit(ObjectReader& top, const ServingDeployment& d, bool decode_side) {
  const auto problem = [&](std::string_view key, const std::string& message) {
    if (decode_side) {
      top.problem("disaggregation", "the decode replicas (decode_tp " + std::to_string(d.tp) + "): " + message);
    } else {
      top.problem(key, message);
    }
  };
  const NodeGroup& g = d.cluster.groups.front();
  if (d.dp_attention && d.model.number("experts", 0) <= 0) {
    problem("dp_attention", "data-parallel attention spreads a mixture of experts' experts over the replica's GPUs; \"" + d.model.id + "\" has none: expected a mixture-of-experts model, or no \"dp_attention\"");
    return;
  }
  if (d.expert_parallel && d.model.number("experts", 0) <= 0) {
    problem("expert_parallel", "expert parallelism spreads a mixture of experts' experts over the replica's GPUs; \"" + d.model.id + "\" has none: expected a mixture-of-experts model, or no \"expert_parallel\"");
    return;
  }
  if (top.field("moe") != nullptr && (!d.experts_spread() || d.tp == 1)) {
    problem("moe", "hot experts load the GPUs unevenly only where each holds its own experts; split over TP (or on one GPU) every GPU holds every expert's share: "
                   "expected \"expert_parallel\" or \"dp_attention\" over tp above 1 beside \"moe\"");
    return;
  }
  if (d.expert_imbalance > d.tp) {  // the busiest of tp GPUs takes at most every token
    problem("moe", "expected an imbalance of at most the " + std::to_string(d.tp) + " GPUs the experts are spread over (the busiest one receiving every token), found " +
                       format_number(d.expert_imbalance));
    return;
  }
  if (!d.dp_attention && d.model.number("heads", 0) > 0 && std::fmod(d.model.number("heads", 0), d.tp) != 0) {
    problem("tp", "expected a divisor of the model's " + format_number(d.model.number("heads", 0)) + " attention heads, found " + std::to_string(d.tp));
    return;
  }
  if (d.tp > g.node.gpus && d.tp % g.node.gpus != 0) {  // a TP group is one node's GPUs or whole nodes'
    problem("tp", "expected at most the " + std::to_string(g.node.gpus) + " GPUs of a " + g.node.id + " node, or a multiple of them (whole nodes), found " + std::to_string(d.tp));
    return;
  }
  if (d.pp > d.model.number("layers", 0)) {
    problem("pp", "expected at most the model's " + format_number(d.model.number("layers", 0)) + " layers, one stage each at least, found " + std::to_string(d.pp));
    return;
  }
  if (g.node.gpus % d.tp != 0 && d.tp % g.node.gpus != 0 && d.pp > 1) {  // a stage's TP group must not straddle two nodes
    problem("pp", "pipeline stages need a tp that divides a " + g.node.id + " node's " + std::to_string(g.node.gpus) + " GPUs, so that no stage spans two nodes; found tp " + std::to_string(d.tp));
    return;
  }
  // vLLM refuses a swap space of more than 70% of the node's host memory over the TP group's GPUs
  // (CacheConfig.verify_with_parallel_config: "Too large swap space").
  if (const double swap = d.engine.swap_space_bytes * d.tp; d.engine.swap && g.node.host_memory_bytes > 0 && swap > 0.7 * g.node.host_memory_bytes) {
    problem("knobs", "a swap space of " + format_quantity(d.engine.swap_space_bytes, Dimension::bytes) + " a GPU over TP " + std::to_string(d.tp) + " is " +
                         format_quantity(swap, Dimension::bytes) + ", over 70% of a " + g.node.id + " node's " +
                         format_quantity(g.node.host_memory_bytes, Dimension::bytes) + " of host memory, which vLLM refuses: expected a smaller swap_space");
  }
  const KvCapacity c = kv_capacity(d);
  if (c.lane_blocks <= 0) {
    const std::string group = d.pp > 1 ? "stage " + std::to_string(c.bound_stage) + " of its pipeline" : d.dp_attention ? "a GPU of its replica (attention whole on each)" : "its TP group";
    problem(d.pp > 1 ? "pp" : "tp", "the model does not fit " + group + ": " + format_quantity(c.weights_per_gpu_bytes, Dimension::bytes) + " of weights a GPU, " +
                      format_quantity(c.activation_bytes, Dimension::bytes) + " of activations and " + format_quantity(c.reserved_bytes, Dimension::bytes) +
                      " reserved leave no room for a KV block " + (d.pp > 1 ? "a lane " : "") + "in " + format_number(d.engine.gpu_memory_utilization * 100) + "% of a " + g.gpu.id + "'s " +
                      format_quantity(g.gpu.vram_bytes, Dimension::bytes) + ": expected a larger tp" + (d.pp > 1 ? " or pp" : ""));
    return;
  }
  std::int64_t longest = d.shared_prefix.tokens + d.prompt_tokens.high + d.output_tokens.high;
  for (const auto& r : d.trace) longest = std::max(longest, r.prompt + r.output);
  if (longest > c.lane_tokens) {
    problem("requests", "a request of " + format_number(static_cast<double>(longest)) + " tokens (prompt and output) would not fit a replica's KV cache of " +
                            format_number(static_cast<double>(c.lane_tokens)) + " tokens" + (d.pp > 1 ? " a lane (1/" + std::to_string(d.pp) + " of its blocks)" : "") +
                            ", so it could never run");
  }
}


// The model, its engine and requests: every field of a deployment but its cluster and seed, which a
// deployment file has of its own and a scenario gives. `cluster_ok`: d.cluster holds the one node group
// the replicas run on.
void read_deployment(ObjectReader& top, ServingDeployment& d, bool cluster_ok, const std::string& base_dir) {
  const std::size_t problems_before = top.problems().size();
  d.description = top.string_or("description", "");
  bool model_ok = false;
  if (const auto id = top.string("model", Need::required)) {
    const Architecture* a = Catalog::builtin().architecture(*id);
    if (a == nullptr) {
      top.problem("model", "unknown architecture \"" + *id + "\" (LLMs in the catalog: " + Catalog::builtin().llm_names() + ")" +
                               did_you_mean_key(*id, Catalog::builtin().architectures()));
    } else if (!is_llm(*a) || a->number("causal", 1) == 0) {
      top.problem("model", "\"" + *id + "\" is a " + a->family + " without a vocabulary, not an LLM a serving engine runs");
    } else {
      d.model = *a;
      model_ok = true;
    }
  }
  // int4: weight-only, 4 bits a weight and a 16-bit scale a group of 128 (GPTQ's and AWQ's group size,
  // the format Marlin's kernels read), computed in bf16.
  const auto dtype_of = [&](std::string_view key, Dtype fallback, bool int4_too) {
    const std::string name = top.string_or(std::string(key), std::string(dtype_name(fallback)));
    if (name == "bf16" || name == "fp16" || name == "fp8") return *parse_dtype(name);
    if (name == "int4" && int4_too) {
      d.weight_storage_bytes = 0.5 + 2.0 / 128;
    } else {
      top.problem(key, std::string("expected bf16, fp16, fp8") + (int4_too ? " or int4" : "") + ", found \"" + name + "\"");
    }
    return fallback;
  };
  d.weights = dtype_of("weights", Dtype::bf16, true);
  d.kv_cache = dtype_of("kv_cache", d.weights == Dtype::fp8 ? Dtype::bf16 : d.weights, false);
  if (top.field("kv_cache") == nullptr) d.assumptions.push_back("KV cache in " + std::string(dtype_name(d.kv_cache)) + " (the engine's default, \"auto\")");
  d.tp = static_cast<int>(top.integer_or("tp", 1, 1, 64));
  d.pp = static_cast<int>(top.integer_or("pp", 1, 1, 64));
  d.dp_attention = top.boolean_or("dp_attention", false);
  d.expert_parallel = top.boolean_or("expert_parallel", false);  // implied by dp_attention
  if (const Json* moe = top.field("moe")) {  // {"imbalance": 1.3}
    ObjectReader r(*moe, top.pointer("moe"), top.problems());
    if (r.ok()) {
      d.expert_imbalance = r.number("imbalance", Need::required, 1.0, 1e3).value_or(1.0);
      r.finish();
      if (model_ok && d.model.number("experts", 0) <= 0) top.problem("moe", "expected \"moe\" only for a mixture of experts; \"" + d.model.id + "\" has none");
    }
  }
  if (d.dp_attention && d.pp > 1) top.problem("dp_attention", "data-parallel attention with pipeline stages is not modelled yet; expected pp 1 beside \"dp_attention\"");
  d.replicas = static_cast<int>(top.integer_or("replicas", 1, 1, 100'000));
  if (const Json* pd = top.field("disaggregation")) {  // {"prefill": 1, "decode": 3}
    ObjectReader r(*pd, top.pointer("disaggregation"), top.problems());
    if (r.ok()) {
      // Autoscaled (read before this), the pools' slots are autoscale's maxima.
      const ServingDeployment::Autoscale& as = d.autoscale;
      int prefill = as.max, decode = as.decode_max;
      if (as.given) {
        for (const char* key : {"prefill", "decode"}) {
          if (r.field(key) != nullptr) r.problem(key, "an autoscaled deployment's prefill and decode replicas are autoscale's \"prefill\" and \"decode\" bounds; expected no \"" + std::string(key) + "\" here");
        }
      } else {
        prefill = static_cast<int>(r.integer("prefill", Need::required, 1, 50'000).value_or(1));
        decode = static_cast<int>(r.integer("decode", Need::required, 1, 50'000).value_or(1));
      }
      if (r.field("decode_tp") != nullptr) d.decode_tp = static_cast<int>(r.integer("decode_tp", Need::required, 1, 64).value_or(0));
      d.kv_by_layer = r.choice("kv_transfer", {"after_prefill", "by_layer"}, 0) == 1;
      r.finish();
      if (!as.given && top.field("replicas") != nullptr && d.replicas != prefill + decode) {
        top.problem("replicas", "expected the " + std::to_string(prefill + decode) + " replicas \"disaggregation\" makes (or no \"replicas\"), found " + std::to_string(d.replicas));
      }
      d.prefill_replicas = prefill;
      d.replicas = prefill + decode;
    }
  }
  read_engine(top, d, cluster_ok);
  for (const std::string& a : d.engine.assumed) {
    if (a == "startup") continue;  // said where a failure restarts a replica (run/serving.cpp)
    const std::string value = a == "iteration_host" ? format_quantity(d.engine.iteration_host_s, Dimension::time)
                              : a == "reserved"     ? format_quantity(d.engine.reserved_bytes, Dimension::bytes)
                              : a == "max_num_seqs" ? std::to_string(d.engine.max_num_seqs)
                                                    : "";
    d.assumptions.push_back(d.engine.name + "'s " + a + (value.empty() ? "" : " of " + value) + " is a guess (models/engines.json says why)");
  }
  if (d.pp > 1) {
    d.assumptions.push_back("pipeline stages run as vLLM V0's virtual engines: " + std::to_string(d.pp) + " lanes a replica, each with 1/" + std::to_string(d.pp) +
                            " of the KV blocks and the requests routed to it, perfectly staggered; " + d.engine.name +
                            " may instead share one KV pool among its batches in flight (vLLM V1 does), which preempts less" +
                            (d.prefill_replicas > 0 && !d.kv_by_layer ? "; disaggregated, each stage sends its layers' KV to the decode replica's same stage once the prompt is through, not layer by layer during it" : ""));
  }
  if (d.kv_by_layer) {
    d.assumptions.push_back("KV sent layer by layer: the last stage's layers end evenly spaced over its share of the prompt's last forward pass, and what "
                            "the links could carry meanwhile (their whole capacity, shared by the transfer's own shares) has gone when the prompt is "
                            "through; each layer's own message costs and earlier chunks' KV are not counted");
  }
  if (d.dp_attention) {
    d.assumptions.push_back("data-parallel attention: " + std::to_string(d.tp) + " ranks a replica, each its own scheduler and KV pool, stepping together " +
                            "(a step runs the experts over every rank's tokens and lasts as long as its slowest rank; a rank with nothing to run waits, " +
                            "its idle batch's time not counted as busy); dispatch and combine as bf16 all-to-alls");
  }
  if (d.experts_spread()) {
    d.assumptions.push_back("experts spread over " + std::to_string(d.tp) + " GPUs, 1/" + std::to_string(d.tp) + " of them whole on each: the batch's tokens " +
                            (d.expert_imbalance == 1 ? std::string("taken as reaching them evenly, each GPU at least one expert's GEMMs (no hot experts: \"moe\": {\"imbalance\": X} sets the busiest GPU's load)")
                                                     : "reaching the busiest GPU's experts " + format_number(d.expert_imbalance) + " times as often as the mean (\"moe\".\"imbalance\"), each GPU at least one expert's GEMMs"));
  }
  d.policy = d.engine.scheduler == "prefill-first" ? BatchPolicy::prefill_first : d.engine.scheduler == "orca" ? BatchPolicy::orca : BatchPolicy::chunked_prefill;
  d.router = static_cast<Router>(top.choice("router", {"round-robin", "least-requests", "least-tokens", "prefix-aware"}, 0));
  read_requests(top, d, base_dir);
  read_slos(top, d);
  if (cluster_ok && model_ok && top.problems().size() == problems_before) check_fit(top, d, false);
  if (d.decode_tp == d.tp) d.decode_tp = 0;  // one shape
  if (d.decode_tp > 0 && d.dp_attention) {
    top.problem("disaggregation", "decode replicas of another TP beside data-parallel attention are not modelled yet; expected no \"decode_tp\" beside \"dp_attention\"");
  } else if (d.decode_tp > 0 && cluster_ok && model_ok && top.problems().size() == problems_before) {
    check_fit(top, d.decode_shape(), true);
  }
}

// A piece of a replica (a node's worth of its GPUs, or less) on the first node from where the last piece of
// its size went with room for it, its lowest free GPUs: the node, or no value with none. A node without
// room for a piece of some size has none for the next of that size (room only shrinks), so each size's
// search goes on from where the last stopped.
std::optional<std::uint32_t> first_fit(int need, std::vector<int>& free_gpus, std::map<int, std::uint32_t>& search_from, std::uint32_t first, std::uint32_t end) {
  std::uint32_t& n = search_from.try_emplace(need, first).first->second;
  while (n < end && free_gpus[n] < need) ++n;
  if (n == end) return std::nullopt;
  free_gpus[n] -= need;
  return n;
}

}  // namespace

int replica_nodes(int tp, int pp, int node_gpus, int replicas, int prefill_replicas, int decode_tp) {
  ServingDeployment shape;
  shape.tp = tp;
  shape.pp = pp;
  shape.replicas = replicas;
  shape.prefill_replicas = prefill_replicas;
  shape.decode_tp = decode_tp;
  shape.cluster.groups.emplace_back().node.gpus = node_gpus;
  // As many nodes as the pieces could need, one each; the placement takes the first ones.
  const auto most = static_cast<std::uint32_t>(shape.first_piece(static_cast<std::size_t>(replicas)));
  std::vector<int> free_gpus(most, node_gpus);
  std::map<int, std::uint32_t> search_from;
  std::uint32_t used = 0;
  for (int r = 0; r < replicas; ++r) {
    for (const int need : shape.piece_gpus(static_cast<std::size_t>(r))) used = std::max(used, *first_fit(need, free_gpus, search_from, 0, most) + 1);
  }
  return static_cast<int>(used);
}

ServingDeployment parse_serving(std::string_view json_text, const std::string& file, std::span<const ScenarioEdit> edits) {
  detail::Problems problems(file);
  Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  detail::apply_edits(doc, edits, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  ServingDeployment d;
  d.file = file;
  if (!top.ok()) problems.throw_if_any();
  d.name = top.string_or("name", std::filesystem::path(file).stem().string());
  d.seed = static_cast<std::uint64_t>(top.integer_or("seed", 1, 0, std::numeric_limits<std::int64_t>::max()));
  bool cluster_ok = false;
  if (const Json* cluster = top.field("cluster", Need::required)) {
    const bool before = problems.empty();
    detail::read_cluster(*cluster, "/cluster", problems, Catalog::builtin(), d.cluster);
    cluster_ok = before && problems.empty();
    if (cluster_ok && d.cluster.groups.size() != 1) {
      top.problem("cluster", "expected one node group (one GPU type) a deployment for now, found " + std::to_string(d.cluster.groups.size()));
      cluster_ok = false;
    }
  }
  const std::string base_dir = std::filesystem::path(file).parent_path().string();
  read_deployment(top, d, cluster_ok, base_dir.empty() ? "." : base_dir);
  if (top.field("autoscale") != nullptr) {
    top.problem("autoscale", "autoscaling replicas needs a scenario, whose other work the replicas share the GPUs with (a \"serving\" entry); expected no \"autoscale\" here");
  }
  // A deployment of its own fills its cluster unless it says how many replicas.
  if (cluster_ok && problems.empty()) {
    const NodeGroup& g = d.cluster.groups.front();
    // Stages of TP GPUs (within a node, or whole nodes each), pp a replica.
    const int fit = (d.tp <= g.node.gpus ? g.count * (g.node.gpus / d.tp) : g.count / (d.tp / g.node.gpus)) / d.pp;
    if (top.field("replicas") == nullptr && d.prefill_replicas == 0) {
      d.replicas = fit;
      if (fit == 0) top.problem("pp", "expected replicas of " + std::to_string(d.tp * d.pp) + " GPUs (TP " + std::to_string(d.tp) + " x PP " + std::to_string(d.pp) + ") that the cluster's " + std::to_string(g.count * g.node.gpus) + " GPUs hold");
    } else if (d.replicas > fit && d.decode_tp == 0) {  // replicas of two shapes: the placement below says
      top.problem("replicas", "expected at most the " + std::to_string(fit) + " replicas of " + std::to_string(d.tp * d.pp) + " GPUs the cluster holds, found " + std::to_string(d.replicas));
    }
    // Disaggregated, a KV transfer's links depend on where the replicas' stages lie: placed as a scenario
    // places them (replica by replica, each piece first fit), so that a replica's stages lie as its
    // iteration time has them, from a node's first free GPU.
    if (problems.empty() && d.prefill_replicas > 0) {
      std::vector<int> free_gpus(static_cast<std::size_t>(g.count), g.node.gpus);
      std::map<int, std::uint32_t> search_from;
      for (int r = 0; r < d.replicas && problems.empty(); ++r) {
        for (const int need : d.piece_gpus(static_cast<std::size_t>(r))) {
          const std::optional<std::uint32_t> n = first_fit(need, free_gpus, search_from, 0, static_cast<std::uint32_t>(g.count));
          if (!n) {
            const std::string shape = "TP " + std::to_string(d.tp) + (d.decode_tp > 0 ? " (decode: " + std::to_string(d.decode_tp) + ")" : "") + " x PP " + std::to_string(d.pp);
            top.problem("replicas", "expected prefill and decode replicas that fit the cluster's " + std::to_string(g.count) + " nodes whole, each stage's " +
                                        "TP group on one node (as a scenario places them): " + std::to_string(r) + " of the " +
                                        std::to_string(d.replicas) + " replicas of " + shape + " found room");
            break;
          }
          d.placement.push_back({*n, g.node.gpus - free_gpus[*n] - need, need});
        }
      }
    }
    // Alone, replicas fill the nodes in order (disaggregated, as placed above): the first holds the most.
    const double first_node_gpus = std::min(g.node.gpus, d.gpus());
    if (problems.empty() && d.engine.swap && g.node.host_memory_bytes > 0 && d.engine.swap_space_bytes * first_node_gpus > 0.7 * g.node.host_memory_bytes) {
      top.problem("knobs", swap_over_host_memory(d, g, 0, false));
    }
  }
  top.finish();
  problems.throw_if_any();
  return d;
}

namespace detail {

// A pool's bounds: {"min": 1, "max": 4}.
void read_bounds(ObjectReader& r, int& min, int& max) {
  min = static_cast<int>(r.integer("min", Need::required, 1, 10'000).value_or(1));
  max = static_cast<int>(r.integer("max", Need::required, 1, 10'000).value_or(1));
  if (max < min) r.problem("max", "expected at least min (" + std::to_string(min) + "), found " + std::to_string(max));
}

// A scenario deployment's `autoscale`: {"min": 1, "max": 4, "interval": "30 s", "queue": 8, "target_busy": 0.6};
// disaggregated, "prefill" and "decode" bounds in place of min and max.
void read_autoscale(ObjectReader& top, ServingDeployment::Autoscale& as) {
  const Json* scale = top.field("autoscale");
  if (scale == nullptr) return;
  as.given = true;
  ObjectReader a(*scale, top.pointer("autoscale"), top.problems());
  if (!a.ok()) return;
  if (top.field("disaggregation") != nullptr) {
    for (const char* key : {"min", "max"}) {
      if (a.field(key) != nullptr) a.problem(key, "a disaggregated deployment scales its prefill and decode replicas apart: expected {\"min\", \"max\"} under \"prefill\" and \"decode\" in place of \"" + std::string(key) + "\"");
    }
    const std::tuple<const char*, int&, int&> pools[] = {{"prefill", as.min, as.max}, {"decode", as.decode_min, as.decode_max}};
    for (const auto& [pool, min, max] : pools) {
      const Json* bounds = a.field(pool, Need::required);
      if (bounds == nullptr) continue;
      ObjectReader b(*bounds, a.pointer(pool), top.problems());
      if (!b.ok()) continue;
      read_bounds(b, min, max);
      b.finish();
    }
  } else {
    for (const char* pool : {"prefill", "decode"}) {
      if (a.field(pool) != nullptr) a.problem(pool, "pools of prefill and decode replicas are a disaggregated deployment's; expected \"min\" and \"max\" here, or \"disaggregation\" beside autoscale");
    }
    read_bounds(a, as.min, as.max);
  }
  as.interval_s = a.quantity_or("interval", Dimension::time, as.interval_s);
  if (!(as.interval_s >= 1e-3)) a.problem("interval", "expected at least 1 ms");
  as.queue = static_cast<int>(a.integer_or("queue", as.queue, 1, 1'000'000));
  as.target_busy = a.number("target_busy", Need::optional, 0.0, 1.0).value_or(as.target_busy);
  a.finish();
}

void read_serving(const Json& value, const std::string& pointer, Problems& problems, const ClusterSpec& cluster, bool cluster_ok,
                  const std::string& base_dir, std::vector<std::shared_ptr<const ServingDeployment>>& out) {
  if (!value.is_array() || value.empty()) {
    problems.add(pointer, "expected a non-empty array of serving deployments, found " + describe(value));
    return;
  }
  // Replicas are placed whole, TP GPUs on one node, first fit over the nodes of the group each
  // deployment names, in order: what the deployments before it took is not free.
  std::vector<int> free_gpus;     // per node of the cluster
  std::vector<double> swap_left;  // per node: 70% of its host memory, less the swap spaces its replicas pin
  std::vector<std::uint32_t> first_node;  // per group: its first node's index in the cluster
  for (const NodeGroup& g : cluster.groups) {
    first_node.push_back(static_cast<std::uint32_t>(free_gpus.size()));
    free_gpus.insert(free_gpus.end(), static_cast<std::size_t>(g.count), g.node.gpus);
    swap_left.insert(swap_left.end(), static_cast<std::size_t>(g.count), 0.7 * g.node.host_memory_bytes);
  }
  std::vector<std::string> names;
  for (std::size_t i = 0; i < value.size(); ++i) {
    ObjectReader top(value[i], child_pointer(pointer, i), problems);
    if (!top.ok()) continue;
    auto d = std::make_shared<ServingDeployment>();
    d->file = problems.file();
    d->name = top.string_or("name", "serving-" + std::to_string(i + 1));
    if (std::find(names.begin(), names.end(), d->name) != names.end()) top.problem("name", "expected a name no other deployment has, found \"" + d->name + "\" again");
    names.push_back(d->name);
    for (const char* key : {"cluster", "seed"}) {
      if (top.field(key) != nullptr) top.problem(key, "a deployment in a scenario runs on the scenario's cluster and seed; expected no \"" + std::string(key) + "\" here");
    }
    std::optional<std::size_t> group;
    if (cluster_ok) {
      if (const auto type = top.string("nodes", cluster.groups.size() > 1 ? Need::required : Need::optional)) {
        std::string known;
        for (std::size_t g = 0; g < cluster.groups.size(); ++g) {
          if (cluster.groups[g].node.id == *type) group = g;
          known += (known.empty() ? "" : ", ") + cluster.groups[g].node.id;
        }
        if (!group) top.problem("nodes", "expected a node type of the cluster (" + known + "), found \"" + *type + "\"");
      } else if (cluster.groups.size() == 1) {
        group = 0;
      }
      if (group && (cluster.groups[*group].mig_slices > 1 || cluster.groups[*group].time_sliced_tasks > 1)) {
        top.problem("nodes", "serving replicas on MIG instances or time-sliced GPUs are not modelled; expected a node group of whole GPUs");
        group.reset();
      }
    } else {
      top.field("nodes");
    }
    if (group) {
      d->cluster = cluster;
      d->cluster.groups = {cluster.groups[*group]};
    }
    const std::size_t problems_before = problems.size();
    read_autoscale(top, d->autoscale);  // first: a disaggregated deployment's pools are sized by it
    read_deployment(top, *d, group.has_value(), base_dir);
    if (d->autoscale.on()) {
      if (top.field("replicas") != nullptr) top.problem("replicas", "an autoscaled deployment has between autoscale's min and max; expected no \"replicas\"");
      if (d->prefill_replicas == 0) d->replicas = d->autoscale.max;  // the slots; min of them start placed
    }
    if (group) {
      d->first_node = first_node[*group];
      d->nodes = static_cast<std::uint32_t>(cluster.groups[*group].count);
    }
    if (group && problems.size() == problems_before) {
      const NodeGroup& g = cluster.groups[*group];
      // A replica's GPUs lie as its iteration time has them (serving/iteration.cpp): tp x pp, stage after
      // stage, filling nodes in order; so its pieces (a node's worth each, the last maybe less) go each on
      // one node, first fit.
      std::map<int, std::uint32_t> search_from;  // by a piece's GPUs: the first node that may have room
      const std::uint32_t end = first_node[*group] + static_cast<std::uint32_t>(g.count);
      int placed = 0, fitted = 0;
      for (int r = 0; r < d->replicas; ++r) placed += d->starts_placed(static_cast<std::size_t>(r)) ? 1 : 0;
      for (int r = 0; r < d->replicas && problems.size() == problems_before; ++r) {
        if (!d->starts_placed(static_cast<std::size_t>(r))) continue;
        for (const int need : d->piece_gpus(static_cast<std::size_t>(r))) {
          const std::optional<std::uint32_t> n = first_fit(need, free_gpus, search_from, first_node[*group], end);
          if (!n) {
            top.problem("replicas", "expected replicas that fit the " + std::to_string(g.count * g.node.gpus) + " GPUs of the " + g.node.id + " nodes beside the deployments above: " +
                                        std::to_string(fitted) + " of the " + std::to_string(placed) + " replicas of TP " + std::to_string(d->tp) +
                                        (d->decode_tp > 0 ? " (decode: " + std::to_string(d->decode_tp) + ")" : "") + (d->pp > 1 ? " x PP " + std::to_string(d->pp) : "") + " found room");
            break;
          }
          d->placement.push_back({*n, g.node.gpus - free_gpus[*n] - need, need});
          if (d->engine.swap && g.node.host_memory_bytes > 0 && (swap_left[*n] -= d->engine.swap_space_bytes * need) < 0) {
            top.problem("knobs", swap_over_host_memory(*d, g, *n, true));
            break;
          }
        }
        ++fitted;
      }
      if (d->pp > 1) {
        d->assumptions.push_back("a replica's stage sends are timed on its own links (NVLink, or the NICs and the fabric between its nodes), not as flows the shared network carries beside other work");
      }
    }
    top.finish();
    out.push_back(std::move(d));
  }
}

}  // namespace detail

ServingDeployment load_serving(const std::string& path, std::span<const ScenarioEdit> edits) { return parse_serving(read_text_file(path), path, edits); }

}  // namespace fleetsim
