// The occupancy component alone: when a GPU is busy for the policy, what the policy's view shows, and
// that a GPU turning free asks for a scheduling round.
#include <catch2/catch.hpp>
#include <numeric>
#include <random>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/policy.hpp"
#include "run/occupancy.hpp"
#include "run/ready_queue.hpp"

using namespace fleetsim;

namespace {

// Two nodes of two GPUs; the second node's GPUs take two tasks at once.
struct Fixture {
  Fixture()
      : sc(test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1},
                                                         {"type": "unit-node-2", "count": 1, "time_slicing": {"tasks": 2}}]},
          "tenants": [{"name": "a"}, {"name": "b", "private_gpus": true}],
          "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
          "workload": [{"workflow": "w", "tenant": "a", "arrival": {"process": "once", "count": 2}},
                       {"workflow": "w", "tenant": "b", "arrival": {"process": "once"}}])")),
        cluster(sc.cluster),
        memory(std::vector<double>(4, 1e12), 0),
        occupancy(sc, cluster, trace, round_wanted) {
    for (std::uint32_t i = 0; i < 3; ++i) {
      TaskRecord r;
      r.instance = make_id<InstanceId>(i);
      r.tenant = make_id<TenantId>(i < 2 ? 0 : 1);
      r.start_s = i;
      trace.tasks.push_back(r);
    }
    occupancy.size_instances({.instances = 3});
  }
  ClusterView view() const { return occupancy.view(memory, compute, {}, 5.0); }

  Scenario sc;
  Cluster cluster;
  Trace trace;
  GpuMemory memory;
  ComputeModel compute;
  bool round_wanted = false;
  run::Occupancy occupancy;
};

}  // namespace

TEST_CASE("a GPU is busy when its slots are full, it is down or its node is off", "[run][occupancy]") {
  Fixture f;
  CHECK(f.occupancy.free_gpus() == 4);
  f.occupancy.add_task(0, 0);
  CHECK(f.occupancy.busy(0));
  f.occupancy.add_task(2, 0);
  CHECK_FALSE(f.occupancy.busy(2));  // time-sliced: one slot left
  f.occupancy.add_task(2, 1);
  CHECK(f.occupancy.busy(2));
  CHECK(f.occupancy.gpus_running() == 2);
  CHECK(f.occupancy.free_gpus() == 2);
  CHECK(f.view().free_gpus(make_id<NodeId>(0)) == 1);
  CHECK(f.view().next_node_with_free(0) == 0);
  f.occupancy.set_down(1, true);
  CHECK(f.occupancy.busy(1));
  CHECK(f.view().next_node_with_free(0) == 1);  // node 0 has no free GPU left
  f.occupancy.set_off(3, true);
  CHECK(f.view().next_node_with_free(0) >= 2);  // none: past the last node
}

TEST_CASE("the view's free GPU count follows every change, as the sum of its nodes'", "[run][occupancy]") {
  // The view holds the occupancy's kept total, not a copy: a view made before a change reads it after.
  Fixture f;
  const ClusterView v = f.view();
  const auto summed = [&] { return v.free_gpus(make_id<NodeId>(0)) + v.free_gpus(make_id<NodeId>(1)); };
  CHECK(v.free_gpu_count() == 4);
  f.occupancy.add_task(0, 0);
  f.occupancy.add_task(2, 0);
  f.occupancy.add_task(2, 1);
  CHECK(v.free_gpu_count() == 2);
  f.occupancy.set_down(1, true);
  f.occupancy.set_off(3, true);
  CHECK(v.free_gpu_count() == 0);
  f.occupancy.remove_task(2, 1);
  f.occupancy.set_down(1, false);
  CHECK(v.free_gpu_count() == 2);
  CHECK(v.free_gpu_count() == summed());
}

TEST_CASE("a GPU turning free asks for a scheduling round", "[run][occupancy]") {
  Fixture f;
  f.occupancy.add_task(0, 0);
  CHECK_FALSE(f.round_wanted);
  f.occupancy.remove_task(0, 0);
  CHECK(f.round_wanted);
  f.round_wanted = false;
  f.occupancy.set_down(1, true);
  CHECK_FALSE(f.round_wanted);
  f.occupancy.set_down(1, false);
  CHECK(f.round_wanted);
}

TEST_CASE("the policy's view shows what runs where, who holds what and what each instance had", "[run][occupancy]") {
  Fixture f;
  f.occupancy.add_task(2, 0);
  f.occupancy.add_task(2, 1);  // started later: the view's start is the latest
  f.occupancy.add_tenant_gpus(make_id<TenantId>(0), 2);
  f.occupancy.attain(make_id<InstanceId>(1), 3.5);
  f.occupancy.set_free_at(2, 9.0);
  const ClusterView v = f.view();
  CHECK(v.running_since_s(make_id<GpuId>(2)) == 1.0);
  CHECK(v.running_rank(make_id<GpuId>(0)) == ClusterView::kNoRank);
  CHECK(v.tenant_gpus(make_id<TenantId>(0)) == 2);
  CHECK(v.attained_s(make_id<InstanceId>(1)) == 3.5);
  CHECK(v.free_at_s(make_id<GpuId>(2)) == 9.0);
  CHECK(v.free_at_s(make_id<GpuId>(0)) == 5.0);  // free: now
  CHECK(f.occupancy.private_tenant(make_id<TenantId>(1)));
  CHECK_FALSE(v.allowed(make_id<TenantId>(1), make_id<GpuId>(2)));  // shares a GPU with tenant a
  CHECK(v.allowed(make_id<TenantId>(1), make_id<GpuId>(3)));
}

TEST_CASE("a policy that keeps its order from round to round places what a fresh sort by key would, as tasks leave, join and come back", "[run][policy]") {
  // Eight free GPUs and one-GPU tasks: each round places the first eight of the policy's order, so the
  // placements show the order. The reference: (key, place in the queue), sorted afresh every round.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 4}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const Cluster cluster(sc.cluster);
  Trace trace;
  bool round_wanted = false;
  run::Occupancy occupancy(sc, cluster, trace, round_wanted);
  const GpuMemory memory(std::vector<double>(8, 1e12), 0);
  const ComputeModel compute;
  const ClusterView view = occupancy.view(memory, compute, {}, 0);
  // (heft orders as critical-path does; its GPU cost needs a task spec, which these bare tasks lack.)
  // drf keeps its order per tenant: one tenant here holding no GPUs, so its key ties and the queue's order decides,
  // through tasks leaving, joining and coming back.
  for (const char* name : {"sjf", "critical-path", "priority", "drf"}) {
    PolicyParams defaults;
    for (const ParamInfo& param : find_policy(name)->params) defaults.set(param.name, param.default_value);
    const std::unique_ptr<Policy> policy = find_policy(name)->make(defaults);
    std::mt19937 engine(7);
    const auto pick = [&](int lo, int hi) { return lo + static_cast<int>(engine() % static_cast<unsigned>(hi - lo + 1)); };
    run::ReadyQueue queue;
    std::uint32_t next_task = 0;
    const auto joined = [&](std::uint32_t task) {
      ReadyTask r{};
      r.task = make_id<TaskId>(task);
      r.gpus = 1;
      r.model = kNoModel;
      r.input_gpu = kNoGpu;
      r.job_s = static_cast<double>(pick(0, 5));   // ties, on purpose
      r.rank_s = static_cast<double>(pick(0, 5));
      r.priority = static_cast<int>(pick(0, 2));
      return r;
    };
    std::vector<ReadyTask> left;  // placed, to come back later (preempted)
    for (int round = 0; round < 600; ++round) {
      // Some join at the end (now and then many); now and then one that left comes back, at the end too.
      for (int k = pick(0, 12) + (round % 50 == 0 ? 2000 : 0); k > 0; --k) queue.push_back(joined(next_task++));
      if (!left.empty() && pick(0, 3) == 0) {
        queue.push_back(left.back());
        left.pop_back();
      }
      const double key_sign = std::string(name) == "sjf" ? 1 : -1;
      const auto key = [&](const ReadyTask& r) {
        return std::string(name) == "sjf"        ? r.job_s
               : std::string(name) == "priority" ? -ClusterView::rank_of(r.priority, r.interactive)
               : std::string(name) == "drf"      ? 0.0
                                                 : key_sign * r.rank_s;
      };
      std::vector<std::uint32_t> expected(queue.size());
      std::iota(expected.begin(), expected.end(), 0u);
      std::stable_sort(expected.begin(), expected.end(), [&](std::uint32_t a, std::uint32_t b) { return key(queue[a]) < key(queue[b]); });
      expected.resize(std::min<std::size_t>(expected.size(), 8));
      Decisions out;
      policy->schedule(view, queue.tasks(), out);
      std::vector<std::uint32_t> placed;
      for (const Decisions::Placement& p : out.placements()) placed.push_back(p.ready_index);
      REQUIRE(placed == expected);
      // The placed leave the queue (the others keep their order); some of them come back later. Others leave
      // unplaced (failed), deep in the queue: the policy must forget them without being told.
      for (std::uint32_t i : placed) {
        if (pick(0, 4) == 0) left.push_back(queue[i]);
      }
      std::sort(placed.begin(), placed.end());
      queue.remove(placed);
      queue.erase_if([&](const ReadyTask&) { return pick(0, 9) == 0; });
    }
  }
}
