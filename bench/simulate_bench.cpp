// Whole-simulation throughput on the default scenario: tasks simulated per second, loading excluded.
#include <benchmark/benchmark.h>

#include "fleetsim/simulation.hpp"

namespace {

void BM_SimulateDefaultScenario(benchmark::State& state) {
  const fleetsim::Scenario sc = fleetsim::load_scenario(FLEETSIM_SOURCE_DIR "/scenarios/default.json");
  std::uint64_t tasks = 0, events = 0;
  for (auto _ : state) {
    const fleetsim::RunResult run = fleetsim::simulate(sc);
    tasks += run.summary.tasks.submitted;
    events += run.summary.events;
    benchmark::DoNotOptimize(run.summary.makespan_s);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(tasks));
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SimulateDefaultScenario)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
