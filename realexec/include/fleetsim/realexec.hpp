// Real execution: a scenario's tasks run for real on local devices, on the devices and in the order
// the simulator chose for them (the plan), and the run is recorded as a measured trace in the
// simulator's own schema, so predicted and measured can be compared task by task.
#pragma once

#include <functional>
#include <string>

#include "fleetsim/simulation.hpp"

namespace fleetsim {

struct ExecOptions {
  // Called from worker threads after each task ends, with the tasks ended so far and in all.
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
RunResult execute_on_cpu(const Scenario& scenario, const RunResult& plan, const ExecOptions& options = {});

// Seconds the plan's busiest device would compute on one CPU core at the catalog's nominal
// cpu-core figures: a warning before a run that would take hours.
double cpu_seconds_estimate(const Scenario& scenario, const RunResult& plan);

// The scenario with every task's work, memory and tensors multiplied by `factor` (weights, working
// sets, FLOP, bytes, edge and collective sizes); launches, arrivals and the cluster stay as they
// are. Shrinks a GPU-sized scenario to a size a CPU finishes in seconds.
Scenario scale_work(Scenario scenario, double factor);

}  // namespace fleetsim
