// The predictions component alone: interned models, and the mean times, upward ranks and totals
// policies order by, on a cluster whose GPU types differ.
#include <catch2/catch.hpp>

#include "../helpers.hpp"
#include "fleetsim/cluster.hpp"
#include "run/predictions.hpp"

using namespace fleetsim;

TEST_CASE("predictions: models interned per shard, mean times over the GPUs, upward ranks", "[run][predictions]") {
  // a (100 TFLOP) feeds b (200 TFLOP, 2 GPUs) and c (100 TFLOP): 1 s, 1 s per GPU share, 1 s on a unit GPU.
  const Scenario sc = test::unit_scenario(R"("cluster": {"nodes": [{"type": "unit-node-2", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "a", "model": {"id": "m", "weights": "2 GB"}, "work": {"flop": "100 TFLOP"}},
                                    {"name": "b", "gpus": 2, "model": {"id": "m", "weights": "4 GB"}, "work": {"flop": "200 TFLOP"}},
                                    {"name": "c", "model": {"id": "m", "weights": "4 GB"}, "work": {"flop": "100 TFLOP"}},
                                    {"name": "d", "work": {"flop": "100 TFLOP"}}],
                          "edges": [{"from": "a", "to": "b"}, {"from": "a", "to": "c"}, {"from": "b", "to": "d"}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])");
  const Cluster cluster(sc.cluster);
  const ComputeModel compute;
  const run::Predictions p(sc, cluster, compute);
  CHECK(p.model(0, 0) == p.model(0, 1));  // 2 GB per GPU either way
  CHECK(p.model(0, 2) != p.model(0, 0));  // 4 GB on one GPU
  CHECK(p.model(0, 3) == kNoModel);
  CHECK(p.mean_s(0, 0) == Approx(1.0).epsilon(1e-3));
  CHECK(p.mean_s(0, 1) == Approx(1.0).epsilon(1e-3));
  // a's rank: itself and the longer of a->b->d (2 s) and a->c (1 s).
  CHECK(p.rank_s(0, 0) == Approx(3.0).epsilon(1e-3));
  CHECK(p.critical_path_s(0) == Approx(3.0).epsilon(1e-3));
  CHECK(p.job_s(0) == Approx(4.0).epsilon(1e-3));
  CHECK(p.job_gpu_s()[0] == Approx(5.0).epsilon(1e-3));  // b holds two GPUs
}
