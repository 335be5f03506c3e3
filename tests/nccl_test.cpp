// NCCL's cost model as fleetsim reproduces it: graphs and tables worked out by hand from NCCL's source
// (src/graph/search.cc and tuning.cc, 2.30), the flow model agreeing with the model on an idle
// network, and rows of reports/collectives.md pinned, so a change that breaks fidelity fails here.
#include <catch2/catch.hpp>
#include <cmath>

#include "fleetsim/cluster.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/nccl.hpp"
#include "fleetsim/nccl_tests.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/topology.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

struct Box {
  ClusterSpec spec;
  Cluster cluster;
  Topology topology;
  explicit Box(ClusterSpec s) : spec(std::move(s)), cluster(spec), topology(cluster, spec.fabric) {}
  Box(const std::string& node, int count) : Box(cluster_of(node, count)) {}
};

std::vector<GpuId> first(std::uint32_t n) {
  std::vector<GpuId> g;
  for (std::uint32_t i = 0; i < n; ++i) g.push_back(make_id<GpuId>(i));
  return g;
}

NcclModel model_of(const Box& b, std::uint32_t gpus) { return NcclModel(*nccl_comm(b.cluster, first(gpus))); }

}  // namespace

TEST_CASE("NCCL's view of the catalog boxes", "[nccl]") {
  const Box a100("hgx-a100-8", 2), h100("hgx-h100-8", 1), l40s("l40s-pcie-8", 1), cpu("cpu-host", 1);
  const NcclComm c = *nccl_comm(a100.cluster, first(16));
  CHECK(c.arch == GpuArch::ampere);
  CHECK(c.nodes == 2);
  CHECK(c.ranks == 16);
  CHECK(c.nvlink);
  CHECK_FALSE(c.nvls);  // Ampere has no NVLink SHARP
  CHECK(c.intra_GBps == Approx(240));
  CHECK(c.nic_GBps == Approx(25));
  CHECK(c.gpu_nic_GBps == Approx(24));
  CHECK(c.rails == 8);
  CHECK(c.cpu == CpuVendor::amd);
  CHECK(nccl_comm(h100.cluster, first(8))->nvls);
  CHECK_FALSE(nccl_comm(l40s.cluster, first(8))->nvlink);
  CHECK_FALSE(nccl_comm(cpu.cluster, first(2)).has_value());  // CPU workers: the link model
}

TEST_CASE("NCCL's topology search, worked by hand", "[nccl]") {
  // H100, one node: NVLink 18 x 20.6 = 370.8 GB/s. Ring: 60 GB/s fits 6 channels (360), no slower
  // speed beats it; duplicated to 12 x 30. Tree: 12 channels at the fastest speed with 12 x s <= 370.8:
  // 30. NVLS: 8 heads, each GPU carrying 9 x s: 40; the inter bandwidth rises to 60 (< 2 x 40).
  const NcclModel h100 = model_of(Box("hgx-h100-8", 1), 8);
  CHECK(h100.graph(CollectiveAlgo::ring).channels == 12);
  CHECK(h100.graph(CollectiveAlgo::ring).intra_GBps == 30);
  CHECK(h100.graph(CollectiveAlgo::tree).intra_GBps == 30);
  CHECK(h100.graph(CollectiveAlgo::nvls).channels == 8);
  CHECK(h100.graph(CollectiveAlgo::nvls).intra_GBps == 40);
  CHECK(h100.graph(CollectiveAlgo::nvls).inter_GBps == 60);
  // A100: 12 x 20 = 240 GB/s; 40 GB/s fills it with 6 channels (perfect), duplicated to 12 x 20.
  const NcclModel a100 = model_of(Box("hgx-a100-8", 1), 8);
  CHECK(a100.graph(CollectiveAlgo::ring).channels == 12);
  CHECK(a100.graph(CollectiveAlgo::ring).intra_GBps == 20);
  CHECK(a100.graph(CollectiveAlgo::nvls).channels == 0);
  // B200: 18 x 40.1 = 721.8: 8 x 90 (720), duplicated to 16 x 45; NVLS 8 heads at 80 (9 x 80 = 720).
  const NcclModel b200 = model_of(Box("hgx-b200-8", 1), 8);
  CHECK(b200.graph(CollectiveAlgo::ring).channels == 16);
  CHECK(b200.graph(CollectiveAlgo::ring).intra_GBps == 45);
  CHECK(b200.graph(CollectiveAlgo::nvls).intra_GBps == 80);
  CHECK(b200.graph(CollectiveAlgo::nvls).inter_GBps == 90);
  // Two H100 nodes, 8 NDR NICs behind PCIe Gen5 (48 GB/s): one channel of 48 per rail, 8 x 48 = 384
  // >= 370.8 stops the search; 48 < 50 with 8 channels keeps them as they are. NVLS tree: 8 heads at
  // 40 inside (9 x 40 <= 370.8), 48 between nodes.
  const NcclModel two = model_of(Box("hgx-h100-8", 2), 16);
  CHECK(two.graph(CollectiveAlgo::ring).channels == 8);
  CHECK(two.graph(CollectiveAlgo::ring).inter_GBps == 48);
  CHECK(two.graph(CollectiveAlgo::nvls_tree).channels == 8);
  CHECK(two.graph(CollectiveAlgo::nvls_tree).intra_GBps == 40);
  CHECK(two.graph(CollectiveAlgo::nvls_tree).inter_GBps == 48);
}

TEST_CASE("NCCL's tuning table and choice, worked by hand", "[nccl]") {
  const NcclModel h100 = model_of(Box("hgx-h100-8", 1), 8);
  // NVLS all-reduce: 8 channels x min(40 x 0.85 x 7/8 x 2, 60) = 476 GB/s of bus bandwidth, x 8/14;
  // latency: the NVLink NVLS figure, 25 us.
  const auto nvls = h100.cost(CollectiveOp::all_reduce, CollectiveAlgo::nvls, CollectiveProto::simple);
  CHECK(nvls.bw_GBps == Approx(476.0 * 8 / 14));
  CHECK(nvls.latency_us() == Approx(25));
  // Ring LL128: min(360 x 0.92, 12 x 36.7) x 8/14; 14 + 14 x 1.9 us.
  const auto ll128 = h100.cost(CollectiveOp::all_reduce, CollectiveAlgo::ring, CollectiveProto::ll128);
  CHECK(ll128.bw_GBps == Approx(360 * 0.92 * 8 / 14));
  CHECK(ll128.latency_us() == Approx(14 + 14 * 1.9));
  // Tree: all-reduce only; NVLS is not for broadcast.
  CHECK(h100.cost(CollectiveOp::all_gather, CollectiveAlgo::tree, CollectiveProto::simple).bw_GBps == 0);
  CHECK(h100.cost(CollectiveOp::broadcast, CollectiveAlgo::nvls, CollectiveProto::simple).bw_GBps == 0);
  // The cheapest entry wins: LL for 64 KiB (15 + 65536 / 80571 us against NVLS's 25 + ...), NVLS at 1 GiB.
  CHECK(h100.estimate(CollectiveOp::all_reduce, 65536)->proto == CollectiveProto::ll);
  CHECK(h100.estimate(CollectiveOp::all_reduce, 1 << 30)->algo == CollectiveAlgo::nvls);
  // A100 has no NVLS: its ring runs LL, then LL128, then Simple, switching where the lines cross
  // (LL128 40.6 us at 126.2 GB/s against Simple 56 us at 137.1 GB/s: at 23.3 MiB).
  const NcclModel a100 = model_of(Box("hgx-a100-8", 1), 8);
  CHECK(a100.estimate(CollectiveOp::all_reduce, 22 << 20)->proto == CollectiveProto::ll128);
  CHECK(a100.estimate(CollectiveOp::all_reduce, 25 << 20)->proto == CollectiveProto::simple);
  // Restricted as NCCL_ALGO and NCCL_PROTO restrict it; nothing to run is no value.
  CHECK(h100.estimate(CollectiveOp::all_reduce, 1 << 30, CollectiveAlgo::ring)->algo == CollectiveAlgo::ring);
  CHECK_FALSE(h100.estimate(CollectiveOp::all_reduce, 1 << 30, CollectiveAlgo::nvls, CollectiveProto::ll).has_value());
  // Small messages cost tens of microseconds on every 8-GPU box, not a few.
  for (const char* node : {"hgx-a100-8", "hgx-h100-8", "hgx-h200-8", "hgx-b200-8"}) {
    INFO(node);
    const double t = model_of(Box(node, 1), 8).estimate(CollectiveOp::all_reduce, 1 << 20)->time_s();
    CHECK(t > 10e-6);
    CHECK(t < 100e-6);
  }
}

TEST_CASE("on an idle network the flow model times every algorithm as the model does", "[nccl][network]") {
  for (int nodes : {1, 2}) {
    const Box b("hgx-h100-8", nodes);
    const auto gpus = first(static_cast<std::uint32_t>(8 * nodes));
    const NcclModel model(*nccl_comm(b.cluster, gpus));
    for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                            CollectiveOp::broadcast, CollectiveOp::reduce, CollectiveOp::all_to_all, CollectiveOp::send_recv}) {
      for (double bytes : {4096.0, 1e6, 1e9}) {
        const auto plan = plan_collective(b.cluster, b.topology, op, CollectiveAlgo::automatic, gpus, bytes);
        INFO(nodes << " nodes, " << collective_op_name(op) << ", " << bytes << " B, " << collective_algo_name(plan.algo));
        const double expected = model.estimate(op, bytes)->time_s();
        CHECK(simulated_time_s(b.topology, plan) == Approx(expected).epsilon(1e-9));
        CHECK(analytical_time_s(b.topology, plan) == Approx(expected).epsilon(1e-9));
      }
    }
  }
}

TEST_CASE("two all-reduces sharing NVLinks slow each other, on separate GPUs they do not", "[nccl][network]") {
  const Box b("hgx-h100-8", 1);
  const double S = 1e9;
  const auto ring = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, first(8), S);
  const double alone = simulated_time_s(b.topology, ring);
  const std::vector<CollectivePlan> both{ring, ring};
  const auto times = simulated_times_s(b.topology, both);
  // Each GPU's NVLink (450 GB/s) now carries two rings' 2 x 7/8 x S: half the link each, slower than
  // the ring's own cap.
  CHECK(times[0] == Approx(2.0 * 7 / 8 * S / 225e9 + ring.steps[0][0].latency_s).epsilon(1e-6));
  CHECK(times[0] > alone);
}

TEST_CASE("large all-reduces on 8-GPU boxes stay near NCCL's model and within the NVLink bound", "[nccl]") {
  // Ring bus bandwidth cannot exceed a GPU's NVLink rate; NVLS's by at most 2(n-1)/n.
  for (const auto& [node, nvlink_GBps] : {std::pair{"hgx-a100-8", 300.0}, {"hgx-h100-8", 450.0}, {"hgx-h200-8", 450.0}, {"hgx-b200-8", 900.0}}) {
    const Box b(node, 1);
    for (double bytes : {1073741824.0, 8589934592.0}) {
      INFO(node << " " << bytes);
      const CollectivePoint p = collective_point(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, first(8), bytes);
      const double nccl_busbw = bytes / p.nccl_s * 1.75;
      CHECK(std::abs(p.busbw_Bps / nccl_busbw - 1) <= 0.10);
      CHECK(p.busbw_Bps <= nvlink_GBps * 1e9 * (p.algo == CollectiveAlgo::nvls ? 1.75 : 1.0));
    }
  }
}

namespace {

CollectiveErrors against_vidur(const std::string& file, const std::string& cluster_file_or_node, CollectiveOp op, std::uint32_t gpus,
                               std::vector<CollectivePoint>* points = nullptr) {
  const MeasuredCollective m = load_measured_collective(test::source_dir() + "/calibrate/data/vidur/" + file);
  const std::string clusters = test::source_dir() + "/calibrate/data/vidur/clusters/";
  const Box b(cluster_file_or_node.ends_with(".json") ? load_cluster(clusters + cluster_file_or_node) : cluster_of(cluster_file_or_node, 1));
  std::vector<CollectivePoint> local;
  std::vector<CollectivePoint>& out = points != nullptr ? *points : local;
  for (const auto& [bytes, seconds] : m.rows) out.push_back(collective_point(b.cluster, b.topology, op, CollectiveAlgo::automatic, first(gpus), bytes));
  return collective_errors(out, m);
}

}  // namespace

TEST_CASE("predictions against Vidur's measured NCCL times (rows of reports/collectives.md)", "[nccl][validation]") {
  // The headline: median |error| within 10% on every set the model is judged on.
  CHECK(against_vidur("a100_dgx_all_reduce_8gpus_8pernode.csv", "hgx-a100-8", CollectiveOp::all_reduce, 8).median_abs <= 0.10);
  CHECK(against_vidur("a100_dgx_all_reduce_2gpus_2pernode.csv", "hgx-a100-8", CollectiveOp::all_reduce, 2).median_abs <= 0.10);
  CHECK(against_vidur("h100_dgx_all_reduce_4gpus_4pernode.csv", "h100-nvls-off.json", CollectiveOp::all_reduce, 4).median_abs <= 0.10);
  CHECK(against_vidur("a100_dgx_send_recv_2gpus_2pernode.csv", "hgx-a100-8", CollectiveOp::send_recv, 2).median_abs <= 0.10);
  CHECK(against_vidur("h100_dgx_send_recv_2gpus_1pernode.csv", "h100-2x1.json", CollectiveOp::send_recv, 2).median_abs <= 0.10);
  // Rows: 8 H100s without NVLS at 64 MiB (measured 322 us: ring Simple) and at 16 MiB (115 us: LL128).
  std::vector<CollectivePoint> points;
  const CollectiveErrors h100 = against_vidur("h100_dgx_all_reduce_8gpus_8pernode.csv", "h100-nvls-off.json", CollectiveOp::all_reduce, 8, &points);
  CHECK(h100.median_abs <= 0.10);
  for (const CollectivePoint& p : points) {
    if (p.bytes == 67108864) {
      CHECK(p.algo == CollectiveAlgo::ring);
      CHECK(p.proto == CollectiveProto::simple);
      CHECK(p.time_s == Approx(322e-6).epsilon(0.10));
    }
    if (p.bytes == 16777216) {
      CHECK(p.proto == CollectiveProto::ll128);
      CHECK(p.time_s == Approx(115e-6).epsilon(0.10));
    }
  }
}

TEST_CASE("a malformed NCCL constants file is refused by field", "[nccl][input]") {
  auto error_of = [](const std::string& text) {
    try {
      parse_nccl_constants(text, "k.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK_THAT(error_of("{"), Catch::Contains("k.json"));
  CHECK_THAT(error_of(R"({"version": "x"})"), Catch::Contains("base_latency_us"));
  // The built-in file, with one array cut short, names that field.
  const std::string text = read_text_file(test::source_dir() + "/models/nccl.json");
  std::string broken = text;
  broken.replace(broken.find("[6.6, 14.0, 8.4]"), 16, "[6.6, 14.0]");
  CHECK_THAT(error_of(broken), Catch::Contains("/base_latency_us/ring") && Catch::Contains("array of 3"));
  CHECK(error_of(text).empty());
}

TEST_CASE("measured collectives are read strictly", "[nccl][input]") {
  auto error_of = [](const std::string& text) {
    try {
      parse_measured_collective(text, "m.csv");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(error_of("bytes,time_us\n1024,10\n2048,12\n").empty());
  CHECK_THAT(error_of("bytes,time\n1024,10\n"), Catch::Contains("expected the header"));
  CHECK_THAT(error_of("bytes,time_us\n1024,fast\n"), Catch::Contains("m.csv") && Catch::Contains("line 2, column time_us"));
  CHECK_THAT(error_of("bytes,time_us\n1024,10,3\n"), Catch::Contains("two numbers"));
  CHECK_THAT(error_of("bytes,time_us\n0,10\n"), Catch::Contains("positive size"));
  CHECK_THAT(error_of("bytes,time_us\n"), Catch::Contains("found none"));
  CHECK_THAT(error_of("bytes,time_us\n1024,10\n1024,11\n"), Catch::Contains("appears twice"));
  // Not numbers, though strtod and from_chars read them as such.
  CHECK_THAT(error_of("bytes,time_us\n1024,inf\n"), Catch::Contains("line 2, column time_us: expected a number, found \"inf\""));
  CHECK_THAT(error_of("bytes,time_us\n1024,nan\n"), Catch::Contains("line 2, column time_us: expected a number, found \"nan\""));
  CHECK_THAT(error_of("bytes,time_us\ninf,10\n"), Catch::Contains("line 2, column bytes: expected a number, found \"inf\""));
  // Numbers, but not a size or a time a run can have.
  CHECK_THAT(error_of("bytes,time_us\n1e300,10\n"), Catch::Contains("line 2, column bytes: expected a size of at most 2^50 bytes, found \"1e300\""));
  CHECK_THAT(error_of("bytes,time_us\n1024,1e-300\n"), Catch::Contains("line 2, column time_us: expected a time from 0.001 to 1e10 microseconds"));
}
