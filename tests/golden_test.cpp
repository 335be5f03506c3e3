// Golden event sequences: every shipped scenario under every policy, the digest of the events its run popped
// compared with tests/golden/events.txt. With tests/golden_test.sh (every --out file byte for byte) this holds a
// refactor of the core to "nothing changed". A change meant to move results regenerates the file with
// FLEETSIM_UPDATE_GOLDEN=1 and says why in its commit.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "fleetsim/policy.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

std::string hex(std::uint64_t value) {
  std::ostringstream out;
  out << std::hex << value;
  return out.str();
}

}  // namespace

TEST_CASE("every shipped scenario pops the golden event sequence under every policy", "[golden][simulation]") {
  namespace fs = std::filesystem;
  const fs::path golden = fs::path(test::source_dir()) / "tests/golden/events.txt";
  const std::vector<std::string> scenarios = test::shipped_scenarios();
  REQUIRE(scenarios.size() >= 10);

  std::map<std::string, std::string> expected;
  std::map<std::string, std::uint64_t> expected_events;
  std::ifstream in(golden);
  for (std::string key, digest; in >> key >> digest >> expected_events[key];) expected[key] = digest;

  // Under the sanitizers a run costs ten times as much: there a run of more than 100,000 events under a policy
  // other than its scenario's own is left out (runs of elastic-studio, inference-serving, resilience and studio:
  // 82% of all the events here). The release build runs every pair; the memory checks see every policy on every
  // other scenario.
  const bool update = std::getenv("FLEETSIM_UPDATE_GOLDEN") != nullptr;
#ifdef FLEETSIM_SANITIZED
  const bool sanitized = true;
#else
  const bool sanitized = false;
#endif
  constexpr std::uint64_t kLargeRun = 100'000;
  int skipped = 0;
  std::ostringstream actual;
  for (const fs::path file : scenarios) {
    Scenario sc = load_scenario(file.string());
    const std::string own = sc.policy.name;
    for (const PolicyInfo& info : policy_registry()) {
      const std::string key = file.stem().string() + "/" + info.name;
      if (sanitized && !update && info.name != own && expected_events[key] > kLargeRun) {
        ++skipped;
        continue;
      }
      sc.policy = PolicySpec{info.name, {}};
      for (const ParamInfo& p : info.params) sc.policy.params.set(p.name, p.default_value);
      const RunResult run = simulate(sc);
      const std::string line = key + " " + hex(run.event_digest) + " " + std::to_string(run.summary.events);
      actual << line << "\n";
      INFO(line);
      CHECK(expected[key] == hex(run.event_digest));
      // A run that ended before its horizon, not stalled, finished or failed every task it was given.
      const auto& tasks = run.summary.tasks;
      if (!run.summary.horizon_reached && !run.summary.stalled) CHECK(tasks.completed + tasks.failed == tasks.submitted);
    }
  }
  if (skipped > 0) WARN(skipped << " large scenario/policy pairs not run under the sanitizers (the release build runs them)");
  if (update) std::ofstream(golden) << actual.str();
}
