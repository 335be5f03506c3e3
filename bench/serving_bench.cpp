// Serving throughput: requests and engine iterations simulated a second of wall time, for one replica
// replaying the requests Vidur generated (reports/serving.md, where Vidur's wall time on the same trace
// stands beside) and for 64 replicas behind a router at a million-request scale, also with shared
// prefixes and prefill/decode disaggregation.
#include <benchmark/benchmark.h>

#include <string>

#include "fleetsim/serving.hpp"

namespace {

void report(benchmark::State& state, const fleetsim::ServingResult& r) {
  state.counters["requests/s"] = benchmark::Counter(static_cast<double>(r.completed), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["iterations/s"] = benchmark::Counter(static_cast<double>(r.iterations), benchmark::Counter::kIsIterationInvariantRate);
}

// Qwen2 7B on one A30, Vidur's vllm scheduler settings, its 1,000 requests at 2 /s.
void BM_ServeVidurTrace(benchmark::State& state) {
  const fleetsim::ServingDeployment d = fleetsim::load_serving(std::string(FLEETSIM_SOURCE_DIR) + "/reports/serving/vidur-vllm-2rps.json");
  for (auto _ : state) report(state, fleetsim::simulate_serving(d));
}
BENCHMARK(BM_ServeVidurTrace)->Unit(benchmark::kMillisecond);

// Llama 3 8B on 64 H100s (a replica each, least-tokens routing), Poisson arrivals at 1,200 /s.
void BM_ServeManyReplicas(benchmark::State& state) {
  const std::string json = R"({"name": "many", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 8}]}, "model": "llama-3-8b",
      "router": "least-tokens", "requests": {"rate": "1200 /s", "count": )" + std::to_string(state.range(0)) +
                           R"(, "prompt_tokens": {"uniform": [128, 2048]}, "output_tokens": {"uniform": [32, 512]}}})";
  const fleetsim::ServingDeployment d = fleetsim::parse_serving(json, "bench.json");
  for (auto _ : state) report(state, fleetsim::simulate_serving(d));
}
BENCHMARK(BM_ServeManyReplicas)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kSecond)->Iterations(1);

// The same fleet with what costs the engine more bookkeeping: prompts sharing one of 64 prefixes of 2,048
// tokens (prefix caching, a prefix-aware router), and 16 prefill replicas handing KV caches to 48 decode ones.
void BM_ServePrefixesDisaggregated(benchmark::State& state) {
  const std::string json = R"({"name": "pd", "cluster": {"nodes": [{"type": "hgx-h100-8", "count": 8}]}, "model": "llama-3-8b",
      "router": "prefix-aware", "disaggregation": {"prefill": 16, "decode": 48}, "requests": {"rate": "1200 /s", "count": )" +
                           std::to_string(state.range(0)) +
                           R"(, "prompt_tokens": {"uniform": [128, 2048]}, "output_tokens": {"uniform": [32, 512]}, "shared_prefix": {"tokens": 2048, "groups": 64}}})";
  const fleetsim::ServingDeployment d = fleetsim::parse_serving(json, "bench.json");
  for (auto _ : state) report(state, fleetsim::simulate_serving(d));
}
BENCHMARK(BM_ServePrefixesDisaggregated)->Arg(100'000)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace
