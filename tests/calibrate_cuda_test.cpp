// The CUDA calibration's parts that need no GPU: naming the catalog entries of a machine's GPUs, the
// nccl-tests figures of a timed collective, and the fits of CUDA-like measurements into a profile
// that the simulator reads back unchanged.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/nccl_tests.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/scenario.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

const std::string kNcclLog = test::source_dir() + "/tests/data/nccl-tests/all_reduce_8ranks.log";

std::string provenance(const Profile& p, const std::string& key) {
  for (const auto& [k, v] : p.provenance) {
    if (k == key) return v;
  }
  return "";
}

const LinkCalibration* link(const Profile& p, const std::string& id) {
  for (const LinkCalibration& l : p.links) {
    if (l.id == id) return &l;
  }
  return nullptr;
}

// What an H100 would measure if it ran each kernel at exactly these rates: GEMM tiles per dtype,
// triads, launches, and pinned host-to-device copies with a fixed cost.
constexpr double kFp32_flops = 5.0e13, kBf16_flops = 7.0e14, kMemory_Bps = 3.0e12, kLaunch_s = 2.5e-6;
constexpr double kHostLatency_s = 9e-6, kHost_Bps = 5.5e10;

Profile synthetic_h100_measurements() {
  Profile p;
  const double tile = 2.0 * 4096.0 * 4096.0 * 4096.0;
  for (int tiles : {1, 2, 4, 8}) {
    p.measurements.push_back({"gemm", Dtype::fp32, tiles * tile, tiles * tile / kFp32_flops, ""});
    p.measurements.push_back({"gemm", Dtype::bf16, tiles * tile, tiles * tile / kBf16_flops, ""});
  }
  p.measurements.push_back({"gemm-square", Dtype::bf16, 256, 1e-5, ""});  // a small square: not fitted
  for (double bytes : {2e8, 4e8, 8e8, 1.6e9}) p.measurements.push_back({"stream", Dtype::fp32, bytes, bytes / kMemory_Bps, ""});
  p.measurements.push_back({"launch", Dtype::fp32, 0, kLaunch_s, ""});
  for (double bytes : {4096.0, 65536.0, 1048576.0, 16777216.0, 268435456.0}) {
    p.measurements.push_back({"memcpy-h2d", Dtype::fp32, bytes, kHostLatency_s + bytes / kHost_Bps, "host->0"});
    p.measurements.push_back({"memcpy-d2h", Dtype::fp32, bytes, 2 * kHostLatency_s + bytes / kHost_Bps, "0->host"});
  }
  return p;
}

}  // namespace

TEST_CASE("CUDA device names map to the catalog's GPU types, and unknown variants to none", "[calibrate][cuda]") {
  CHECK(catalog_gpu_of_device("NVIDIA H100 80GB HBM3") == "h100-sxm");
  CHECK(catalog_gpu_of_device("NVIDIA H100 PCIe") == "h100-pcie");
  CHECK(catalog_gpu_of_device("NVIDIA H200") == "h200-sxm");
  CHECK(catalog_gpu_of_device("NVIDIA A100-SXM4-80GB") == "a100-sxm-80gb");
  CHECK(catalog_gpu_of_device("NVIDIA L40S") == "l40s");
  CHECK(catalog_gpu_of_device("NVIDIA GeForce RTX 4090") == "rtx-4090");
  CHECK(catalog_gpu_of_device("NVIDIA B200") == "b200");
  // Variants the catalog has no entry for are named with --gpu-type, not calibrated as a neighbour.
  CHECK_FALSE(catalog_gpu_of_device("NVIDIA H100 NVL"));
  CHECK_FALSE(catalog_gpu_of_device("NVIDIA A100-SXM4-40GB"));
  CHECK_FALSE(catalog_gpu_of_device("NVIDIA A100 80GB PCIe"));
  CHECK_FALSE(catalog_gpu_of_device("NVIDIA GeForce RTX 4090 Laptop GPU"));
  CHECK_FALSE(catalog_gpu_of_device("Tesla V100-SXM2-32GB"));
}

TEST_CASE("the node type calibrated is the smallest that holds the local GPUs", "[calibrate][cuda]") {
  CHECK(node_type_for("h100-sxm", 8) == "hgx-h100-8");
  CHECK(node_type_for("h100-sxm", 1) == "hgx-h100-8");
  CHECK(node_type_for("rtx-4090", 1) == "rtx4090-ws-1");
  CHECK(node_type_for("rtx-4090", 2) == "rtx4090-pcie-2");
  CHECK(node_type_for("rtx-4090", 3) == "rtx4090-pcie-4");
  CHECK(node_type_for("h100-pcie", 1) == "h100-pcie-1");
  CHECK(node_type_for("h100-sxm", 9).empty());
  CHECK(node_type_for("mi300x", 1).empty());  // no catalog node holds it
}

TEST_CASE("a timed collective gets nccl-tests' algbw and busbw, as the log's own columns", "[calibrate][cuda][nccl-tests]") {
  const NcclTestsLog log = load_nccl_tests_log(kNcclLog);
  for (const NcclTestsRow& r : log.rows) {
    const NcclTestsResult got = nccl_tests_result(CollectiveOp::all_reduce, log.ranks, r.bytes, r.out_of_place.time_s);
    CHECK(got.time_s == r.out_of_place.time_s);
    CHECK(got.algbw_Bps == Approx(r.out_of_place.algbw_Bps).epsilon(0.01));  // the log rounds to 10 MB/s
    if (r.out_of_place.busbw_Bps > 5e9) CHECK(got.busbw_Bps == Approx(r.out_of_place.busbw_Bps).epsilon(0.01));
  }
  // The factors are the simulator's (bus_bandwidth_factor): 2(n-1)/n, (n-1)/n, 1.
  CHECK(nccl_tests_result(CollectiveOp::all_reduce, 4, 1e9, 1e-2).busbw_Bps == Approx(1.5e11));
  CHECK(nccl_tests_result(CollectiveOp::all_gather, 4, 1e9, 1e-2).busbw_Bps == Approx(0.75e11));
  CHECK(nccl_tests_result(CollectiveOp::reduce_scatter, 4, 1e9, 1e-2).busbw_Bps == Approx(0.75e11));
  CHECK(nccl_tests_result(CollectiveOp::all_to_all, 4, 1e9, 1e-2).busbw_Bps == Approx(0.75e11));
  CHECK(nccl_tests_result(CollectiveOp::broadcast, 4, 1e9, 1e-2).busbw_Bps == Approx(1e11));
  CHECK(nccl_tests_result(CollectiveOp::send_recv, 4, 1e9, 1e-2).busbw_Bps == Approx(1e11));
}

TEST_CASE("CUDA measurements are fitted to the GPU type and the node's host link", "[calibrate][cuda]") {
  Profile p = synthetic_h100_measurements();
  fit_cuda_profile(p, {.gpu_type = "h100-sxm", .node_type = "hgx-h100-8", .gpus = 1, .nccl_algo = {}});
  REQUIRE(p.gpus.size() == 1);
  const GpuCalibration& g = p.gpus[0];
  CHECK(g.id == "h100-sxm");
  CHECK(*g.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] == Approx(kFp32_flops));
  CHECK(*g.peak_flop_per_s[static_cast<std::size_t>(Dtype::bf16)] == Approx(kBf16_flops));
  CHECK_FALSE(g.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp64)]);  // not measured: the catalog's stays
  CHECK_FALSE(g.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp8)]);
  CHECK(*g.memory_bandwidth_Bps == Approx(kMemory_Bps));
  CHECK(*g.launch_overhead_s == Approx(kLaunch_s));
  const LinkCalibration* host = link(p, "pcie5-x16");
  REQUIRE(host != nullptr);
  CHECK(*host->bandwidth_Bps == Approx(kHost_Bps).epsilon(1e-6));
  CHECK(*host->latency_s == Approx(kHostLatency_s).epsilon(1e-6));
  CHECK(provenance(p, "gpu link fit") == "none: one local GPU");
}

TEST_CASE("the GPU link is fitted from the all-reduce sweep exactly as import nccl-tests fits the same numbers", "[calibrate][cuda][nccl-tests]") {
  const NcclTestsLog log = load_nccl_tests_log(kNcclLog);
  const NcclTestsFit imported = fit_nccl_tests(log, CollectiveOp::all_reduce, CollectiveAlgo::ring, "hgx-h100-8");
  Profile p = synthetic_h100_measurements();
  for (const NcclTestsRow& r : log.rows) p.measurements.push_back({"all-reduce", Dtype::fp32, r.bytes, r.out_of_place.time_s, ""});
  // Peer copies too: the NCCL fit wins over them.
  p.measurements.push_back({"peer-copy", Dtype::fp32, 1e6, 1e-5, "0->1"});
  p.measurements.push_back({"peer-copy", Dtype::fp32, 1e8, 4e-4, "0->1"});
  fit_cuda_profile(p, {.gpu_type = "h100-sxm", .node_type = "hgx-h100-8", .gpus = 8, .nccl_algo = CollectiveAlgo::ring});
  const LinkCalibration* nvlink = link(p, "nvlink4");
  REQUIRE(nvlink != nullptr);
  CHECK(*nvlink->collective_bandwidth_scale == Approx(imported.bandwidth_scale));
  CHECK(*nvlink->collective_latency_scale == Approx(imported.latency_scale));
  CHECK_FALSE(nvlink->bandwidth_Bps.has_value());
  CHECK(provenance(p, "gpu link fit").find("all-reduce over 8 GPUs") != std::string::npos);
}

TEST_CASE("without a known NCCL algorithm the GPU link comes from the peer copies", "[calibrate][cuda]") {
  Profile p = synthetic_h100_measurements();
  const double latency_s = 2e-6, bandwidth_Bps = 3.5e11;
  for (const char* pair : {"0->1", "1->0"}) {
    for (double bytes : {65536.0, 4194304.0, 268435456.0}) p.measurements.push_back({"peer-copy", Dtype::fp32, bytes, latency_s + bytes / bandwidth_Bps, pair});
  }
  p.measurements.push_back({"peer-copy-no-access", Dtype::fp32, 268435456.0, 1e-2, "0->1"});  // not fitted
  p.measurements.push_back({"all-reduce", Dtype::fp32, 1e6, 1e-4, ""});
  p.measurements.push_back({"all-reduce", Dtype::fp32, 1e8, 1e-3, ""});
  fit_cuda_profile(p, {.gpu_type = "h100-sxm", .node_type = "hgx-h100-8", .gpus = 2, .nccl_algo = {}});
  const LinkCalibration* nvlink = link(p, "nvlink4");
  REQUIRE(nvlink != nullptr);
  CHECK(*nvlink->bandwidth_Bps == Approx(bandwidth_Bps).epsilon(1e-6));
  CHECK(*nvlink->latency_s == Approx(latency_s).epsilon(1e-6));
}

TEST_CASE("links are left to the catalog, with the reason in the provenance, where they cannot be fitted", "[calibrate][cuda]") {
  Profile none = synthetic_h100_measurements();
  fit_cuda_profile(none, {.gpu_type = "h100-pcie", .node_type = "", .gpus = 1, .nccl_algo = {}});
  CHECK(none.links.empty());
  CHECK(provenance(none, "link fits").find("--node-type") != std::string::npos);
  // PCIe nodes: the GPU link is the host link's type, fitted once, from the host copies.
  Profile pcie = synthetic_h100_measurements();
  fit_cuda_profile(pcie, {.gpu_type = "l40s", .node_type = "l40s-pcie-8", .gpus = 2, .nccl_algo = CollectiveAlgo::ring});
  REQUIRE(pcie.links.size() == 1);
  CHECK(pcie.links[0].id == "pcie4-x16");
  CHECK(provenance(pcie, "gpu link fit").find("also the host link") != std::string::npos);
  Profile bad = synthetic_h100_measurements();
  CHECK_THROWS_AS(fit_cuda_profile(bad, {.gpu_type = "h100-sxm", .node_type = "hgx-nothing", .gpus = 1, .nccl_algo = {}}), InputError);
}

TEST_CASE("a CUDA profile reads back unchanged and calibrates the scenario's GPUs and links", "[calibrate][cuda]") {
  Profile p = synthetic_h100_measurements();
  p.provenance = {{"backend", "cuda"}, {"device", "NVIDIA H100 80GB HBM3"}, {"compute capability", "9.0"}, {"driver", "12.4"},
                  {"runtime", "12.4"}, {"cublas", "12.4.5"}, {"nccl", "2.21.5"}, {"date", "2026-11-24T05:00:00Z"}};
  fit_cuda_profile(p, {.gpu_type = "h100-sxm", .node_type = "hgx-h100-8", .gpus = 1, .nccl_algo = {}});
  const Profile back = parse_profile(profile_json(p), "cuda.json");
  REQUIRE(back.measurements.size() == p.measurements.size());
  for (std::size_t i = 0; i < p.measurements.size(); ++i) {
    CHECK(back.measurements[i].kernel == p.measurements[i].kernel);
    CHECK(back.measurements[i].devices == p.measurements[i].devices);
  }
  for (const char* key : {"backend", "device", "compute capability", "driver", "runtime", "cublas", "nccl", "date", "host link fit"}) {
    INFO(key);
    CHECK(provenance(back, key) == provenance(p, key));
  }
  ClusterSpec spec = cluster_of("hgx-h100-8", 1);
  CHECK(apply_profile(spec, back) >= 2);  // the GPU type and the host link
  CHECK(spec.groups[0].gpu.peak_flop_per_s[static_cast<std::size_t>(Dtype::bf16)] == Approx(kBf16_flops).epsilon(1e-5));
  CHECK(spec.groups[0].gpu.memory_bandwidth_Bps == Approx(kMemory_Bps).epsilon(1e-5));
}

TEST_CASE("a CUDA profile refines the kernel model: measured squares and triads set its scales, and replaced peaks do not count twice",
          "[calibrate][cuda][kernels]") {
  // An H100 whose large bf16 squares run 20% slower than the public constants predict, and whose
  // triads 10% faster.
  const GpuType& catalog = *Catalog::builtin().gpu("h100-sxm");
  const KernelModel model(catalog);
  auto square = [&](const KernelModel& m, double side) {
    return m.estimate({.cls = KernelClass::gemm, .m = side, .n = side, .k = side}, Dtype::bf16).time_s();
  };
  auto triad = [&](const KernelModel& m, double bytes) {
    return m.estimate({.cls = KernelClass::add, .m = bytes / (3 * 4 * 1024), .n = 1024}, Dtype::fp32).time_s();
  };
  Profile p = synthetic_h100_measurements();
  p.measurements.erase(std::remove_if(p.measurements.begin(), p.measurements.end(), [](const Measurement& m) { return m.kernel == "stream"; }),
                       p.measurements.end());
  for (double side : {2048.0, 4096.0, 8192.0}) p.measurements.push_back({"gemm-square", Dtype::bf16, side, 1.25 * square(model, side), ""});
  for (double bytes : {4e8, 8e8, 1.6e9}) p.measurements.push_back({"stream", Dtype::fp32, bytes, triad(model, bytes) / 1.1, ""});
  fit_cuda_profile(p, {.gpu_type = "h100-sxm", .node_type = "", .gpus = 1, .nccl_algo = {}});
  const Profile back = parse_profile(profile_json(p), "cuda.json");
  REQUIRE(back.gpus.size() == 1);
  CHECK(*back.gpus[0].kernel_compute_scale == Approx(0.8));
  CHECK(*back.gpus[0].kernel_memory_scale == Approx(1.1));

  // Applied, the roofline takes the measured peaks, and the kernel model predicts what was measured.
  ClusterSpec spec = cluster_of("hgx-h100-8", 1);
  apply_profile(spec, back);
  const GpuType& calibrated = spec.groups[0].gpu;
  CHECK(calibrated.peak_for(Dtype::bf16) == Approx(kBf16_flops).epsilon(1e-5));
  const KernelModel refined(calibrated);
  CHECK(square(refined, 8192) == Approx(1.25 * square(model, 8192)).epsilon(0.01));
  CHECK(triad(refined, 1.6e9) == Approx(triad(model, 1.6e9) / 1.1).epsilon(0.01));
  // Without the scales, only the measured peaks: the kernel model stays where its constants put it.
  Profile peaks_only = back;
  peaks_only.gpus[0].kernel_compute_scale.reset();
  peaks_only.gpus[0].kernel_memory_scale.reset();
  ClusterSpec plain = cluster_of("hgx-h100-8", 1);
  apply_profile(plain, peaks_only);
  CHECK(square(KernelModel(plain.groups[0].gpu), 8192) == Approx(square(model, 8192)).epsilon(1e-9));
  CHECK(triad(KernelModel(plain.groups[0].gpu), 1.6e9) == Approx(triad(model, 1.6e9)).epsilon(1e-9));
}
