// NCCL's cost model, reproduced, and what its choices achieve on real GPUs.
//
// NCCL times every (algorithm, protocol) of a collective as latency + bytes / bandwidth, from a table
// it fills at start-up out of its topology search (channels, bandwidth per channel) and fixed
// constants, and runs the cheapest entry. NcclModel rebuilds that table from what fleetsim knows of a
// communicator (NcclComm) with NCCL's own figures (models/nccl.json), so it picks what NCCL picks.
// NCCL's table ranks choices; it does not predict them: real runs differ from it by up to 1.5x. The
// estimate therefore scales the chosen entry by per-architecture, per-protocol corrections measured on
// DGX A100 and H100 boxes (the "achieved" section), and returns both times with the breakdown.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/ids.hpp"

namespace fleetsim {

// What NCCL sees of one communicator. Bandwidths are NCCL's (GB/s of 1e9 bytes), as in its source.
struct NcclComm {
  GpuArch arch = GpuArch::hopper;
  int ranks = 1;
  int nodes = 1;
  bool nvlink = true;          // a node's GPUs talk over NVLink through NVSwitch; else over PCIe
  bool nvls = false;           // NVLink SHARP: reduction in the NVSwitch
  double intra_GBps = 0;       // a GPU's NVLinks together, or its PCIe path to the other GPUs
  double nic_GBps = 0;         // one NIC
  double gpu_nic_GBps = 0;     // a GPU's PCIe path to its NIC
  int rails = 1;               // NICs per node next to the communicator's GPUs
  CpuVendor cpu = CpuVendor::intel;
  LinkKind net = LinkKind::infiniband;
  // Latencies of the links a step crosses: above NCCL's reference (models/nccl.json) they add to it.
  double intra_link_us = 0;
  double net_link_us = 0;
  // A calibration's corrections of the achieved time (LinkType::collective_*_scale).
  double latency_scale = 1;
  double bandwidth_scale = 1;
  int ppn() const { return ranks / nodes; }
};

class Cluster;
// What NCCL would see of a communicator over `gpus` (in rank order); no value for GPUs NCCL does
// not run (an unknown architecture: CPU workers, AMD GPUs), whose collectives follow the links alone.
std::optional<NcclComm> nccl_comm(const Cluster& cluster, std::span<const GpuId> gpus);

// One of NCCL's topology graphs: channels and the bandwidth of each inside and between nodes.
struct NcclGraph {
  int channels = 0;
  double intra_GBps = 0;
  double inter_GBps = 0;
};

// The constants of models/nccl.json (or a user's file of the same shape).
struct NcclConstants;
std::shared_ptr<const NcclConstants> builtin_nccl_constants();
// Strict: unknown fields, wrong shapes and non-positive figures are errors naming `file` and the field.
std::shared_ptr<const NcclConstants> parse_nccl_constants(std::string_view text, const std::string& file);

// A choice and its times. nccl_s is NCCL's own estimate, which it chose by; latency_s + transfer_s is
// what the choice achieves.
struct NcclEstimate {
  CollectiveAlgo algo = CollectiveAlgo::ring;
  CollectiveProto proto = CollectiveProto::simple;
  int channels = 0;
  double nccl_s = 0;
  double latency_s = 0;   // fixed part: launch, per-step synchronisation, pipeline fill
  double transfer_s = 0;  // bytes over the achieved bandwidth
  double time_s() const { return latency_s + transfer_s; }
};

class NcclModel {
 public:
  explicit NcclModel(const NcclComm& comm, std::shared_ptr<const NcclConstants> constants = builtin_nccl_constants());

  const NcclComm& comm() const { return comm_; }
  // The graph an algorithm runs on (nvls and nvls-tree share one; pat runs on the tree's).
  // channels 0: none could be built.
  const NcclGraph& graph(CollectiveAlgo algo) const;

  // NCCL's table entry for an (algorithm, protocol): latency (us) and algorithm bandwidth (GB/s).
  // bw_GBps 0: NCCL would not run it.
  struct Cost {
    double base_us = 0;   // the fixed part of the latency
    double steps_us = 0;  // the per-step part
    double bw_GBps = 0;
    double latency_us() const { return base_us + steps_us; }
  };
  Cost cost(CollectiveOp op, CollectiveAlgo algo, CollectiveProto proto) const;

  // What NCCL runs for `bytes` (nccl-tests' size) among the entries `algo` and `proto` allow
  // (automatic: any), and what it achieves; no value when none can run. send/recv and all-to-all
  // are point-to-point (algorithm direct, protocol Simple), which NCCL's table does not time.
  std::optional<NcclEstimate> estimate(CollectiveOp op, double bytes, CollectiveAlgo algo = CollectiveAlgo::automatic,
                                       CollectiveProto proto = CollectiveProto::automatic) const;

  // What the estimates assume beyond what was measured, one sentence each (empty: nothing).
  std::vector<std::string> assumptions() const;
  // One line: the NCCL version modelled, the communicator as NCCL sees it, and its graphs.
  std::string describe() const;

 private:
  bool corrected(CollectiveAlgo algo) const;  // whether the measured corrections apply to it
  double achieved_bw_scale(CollectiveAlgo algo, CollectiveProto proto) const;
  double intra_extra_us() const;
  double net_extra_us() const;
  NcclEstimate direct(CollectiveOp op, double bytes) const;
  NcclComm comm_;
  std::shared_ptr<const NcclConstants> k_;
  NcclGraph ring_, tree_, nvls_;
  NcclGraph none_;
};

}  // namespace fleetsim
