// Golden event sequences: every shipped scenario under every policy, the digest of the events its run popped
// compared with tests/golden/events.txt. With tests/golden_test.sh (every --out file byte for byte) this holds a
// refactor of the core to "nothing changed". A change meant to move results regenerates the file with
// FLEETSIM_UPDATE_GOLDEN=1 and says why in its commit.
#include <catch2/catch.hpp>

#include <algorithm>
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
  std::vector<fs::path> scenarios;
  for (const auto& entry : fs::directory_iterator(fs::path(test::source_dir()) / "scenarios")) {
    if (entry.path().extension() == ".json") scenarios.push_back(entry.path());
  }
  std::sort(scenarios.begin(), scenarios.end());
  REQUIRE(scenarios.size() >= 10);

  std::map<std::string, std::string> expected;
  std::ifstream in(golden);
  for (std::string key, digest, events; in >> key >> digest >> events;) expected[key] = digest;

  std::ostringstream actual;
  for (const fs::path& file : scenarios) {
    Scenario sc = load_scenario(file.string());
    for (const PolicyInfo& info : policy_registry()) {
      sc.policy = PolicySpec{info.name, {}};
      for (const ParamInfo& p : info.params) sc.policy.params.set(p.name, p.default_value);
      const RunResult run = simulate(sc);
      const std::string key = file.stem().string() + "/" + info.name;
      const std::string line = key + " " + hex(run.event_digest) + " " + std::to_string(run.summary.events);
      actual << line << "\n";
      INFO(line);
      CHECK(expected[key] == hex(run.event_digest));
    }
  }
  if (std::getenv("FLEETSIM_UPDATE_GOLDEN") != nullptr) std::ofstream(golden) << actual.str();
}
