// VRAM: the weights cache (a resident model costs no load; eviction is least recently used; a
// peer GPU of the node can serve a load), held edge tensors, and never above capacity.
#include <catch2/catch.hpp>
#include <map>

#include "fleetsim/memory.hpp"
#include "fleetsim/simulation.hpp"
#include "helpers.hpp"

using namespace fleetsim;
using fleetsim::test::unit_scenario;

namespace {

// A task named `name` of 1 s (100 TFLOP on the unit GPU) using model `model` of `weights`.
std::string task(const std::string& name, const std::string& model, const std::string& weights, double seconds = 1) {
  return R"({"name": ")" + name + R"(", "model": {"id": ")" + model + R"(", "weights": ")" + weights +
         R"("}, "work": {"flop": ")" + std::to_string(static_cast<int>(seconds * 100)) + R"( TFLOP"}})";
}

std::string chain(const std::vector<std::string>& tasks) {
  std::string t = "[", e = "[";
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    t += (i ? ", " : "") + tasks[i];
    if (i > 0) e += std::string(i > 1 ? ", " : "") + R"({"from": "t)" + std::to_string(i - 1) + R"(", "to": "t)" + std::to_string(i) + R"("})";
  }
  return R"({"tasks": )" + t + R"(], "edges": )" + e + "]}";
}

}  // namespace

TEST_CASE("LRU eviction keeps the most recently used models", "[memory]") {
  GpuMemory m({100e9});
  const GpuId g = make_id<GpuId>(0);
  CHECK(m.admit(g, 0, 40e9, 0, 0));  // A loads
  m.release(g, 0, 0, 0);
  CHECK(m.admit(g, 1, 40e9, 0, 0));  // B loads
  m.release(g, 1, 0, 0);
  CHECK_FALSE(m.admit(g, 0, 40e9, 0, 0));  // A is resident: no load, and now the most recent
  m.release(g, 0, 0, 0);
  CHECK(m.admit(g, 2, 40e9, 0, 0));  // C needs room: B, least recently used, goes
  CHECK(m.resident(g, 0));
  CHECK_FALSE(m.resident(g, 1));
  CHECK(m.evictions() == 1);
  // A referenced model is never evicted: with C in use, D cannot displace it, only A.
  CHECK(m.need(g, 3, 60e9, 0) == 60e9);
  CHECK(m.available(g) == Approx(60e9));  // C pinned; A evictable
  CHECK(m.admit(g, 3, 60e9, 0, 0));
  CHECK(m.resident(g, 2));
  CHECK_FALSE(m.resident(g, 0));
  CHECK(m.used(g) == Approx(100e9));
}

TEST_CASE("held tensors and working sets count, what does not fit spills to host", "[memory]") {
  GpuMemory m({100e9});
  const GpuId g = make_id<GpuId>(0);
  m.admit(g, kNoModel, 0, 30e9, 0);
  CHECK(m.hold(g, 50e9, 0) == 50e9);
  CHECK(m.available(g) == Approx(20e9));
  CHECK(m.hold(g, 30e9, 0) == Approx(20e9));  // 10 GB do not fit
  CHECK(m.spilled_bytes() == Approx(10e9));
  m.unhold(g, 70e9, 0);
  m.release(g, kNoModel, 30e9, 0);
  CHECK(m.used(g) == 0);
  CHECK(m.peak_used(g) == Approx(100e9));
}

TEST_CASE("a second use of a resident model pays no load", "[memory][simulation]") {
  // The 10 GB load comes from host memory over two PCIe hops: 4 us + 10 GB / 50 GB/s = 0.200004 s.
  const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": )" + chain({task("t0", "a", "10 GB"), task("t1", "a", "10 GB")}) + R"(},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const auto run = simulate(sc);
  CHECK(run.trace.tasks[0].compute_start_s - run.trace.tasks[0].start_s == Approx(0.200004).epsilon(1e-9));
  CHECK(run.trace.tasks[1].compute_start_s == run.trace.tasks[1].start_s);
  CHECK(run.summary.weight_loads == 1);
  CHECK(run.summary.weight_bytes_loaded == 10e9);
  CHECK(run.summary.weight_load_s == Approx(0.200004));
  CHECK(run.summary.makespan_s == Approx(2.200004).epsilon(1e-9));
}

TEST_CASE("models swap in least-recently-used order", "[memory][simulation]") {
  // 100 GB GPU, 40 GB models: A B A C A B. C evicts B (A was used more recently), so the third A
  // is still resident; the last B must load again, evicting C. Loads: A, B, C, B. Each load is
  // 4 us + 40 GB / 50 GB/s = 0.800004 s.
  const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": )" + chain({task("t0", "a", "40 GB"), task("t1", "b", "40 GB"), task("t2", "a", "40 GB"),
                                     task("t3", "c", "40 GB"), task("t4", "a", "40 GB"), task("t5", "b", "40 GB")}) + R"(},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const auto run = simulate(sc);
  std::vector<bool> loaded;
  for (const auto& t : run.trace.tasks) loaded.push_back(t.compute_start_s > t.start_s);
  CHECK(loaded == std::vector<bool>{true, true, false, true, false, true});
  CHECK(run.summary.weight_loads == 4);
  CHECK(run.summary.evictions == 2);
  CHECK(run.summary.makespan_s == Approx(6 + 4 * 0.800004).epsilon(1e-9));
}

TEST_CASE("a load is served by a peer GPU of the node when one holds the weights", "[memory][simulation]") {
  // Node of 2 GPUs. Instance 0: t0 (model a, 1 s) then t1 (model b, 10 s), both on g0. At 2 s
  // instance 1 asks for model a: g0 is busy, so it runs on g1 and copies a from g0 over NVLink
  // (2 us + 10 GB / 100 GB/s = 0.100002 s) instead of host PCIe (0.200004 s).
  const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"w": )" + chain({task("t0", "a", "10 GB"), task("t1", "b", "10 GB", 10)}) + R"(,
                    "v": {"tasks": [)" + task("u", "a", "10 GB") + R"(]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}},
                   {"workflow": "v", "arrival": {"process": "times", "times": ["2 s"]}}])");
  const auto run = simulate(sc);
  const auto& u = run.trace.tasks[2];
  CHECK(run.cluster.gpu_name(run.trace.gpus[u.gpu_begin]) == "n0.g1");
  CHECK(u.compute_start_s - u.start_s == Approx(0.100002).epsilon(1e-9));
}

TEST_CASE("an output tensor occupies the producer's VRAM until its consumer has read it", "[memory][simulation]") {
  // Fork on a 2-GPU node: p (1 s) on g0 writes 60 GB for c on g1 and 1 GB for d on g0... d runs first on g0.
  // While c's 60 GB transfer runs (1 us x 2 + 60 GB / 100 GB/s = 0.600002 s), g0 holds the tensor.
  const auto sc = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "p", "work": {"flop": "100 TFLOP"}}, {"name": "d", "work": {"flop": "100 TFLOP"}},
                                   {"name": "c", "work": {"flop": "100 TFLOP"}}],
                         "edges": [{"from": "p", "to": "d", "bytes": "1 GB"}, {"from": "p", "to": "c", "bytes": "60 GB"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  RunOptions options;
  options.record_link_samples = true;
  const auto run = simulate(sc, options);
  double g0_after_read = -1, g0_while_sending = -1;
  for (const VramSample& s : run.vram_samples) {
    if (s.gpu != make_id<GpuId>(0)) continue;
    if (s.time_s == Approx(1.0)) g0_while_sending = s.used_bytes;  // last sample at 1 s wins
    if (s.time_s == Approx(1.600002)) g0_after_read = s.used_bytes;
  }
  CHECK(g0_while_sending == Approx(60e9));  // d read its 1 GB in place at once
  CHECK(g0_after_read == Approx(0));
}

TEST_CASE("a decode tiled only on smaller GPUs holds its whole working set on a larger one", "[memory][simulation]") {
  // Two SD VAE decodes at once, each tiled only below 30 GB (its whole peak with its 1 GB of weights): one on an
  // RTX 4090 (24 GB) holds the tiles' 2 GB, one on an L40S (48 GB) the whole decode's 29 GB.
  const auto sc = test::builtin_scenario(R"("cluster": {"nodes": [{"type": "rtx4090-ws-1", "count": 1}, {"type": "l40s-pcie-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "decode", "model": {"id": "vae", "weights": "1 GB"}, "working_set": "2 GB",
          "work": {"architecture": "sd-vae-decoder", "width": 1024, "height": 1024, "tiles": {"size": 64, "overlap": 8, "vram_below": "30 GB"}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "times", "times": ["0 s", "0 s"]}}])");
  const TaskSpec& decode = sc.workflows[0].tasks[0];
  CHECK(decode.working_set_on(24e9) == Approx(2e9));
  CHECK(decode.working_set_on(48e9) == Approx(29e9));
  CHECK(decode.working_set_on(30e9) == Approx(29e9));
  RunOptions options;
  options.record_link_samples = true;
  const auto run = simulate(sc, options);
  REQUIRE(run.summary.tasks.completed == 2);
  std::map<std::string, double> peak;
  for (const VramSample& v : run.vram_samples) peak[run.cluster.gpu_type(v.gpu).id] = std::max(peak[run.cluster.gpu_type(v.gpu).id], v.used_bytes);
  CHECK(peak["rtx-4090"] == Approx(3e9));
  CHECK(peak["l40s"] == Approx(30e9));
  // On a time-sliced L40S that may run two tasks at once, the second decode does not fit beside the first's whole
  // working set (1 + 29 + 29 GB): it waits, where two tiles' working sets would have run together.
  const RunResult busy = simulate(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "l40s-pcie-1", "count": 1, "time_slicing": {"tasks": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "decode", "model": {"id": "vae", "weights": "1 GB"}, "working_set": "2 GB",
          "work": {"architecture": "sd-vae-decoder", "width": 1024, "height": 1024, "tiles": {"size": 64, "overlap": 8, "vram_below": "30 GB"}}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "times", "times": ["0 s", "0 s"]}}])"), options);
  CHECK(busy.summary.tasks.completed == 2);
  peak.clear();
  for (const VramSample& v : busy.vram_samples) peak["l40s"] = std::max(peak["l40s"], v.used_bytes);
  CHECK(peak["l40s"] == Approx(30e9));
  CHECK(busy.trace.tasks[1].start_s == Approx(busy.trace.tasks[0].end_s));
}

TEST_CASE("a run that can never place a task stalls, or fails it when told to", "[memory][simulation]") {
  // One 100 GB GPU. p writes 70 GB for c, which needs 40 GB itself: c can only run where the 70 GB
  // sit, and they leave only when c has read them. With "on_stall": "fail", c fails with a reason.
  const std::string body = R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "p", "work": {"flop": "100 TFLOP"}},
                                   {"name": "c", "working_set": "40 GB", "work": {"flop": "100 TFLOP"}}],
                         "edges": [{"from": "p", "to": "c", "bytes": "70 GB"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])";
  const auto waiting = simulate(unit_scenario(body)).summary;
  CHECK(waiting.stalled);
  CHECK(waiting.tasks.queued == 1);
  const auto run = simulate(unit_scenario(body + R"(, "memory": {"on_stall": "fail"})"));
  CHECK_FALSE(run.summary.stalled);
  CHECK(run.summary.tasks.failed == 1);
  CHECK_THAT(run.trace.reasons[run.trace.tasks[1].reason], Catch::Contains("out of memory"));
}

TEST_CASE("a task short of VRAM offloads part of its working set to host memory and pays the transfers", "[memory][simulation]") {
  // As above: 70 GB of p's output sit on the 100 GB GPU until c reads them, and c needs 40 GB. With
  // up to half its working set offloadable, c keeps 30 GB in VRAM and 10 GB in host memory; the 10 GB
  // go out and back over the 50 GB/s host link (two 2 us hops), both directions at once: 0.2 s.
  const std::string body = R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "p", "work": {"flop": "100 TFLOP"}},
                                   {"name": "c", "working_set": "40 GB", "work": {"flop": "100 TFLOP"}}],
                         "edges": [{"from": "p", "to": "c", "bytes": "70 GB"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])";
  const auto run = simulate(unit_scenario(body + R"(, "memory": {"max_offload": 0.5})"));
  REQUIRE(run.summary.tasks.completed == 2);
  const TaskRecord& c = run.trace.tasks[1];
  CHECK(c.offload_bytes == Approx(10e9));
  CHECK(c.start_s == Approx(run.trace.tasks[0].end_s));
  CHECK(c.compute_start_s - c.start_s == Approx(10e9 / 50e9 + 4e-6).epsilon(1e-9));
  CHECK(run.summary.offloaded_tasks == 1);
  CHECK(run.summary.offload_bytes == Approx(10e9));
  CHECK(run.summary.vram_peak_utilization == Approx(1.0));

  // A fifth of the working set (8 GB) is not enough: c waits, as without offload.
  const auto short_of = simulate(unit_scenario(body + R"(, "memory": {"max_offload": 0.2})")).summary;
  CHECK(short_of.stalled);
  CHECK(short_of.offloaded_tasks == 0);
}

TEST_CASE("a task that fits pays no offload even when offload is allowed", "[memory][simulation]") {
  const std::string body = R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "a", "working_set": "60 GB", "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}], "memory": {"max_offload": 1})";
  const auto run = simulate(unit_scenario(body));
  CHECK(run.summary.offloaded_tasks == 0);
  CHECK(run.trace.tasks[0].compute_start_s == run.trace.tasks[0].start_s);
}

TEST_CASE("weights come from storage the first time a node loads them, then from its host memory", "[memory][simulation]") {
  // One 100 GB GPU; two 60 GB models cannot both stay. Storage reads at 10 GB/s (100 us), the host
  // link at 50 GB/s (two 2 us hops). A at 0 s reads m from storage (6 s); B at 10 s evicts m and reads
  // m2 from storage; A again at 20 s loads m from host memory, which kept it (1.2 s).
  const std::string body = R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1}],
                                "storage": {"bandwidth": "10 GB/s", "latency": "100 us"}},
      "workflows": {"a": {"tasks": [{"name": "t", "model": {"id": "m", "weights": "60 GB"}, "work": {"flop": "100 TFLOP"}}]},
                    "b": {"tasks": [{"name": "t", "model": {"id": "m2", "weights": "60 GB"}, "work": {"flop": "100 TFLOP"}}]}},
      "workload": [{"workflow": "a", "arrival": {"process": "times", "times": ["0 s", "20 s"]}},
                   {"workflow": "b", "arrival": {"process": "times", "times": ["10 s"]}}])";
  const auto run = simulate(unit_scenario(body));
  REQUIRE(run.trace.weight_loads.size() == 3);
  std::vector<std::pair<double, bool>> loads;
  for (const WeightLoad& w : run.trace.weight_loads) loads.emplace_back(w.start_s, w.from_storage);
  std::sort(loads.begin(), loads.end());
  CHECK(loads[0].second);
  CHECK(loads[1].second);
  CHECK_FALSE(loads[2].second);
  for (const WeightLoad& w : run.trace.weight_loads) {
    const double expected = w.from_storage ? 60e9 / 10e9 + 100e-6 + 4e-6 : 60e9 / 50e9 + 4e-6;
    CHECK(w.end_s - w.start_s == Approx(expected).epsilon(1e-9));
  }
  CHECK(run.summary.storage_reads == 2);
  CHECK(run.summary.storage_bytes == Approx(120e9));
  // Without storage every load comes from host memory.
  const auto plain = simulate(unit_scenario(body.substr(0, body.find(",\n                                \"storage\"")) + "}," +
                                            body.substr(body.find("\"workflows\""))));
  CHECK(plain.summary.storage_reads == 0);
  CHECK(plain.summary.weight_loads == 3);
}

TEST_CASE("MIG splits a GPU into instances with their share of compute and VRAM and no peer-to-peer", "[memory][mig]") {
  // One 100 GB, 100 TFLOP/s GPU as two instances: 50 GB and 50 TFLOP/s each. p1 and p2 (100 TFLOP each)
  // run side by side in 2 s; c reads 10 GB from each, the one from the other instance staged through host
  // memory over the 50 GB/s host link (up two 2 us hops, down two): 0.2 s + 8 us.
  const auto run = simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "mig": {"slices": 2}}]},
      "workflows": {"w": {"tasks": [{"name": "p1", "work": {"flop": "100 TFLOP"}}, {"name": "p2", "work": {"flop": "100 TFLOP"}},
                                   {"name": "c", "working_set": "45 GB", "work": {"flop": "1 TFLOP"}}],
                         "edges": [{"from": "p1", "to": "c", "bytes": "1 GB"}, {"from": "p2", "to": "c", "bytes": "10 GB"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  REQUIRE(run.cluster.gpu_count() == 2);
  CHECK(run.cluster.gpu_name(make_id<GpuId>(1)) == "n0.g0.m1");
  CHECK(run.cluster.gpu_type(make_id<GpuId>(0)).vram_bytes == Approx(50e9));
  const auto& t = run.trace.tasks;
  CHECK(t[0].end_s == Approx(2.0));
  CHECK(t[1].end_s == Approx(2.0));
  CHECK(index(run.trace.gpus[t[0].gpu_begin]) != index(run.trace.gpus[t[1].gpu_begin]));
  CHECK(t[2].compute_start_s - t[2].start_s == Approx(10e9 / 50e9 + 8e-6).epsilon(1e-9));
  // Each instance costs its share: the two together cost what the GPU does.
  CHECK(run.summary.cost_usd == Approx(1.0 * run.summary.end_s / 3600).epsilon(1e-9));
}

TEST_CASE("MIG settings and instance names are checked", "[memory][mig][errors]") {
  const auto error = [](const std::string& mig, const std::string& faults = "") {
    return fleetsim::test::scenario_error(R"({"name": "s", "catalog": ["unit-catalog.json"],
        "cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "mig": )" + mig + R"(}]},
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}])" + faults + "}");
  };
  CHECK(error(R"({"slices": 7, "vram": "10 GB"})") == "");
  CHECK_THAT(error(R"({"slices": 8})"), Catch::Contains("/cluster/nodes/0/mig/slices"));
  CHECK_THAT(error(R"({"slices": 4, "vram": "30 GB"})"), Catch::Contains("/cluster/nodes/0/mig/vram: 4 slices of 30 GB exceed the GPU's 100 GB"));
  // A failure names a whole GPU (all its instances) or one instance.
  const Scenario whole = unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1, "mig": {"slices": 3}}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}],
      "faults": {"events": [{"at": "1 s", "gpu": "n0.g1"}, {"at": "2 s", "gpu": "n0.g0.m2"}]})");
  REQUIRE(whole.faults.events.size() == 2);
  CHECK(whole.faults.events[0].gpu_first == 3);
  CHECK(whole.faults.events[0].gpu_count == 3);
  CHECK(whole.faults.events[1].gpu_first == 2);
  CHECK(whole.faults.events[1].gpu_count == 1);
  CHECK_THAT(error(R"({"slices": 2})", R"(, "faults": {"events": [{"at": "1 s", "gpu": "n0.g0.m2"}]})"), Catch::Contains("no GPU \"n0.g0.m2\""));
}

TEST_CASE("a tenant with private GPUs shares no GPU's MIG instances with another tenant", "[memory][mig][pinning]") {
  const auto run = [](bool isolated) {
    return simulate(unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-1", "count": 1, "mig": {"slices": 2}}]},
        "tenants": [{"name": "a", "private_gpus": )" + std::string(isolated ? "true" : "false") + R"(}, {"name": "b"}],
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]}},
        "workload": [{"tenant": "a", "workflow": "w", "arrival": {"process": "once"}},
                     {"tenant": "b", "workflow": "w", "arrival": {"process": "once"}}])"));
  };
  // Shared: both instances busy at once, both done at 2 s. Private: b waits for a's instance to free the GPU.
  CHECK(run(false).summary.makespan_s == Approx(2.0));
  const auto isolated = run(true);
  CHECK(isolated.summary.makespan_s == Approx(4.0));
  CHECK(isolated.trace.tasks[1].start_s == Approx(2.0));
}
