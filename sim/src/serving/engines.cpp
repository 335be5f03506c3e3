// The serving engines of models/engines.json, read strictly once.
#include <algorithm>
#include <array>

#include "../json_reader.hpp"
#include "fleetsim/serving.hpp"

namespace fleetsim {
namespace embedded {
std::string_view engines_json();
}  // namespace embedded

namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

std::vector<EngineProfile> parse_engines(std::string_view text, const std::string& file) {
  detail::Problems problems(file);
  const Json doc = detail::parse_json(text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  std::vector<EngineProfile> out;
  top.string("about", Need::required);
  const Json* engines = top.field("engines", Need::required);
  if (engines != nullptr && !engines->is_object()) top.problem("engines", "expected an object of engines by id");
  static const Json none = Json::object();
  for (const auto& [id, value] : (engines != nullptr && engines->is_object() ? *engines : none).items()) {
    ObjectReader r(value, detail::child_pointer(top.pointer("engines"), id), problems);
    if (!r.ok()) continue;
    EngineProfile e;
    e.id = id;
    e.name = r.string("name", Need::required).value_or(e.id);
    e.memory = static_cast<EngineProfile::Memory>(r.choice("memory", {"vllm", "sglang", "tensorrt-llm"}, 0));
    r.field("memory", Need::required);
    e.block_size = static_cast<int>(r.integer("block_size", Need::required, 1, 4096).value_or(16));
    e.gpu_memory_utilization = r.number("gpu_memory_utilization", Need::required, 0.0, 1.0).value_or(0.9);
    e.max_num_seqs = static_cast<int>(r.integer("max_num_seqs", Need::required, 1, 65536).value_or(256));
    e.max_num_batched_tokens = static_cast<int>(r.integer("max_num_batched_tokens", Need::required, 1, 1 << 20).value_or(8192));
    if (const Json* small = r.field("small_gpu")) {
      ObjectReader s(*small, r.pointer("small_gpu"), problems);
      e.small_gpu_max_num_seqs = static_cast<int>(s.integer("max_num_seqs", Need::required, 1, 65536).value_or(0));
      e.small_gpu_max_num_batched_tokens = static_cast<int>(s.integer("max_num_batched_tokens", Need::required, 1, 1 << 20).value_or(0));
      s.finish();
    }
    e.scheduler = std::string(std::array<std::string_view, 3>{"chunked-prefill", "prefill-first", "orca"}[r.choice("scheduler", {"chunked-prefill", "prefill-first", "orca"}, 0)]);
    e.reserve_whole_request = r.boolean_or("reserve_whole_request", false);
    e.dp_attention_splits_budget = r.boolean_or("dp_attention_splits_budget", false);
    e.prefix_caching = r.boolean_or("prefix_caching", false);
    e.swap = r.choice("preemption", {"recompute", "swap"}, 0) == 1;
    e.swap_space_bytes = r.quantity("swap_space", Dimension::bytes, Need::optional).value_or(0);
    e.iteration_host_s = r.quantity("iteration_host", Dimension::time, Need::required).value_or(0);
    e.reserved_bytes = r.quantity("reserved", Dimension::bytes, Need::required).value_or(0);
    e.startup_s = r.quantity("startup", Dimension::time, Need::required).value_or(0);
    if (const Json* assumed = r.field("assumed")) {
      for (std::size_t i = 0; assumed->is_array() && i < assumed->size(); ++i) {
        if ((*assumed)[i].is_string()) e.assumed.push_back((*assumed)[i].get<std::string>());
      }
      if (!assumed->is_array() || e.assumed.size() != assumed->size()) r.problem("assumed", "expected an array of field names");
    }
    e.source = r.string("source", Need::required).value_or("");
    r.finish();
    out.push_back(std::move(e));
  }
  top.finish();
  problems.throw_if_any();
  return out;
}

}  // namespace

const std::vector<EngineProfile>& engine_profiles() {
  static const std::vector<EngineProfile> engines = parse_engines(embedded::engines_json(), "models/engines.json (built in)");
  return engines;
}

const EngineProfile* find_engine(std::string_view id) {
  const auto& all = engine_profiles();
  const auto it = std::find_if(all.begin(), all.end(), [&](const EngineProfile& e) { return e.id == id; });
  return it == all.end() ? nullptr : &*it;
}

EngineProfile engine_for_gpu(EngineProfile e, const GpuType& gpu) {
  // vLLM takes its larger batch defaults on GPUs of 70 GiB or more, A100s excepted (vllm/engine/arg_utils.py,
  // after vLLM pull request 17885); SGLang its larger chunks from 60 GB (server_args.py).
  const double gib = 1024.0 * 1024 * 1024;
  const bool small = e.memory == EngineProfile::Memory::sglang ? gpu.vram_bytes < 60e9
                                                               : gpu.vram_bytes < 70 * gib || gpu.id.find("a100") != std::string::npos;
  if (small && e.small_gpu_max_num_seqs > 0) {
    e.max_num_seqs = e.small_gpu_max_num_seqs;
    e.max_num_batched_tokens = e.small_gpu_max_num_batched_tokens;
  }
  e.max_num_seqs = std::min(e.max_num_seqs, e.max_num_batched_tokens);  // vLLM clamps so; the others never reach it
  return e;
}

}  // namespace fleetsim
