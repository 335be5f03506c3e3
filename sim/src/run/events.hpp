// The kinds of event a run schedules, and what each one's subject names.
#pragma once

#include <cstdint>

#include "fleetsim/engine.hpp"

namespace fleetsim::run {

// kArrival: an instance arrives (subject: the instance).
// kComputeDone, kCommStart, kRetry: a task's compute ends, its overlapped collective starts, it runs
//   again after a failure (subject: the task; the kind carries the task's stamp, see stamped() below).
// kNetwork: the network's next delivery (subject: the wake-up generation; stale ones are skipped).
// kSchedule: a scheduling round.
// kFault, kRepair: a fault source fails or is repaired (subject: the source, see Faults).
// kAutoscale: the autoscaler's periodic decision; kNodeUp: a node's provisioning ends (subject: the node).
// kBatchRelease: a batching key's held tasks have waited max_wait (subject: the key).
// kPolicyWake: the time a policy asked for a round at (subject: the wake-up generation; stale ones are skipped).
// kServingArrival: a serving deployment's next request arrives (subject: the deployment);
// kServingIteration: a serving replica's iteration ends (subject: the replica, see run/serving.hpp);
// kServingScale: an autoscaled deployment's periodic decision (subject: the deployment).
enum EventKind : std::uint32_t {
  kArrival,
  kComputeDone,
  kCommStart,
  kNetwork,
  kSchedule,
  kFault,
  kRepair,
  kRetry,
  kAutoscale,
  kNodeUp,
  kBatchRelease,
  kPolicyWake,
  kServingArrival,
  kServingIteration,
  kServingScale
};

// A task's events carry its stamp (24 bits) above the kind's low byte; the task moves its stamp on
// when they go stale (a stop, a resize, co-runners changing its pace), so stale ones are skipped.
inline constexpr std::uint32_t kStampMask = 0xFFFFFFu;
constexpr std::uint32_t stamped(EventKind kind, std::uint32_t stamp) { return kind | ((stamp & kStampMask) << 8); }
constexpr EventKind kind_of(const Event& e) { return static_cast<EventKind>(e.kind & 0xFFu); }
constexpr std::uint32_t stamp_of(const Event& e) { return e.kind >> 8; }

}  // namespace fleetsim::run
