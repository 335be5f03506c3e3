// Event engine throughput: the "hold" model (pop the earliest event, push one a random interval
// later) at steady queue sizes, the classic benchmark for simulation event sets.
#include <benchmark/benchmark.h>

#include "fleetsim/engine.hpp"
#include "fleetsim/rng.hpp"

namespace {

void BM_EventQueueHold(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  fleetsim::EventQueue q;
  q.reserve(size + 1);
  fleetsim::Rng rng(1, 0, "bench");
  // Pre-drawn increments keep the random number generator out of the measured loop.
  std::vector<double> increments(4096);
  for (double& x : increments) x = rng.exponential(1.0);
  for (std::size_t i = 0; i < size; ++i) q.push(rng.exponential(1.0), 0, static_cast<std::uint32_t>(i));
  std::size_t k = 0;
  for (auto _ : state) {
    const fleetsim::Event e = q.pop();
    q.push(e.time_s + increments[k++ & 4095], e.kind, e.subject);
    benchmark::DoNotOptimize(e);
  }
  state.SetItemsProcessed(state.iterations());  // one event handled per iteration
  state.counters["queue"] = static_cast<double>(size);
}
BENCHMARK(BM_EventQueueHold)->Arg(16)->Arg(1 << 10)->Arg(1 << 16)->Arg(1 << 20);

}  // namespace
