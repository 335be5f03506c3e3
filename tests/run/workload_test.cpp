// The workload component alone: instances and their tasks in the trace, open-loop arrivals one after
// another, closed-loop users coming back after their think time.
#include <catch2/catch.hpp>

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

TEST_CASE("the workload writes every instance and its tasks to the trace up front", "[run][workload]") {
  Fixture f(R"([{"workflow": "pair", "arrival": {"process": "times", "times": ["2 s", "1 s"]}}])");
  REQUIRE(f.trace.instances.size() == 2);
  CHECK(f.trace.instances[0].arrival_s == 1.0);  // sorted by time
  CHECK(f.trace.instances[1].arrival_s == 2.0);
  REQUIRE(f.trace.tasks.size() == 4);
  CHECK(index(f.workload.task_id(1, 1)) == 3);
  CHECK(f.trace.tasks[3].task == 1);
  CHECK(f.workload.unfinished() == 2);
  CHECK(f.workload.job_sizes().size() == 2);
}

TEST_CASE("an open-loop arrival makes its roots ready and schedules the next one", "[run][workload]") {
  Fixture f(R"([{"workflow": "pair", "arrival": {"process": "times", "times": ["1 s", "2 s"]}}])");
  f.workload.start_open_loops();
  REQUIRE(f.queue.size() == 1);
  const Event first = f.queue.pop();
  CHECK(first.kind == run::kArrival);
  std::vector<TaskId> ready;
  f.workload.arrive(first.subject, [&](TaskId id) { ready.push_back(id); });
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
  REQUIRE(f.trace.instances.size() == 6);
  CHECK(f.trace.instances[0].arrival_s == kNever);  // learnt when it comes
  f.workload.start_open_loops();
  CHECK(f.queue.empty());
  f.workload.start_closed_loops();
  CHECK(f.queue.size() == 2);  // one per user
  const Event e = f.queue.pop();
  f.workload.arrive(e.subject, [](TaskId) {});
  f.workload.task_ended(e.subject);
  f.workload.task_ended(e.subject);
  REQUIRE(f.queue.size() == 2);  // the other user's first, and this user's second at once (no think time)
  f.queue.pop();
  CHECK(f.queue.pop().subject == e.subject + 1);
}
