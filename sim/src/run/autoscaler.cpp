#include "autoscaler.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "events.hpp"

namespace fleetsim::run {

Autoscaler::Autoscaler(const Scenario& sc, const Cluster& cluster, EventQueue& queue, Occupancy& occupancy, GpuMemory& memory,
                       Billing& billing, std::function<bool()> work_left, std::function<std::vector<Serving::NodesWanted>()> serving_wants, PolicyRound& round,
                       std::function<void(std::uint32_t node)> node_off)
    : sc_(sc),
      cluster_(cluster),
      queue_(queue),
      occupancy_(occupancy),
      memory_(memory),
      billing_(billing),
      work_left_(std::move(work_left)),
      serving_wants_(std::move(serving_wants)),
      round_(round),
      ready_(round.ready()),
      node_off_(std::move(node_off)),
      node_state_(cluster.node_count(), NodeState::on),
      billed_since_(cluster.node_count(), 0.0),
      billed_s_(cluster.node_count(), 0.0) {}

void Autoscaler::start() {
  for (std::uint32_t n = static_cast<std::uint32_t>(sc_.autoscale.initial_nodes); n < cluster_.node_count(); ++n) {
    if (starts_on(n)) continue;
    node_state_[n] = NodeState::off;
    set_gpus_off(n, true);
  }
  queue_.push(sc_.autoscale.interval_s, kAutoscale, 0);
}

void Autoscaler::set_gpus_off(std::uint32_t n, bool off) {
  for_gpus_of(n, [&](std::uint32_t g) { occupancy_.set_off(g, off); });
}

// The node stops being billed.
void Autoscaler::turn_off(std::uint32_t n, const std::string& why) {
  record(DecisionKind::node_off, n, why);
  node_state_[n] = NodeState::off;
  node_off_(n);
  billed_s_[n] += queue_.now() - billed_since_[n];
  billing_.stop(n);
  ++nodes_stopped_;
}

int Autoscaler::nodes_on() const {
  return static_cast<int>(std::count_if(node_state_.begin(), node_state_.end(),
                                        [](NodeState s) { return s == NodeState::on || s == NodeState::provisioning; }));
}

bool Autoscaler::pinned(std::uint32_t n) const {
  bool held = false;
  for_gpus_of(n, [&](std::uint32_t g) { held = held || occupancy_.held(g); });
  return held;
}

int Autoscaler::pinned_nodes() const {
  int pinned_count = 0;
  for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) pinned_count += pinned(n) ? 1 : 0;
  return pinned_count;
}

namespace {
int nodes_in(const std::vector<Serving::NodesWanted>& wants) {
  int nodes = 0;
  for (const Serving::NodesWanted& w : wants) nodes += w.nodes;
  return nodes;
}
}  // namespace

std::vector<Serving::NodesWanted> Autoscaler::serving_nodes(bool unserved) const {
  std::vector<Serving::NodesWanted> wants = serving_wants_();
  std::vector<std::pair<std::uint32_t, int>> claimed;  // by a group's first node: its nodes not on taken so far
  for (Serving::NodesWanted& w : wants) {
    int free = 0, provisioning = 0;
    for (std::uint32_t n = w.first_node; n < w.end_node; ++n) {
      free += node_state_[n] == NodeState::off || node_state_[n] == NodeState::draining ? 1 : 0;
      provisioning += node_state_[n] == NodeState::provisioning ? 1 : 0;
    }
    auto it = std::find_if(claimed.begin(), claimed.end(), [&](const auto& c) { return c.first == w.first_node; });
    if (it == claimed.end()) it = claimed.insert(claimed.end(), {w.first_node, 0});
    // A replica needs every node its pieces want: fewer would start nodes it cannot use, drained idle and wanted
    // again decision after decision (a replica of TP 16, or TP 8 x PP 2, on a group with one node to spare).
    if (w.nodes > free + provisioning - it->second) w.nodes = 0;
    it->second += w.nodes;
    if (unserved) w.nodes -= std::min(w.nodes, std::max(0, provisioning - (it->second - w.nodes)));
  }
  std::erase_if(wants, [](const Serving::NodesWanted& w) { return w.nodes <= 0; });
  return wants;
}

int Autoscaler::desired_nodes() const {
  const AutoscaleSpec& a = sc_.autoscale;
  const int on = nodes_on(), per_node = static_cast<int>(cluster_.gpus_in(make_id<NodeId>(0))), kept = pinned_nodes();
  int want = on;
  switch (a.policy) {
    case AutoscaleSpec::Policy::utilization: {
      // GPUs running tasks on the nodes no serving replica keeps on, and those waiting tasks ask for less the
      // free GPUs of the nodes replicas keep on (taken first), at the target utilization; and whole nodes for
      // the pieces of replicas the deployments' autoscaling wants that find no room (no free GPUs offset
      // them: they found none that could hold them): what the other nodes are for.
      double running = 0, free_kept = 0, waiting = 0;
      for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
        const bool kept_on = pinned(n);
        for_gpus_of(n, [&](std::uint32_t g) {
          if (kept_on) free_kept += occupancy_.busy(g) ? 0 : 1;
          else running += occupancy_.tasks_on(g).empty() ? 0 : 1;
        });
      }
      for (const ReadyTask& r : ready_) waiting += r.gpus;
      const double demand = running + std::max(0.0, waiting - free_kept);
      want = kept + static_cast<int>(std::ceil(demand / (a.target_utilization * per_node) - 1e-9));
      // The nodes wanted replicas need, and the idle ones on that already hold their pieces that fit.
      for (const Serving::NodesWanted& w : serving_nodes(false)) {
        want += w.nodes;
        for (const std::uint32_t n : w.holding) want += !pinned(n) && runs_no_task(n) ? 1 : 0;
      }
      break;
    }
    case AutoscaleSpec::Policy::queue: {
      double oldest = queue_.now();
      for (const ReadyTask& r : ready_) oldest = std::min(oldest, r.ready_s);
      // One node more for the tasks where the oldest has waited too long, and the nodes of serving replicas
      // wanted that are not on their way.
      const bool waited = queue_.now() - oldest > a.target_wait_s;
      const int unserved = nodes_in(serving_nodes(true));
      if (waited || unserved > 0) want = on + (waited ? 1 : 0) + unserved;
      else if (ready_.empty() && occupancy_.free_gpus() >= static_cast<std::uint32_t>(per_node)) want = on - 1;
      break;
    }
    case AutoscaleSpec::Policy::schedule: {
      const double t = std::fmod(queue_.now(), a.period_s);
      want = a.schedule.back().second;  // the last entry holds until the first of the next period
      for (const auto& [at, nodes] : a.schedule) {
        if (at <= t) want = nodes;
      }
      break;
    }
    case AutoscaleSpec::Policy::none: break;
  }
  return std::clamp(want, std::max(a.min_nodes, kept), static_cast<int>(cluster_.node_count()));
}

void Autoscaler::on_decide() {
  const double now = queue_.now();
  const auto count = static_cast<std::uint32_t>(node_state_.size());
  for (std::uint32_t n = 0; n < count && !sc_.serving.empty(); ++n) {
    if (node_state_[n] != NodeState::draining) continue;
    if (pinned(n)) {  // a serving replica has since taken GPUs of it: it cannot drain while the replica runs
      record(DecisionKind::node_kept, n, "a serving replica holds GPUs of it");
      node_state_[n] = NodeState::on;
      set_gpus_off(n, false);
    } else {  // a replica that held GPUs of it may have given them back since
      for_gpus_of(n, [&](std::uint32_t g) {
        if (!occupancy_.off(g)) gpu_released(g);
      });
    }
  }
  wanted_.emplace_back(now, desired_nodes());
  while (wanted_.front().first < now - sc_.autoscale.scale_in_window_s) wanted_.pop_front();
  int want = wanted_.back().second;
  const int on_now = nodes_on();
  if (want < on_now) {  // the most wanted over the window, and never more than now
    for (const auto& [at, n] : wanted_) want = std::max(want, std::min(n, on_now));
  }
  // The reasons for the decision log, written only where the log is kept.
  const bool log = round_.recording();
  const auto why = [&](int on) {
    return !log ? std::string()
                : "the autoscaler wants " + std::to_string(want) + (want == 1 ? " node" : " nodes") + " on; " + std::to_string(on) +
                      (on == 1 ? " is" : " are") + " on or provisioning";
  };
  const std::string why_now = why(on_now);
  // Nodes for the serving replicas wanted and not yet on their way come from their deployments' groups,
  // first (each such want has a node off or draining there); the rest from any. They start even where as many
  // nodes as wanted are on: an idle node of another type can stand in that count, and the replica runs only on
  // its group's; the scale-in below then drains one node for each started beyond the count. Nodes started or
  // kept for a replica, and provisioning nodes on their way to one, are spared by that scale-in.
  std::vector<char> spared(count, 0);
  std::vector<Serving::NodesWanted> serving = serving_nodes(true);
  const int to_start = std::max(want - on_now, nodes_in(serving));
  for (int started = 0; started < to_start; ++started) {
    std::uint32_t first = 0, end = count;
    std::string reason = why_now;
    const bool for_replica = !serving.empty();
    if (for_replica) {
      std::tie(first, end) = std::pair{serving.front().first_node, serving.front().end_node};
      if (--serving.front().nodes == 0) serving.erase(serving.begin());
      if (log) reason = "a serving replica wanted needs a node of nodes " + std::to_string(first) + " to " + std::to_string(end - 1);
    }
    // A draining node is the quickest to have back; else the first node that is off.
    std::uint32_t n = first;
    while (n < end && node_state_[n] != NodeState::draining) ++n;
    if (n < end) {
      record(DecisionKind::node_kept, n, reason);
      node_state_[n] = NodeState::on;
      set_gpus_off(n, false);
    } else {
      n = first;
      while (n < end && node_state_[n] != NodeState::off) ++n;
      record(DecisionKind::node_started, n, reason);
      node_state_[n] = NodeState::provisioning;
      billed_since_[n] = now;
      billing_.start(n);
      ++nodes_started_;
      queue_.push(now + sc_.autoscale.provisioning_s, kNodeUp, n);
    }
    if (for_replica) spared[n] = 1;
  }
  const int on_before_scale_in = nodes_on();
  if (want < on_before_scale_in) {
    for (const Serving::NodesWanted& w : serving_nodes(false)) {
      for (const std::uint32_t n : w.holding) spared[n] = 1;  // the nodes on that hold the replica's other pieces
      int keep = w.nodes;
      for (std::uint32_t n = w.first_node; n < w.end_node && keep > 0; ++n) {
        if (node_state_[n] == NodeState::provisioning && spared[n] == 0) {
          spared[n] = 1;
          --keep;
        }
      }
    }
  }
  const std::string why_scale_in = why(on_before_scale_in);
  for (int on = on_before_scale_in; on > want; --on) {
    // The last node still provisioning, else the last node on that runs no task, else the last node on, drains.
    std::uint32_t n = count;
    for (std::uint32_t k = count; k-- > 0;) {
      if (node_state_[k] == NodeState::provisioning && spared[k] == 0) {
        n = k;
        break;
      }
    }
    if (n < count) {
      turn_off(n, why_scale_in + " (called off while provisioning)");
      continue;
    }
    const auto drainable = [&](std::uint32_t k) { return node_state_[k] == NodeState::on && !pinned(k) && spared[k] == 0; };
    for (std::uint32_t k = count; k-- > 0 && n == count;) {
      if (drainable(k) && runs_no_task(k)) n = k;
    }
    for (std::uint32_t k = count; k-- > 0 && n == count;) {
      if (drainable(k)) n = k;
    }
    if (n == count) break;  // every node on holds a serving replica, or was started for one
    record(DecisionKind::node_draining, n, why_scale_in);
    node_state_[n] = NodeState::draining;
    for_gpus_of(n, [&](std::uint32_t g) { gpu_released(g); });
  }
  if (work_left_() && now + sc_.autoscale.interval_s <= sc_.horizon_s) {
    queue_.push(now + sc_.autoscale.interval_s, kAutoscale, 0);
  }
}

void Autoscaler::on_node_up(std::uint32_t n) {
  if (node_state_[n] != NodeState::provisioning) return;  // turned off again before it came up
  node_state_[n] = NodeState::on;
  set_gpus_off(n, false);
}

void Autoscaler::gpu_released(std::uint32_t g) {
  const std::uint32_t n = index(cluster_.node_of(make_id<GpuId>(g)));
  if (node_state_[n] != NodeState::draining || !occupancy_.tasks_on(g).empty() || memory_.held(make_id<GpuId>(g)) > 0) return;
  occupancy_.set_off(g, true);
  bool all_off = true;
  for_gpus_of(n, [&](std::uint32_t k) { all_off = all_off && occupancy_.off(k); });
  if (!all_off) return;
  turn_off(n, "drained: its GPUs run nothing and hold nothing a task waits for");
  for_gpus_of(n, [&](std::uint32_t k) {
    if (!occupancy_.down(k)) memory_.wipe(make_id<GpuId>(k), queue_.now());
  });
}

void Autoscaler::summarize(double end_s, Summary& summary) {
  for (std::uint32_t n = 0; n < cluster_.node_count(); ++n) {
    const NodeId node = make_id<NodeId>(n);
    if (node_state_[n] != NodeState::off) billed_s_[n] += end_s - billed_since_[n];
    summary.node_s_on += billed_s_[n];
    // A node that is off draws no idle power (its tasks ran while it was on).
    summary.energy_j -= (end_s - billed_s_[n]) * cluster_.gpus_in(node) * cluster_.gpu_type(cluster_.first_gpu(node)).idle_power_w;
  }
  summary.nodes_started = nodes_started_;
  summary.nodes_stopped = nodes_stopped_;
}

}  // namespace fleetsim::run
