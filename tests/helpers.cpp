#include "helpers.hpp"

#include <algorithm>
#include <barrier>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "fleetsim/error.hpp"
#include "fleetsim/serving.hpp"

namespace fleetsim::test {

std::string source_dir() { return FLEETSIM_SOURCE_DIR; }
std::string data_dir() { return source_dir() + "/tests/data"; }

std::vector<std::string> shipped_scenarios() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(source_dir()) / "scenarios")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

Scenario unit_scenario(const std::string& body) {
  const std::string json = R"({"name": "unit", "catalog": ["unit-catalog.json"], )" + body + "}";
  return parse_scenario(json, "unit.json", data_dir());
}

Scenario builtin_scenario(const std::string& body) {
  return parse_scenario(R"({"name": "builtin", )" + body + "}", "builtin.json", data_dir());
}

std::string scenario_error(const std::string& json) {
  try {
    parse_scenario(json, "bad.json", data_dir());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string serving_error(const std::string& json) {
  try {
    parse_serving(json, "d.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

PlanResult plan_over_node_counts(const std::string& base_json, const std::string& node_type, int max_nodes) {
  char dir_template[] = "/tmp/fleetsim-plan-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) throw std::runtime_error("cannot make a temporary folder");
  const std::filesystem::path dir = dir_template;
  std::ofstream(dir / "base.json") << base_json;
  const std::string plan = R"({"base": "base.json", "search": {"node_types": [")" + node_type + R"("], "nodes": {"min": 1, "max": )" +
                           std::to_string(max_nodes) + R"(}}, "seeds": 1, "confirm_seeds": 1})";
  try {
    PlanResult result = run_plan(parse_plan(plan, "plan.json", dir.string()), {.threads = 1, .exhaustive = true});
    std::filesystem::remove_all(dir);
    return result;
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
}

const PlanPoint* searched_point(const PlanResult& result, int nodes) {
  for (const PlanPoint& p : result.points) {
    if (p.nodes == nodes && !p.confirmation) return &p;
  }
  return nullptr;
}

void on_two_ranks(const std::function<void(unsigned rank, const Exchange& exchange)>& run) {
  std::vector<std::string> slots(2);
  std::barrier sync(2);
  const auto exchange = [&](unsigned rank) -> Exchange {
    return [&, rank](const std::string& mine) {
      slots[rank] = mine;
      sync.arrive_and_wait();
      std::vector<std::string> all = slots;
      sync.arrive_and_wait();  // nobody writes a slot again before everyone has read them all
      return all;
    };
  };
  const Exchange first = exchange(0), second = exchange(1);
  std::thread other([&] { run(1, second); });
  run(0, first);
  other.join();
}

}  // namespace fleetsim::test
