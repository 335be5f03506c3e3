// A plan replayed over several MPI processes, one rank per device that runs work (docs/run.md#several-
// processes-mpirun). The replay's rules (order, meetings, tensors and notes between ranks, the merge on
// rank 0) are the same whichever backend runs the device; a backend supplies a RankDevice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"

namespace fleetsim::replay {

// What one device must hold and run, from the plan: the largest tensor it sends and receives, its weights,
// the largest weight load from host memory, its collective buffer (2 x floats: the data, then room to
// receive), and the element types of its GEMMs.
struct Buffers {
  double outbox = 0, inbox = 0, weights = 0, host_weights = 0;
  std::size_t collective_floats = 0;
  std::vector<Dtype> dtypes;  // the element types its tasks' FLOP run in
};

// One rank's device as the replay drives it. Each call returns once its work is done, so the replay
// times it on the host clock. A call that cannot do its work throws, naming the device: inside a task
// that fails the task; at set-up or in a collective it stops the run.
class RankDevice {
 public:
  virtual ~RankDevice() = default;
  // Before the clock: buffers of these sizes written once; `groups` are the gangs' ranks as
  // ranks::Transport has them (a collective names one by index), for a device with communicators of
  // its own to make them. The device may run collectives over `transport`, and calls its progress()
  // about every millisecond of a long computation or wait, so the rank's sends move on.
  virtual void set_up(const Buffers& sizes, std::span<const std::vector<int>> groups, ranks::Transport& transport) = 0;
  virtual void hold_working_set(double bytes) = 0;  // until release_working_set
  virtual void release_working_set() = 0;
  virtual void load_weights(double bytes) = 0;  // from host memory
  virtual void compute(double flop, double bytes, Dtype dtype, std::uint32_t launches) = 0;
  // The gang's collective over `count` floats, on the group's members in member order.
  virtual void collective(std::size_t group, CollectiveOp op, std::size_t count) = 0;
  // A tensor leaving for another rank: the bytes to send (valid until the run ends).
  virtual const void* outgoing(double bytes) = 0;
  // A tensor from another rank: where to receive it, then `arrived` once it has.
  virtual void* incoming(double bytes) = 0;
  virtual void arrived(double bytes) = 0;
};

// Runs this rank's device's tasks of the plan and returns, on rank 0, the whole measured run; on the other
// ranks only their own tasks. Every rank of MPI_COMM_WORLD must call it with the same scenario and plan;
// the world size must be the number of devices that run work (rank_of_each_gpu).
RunResult execute_as_rank(const Scenario& scenario, const RunResult& plan, const ExecOptions& options, RankDevice& device);

}  // namespace fleetsim::replay
