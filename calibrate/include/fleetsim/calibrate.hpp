// Calibration of the CPU backend: microbenchmarks of its own kernels on this machine, fitted to the
// model's cost laws (time = fixed cost + size / rate), as a profile for the catalog's `cpu-core`
// device and `host-memcpy` link.
#pragma once

#include <functional>

#include "fleetsim/profile.hpp"

namespace fleetsim {

struct CalibrateOptions {
  int repeats = 5;       // timed runs per point; the median is kept
  unsigned workers = 0;  // threads measured at once, one per core the backend would use; 0: every core
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// Runs on worker threads, as the backend does, all busy at once. Provenance: backend, device (the CPU's model name), cores, date,
// compiler and Eigen versions; the caller adds the command.
Profile calibrate_cpu(const CalibrateOptions& options = {});

}  // namespace fleetsim
