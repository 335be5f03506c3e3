// The workload component alone: instances and their tasks in the trace, open-loop arrivals one after
// another, closed-loop users coming back after their think time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string_view>

#include "../helpers.hpp"
#include "run/events.hpp"
#include "run/workload.hpp"

using namespace fleetsim;

namespace {

struct Fixture {
  explicit Fixture(const std::string& workload_json)
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
          "workflows": {"pair": {"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}}, {"name": "b", "work": {"flop": "1 TFLOP"}}],
                                 "edges": [{"from": "a", "to": "b", "bytes": "1 MB"}]}},
          "workload": )" + workload_json)),
        workload(sc, sc.seed, std::vector<double>(sc.workflows.size(), 1.0), queue, trace) {}
  Scenario sc;
  EventQueue queue;
  Trace trace;
  run::Workload workload;
};

}  // namespace

namespace {

// The pair's scenario with two tenants and these streams, to mutate before a workload is made of it.
Scenario streams_scenario(const std::string& workload_json) {
  return test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "tenants": [{"name": "x"}, {"name": "y"}],
      "workflows": {"pair": {"tasks": [{"name": "a", "work": {"flop": "1 TFLOP"}}, {"name": "b", "work": {"flop": "1 TFLOP"}}],
                             "edges": [{"from": "a", "to": "b", "bytes": "1 MB"}]}},
      "workload": )" + workload_json);
}

// Plays every arrival (nothing else is queued): the instances' arrival times and tenants, in the order made.
std::vector<std::pair<double, std::uint32_t>> arrive_all(EventQueue& queue, run::Workload& workload, const Trace& trace) {
  workload.start_open_loops();
  while (!queue.empty()) workload.arrive(queue.pop().subject, [](std::uint32_t) {}, [](TaskId) {});
  std::vector<std::pair<double, std::uint32_t>> out;
  for (const InstanceRecord& i : trace.instances) out.emplace_back(i.arrival_s, index(i.tenant));
  return out;
}

}  // namespace

TEST_CASE("the workload counts its arrivals up front and makes each instance's records as it arrives", "[run][workload]") {
  Fixture f(R"([{"workflow": "pair", "arrival": {"process": "times", "times": ["2 s", "1 s"]}}])");
  CHECK(f.trace.instances.empty());
  CHECK(f.workload.most_instances() == 2);
  CHECK(f.workload.most_tasks() == 4);
  CHECK(f.workload.unfinished() == 2);
  CHECK(f.workload.job_sizes().size() == 2);
  f.workload.start_open_loops();
  std::size_t made = 0;
  f.workload.arrive(f.queue.pop().subject, [&](std::uint32_t i) { made = f.trace.tasks.size() + i; }, [](TaskId) {});
  CHECK(made == 2);  // told once the instance's two task records were made
  CHECK(f.trace.instances[0].arrival_s == 1.0);  // the earlier one first
  REQUIRE(f.queue.size() == 1);
  CHECK(f.queue.top().time_s == 2.0);  // the later one, after
  f.workload.arrive(f.queue.pop().subject, [](std::uint32_t) {}, [](TaskId) {});
  REQUIRE(f.trace.tasks.size() == 4);
  CHECK(index(f.workload.task_id(1, 1)) == 3);
  CHECK(f.trace.tasks[3].task == 1);
  CHECK(f.trace.tasks[3].instance == make_id<InstanceId>(1));
}

TEST_CASE("streams drawn one arrival at a time merge in time order, the lower stream first at a tie", "[run][workload]") {
  Scenario sc = streams_scenario(R"([{"workflow": "pair", "tenant": "x", "arrival": {"process": "times", "times": ["1 s", "2 s"]}},
                                     {"workflow": "pair", "tenant": "y", "arrival": {"process": "times", "times": ["1 s", "1.5 s"]}}])");
  EventQueue queue;
  Trace trace;
  run::Workload workload(sc, sc.seed, {1.0}, queue, trace);
  using A = std::vector<std::pair<double, std::uint32_t>>;
  CHECK(arrive_all(queue, workload, trace) == A{{1.0, 0}, {1.0, 1}, {1.5, 1}, {2.0, 0}});
}

TEST_CASE("a replayed trace's arrivals come in time order with their own work scales, and size the job distribution", "[run][workload]") {
  Scenario sc = streams_scenario(R"([{"workflow": "pair", "tenant": "x", "arrival": {"process": "times", "times": ["1 s", "2 s", "3 s"]}},
                                     {"workflow": "pair", "tenant": "y", "arrival": {"process": "periodic", "interval": "10 s", "count": 2}}])");
  // As a job trace is read: times in the file's order, not sorted; each job's duration its work scale.
  sc.streams[0].arrival.times_s = {3, 1, 2, 1};
  sc.streams[0].arrival.work_scales = {30, 10, 20, 11};
  sc.streams[0].arrival.count = 4;
  EventQueue queue;
  Trace trace;
  run::Workload workload(sc, sc.seed, {2.0}, queue, trace);
  // Job sizes: 2 GPU-s a workflow times each arrival's scale (the periodic stream's at scale 1, twice).
  CHECK(workload.job_sizes() == std::vector<double>{2, 2, 20, 22, 40, 60});
  using A = std::vector<std::pair<double, std::uint32_t>>;
  CHECK(arrive_all(queue, workload, trace) == A{{0.0, 1}, {1.0, 0}, {1.0, 0}, {2.0, 0}, {3.0, 0}, {10.0, 1}});
  CHECK(workload.known_scale(make_id<InstanceId>(1)) == 10);  // the first "1 s" of the file first
  CHECK(workload.known_scale(make_id<InstanceId>(2)) == 11);
  CHECK(workload.known_scale(make_id<InstanceId>(4)) == 30);
  CHECK(workload.known_scale(make_id<InstanceId>(5)) == 1);
  CHECK(trace.tasks[2].work_scale == 10);
}

TEST_CASE("a stream's draws come in time order, within its horizon and count, the same from the same random stream", "[run][workload]") {
  // Mean rates: poisson 3/s; bursty (5/s for 2 s, 0.5/s for 3 s) 2.3/s; diurnal 2/s over whole periods.
  for (const auto& [arrival, rate] : {std::pair<std::string, double>{R"({"process": "poisson", "rate": "3/s"})", 3.0},
                                      {R"({"process": "bursty", "rate": "5/s", "on": "2 s", "off": "3 s", "off_rate": "0.5/s"})", 2.3},
                                      {R"({"process": "diurnal", "rate": "2/s", "amplitude": 0.8, "period": "20 s"})", 2.0}}) {
    INFO(arrival);
    const Scenario sc = streams_scenario(R"([{"workflow": "pair", "tenant": "x", "arrival": )" + arrival + R"(}], "horizon": "4000 s")");
    const auto draw = [&](std::string_view stream) {
      run::ArrivalDraws draws(sc.streams[0].arrival, 4000, Rng(7, 0, stream));
      std::vector<double> times;
      while (const auto a = draws.next()) times.push_back(a->time_s);
      return times;
    };
    const std::vector<double> times = draw("s");
    CHECK(std::is_sorted(times.begin(), times.end()));
    CHECK(times.back() <= 4000);
    CHECK(static_cast<double>(times.size()) == Approx(rate * 4000).epsilon(0.05));
    CHECK(draw("s") == times);
    CHECK(draw("t") != times);
  }
  // A count stops the draws before the horizon does.
  const Scenario counted = streams_scenario(R"([{"workflow": "pair", "tenant": "x", "arrival": {"process": "poisson", "rate": "3/s", "count": 10}}])");
  run::ArrivalDraws draws(counted.streams[0].arrival, 4000, Rng(7, 0, "s"));
  int n = 0;
  while (draws.next()) ++n;
  CHECK(n == 10);
}

TEST_CASE("an open-loop arrival makes its roots ready and schedules the next one", "[run][workload]") {
  Fixture f(R"([{"workflow": "pair", "arrival": {"process": "times", "times": ["1 s", "2 s"]}}])");
  f.workload.start_open_loops();
  REQUIRE(f.queue.size() == 1);
  const Event first = f.queue.pop();
  CHECK(first.kind == run::kArrival);
  std::vector<TaskId> ready;
  f.workload.arrive(first.subject, [](std::uint32_t) {}, [&](TaskId id) { ready.push_back(id); });
  CHECK(ready == std::vector<TaskId>{make_id<TaskId>(0)});  // only "a": "b" waits for its input
  CHECK(f.workload.in_flight() == 1);
  REQUIRE(f.queue.size() == 1);
  CHECK(f.queue.top().time_s == 2.0);
  f.workload.task_ended(0);
  CHECK(f.workload.unfinished() == 2);  // one of its two tasks
  f.workload.task_ended(0);
  CHECK(f.workload.unfinished() == 1);
  CHECK(f.workload.in_flight() == 0);
  CHECK(f.trace.instances[0].end_s == 1.0);
}

TEST_CASE("a closed-loop user submits its next workflow only when the last one ends", "[run][workload]") {
  Fixture f(R"([{"workflow": "pair", "arrival": {"process": "closed", "users": 2, "count": 3, "think": "0 s"}}])");
  CHECK(f.trace.instances.empty());  // made as they come
  CHECK(f.workload.most_instances() == 6);
  f.workload.start_open_loops();
  CHECK(f.queue.empty());
  f.workload.start_closed_loops();
  CHECK(f.queue.size() == 2);  // one per user
  const Event e = f.queue.pop();
  f.workload.arrive(e.subject, [](std::uint32_t) {}, [](TaskId) {});
  REQUIRE(f.trace.instances.size() == 1);
  f.workload.task_ended(0);
  f.workload.task_ended(0);
  REQUIRE(f.queue.size() == 2);  // the other user's first, and this user's second at once (no think time)
  f.queue.pop();
  CHECK(f.queue.pop().subject == e.subject + 1);
}

TEST_CASE("a closed-loop user's last workflow submits no other", "[run][workload]") {
  Fixture f(R"([{"workflow": "pair", "arrival": {"process": "closed", "users": 1, "count": 2, "think": "0 s"}}])");
  f.workload.start_closed_loops();
  for (std::uint32_t k = 0; k < 2; ++k) {
    REQUIRE(f.queue.size() == 1);
    f.workload.arrive(f.queue.pop().subject, [](std::uint32_t) {}, [](TaskId) {});
    f.workload.task_ended(k);
    f.workload.task_ended(k);
  }
  CHECK(f.queue.empty());
  CHECK(f.workload.unfinished() == 0);
}
