// Real execution: a scenario's tasks run for real on local devices, on the devices and in the order
// the simulator chose for them (the plan), and the run is recorded as a measured trace in the
// simulator's own schema, so predicted and measured can be compared task by task.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include "fleetsim/simulation.hpp"

namespace fleetsim {

struct ExecOptions {
  // Called from a backend thread after each task ends, with the tasks ended so far and in all.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// The plan replayed: every task the plan completed runs on the same devices (the plan's GPUs, one
// worker each), each device taking its tasks in the plan's start order; a task starts once its
// instance has arrived, its producers have ended and every member of its gang is free. Weight
// loads the plan made are made again; tasks the plan did not run keep the plan's status and reason.
// The result carries the plan's cluster and topology and a summary of the measured trace; times
// are seconds since the run began.
//
// CPU backend: each device is a worker thread with its own memory. FLOP run as fp32/fp64 GEMMs
// (Eigen), memory traffic as a streaming triad, edge tensors and weights are copied between
// workers' buffers, and collectives are real reductions across the gang's buffers.
//
// Under mpirun (MPI initialized, more than one rank) each rank runs one device of the plan (ranks.hpp:
// the world size must be the number of devices that run work); tensors and collectives between devices
// go over MPI. Every rank must call it; rank 0 returns the whole measured run, the others only their own
// device's tasks.
RunResult execute_on_cpu(const Scenario& scenario, const RunResult& plan, const ExecOptions& options = {});

// A device could not do what the backend asked outside any one task (setting up, or a fault found
// when the run ends): the message names the device and the CUDA, cuBLAS or NCCL error.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether execute_on_cuda can run here: this build has the CUDA backend and this machine a CUDA
// device. When it cannot, `why` (if given) says which is missing.
bool cuda_available(std::string* why = nullptr);

// CUDA backend: the same replay on local GPUs (docs/run.md). The plan's devices that run work take
// the local GPUs round-robin, in index order; each has its own stream. FLOP run as cuBLAS GEMMs in
// the task's dtype, memory traffic as a triad kernel, working sets are stream-ordered allocations,
// weights are copied from pinned host memory or the peer GPU, edge tensors by peer copies, and a
// gang's collective runs on NCCL (or, without NCCL or with two members on one GPU, as peer copies
// and a reduction kernel). Times come from CUDA events. A failure inside a task fails that task,
// naming it, its device and the CUDA error; anything else throws DeviceError. Throws DeviceError
// at once when cuda_available() is false.
RunResult execute_on_cuda(const Scenario& scenario, const RunResult& plan, const ExecOptions& options = {});

// Seconds the plan's busiest device would compute on one CPU core at the catalog's nominal
// cpu-core figures: a warning before a run that would take hours.
double cpu_seconds_estimate(const Scenario& scenario, const RunResult& plan);

// The scenario with every task's work, memory and tensors multiplied by `factor` (weights, working
// sets, FLOP, bytes, edge and collective sizes); launches, arrivals and the cluster stay as they
// are. Shrinks a GPU-sized scenario to a size a CPU finishes in seconds.
Scenario scale_work(Scenario scenario, double factor);

}  // namespace fleetsim
