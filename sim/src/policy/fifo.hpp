// First in, first out: tasks are placed in the order they became ready, each on the lowest-numbered
// free GPUs that can hold it (a gang inside one node when one node has room, else across nodes).
// When the oldest ready task cannot be placed, nothing behind it is (head-of-line blocking).
#pragma once

#include "fleetsim/policy.hpp"

namespace fleetsim::policies {

class Fifo final : public Policy {
 public:
  void schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override;

 private:
  bool place(const ClusterView& view, const ReadyTask& task, std::size_t ready_index, Decisions& out);

  std::vector<std::uint8_t> taken_;  // GPUs placed on earlier in this round
  std::vector<GpuId> chosen_;
};

}  // namespace fleetsim::policies
