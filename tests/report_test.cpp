// Output formats: the Perfetto trace is well-formed trace-event JSON with a track per GPU, task
// slices that match the trace, and counters.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "../reports/src/json_stream.hpp"
#include "../reports/src/json_writer.hpp"
#include "../reports/src/readable.hpp"
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

namespace {

// Writes `v` through JsonWriter, as a value at `depth`.
void write_value(JsonWriter& w, const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      w.begin_object();
      for (const auto& [k, e] : v.items()) write_value(w.key(k), e);
      w.end_object();
      break;
    case nlohmann::json::value_t::array:
      w.begin_array();
      for (const auto& e : v) write_value(w, e);
      w.end_array();
      break;
    case nlohmann::json::value_t::string: w.value(v.get<std::string>()); break;
    case nlohmann::json::value_t::number_float: w.value(v.get<double>()); break;
    case nlohmann::json::value_t::number_unsigned: w.value(v.get<std::uint64_t>()); break;
    case nlohmann::json::value_t::number_integer: w.value(v.get<std::int64_t>()); break;
    default: w.null();
  }
}

}  // namespace

TEST_CASE("JsonWriter writes what nlohmann's dump writes, numbers and escapes included", "[report][json]") {
  using nlohmann::ordered_json;
  // Numbers across the whole range, both signs, integers held as doubles, and the shortest round trips.
  std::mt19937_64 rng(7);
  ordered_json numbers = ordered_json::array({0.0, -0.0, 1.0, 0.1, 1e-7, 4e-06, 123456789012345680.0, 1e21, 5e-324,
                                              std::numeric_limits<double>::max(), -2.5, 100.0, 1.0 / 3});
  for (int i = 0; i < 2000; ++i) {
    const double mantissa = std::uniform_real_distribution<double>(-1, 1)(rng);
    numbers.push_back(std::ldexp(mantissa, std::uniform_int_distribution<int>(-1060, 1020)(rng)));
    numbers.push_back(std::bit_cast<double>(rng() & 0x7FEFFFFFFFFFFFFFull));  // any finite bit pattern
  }
  const ordered_json doc{{"numbers", numbers},
                         {"ints", {0, -1, 42, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::uint64_t>::max()}},
                         {"text", {"plain", "quote \" and back\\slash", "tab\tnew\nline\rcr\bbs\fff", std::string("nul\0and\x1f", 9), "café 温度"}},
                         {"nested", {{"empty_object", ordered_json::object()}, {"empty_array", ordered_json::array()}, {"null", nullptr}}}};
  for (const int indent : {-1, 1, 2}) {
    INFO("indent " << indent);
    JsonWriter w(indent);
    write_value(w, doc);
    CHECK(w.text() == doc.dump(indent));
  }
  // Not finite: null, as dump() writes it.
  JsonWriter w;
  w.begin_array().value(std::numeric_limits<double>::quiet_NaN()).value(std::numeric_limits<double>::infinity()).end_array();
  CHECK(w.text() == "[null,null]");
  // A value nested in an indented document, streamed into its array.
  const ordered_json rows = ordered_json::array({ordered_json{{"a", 1.5}, {"b", {1, 2}}}, ordered_json{{"a", nullptr}, {"b", ordered_json::array()}}});
  const ordered_json whole{{"rows", rows}};
  std::ostringstream streamed;
  streamed << "{\n \"rows\": ";
  JsonArrayStream array(streamed, 1, 1);
  for (const auto& r : rows) {
    JsonWriter row(1, 2);
    write_value(row, r);
    array.add_text(row.text());
  }
  array.close();
  streamed << "\n}";
  CHECK(streamed.str() == whole.dump(1));
}

TEST_CASE("the report's Gantt chart draws each bar of a small run and bins the busy time of a large one", "[report]") {
  auto report_of = [](int tasks) {
    const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "150 /s", "count": )" + std::to_string(tasks) + "}}]");
    std::ostringstream html;
    write_run_report_html(html, sc, simulate(sc));
    const std::string page = html.str();
    const std::size_t from = page.find("id=\"gantt\""), to = page.find("</svg>", from);
    REQUIRE(from != std::string::npos);
    std::size_t rects = 0;
    for (std::size_t at = page.find("<rect", from); at < to; at = page.find("<rect", at + 1)) ++rects;
    return std::pair{page, rects};
  };
  const auto [small, small_rects] = report_of(100);
  CHECK_THAT(small, Catch::Contains("Tasks on GPUs"));
  CHECK(small_rects >= 100);  // a bar per task
  const auto [large, large_rects] = report_of(50000);
  CHECK_THAT(large, Catch::Contains("GPUs busy over time") && Catch::Contains("50000 task and weight-load bars of this run are too many"));
  CHECK(large_rects < 2 * 200 + 50);  // at most a cell per GPU and time bin, plus the frame and legend
}

TEST_CASE("tables print numbers without exponents and times in a unit that suits them", "[report]") {
  CHECK(fleetsim::readable(20860.4, 4) == "20860");
  CHECK(fleetsim::readable(5.7941, 4) == "5.794");
  CHECK(fleetsim::readable(181.2, 2) == "181");
  CHECK(fleetsim::readable(-2.5e6, 3) == "-2500000");
  CHECK(fleetsim::readable(0.00012, 2) == "0.00012");
  CHECK(fleetsim::readable(0, 4) == "0");
  CHECK(std::string(fleetsim::time_unit_for(999).name) == "s");
  CHECK(std::string(fleetsim::time_unit_for(3901).name) == "min");
  CHECK(fleetsim::time_unit_for(20860).seconds == 3600);
  CHECK(std::string(fleetsim::time_unit_for(100 * 3600).name) == "days");
}

TEST_CASE("a validation's profile check is written beside its errors, as text and as JSON", "[report]") {
  const std::vector<ProfileFigure> before{{.name = "fp32 GEMM, one worker alone", .unit = Dimension::flop_rate, .profile = 28e9, .measured = 21e9},
                                          {.name = "stream, every worker", .unit = Dimension::bandwidth, .profile = 10e9, .measured = 10.5e9}};
  std::vector<ProfileFigure> after = before;
  after[0].measured = 28e9;
  std::ostringstream text;
  write_profile_check_text(text, before, after);
  CHECK_THAT(text.str(), Catch::Contains("fp32 GEMM, one worker alone") && Catch::Contains("-25.0% /   +0.0%") &&
                             Catch::Contains("+5.0% /   +5.0%") && Catch::Contains("moved by up to -25.0%"));
  const nlohmann::json j = nlohmann::json::parse(trace_diff_json(TraceDiff{}, before, after));
  REQUIRE(j["profile_check"].size() == 2);
  CHECK(j["profile_check"][0]["figure"] == "fp32 GEMM, one worker alone");
  CHECK(j["profile_check"][0]["before"].get<double>() == Approx(21e9));
  CHECK(j["profile_check"][0]["after"].get<double>() == Approx(28e9));
  CHECK_FALSE(nlohmann::json::parse(trace_diff_json(TraceDiff{})).contains("profile_check"));
  CHECK_THROWS_AS(write_profile_check_text(text, before, std::span(after).first(1)), std::invalid_argument);
}

TEST_CASE("the run page's latency distribution counts what the summary counts: completed workflows past the warm-up", "[report]") {
  const auto page_of = [](const std::string& warmup) {
    const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": "1 /s", "count": 100}}])" + warmup);
    const RunResult run = simulate(sc);
    std::size_t measured = 0;
    for (const InstanceRecord& i : run.trace.instances) measured += measured_latency(sc, i).has_value() ? 1 : 0;
    std::ostringstream html;
    write_run_report_html(html, sc, run);
    const std::string page = html.str();
    const std::size_t chart = page.find("id=\"latency-cdf\""), from = page.find("points=\"", chart), to = page.find('"', from + 8);
    REQUIRE(chart != std::string::npos);
    const auto points = static_cast<std::size_t>(std::count(page.begin() + static_cast<std::ptrdiff_t>(from), page.begin() + static_cast<std::ptrdiff_t>(to), ','));
    return std::tuple{page, measured, points};
  };
  const auto [all, all_measured, all_points] = page_of("");
  const auto [later, later_measured, later_points] = page_of(R"(, "warmup": "50 s")");
  CHECK(all_measured == 100);
  CHECK(later_measured < 80);
  CHECK(later_measured > 20);
  // One point a workflow, and one at each end of the step line.
  CHECK(all_points == all_measured + 2);
  CHECK(later_points == later_measured + 2);
  CHECK_THAT(later, Catch::Contains("fraction of completed workflows past the warm-up"));
  CHECK_THAT(all, !Catch::Contains("past the warm-up"));
}
