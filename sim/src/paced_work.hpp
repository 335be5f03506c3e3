// Work counted in solo seconds (what it takes alone) and done at a pace that changes as neighbours come
// and go: tasks on time-sliced GPUs (shared_compute.hpp) and on nodes whose devices share memory bandwidth or compute (node_shares.hpp).
#pragma once

#include <algorithm>

namespace fleetsim {

struct PacedWork {
  double work_s = 0;  // solo seconds in all
  double left_s = 0;  // solo seconds left at since_s
  double pace = 1;    // solo seconds done per second since since_s
  double since_s = 0;

  static PacedWork starting(double work_s, double now_s) { return {work_s, work_s, 1, now_s}; }
  // Brings it up to now at its present pace (before the pace changes).
  void advance(double now_s) {
    left_s = std::max(0.0, left_s - pace * (now_s - since_s));
    if (left_s < 1e-12 * work_s) left_s = 0;  // a residue must not become a storm of tiny events
    since_s = now_s;
  }
  double done_s(double now_s) const { return work_s - std::max(0.0, left_s - pace * (now_s - since_s)); }
  // When, at its present pace, `left` solo seconds are left (0: when it ends).
  double reaches_s(double left) const { return since_s + std::max(0.0, left_s - left) / pace; }
};

}  // namespace fleetsim
