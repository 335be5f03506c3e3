// Calibration of a backend: microbenchmarks of its own kernels on this machine, fitted to the
// model's cost laws (time = fixed cost + size / rate), as a profile. The CPU backend calibrates the
// catalog's `cpu-core` device and `host-memcpy` link; the CUDA backend the local GPUs' catalog type
// and the host and GPU links of the node type that holds them.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/collective.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {

struct CalibrateOptions {
  int repeats = 5;       // timed runs per point; the median is kept
  unsigned workers = 0;  // threads measured at once, one per core the backend would use; 0: every core
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// Runs on worker threads, as the backend does, all busy at once. Provenance: backend, device (the CPU's model name), cores, date,
// compiler and Eigen versions; the caller adds the command.
Profile calibrate_cpu(const CalibrateOptions& options = {});

// Fills `profile.gpus` (`cpu-core`) and `profile.links` (`host-memcpy`) from `profile.measurements` of a CPU
// calibration on `workers` threads (docs/calibrate.md): the rates through the origin, the copy link
// alpha-beta, and with more than one worker the memory bus and compute pool they share.
void fit_cpu_profile(Profile& profile, unsigned workers);

// One figure of a CPU profile measured again on this machine now. A validation checks its profile
// before and after its real runs, so that an error the size of the machine's change since the
// calibration is seen as that, not as the model's (a shared VM's GEMM rate moves by a quarter within
// minutes).
struct ProfileFigure {
  std::string name;     // "fp32 GEMM, one worker alone"
  Dimension unit = Dimension::flop_rate;  // or bandwidth
  double profile = 0;   // the rate the profile gives it
  double measured = 0;  // the same point's rate now
  double change() const { return measured / profile - 1; }
};

// Runs the calibration's points behind the profile's `cpu-core` rates again, `repeats` passes on as
// many workers as the calibration had (about 0.3 s a pass on two): a GEMM and a stream, one worker
// alone and every worker at once, each against the rate the simulator gives that mix. No figures
// where the profile has no `cpu-core` fp32 rate and memory bandwidth: nothing of a CPU to check.
std::vector<ProfileFigure> check_cpu_profile(const Profile& profile, int repeats = 3);

struct CudaCalibrateOptions {
  int repeats = 5;         // timed samples per point after the warm-up; the median is kept
  std::string gpu_type;    // catalog GPU type to calibrate; empty: read off local GPU 0's name
  std::string node_type;   // catalog node type whose links are calibrated; empty: the smallest that holds the GPUs
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// The CUDA backend's sweeps (docs/calibrate.md): cuBLAS GEMMs per dtype, the triad, kernel launches,
// pinned host<->device copies on local GPU 0; peer copies between every ordered pair of local GPUs
// with and without peer access; NCCL collectives over all local GPUs. All timed with CUDA events:
// warm-up runs, then the median of `repeats` samples. Provenance: every device's name and compute
// capability, driver, runtime, cuBLAS and NCCL versions, date; the caller adds the command.
// Throws DeviceError (realexec.hpp) naming the device and the CUDA, cuBLAS or NCCL error, and at
// once where this build has no CUDA backend or this machine no CUDA device; InputError where the
// GPU type or node type is unknown.
Profile calibrate_cuda(const CudaCalibrateOptions& options = {});

// --- The parts of the CUDA calibration that need no GPU, so they are tested everywhere. ---

// The catalog GPU type of a CUDA device name ("NVIDIA H100 80GB HBM3" -> "h100-sxm"); none when the
// name is not one the catalog knows.
std::optional<std::string> catalog_gpu_of_device(std::string_view device_name);

// The catalog node type whose links a calibration on `gpus` local GPUs of `gpu_type` measures: the
// one holding that GPU type with the fewest GPUs, at least `gpus` of them (ties by id); empty if none.
std::string node_type_for(std::string_view gpu_type, std::size_t gpus);

// What the measurements are fitted to.
struct CudaFitTarget {
  std::string gpu_type;   // catalog GPU type: gets peak FLOP/s per dtype, memory bandwidth, launch overhead
  std::string node_type;  // empty: no link is calibrated
  std::size_t gpus = 1;   // local GPUs the collectives ran on
  std::optional<CollectiveAlgo> nccl_algo;  // the algorithm NCCL was told to run (NCCL_ALGO); none: not known
};

// Fills `profile.gpus` and `profile.links` from `profile.measurements`, with the CPU calibration's
// fits (fit.hpp): "gemm" per dtype and "stream" through the origin, "launch" as measured; the node's
// host link from "memcpy-h2d" (alpha-beta); its GPU link from the "all-reduce" sweep as
// `fleetsim import nccl-tests` fits one (fit_nccl_tests), else from "peer-copy" (alpha-beta). Adds a
// provenance line saying what each link was fitted from, or why it was not.
void fit_cuda_profile(Profile& profile, const CudaFitTarget& target);

}  // namespace fleetsim
