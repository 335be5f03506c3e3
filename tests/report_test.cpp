// Output formats: the Perfetto trace is well-formed trace-event JSON with a track per GPU, task
// slices that match the trace, and counters.
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../reports/src/json_stream.hpp"
#include "fleetsim/report.hpp"
#include "helpers.hpp"

using namespace fleetsim;

TEST_CASE("the Perfetto trace is well-formed and matches the run", "[report]") {
  const Scenario sc = load_scenario(test::source_dir() + "/scenarios/llm-training.json");
  RunOptions options;
  options.record_link_samples = true;
  const RunResult run = simulate(sc, options);
  std::ostringstream text;
  write_perfetto_json(text, sc, run);
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  REQUIRE(doc["traceEvents"].is_array());
  std::map<std::string, int> phases;
  double compute_us = 0;
  int gpu_threads = 0, loads = 0, queue_samples = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.at("ph");
    ++phases[ph];
    CHECK(e.at("pid").is_number_integer());
    if (ph == "X") {
      CHECK(e.at("tid").is_number_integer());
      CHECK(e.at("ts").get<double>() >= 0);
      CHECK(e.at("dur").get<double>() > 0);
      if (e.at("cat") == "compute") compute_us += e.at("dur").get<double>();
      if (e.at("cat") == "weight load") ++loads;
    } else if (ph == "C") {
      CHECK(e.at("ts").get<double>() >= 0);
      CHECK(e.at("args").is_object());
      if (e.at("name") == "ready tasks waiting") ++queue_samples;
    } else if (ph == "M" && e.at("name") == "thread_name") {
      ++gpu_threads;
    }
  }
  CHECK(gpu_threads == static_cast<int>(run.cluster.gpu_count()));
  CHECK(loads == static_cast<int>(run.trace.weight_loads.size()));
  CHECK(loads > 0);
  CHECK(queue_samples > 0);
  CHECK(phases["X"] > 0);
  CHECK(phases["C"] > 0);
  // Compute slices add up to the GPU-seconds of compute in the trace.
  double expected_us = 0;
  for (const TaskRecord& t : run.trace.tasks) {
    const double compute_end = t.comm_start_s != kNever ? t.comm_start_s : t.end_s;
    expected_us += (compute_end - t.compute_start_s) * 1e6 * t.gpu_count;
  }
  CHECK(compute_us == Approx(expected_us));
}

TEST_CASE("tasks sharing a GPU get lanes of its track, so no slices overlap", "[report][time-slicing]") {
  // Two tasks share a time-sliced GPU (and a third follows): two lanes, each a proper nesting of slices.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "time_slicing": {"tasks": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "a", "model": {"id": "m", "weights": "1 GB"}, "work": {"flop": "100 TFLOP"}},
                                   {"name": "b", "model": {"id": "n", "weights": "1 GB"}, "work": {"flop": "200 TFLOP"}},
                                   {"name": "c", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const RunResult run = simulate(sc);
  std::ostringstream text;
  write_perfetto_json(text, sc, run);
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  std::map<std::int64_t, std::vector<std::pair<double, double>>> slices;  // per thread
  int threads = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") ++threads;
    if (e.at("ph") == "X") slices[e.at("tid").get<std::int64_t>()].emplace_back(e.at("ts").get<double>(), e.at("ts").get<double>() + e.at("dur").get<double>());
  }
  CHECK(threads == 2);
  CHECK(slices.size() == 2);
  for (auto& [tid, s] : slices) {
    std::sort(s.begin(), s.end());
    // Each slice ends before the next starts, or holds it whole.
    for (std::size_t i = 1; i < s.size(); ++i) {
      INFO("thread " << tid);
      CHECK((s[i].first >= s[i - 1].second - 1e-6 || s[i].second <= s[i - 1].second + 1e-6));
    }
  }
}

TEST_CASE("a JSON array written element by element is the dump of the whole array", "[report][json]") {
  using nlohmann::ordered_json;
  const ordered_json elements = ordered_json::array({ordered_json{{"a", 1}, {"b", {1.5, nullptr}}, {"c", "two\nlines \"quoted\""}},
                                                     ordered_json::array(), ordered_json::object(), 2.0, "x"});
  for (const int indent : {-1, 1, 2}) {
    INFO("indent " << indent);
    for (const std::size_t count : {std::size_t{0}, std::size_t{1}, elements.size()}) {
      ordered_json whole = ordered_json::array();
      std::ostringstream streamed;
      JsonArrayStream array(streamed, indent);
      for (std::size_t i = 0; i < count; ++i) {
        whole.push_back(elements[i]);
        array.add(elements[i]);
      }
      array.close();
      CHECK(streamed.str() == whole.dump(indent));
    }
    // Nested one level, as a document's member.
    ordered_json doc{{"items", elements}};
    std::ostringstream streamed;
    streamed << (indent < 0 ? "{\"items\":" : "{\n" + std::string(static_cast<std::size_t>(indent), ' ') + "\"items\": ");
    JsonArrayStream array(streamed, indent, 1);
    for (const auto& e : elements) array.add(e);
    array.close();
    streamed << (indent < 0 ? "}" : "\n}");
    CHECK(streamed.str() == doc.dump(indent));
  }
}
