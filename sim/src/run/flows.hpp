// The network as a run drives it: flows started over the routes the topology picks, tagged with what
// they carry and for which task; one pending wake-up event at the next delivery (a new generation
// supersedes the last, so stale wake-ups are skipped); and flows moved off a failed link.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "fleetsim/engine.hpp"
#include "fleetsim/hash.hpp"
#include "fleetsim/ids.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/topology.hpp"

namespace fleetsim::run {

// What a flow carries: a task's input edge, a gang member's weights, a collective step, a member's
// offloaded working set (part: member * 2 + direction), or one TP rank's share of a serving request's
// KV cache moving from a prefill replica to a decode replica (run/serving.hpp).
enum class FlowKind : std::uint8_t { input, weights, collective, offload, kv };

struct FlowTag {
  FlowKind kind;
  std::uint32_t part;  // the edge (inputs), the gang member (weights, offload), the collective's place in its task's list, the deployment (kv); 24 bits
  TaskId task;         // the task; for kv, the KV transfer's number (not a task)

  std::uint64_t packed() const {
    return (std::uint64_t{static_cast<std::uint8_t>(kind)} << 56) | (std::uint64_t{part} << 32) | index(task);
  }
  static FlowTag of(std::uint64_t packed) {
    return {static_cast<FlowKind>(packed >> 56), static_cast<std::uint32_t>(packed >> 32) & 0xFFFFFFu,
            make_id<TaskId>(static_cast<std::uint32_t>(packed))};
  }
};

// A key that spreads flows over equal-cost routes.
inline std::uint64_t route_key(std::uint64_t a, std::uint64_t b) { return hash_combine(a, b); }

class Flows {
 public:
  Flows(Topology& topology, Network& network, EventQueue& queue) : topology_(topology), network_(network), queue_(queue) {}

  // Starts a flow over the route `key` picks among equal ones, paying the route's latency (or
  // `latency_s`, a collective step's own). False where link failures left no route: the flow is
  // stranded (in flight, never delivered) and its task must be stopped.
  bool start(FlowTag tag, std::uint32_t from, std::uint32_t to, double bytes, std::uint64_t key,
             std::optional<double> latency_s = std::nullopt, double cap_Bps = std::numeric_limits<double>::infinity());
  // The flows in flight changed: the wake-up is moved after the current event (arm).
  void changed() { dirty_ = true; }
  void arm();
  // kNetwork: whether this wake-up is current; if so, the flows delivered by now.
  bool wake(std::uint32_t generation);
  const std::vector<FlowDelivery>& delivered() const { return delivered_; }
  // The task was stopped: its flows are cancelled; `dropped` gets their tags.
  void cancel(TaskId task, double now_s, std::vector<std::uint64_t>& dropped);
  // A KV transfer given up: its flows still in flight are cancelled.
  void cancel_kv(std::uint32_t transfer, double now_s);

  // A flow moved off a failed link, or stranded where no route is left.
  struct Moved {
    FlowTag tag;
    std::uint32_t from, to;
    bool stranded;
  };
  // Moves the flows sending over `link` to routes around it (a reconnect: the bytes left go on over the
  // new route, whose latency is paid once more on delivery).
  const std::vector<Moved>& reroute_off(std::uint32_t link);
  std::uint64_t rerouted() const { return rerouted_; }

 private:
  Topology& topology_;
  Network& network_;
  EventQueue& queue_;
  std::vector<std::uint32_t> route_;  // scratch
  std::vector<FlowDelivery> delivered_;
  std::vector<std::uint32_t> on_link_;  // scratch
  std::vector<Moved> moved_;
  std::uint32_t generation_ = 0;
  bool armed_ = false, dirty_ = false;
  double armed_s_ = 0;
  std::uint64_t rerouted_ = 0;
};

}  // namespace fleetsim::run
