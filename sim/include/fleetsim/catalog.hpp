// The hardware and model catalog: GPU types, link types, node types, model weights and operator
// profiles. The built-in catalog is models/hardware.json + models/operators.json compiled into the
// library; scenarios may add entries from their own files. Every number carries its public source.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fleetsim {

enum class Dtype : std::uint8_t { fp64, fp32, tf32, bf16, fp16, fp8, int8 };
inline constexpr std::size_t kDtypeCount = 7;
std::string_view dtype_name(Dtype dtype);
std::optional<Dtype> parse_dtype(std::string_view name);

// The GPU generation, which decides what NCCL's cost model assumes of a GPU (its per-architecture
// constants). unknown: a GPU that NCCL does not run (CPU workers, AMD): collectives follow the links.
enum class GpuArch : std::uint8_t { unknown, volta, ampere, ada, hopper, blackwell, pascal, turing };
std::string_view gpu_arch_name(GpuArch arch);

// The precision a training job ran in: fp32 (TF32 where the GPU has it, as frameworks run fp32 convolutions)
// or mixed (AMP: fp16/bf16 GEMMs, fp32 master weights).
enum class TrainingPrecision : std::uint8_t { fp32, mixed };
std::string_view training_precision_name(TrainingPrecision precision);

// How fast a GPU trains a GPU-bound job, relative to a V100-SXM2-16GB (1), per precision, from published
// benchmarks: what a job recorded on one GPU type takes on another (a trace replay). 0: not in the catalog.
// `estimated`: no measurement of this GPU in that precision; a sibling's figure scaled by the catalog's peaks.
struct TrainingThroughput {
  std::array<double, 2> relative{};  // by TrainingPrecision
  std::array<bool, 2> estimated{};
  std::string source;
  double of(TrainingPrecision p) const { return relative[static_cast<std::size_t>(p)]; }
  bool estimated_in(TrainingPrecision p) const { return estimated[static_cast<std::size_t>(p)]; }
  bool operator==(const TrainingThroughput&) const = default;
};

struct GpuType {
  std::string id;
  std::string name;
  GpuArch arch = GpuArch::unknown;
  int sms = 0;  // streaming multiprocessors (compute units): the kernel model tiles work over them; 0: unknown
  double l2_bytes = 0;  // last-level cache: a kernel whose data fits reads it from there (0: none)
  double vram_bytes = 0;
  double memory_bandwidth_Bps = 0;
  std::array<double, kDtypeCount> peak_flop_per_s{};  // dense; 0 where the dtype is unsupported
  double tdp_w = 0;
  double idle_power_w = 0;
  double launch_overhead_s = 0;
  double price_usd_per_hour = 0;
  double purchase_usd = 0;  // one card bought (0: no price in the catalog)
  // A calibration's correction of the kernel-time model's rates on this GPU, per dtype and for memory
  // (1: the public constants as they are). A profile that replaces the peaks with measured rates also
  // folds the change in here, so the kernel model keeps its own figures (fleetsim/profile.hpp).
  std::array<double, kDtypeCount> kernel_compute_scale{1, 1, 1, 1, 1, 1, 1};
  double kernel_memory_scale = 1;
  // Whether a task's FLOP and memory traffic overlap (one fused kernel: the roofline's max) or run
  // back to back (a CPU worker that runs a GEMM, then a streaming kernel: their sum).
  bool sequential_compute_and_memory = false;
  TrainingThroughput training_throughput;
  std::string source;

  // The peak used for a dtype: its own, else the first supported one of fp8/int8 -> fp16 -> bf16 ->
  // fp32 -> fp64 (bf16 and fp16 stand in for each other), as frameworks upcast where a format is
  // missing; 0 when none is supported.
  double peak_for(Dtype dtype) const;
  bool operator==(const GpuType&) const = default;
};

// memory: a copy through host memory between CPU-backend workers.
enum class LinkKind : std::uint8_t { nvlink, pcie, infiniband, roce, ethernet, memory };
std::string_view link_kind_name(LinkKind kind);

struct LinkType {
  std::string id;
  std::string name;
  LinkKind kind = LinkKind::pcie;
  double bandwidth_Bps = 0;  // per direction
  double latency_s = 0;      // one hop
  // What NCCL's topology detection credits a GPU with over this link (its NVLinks together at NCCL's
  // per-link figure, PCIe lanes x rate / 80, a NIC's line rate): the input of NCCL's cost model. A
  // calibrated bandwidth scales it by the same factor.
  double nccl_bandwidth_Bps = 0;
  // Measured corrections of NCCL's time for collectives over this link (a calibration profile's,
  // fitted to an nccl-tests log): its latency and bandwidth scale the model's. 1: none.
  double collective_latency_scale = 1;
  double collective_bandwidth_scale = 1;
  std::string source;

  double nccl_Bps() const { return nccl_bandwidth_Bps > 0 ? nccl_bandwidth_Bps : bandwidth_Bps; }
};

enum class CpuVendor : std::uint8_t { intel, amd };

struct NodeType {
  std::string id;
  std::string name;
  std::string gpu;        // GpuType id
  int gpus = 0;
  std::string gpu_link;   // LinkType id between GPUs of the node
  std::string host_link;  // LinkType id between a GPU and the host / NICs
  std::string nic;        // LinkType id of the node's network cards
  int nics = 0;
  double host_memory_bytes = 0;
  // Memory bandwidth the node's devices share (CPU workers on one machine's memory), bytes/s; 0: each
  // device has its own (GPUs and their HBM). See sim/src/node_shares.hpp.
  double memory_bus_Bps = 0;
  // Compute the node's devices deliver together, in devices' worth (CPU workers on sibling
  // hyperthreads deliver less than one each); 0: each device computes on its own. See sim/src/node_shares.hpp.
  double compute_pool_devices = 0;
  // Bandwidth of host memory, which copies into and out of it share, reads and writes together
  // (weight loads from host memory or local storage, offloaded working sets), bytes/s; 0: not modelled.
  double host_memory_bandwidth_Bps = 0;
  CpuVendor cpu = CpuVendor::intel;  // NCCL's network overhead and LL bandwidth depend on it
  bool nvls = true;  // NCCL may reduce in the NVSwitch (Hopper and later; off where multicast is not offered)
  // The whole node's price per hour (a cloud instance's, CPUs and memory included); 0: its GPUs at their
  // GPU type's price.
  double price_usd_per_hour = 0;
  // Bought rather than rented: the whole server's price (0: none in the catalog; a plan then prices it as
  // its cards times the server-to-GPU cost ratio, or refuses it), and its maximum system power (0: unknown).
  double purchase_usd = 0;
  double system_power_w = 0;
  std::string source;
};

struct ModelSpec {
  std::string id;
  std::string name;
  double weights_bytes = 0;
  std::string source;
};

struct OperatorSpec {
  std::string id;
  std::string name;
  double flop = 0;
  double bytes = 0;  // memory traffic per invocation
  Dtype dtype = Dtype::bf16;
  std::string source;
};

struct Architecture;

class Catalog {
 public:
  // The catalog compiled into fleetsim.
  static const Catalog& builtin();

  // Adds the entries of one catalog file (JSON text). Ids already present, unknown fields, bad
  // values and references to missing entries are errors naming `file_name` and the field.
  void add_json(std::string_view text, const std::string& file_name);
  void add_file(const std::string& path);

  const GpuType* gpu(std::string_view id) const;
  const LinkType* link(std::string_view id) const;
  const NodeType* node(std::string_view id) const;
  const ModelSpec* model(std::string_view id) const;
  const OperatorSpec* op(std::string_view id) const;
  const Architecture* architecture(std::string_view id) const;

  // Sorted by id, so listings and outputs are deterministic.
  const std::map<std::string, GpuType, std::less<>>& gpus() const { return gpus_; }
  const std::map<std::string, LinkType, std::less<>>& links() const { return links_; }
  const std::map<std::string, NodeType, std::less<>>& nodes() const { return nodes_; }
  const std::map<std::string, ModelSpec, std::less<>>& models() const { return models_; }
  const std::map<std::string, OperatorSpec, std::less<>>& operators() const { return operators_; }
  const std::map<std::string, std::shared_ptr<const Architecture>, std::less<>>& architectures() const { return architectures_; }
  // "llama-3-70b, llama-3-8b, ...": the LLMs among the architectures, for messages.
  std::string llm_names() const;

 private:
  std::map<std::string, GpuType, std::less<>> gpus_;
  std::map<std::string, LinkType, std::less<>> links_;
  std::map<std::string, NodeType, std::less<>> nodes_;
  std::map<std::string, ModelSpec, std::less<>> models_;
  std::map<std::string, OperatorSpec, std::less<>> operators_;
  std::map<std::string, std::shared_ptr<const Architecture>, std::less<>> architectures_;
};

// The largest input file fleetsim reads (2 GiB): a larger one is refused before it is read.
inline constexpr std::uintmax_t kMaxInputFileBytes = std::uintmax_t{2} << 30;
// Reads a whole text file. A missing or unreadable file, a directory, anything but a regular file (a
// FIFO, a device) and a file over kMaxInputFileBytes are InputErrors naming it and saying why (the
// operating system's reason where it gave one), refused before anything is read.
std::string read_text_file(const std::string& path);

}  // namespace fleetsim
