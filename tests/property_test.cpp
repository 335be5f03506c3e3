// Property test: random scenarios (clusters, fabrics, DAGs with gangs, models, tensors and
// collectives, elastic gangs, arrival processes, policies, horizons) over many seeds. Every run must pass the
// invariants simulate() checks (nothing lost, no GPU double-booked, VRAM and links within
// capacity, time forwards) and give the same result twice.
#include <catch2/catch.hpp>
#include <random>

#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

struct Gen {
  std::mt19937_64 rng;
  explicit Gen(std::uint64_t seed) : rng(seed) {}
  int between(int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); }
  bool chance(int percent) { return between(1, 100) <= percent; }
  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[static_cast<std::size_t>(between(0, static_cast<int>(v.size()) - 1))]; }
};

// Every draw is a statement of its own: the operands of one expression are evaluated in an order the
// compilers choose differently (GCC and clang made different scenarios of the same seed).
std::string random_workflow(Gen& g, int max_gang) {
  const int n = g.between(1, 6);
  std::string tasks, edges;
  for (int i = 0; i < n; ++i) {
    const int gpus = g.chance(20) ? g.between(1, max_gang) : 1;
    std::string t = R"({"name": "t)" + std::to_string(i) + R"(", "gpus": )" + std::to_string(gpus);
    if (g.chance(60)) {
      const int model = g.between(0, 3), weights_gb = g.between(1, 60);
      t += R"(, "model": {"id": "m)" + std::to_string(model) + R"(", "weights": ")" + std::to_string(weights_gb) + R"( GB"})";
    }
    if (g.chance(50)) t += R"(, "working_set": ")" + std::to_string(g.between(1, 30)) + R"( GB")";
    const int tflop = g.between(1, 300), gb = g.between(0, 500);
    const bool exponential = g.chance(30);
    t += R"(, "work": {"flop": ")" + std::to_string(tflop) + R"( TFLOP", "bytes": ")" + std::to_string(gb) + R"( GB")" +
         (exponential ? R"(, "size": "exponential")" : "") + "}";
    if (gpus == 1 && g.chance(25)) {
      const int max_size = g.between(2, 8);
      const bool waits = g.chance(50);
      t += R"(, "batching": {"max_size": )" + std::to_string(max_size) + R"(, "max_wait": ")" + (waits ? "0.5 s" : "0 s") +
           R"(", "shared_bytes": 0.5})";
    }
    if (gpus > 1 && g.chance(60)) {
      const std::string op = g.pick(std::vector<std::string>{"all-reduce", "all-gather", "broadcast", "all-to-all"});
      const int bytes_gb = g.between(1, 20);
      const bool overlaps = g.chance(50);
      t += R"(, "collective": {"op": ")" + op + R"(", "bytes": ")" + std::to_string(bytes_gb) + R"( GB", "overlap": )" +
           (overlaps ? "0.5" : "0") + "}";
    }
    if (gpus > 1 && g.chance(40)) {
      const int min_gpus = g.between(1, gpus), restart_s = g.between(0, 2), interval_s = g.between(0, 5);
      t += R"(, "elastic": {"min_gpus": )" + std::to_string(min_gpus) + R"(, "restart": ")" + std::to_string(restart_s) +
           R"( s", "min_interval": ")" + std::to_string(interval_s) + R"( s"})";
    }
    tasks += (i ? ", " : "") + t + "}";
    for (int j = 0; j < i; ++j) {
      if (g.chance(35)) {
        edges += std::string(edges.empty() ? "" : ", ") + R"({"from": "t)" + std::to_string(j) + R"(", "to": "t)" +
                 std::to_string(i) + R"(", "bytes": ")" + std::to_string(g.between(0, 20)) + R"( GB"})";
      }
    }
  }
  return R"({"tasks": [)" + tasks + R"(], "edges": [)" + edges + "]}";
}

std::string random_scenario(std::uint64_t seed) {
  Gen g(seed);
  std::string nodes;
  int total = 0, largest_node = 0;
  for (int i = 0, groups = g.between(1, 3); i < groups; ++i) {
    const int count = g.between(1, 3);
    const bool two = g.chance(50);
    total += count * (two ? 2 : 1);
    largest_node = std::max(largest_node, two ? 2 : 1);
    nodes += std::string(i ? ", " : "") + R"({"type": ")" + (two ? "unit-node-2" : "unit-node-1") + R"(", "count": )" +
             std::to_string(count) + "}";
  }
  const std::string fabric = g.pick(std::vector<std::string>{
      R"({"topology": "single-switch"})", R"({"topology": "fat-tree", "nodes_per_leaf": 2, "oversubscription": 2})",
      R"({"topology": "rail-optimized", "nodes_per_leaf": 1})"});
  std::string workflows, workload;
  const int flows = g.between(1, 3);
  for (int w = 0; w < flows; ++w) {
    workflows += std::string(w ? ", " : "") + "\"w" + std::to_string(w) + "\": " + random_workflow(g, std::min(total, 4));
    const std::string arrival = g.pick(std::vector<std::string>{
        R"({"process": "poisson", "rate": "0.5 /s", "count": 15})", R"({"process": "periodic", "interval": "3 s", "count": 10})",
        R"({"process": "once", "count": 5})", R"({"process": "times", "times": ["0 s", "1 s", "1 s", "7 s"]})"});
    workload += std::string(w ? ", " : "") + R"({"tenant": ")" + (w % 2 ? "a" : "b") + R"(", "workflow": "w)" +
                std::to_string(w) + R"(", "arrival": )" + arrival + "}";
  }
  std::vector<std::string> policies;
  for (const PolicyInfo& p : policy_registry()) policies.push_back(p.name);
  std::string policy = R"({"name": ")" + g.pick(policies) + R"("})";
  if (g.chance(25)) policy = R"({"name": "priority", "params": {"preempt": true, "backfill": )" + std::string(g.chance(50) ? "true" : "false") + "}}";
  const std::string memory = g.chance(30) ? R"( "memory": {"max_offload": 0.5},)" : "";
  const std::string storage = g.chance(30) ? R"(, "storage": {"bandwidth": "20 GB/s", "latency": "50 us"})" : "";
  const std::string tenant_a = g.chance(20) ? R"({"name": "a", "quota": 2, "nodes": ["n0"]})" : R"({"name": "a", "quota": 2})";
  const std::string tenant_b = g.chance(40) ? R"({"name": "b", "priority": 1, "class": "interactive"})" : R"({"name": "b", "priority": 1})";
  // Drawn last, so the draws above stay what they were for each seed.
  if (g.chance(25)) {
    const std::string slicing = R"(, "time_slicing": {"tasks": )" + std::to_string(g.between(2, 3)) + R"(, "interference": 0.1})";
    for (std::size_t at = nodes.find('}'); at != std::string::npos; at = nodes.find('}', at + slicing.size() + 1)) nodes.insert(at, slicing);
  }
  const std::string faults = g.chance(20) ? R"(, "faults": {"gpu": {"mtbf": "30 s", "mttr": "2 s"}, "retry": {"max_attempts": 3, "backoff": "1 s"},
                                                         "checkpoint": {"interval": "1 s", "restore": "0.2 s"}})"
                                          : "";
  const std::string horizon = g.chance(30) ? R"( "horizon": "20 s",)" : "";
  return R"({"name": "random", "seed": )" + std::to_string(seed) + R"(, "catalog": ["unit-catalog.json"],)" + horizon + memory + R"( "policy": )" + policy + R"(,
      "cluster": {"nodes": [)" + nodes + R"(], "fabric": )" + fabric + storage + R"(},
      "tenants": [)" + tenant_a + ", " + tenant_b + R"(],
      "workflows": {)" + workflows + R"(}, "workload": [)" + workload + "]" + faults + "}";
}

// Whether two tasks, not batched together, ran on one GPU at once: time slicing at work.
bool co_ran(const RunResult& run) {
  std::vector<std::vector<std::pair<double, double>>> spans(run.cluster.gpu_count());
  for (const TaskRecord& t : run.trace.tasks) {
    if (t.start_s == kNever || t.batched_with != 0) continue;
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
      spans[index(run.trace.gpus[t.gpu_begin + i])].emplace_back(t.start_s, t.end_s == kNever ? run.summary.end_s : t.end_s);
    }
  }
  for (auto& s : spans) {
    std::sort(s.begin(), s.end());
    for (std::size_t i = 1; i < s.size(); ++i) {
      if (s[i].first < s[i - 1].second - 1e-9) return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("random scenarios keep every invariant and are deterministic", "[property]") {
  int simulated = 0, rejected = 0, batched = 0, preempted = 0, offloaded = 0, shared = 0, stopped = 0, resized = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    const std::string json = random_scenario(seed);
    INFO("seed " << seed << "\n" << json);
    Scenario sc;
    try {
      sc = parse_scenario(json, "random.json", test::data_dir());
    } catch (const InputError&) {
      ++rejected;  // e.g. a gang wider than the cluster: rejected before simulating, as it must be
      continue;
    }
    const RunResult a = simulate(sc);  // check_invariants runs inside
    const RunResult b = simulate(sc);
    REQUIRE(summary_json(a.summary) == summary_json(b.summary));
    const auto& t = a.summary.tasks;
    REQUIRE(t.completed + t.failed + t.running + t.queued == t.submitted);
    if (!a.summary.horizon_reached && !a.summary.stalled) REQUIRE(t.completed + t.failed == t.submitted);
    ++simulated;
    batched += a.summary.batches > 0;
    preempted += a.summary.tasks_preempted > 0;
    offloaded += a.summary.offloaded_tasks > 0;
    stopped += a.summary.tasks_stopped > 0;
    shared += co_ran(a);
    resized += a.summary.resizes > 0;
  }
  INFO(simulated << " simulated, " << rejected << " rejected; " << batched << " with batches, " << preempted
                 << " with preemptions, " << offloaded << " with offload, " << shared << " with tasks sharing a GPU, " << stopped
                 << " with tasks stopped by failures, "
                 << resized << " with elastic resizes");
  CHECK(simulated >= 150);
  // The features under test were exercised, not just generated.
  CHECK(batched >= 10);
  CHECK(preempted >= 3);
  CHECK(shared >= 10);
  CHECK(stopped >= 10);
  CHECK(resized >= 5);
}
