// A calibration profile: figures measured on real devices (or read from outside measurements) that
// replace the catalog's for the GPU and link types they name, with where and how they were measured.
// `fleetsim calibrate` writes one; `--profile` applies it to a scenario.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fleetsim/catalog.hpp"

namespace fleetsim {

struct ClusterSpec;

struct GpuCalibration {
  std::string id;  // catalog GPU type
  std::array<std::optional<double>, kDtypeCount> peak_flop_per_s;
  std::optional<double> memory_bandwidth_Bps, launch_overhead_s;
  // The kernel-time model's rates on this GPU over what its public constants give (fitted to the
  // measured GEMMs and triad): a refinement of that model, not a replacement.
  std::optional<double> kernel_compute_scale = std::nullopt, kernel_memory_scale = std::nullopt;
  // What all devices of this type on one node stream together, where they share one memory (CPU
  // workers): it becomes their node's memory bus (sim/src/node_shares.hpp).
  std::optional<double> shared_memory_bandwidth_Bps = std::nullopt;
  // What they compute together, in devices' worth (peak_flop_per_s being one device's alone): their
  // node's compute pool.
  std::optional<double> compute_pool_devices = std::nullopt;
};

struct LinkCalibration {
  std::string id;  // catalog link type
  std::optional<double> bandwidth_Bps, latency_s;
  // Corrections of the collective model's latency and bandwidth on this link (fleetsim/nccl.hpp).
  std::optional<double> collective_latency_scale{}, collective_bandwidth_scale{};
};

// One timed run of a microbenchmark: `size` is FLOP (gemm), a matrix side (gemm-square), bytes
// (stream, the copies, and collectives as nccl-tests counts them) or 0 (launch: one call of each
// kernel with next to no work).
struct Measurement {
  // "gemm", "gemm-square", "stream", "memcpy", "launch", "stream-alone" (one CPU worker streaming while
  // the others wait), "stream-beside-gemm" (one streaming while the others run GEMMs), "gemm-alone",
  // "gemm-beside-stream" (the same for a GEMM), a collective ("all-reduce", ...), or a CUDA
  // copy: "memcpy-h2d", "memcpy-d2h" (pinned host memory), "peer-copy" (peer access enabled),
  // "peer-copy-no-access" (not enabled: the driver picks the path).
  std::string kernel;
  Dtype dtype = Dtype::fp32;
  double size = 0;
  double seconds = 0;
  std::string devices;  // where it ran, when that matters: "0->1" for a copy between local GPUs 0 and 1
  double spread = 0;    // the timed repeats' range over their median, (slowest - fastest) / median; 0: not recorded
};

struct Profile {
  std::string file;
  std::vector<std::pair<std::string, std::string>> provenance;  // device, date, command, versions...
  std::vector<GpuCalibration> gpus;
  std::vector<LinkCalibration> links;
  std::vector<Measurement> measurements;  // the raw points the figures were fitted to
};

Profile load_profile(const std::string& path);
Profile parse_profile(std::string_view json_text, const std::string& file_name);

// Replaces the figures of every node group whose GPU type or link types the profile names. Returns
// how many GPU and link entries of the cluster changed.
std::size_t apply_profile(ClusterSpec& cluster, const Profile& profile);

}  // namespace fleetsim
