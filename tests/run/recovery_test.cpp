// The recovery component alone: checkpoints keep whole intervals of a stopped run's compute, the next
// run pays a restore and computes what is left; failures use attempts, preemptions and resizes do not.
#include <catch2/catch.hpp>

#include "run/recovery.hpp"

using namespace fleetsim;

namespace {

FaultSpec faults(int attempts, double interval_s, double restore_s, double backoff_s) {
  FaultSpec f;
  f.max_attempts = attempts;
  f.checkpoint_interval_s = interval_s;
  f.restore_s = restore_s;
  f.backoff_s = backoff_s;
  return f;
}

const TaskId kTask = make_id<TaskId>(1);

}  // namespace

TEST_CASE("a run stopped mid-compute keeps its whole checkpoint intervals and the next one restores them", "[run][recovery]") {
  const FaultSpec f = faults(3, 10, 2, 5);
  run::Recovery recovery(f, /*restartable=*/true);
  recovery.size_tasks({.tasks = 2});
  CHECK(recovery.begin_compute(kTask, 35, 0, 1) == Approx(35));  // nothing saved yet: no restore
  CHECK(recovery.checkpoint(kTask, 25) == Approx(20));            // 25 s computed: two 10-s intervals
  const auto again = recovery.stopped(kTask, 100, false, 5);
  REQUIRE(again);
  CHECK(*again == Approx(105));                                    // after the backoff
  CHECK(recovery.run(kTask) == 1);
  // 20 of 35 s saved: the restore, then the 15 s left.
  CHECK(recovery.begin_compute(kTask, 35, 0, 1) == Approx(2 + 15));
  // Stopped 1 s into the restore: nothing more is saved.
  CHECK(recovery.checkpoint(kTask, 1) == 0);
}

TEST_CASE("failures use the retry attempts, preemptions do not", "[run][recovery]") {
  const FaultSpec f = faults(2, 0, 0, 1);
  run::Recovery recovery(f, /*restartable=*/true);
  recovery.size_tasks({.tasks = 2});
  CHECK(recovery.stopped(kTask, 10, true, 0) == std::optional<double>(10));  // preempted: ready at once
  CHECK(recovery.stopped(kTask, 20, false, 0) == std::optional<double>(21));  // first failure: retried
  CHECK_FALSE(recovery.stopped(kTask, 30, false, 0));                         // second: out of attempts
  CHECK(recovery.attempts(kTask) == "(run 2 of 2)");
  Summary s;
  recovery.summarize(s);
  CHECK(s.tasks_stopped == 2);
  CHECK(s.tasks_preempted == 1);
  CHECK(s.retries == 1);
}

TEST_CASE("a resize keeps the work done and the next run pays the task's restart on its new gang", "[run][recovery]") {
  const FaultSpec f = faults(2, 0, 7, 0);
  run::Recovery recovery(f, /*restartable=*/true);
  recovery.size_tasks({.tasks = 2});
  CHECK(recovery.begin_compute(kTask, 100, 3, 4) == Approx(100));  // no restart pending: the restart time is not paid
  recovery.resized(kTask, 40);                                      // 40 of 100 s done
  CHECK(recovery.begin_compute(kTask, 50, 3, 2) == Approx(3 + 0.6 * 50));  // restart, not restore
  recovery.resized(kTask, 3 + 15);                                  // 15 more of the new 50 s: 30% more
  CHECK(recovery.begin_compute(kTask, 50, 3, 2) == Approx(3 + 0.3 * 50));
  // Resizes are no failure: a failure now is the first of two attempts.
  CHECK(recovery.stopped(kTask, 0, false, 0));
  CHECK(recovery.attempts(kTask) == "(run 1 of 2)");
  Summary s;
  recovery.summarize(s);
  CHECK(s.restart_gpu_s == Approx(2 * 3 * 2));
}

TEST_CASE("recovery time runs from a stop to the next start, goodput counts lost GPU time", "[run][recovery]") {
  const FaultSpec f = faults(3, 0, 0, 0);
  run::Recovery recovery(f, /*restartable=*/true);
  recovery.size_tasks({.tasks = 2});
  recovery.started(kTask, 1);  // a first start: nothing recovered
  recovery.stopped(kTask, 10, false, 30);
  recovery.started(kTask, 14);
  recovery.stopped(kTask, 20, false, 10);
  recovery.started(kTask, 26);
  Summary s;
  s.gpu_busy_s = 160;  // held GPU time, the stopped runs' included
  recovery.summarize(s);
  CHECK(s.mean_recovery_s == Approx(5));
  CHECK(s.lost_gpu_s == Approx(40));
  CHECK(s.goodput == Approx(120.0 / 160.0));
}

TEST_CASE("runs that are never stopped keep no per-task state", "[run][recovery]") {
  const FaultSpec f = faults(1, 0, 0, 0);
  run::Recovery recovery(f, /*restartable=*/false);
  recovery.size_tasks({.tasks = 1000});
  CHECK_FALSE(recovery.on());
  recovery.started(kTask, 5);  // a no-op
  Summary s;
  s.gpu_busy_s = 3;
  recovery.summarize(s);
  CHECK(s.goodput == 1);
  CHECK(s.mean_recovery_s == 0);
}
