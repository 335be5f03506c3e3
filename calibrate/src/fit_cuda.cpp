// The CUDA calibration's fits, apart from the GPU: which catalog entries a machine's GPUs are, and
// the measured points turned into catalog figures, as the CPU calibration fits them.
#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/catalog.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/fit.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/nccl_tests.hpp"
#include "fleetsim/units.hpp"
#include "measure.hpp"

namespace fleetsim {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// CUDA device names as the driver reports them ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB",
// "NVIDIA H100 PCIe", "NVIDIA GeForce RTX 4090"). A name matches when it holds every `has` word and
// no `lacks` word; the first match wins. Variants the catalog has no entry for (H100 NVL, A100 40GB,
// A100 PCIe) match nothing, so they are named with --gpu-type rather than calibrated as a neighbour.
struct NameRule {
  std::array<std::string_view, 2> has;
  std::array<std::string_view, 2> lacks;
  std::string_view gpu_type;
};
constexpr NameRule kNameRules[] = {
    {{"h200", ""}, {"nvl", ""}, "h200-sxm"},
    {{"h100", "pcie"}, {"nvl", ""}, "h100-pcie"},
    {{"h100", ""}, {"nvl", "pcie"}, "h100-sxm"},
    {{"a100", "80gb"}, {"pcie", ""}, "a100-sxm-80gb"},
    {{"l40s", ""}, {"", ""}, "l40s"},
    {{"rtx 4090", ""}, {"laptop", ""}, "rtx-4090"},
    {{"b200", ""}, {"", ""}, "b200"},
};

bool matches(const std::string& name, const NameRule& rule) {
  for (std::string_view word : rule.has) {
    if (!word.empty() && name.find(word) == std::string::npos) return false;
  }
  for (std::string_view word : rule.lacks) {
    if (!word.empty() && name.find(word) != std::string::npos) return false;
  }
  return true;
}

// The dtypes the CUDA backend runs as cuBLAS GEMMs of their own type (fp8 and int8 run as bf16).
constexpr Dtype kGemmDtypes[] = {Dtype::fp64, Dtype::fp32, Dtype::tf32, Dtype::bf16, Dtype::fp16};

// How far the kernel-time model's public constants are from this GPU: the median of its predicted
// over the measured time, for bf16 squares large enough to be compute-bound (2048 and up) and for
// triads well beyond the L2 cache (a triad is the add class: two arrays read, one written).
void fit_kernel_model(const std::vector<Measurement>& measurements, GpuCalibration& gpu) {
  const GpuType* type = Catalog::builtin().gpu(gpu.id);
  if (type == nullptr) return;
  const KernelModel model(*type);
  std::vector<double> compute, memory;
  for (const Measurement& m : measurements) {
    if (m.seconds <= 0) continue;
    if (m.kernel == "gemm-square" && m.dtype == Dtype::bf16 && m.size >= 2048) {
      compute.push_back(model.estimate({.cls = KernelClass::gemm, .m = m.size, .n = m.size, .k = m.size}, Dtype::bf16).time_s() / m.seconds);
    }
    if (m.kernel == "stream" && m.size >= 8 * type->l2_bytes) {
      const double rows = m.size / (3 * dtype_bytes(Dtype::fp32) * 1024);
      memory.push_back(model.estimate({.cls = KernelClass::add, .m = rows, .n = 1024}, Dtype::fp32).time_s() / m.seconds);
    }
  }
  if (!compute.empty()) gpu.kernel_compute_scale = measure::median_of(compute);
  if (!memory.empty()) gpu.kernel_memory_scale = measure::median_of(memory);
}

void fit_gpu(Profile& p, const std::string& gpu_type) {
  GpuCalibration gpu{.id = gpu_type, .peak_flop_per_s = {}, .memory_bandwidth_Bps = {}, .launch_overhead_s = {}, .kernel_compute_scale = {}, .kernel_memory_scale = {}};
  // As on the CPU: task FLOP and bytes are charged with no fixed part (launches are measured on their
  // own), so those fits go through the origin.
  for (Dtype d : kGemmDtypes) {
    const measure::Points points = measure::points_of(p.measurements, "gemm", d);
    if (!points.sizes.empty()) gpu.peak_flop_per_s[static_cast<std::size_t>(d)] = fit_rate(points.sizes, points.seconds).rate;
  }
  const measure::Points stream = measure::points_of(p.measurements, "stream", Dtype::fp32);
  if (!stream.sizes.empty()) gpu.memory_bandwidth_Bps = fit_rate(stream.sizes, stream.seconds).rate;
  const measure::Points launch = measure::points_of(p.measurements, "launch", Dtype::fp32);
  if (!launch.seconds.empty()) gpu.launch_overhead_s = measure::median_of(launch.seconds);
  fit_kernel_model(p.measurements, gpu);
  p.gpus.push_back(gpu);
}

void fit_host_link(Profile& p, const NodeType& node) {
  const measure::Points h2d = measure::points_of(p.measurements, "memcpy-h2d", Dtype::fp32);
  if (h2d.sizes.size() < 2) {
    p.provenance.emplace_back("host link fit", "none: fewer than two host-to-device copy sizes");
    return;
  }
  // Weight loads, the host link's traffic in the model, go host to device.
  const AlphaBeta fit = fit_alpha_beta(h2d.sizes, h2d.seconds);
  p.links.push_back({.id = node.host_link, .bandwidth_Bps = fit.rate, .latency_s = fit.alpha_s});
  p.provenance.emplace_back("host link fit", node.host_link + " from memcpy-h2d (pinned host memory, alpha-beta)");
}

// The GPU link as `fleetsim import nccl-tests` fits it: the all-reduce sweep read as an nccl-tests log.
bool fit_gpu_link_from_nccl(Profile& p, const CudaFitTarget& target) {
  if (target.gpus < 2 || !target.nccl_algo) return false;
  NcclTestsLog log;
  log.file = "the all-reduce sweep of this calibration";
  log.ranks = target.gpus;
  log.hosts = {"localhost"};
  for (const Measurement& m : p.measurements) {
    if (m.kernel != collective_op_name(CollectiveOp::all_reduce)) continue;
    NcclTestsRow row;
    row.bytes = m.size;
    row.count = static_cast<std::uint64_t>(m.size / sizeof(float));
    row.type = "float";
    row.redop = "sum";
    row.out_of_place = nccl_tests_result(CollectiveOp::all_reduce, target.gpus, m.size, m.seconds);
    log.rows.push_back(row);
  }
  if (log.rows.size() < 2) return false;
  const NcclTestsFit fit = fit_nccl_tests(log, CollectiveOp::all_reduce, *target.nccl_algo, target.node_type);
  p.links.push_back(fit.profile.links.front());
  p.provenance.emplace_back("gpu link fit", fit.link_id + " from all-reduce over " + std::to_string(target.gpus) + " GPUs (NCCL, " +
                                                std::string(collective_algo_name(*target.nccl_algo)) +
                                                "; exact at the smallest size's time and the largest size's bus bandwidth)");
  return true;
}

bool fit_gpu_link_from_peer_copies(Profile& p, const NodeType& node) {
  const measure::Points peer = measure::points_of(p.measurements, "peer-copy", Dtype::fp32);
  if (peer.sizes.size() < 2) return false;
  const AlphaBeta fit = fit_alpha_beta(peer.sizes, peer.seconds);  // every pair's points together
  p.links.push_back({.id = node.gpu_link, .bandwidth_Bps = fit.rate, .latency_s = fit.alpha_s});
  p.provenance.emplace_back("gpu link fit", node.gpu_link + " from peer-copy over every pair (peer access enabled, alpha-beta)");
  return true;
}

}  // namespace

std::optional<std::string> catalog_gpu_of_device(std::string_view device_name) {
  const std::string name = lower(device_name);
  for (const NameRule& rule : kNameRules) {
    if (matches(name, rule)) return std::string(rule.gpu_type);
  }
  return std::nullopt;
}

std::string node_type_for(std::string_view gpu_type, std::size_t gpus) {
  const NodeType* best = nullptr;
  for (const auto& [id, node] : Catalog::builtin().nodes()) {  // sorted by id: ties go to the first
    if (node.gpu != gpu_type || static_cast<std::size_t>(node.gpus) < gpus) continue;
    if (best == nullptr || node.gpus < best->gpus) best = &node;
  }
  return best != nullptr ? best->id : std::string();
}

void fit_cuda_profile(Profile& p, const CudaFitTarget& target) {
  fit_gpu(p, target.gpu_type);
  if (target.node_type.empty()) {
    p.provenance.emplace_back("link fits", "none: no catalog node type holds " + target.gpu_type + " (name one with --node-type)");
    return;
  }
  const NodeType* node = Catalog::builtin().node(target.node_type);
  if (node == nullptr) throw InputError({Problem{"--node-type", "", "unknown node type \"" + target.node_type + "\" (fleetsim catalog lists them)"}});
  fit_host_link(p, *node);
  if (node->gpu_link == node->host_link) {
    p.provenance.emplace_back("gpu link fit", "none: " + node->gpu_link + " is also the host link, fitted from the host-to-device copies");
    return;
  }
  try {
    if (fit_gpu_link_from_nccl(p, target)) return;
  } catch (const InputError& e) {  // measured for minutes: keep the rest of the profile, say why
    p.provenance.emplace_back("gpu link fit from NCCL", std::string("none: ") + e.what());
  }
  if (fit_gpu_link_from_peer_copies(p, *node)) return;
  p.provenance.emplace_back("gpu link fit", target.gpus < 2 ? "none: one local GPU" : "none: neither an NCCL all-reduce sweep with a known algorithm nor peer copies with peer access");
}

}  // namespace fleetsim
