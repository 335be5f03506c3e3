#include "helpers.hpp"

#include "fleetsim/error.hpp"

namespace fleetsim::test {

std::string source_dir() { return FLEETSIM_SOURCE_DIR; }
std::string data_dir() { return source_dir() + "/tests/data"; }

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

}  // namespace fleetsim::test
