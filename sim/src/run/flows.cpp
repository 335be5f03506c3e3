#include "flows.hpp"

#include <cmath>

#include "events.hpp"

namespace fleetsim::run {

bool Flows::start(FlowTag tag, std::uint32_t from, std::uint32_t to, double bytes, std::uint64_t key, std::optional<double> latency_s,
                  double cap_Bps) {
  dirty_ = true;
  route_.clear();
  if (!topology_.try_route(from, to, key, route_)) {
    network_.start_stranded(bytes, latency_s.value_or(0.0), tag.packed(), queue_.now());
    return false;
  }
  network_.start(route_, bytes, latency_s ? *latency_s : topology_.latency_s(route_), tag.packed(), queue_.now(), cap_Bps);
  return true;
}

// Keeps one pending wake-up: at the next delivery, under a new generation.
void Flows::arm() {
  if (!dirty_) return;
  dirty_ = false;
  const double next = network_.next_time();
  if (!std::isfinite(next) || (armed_ && next == armed_s_)) return;
  ++generation_;
  armed_ = true;
  armed_s_ = next;
  queue_.push(next, kNetwork, generation_);
}

bool Flows::wake(std::uint32_t generation) {
  if (generation != generation_) return false;
  armed_ = false;
  delivered_.clear();
  network_.advance(queue_.now(), delivered_);
  dirty_ = true;
  return true;
}

const std::vector<Flows::Moved>& Flows::reroute_off(std::uint32_t link) {
  moved_.clear();
  on_link_.clear();
  network_.sending_on(link, on_link_);
  for (std::uint32_t flow : on_link_) {
    const std::span<const std::uint32_t> old = network_.route(flow);
    const std::uint32_t from = topology_.links()[old.front()].from, to = topology_.links()[old.back()].to;
    const FlowTag tag = FlowTag::of(network_.tag(flow));
    route_.clear();
    if (!topology_.try_route(from, to, route_key(network_.tag(flow), from), route_)) {
      network_.strand(flow, queue_.now());
      moved_.push_back({tag, from, to, true});
      continue;
    }
    // Whatever the flow's latency held beyond its route's (a collective's own) is kept.
    const double new_s = topology_.latency_s(route_);
    network_.reroute(flow, route_, network_.latency_s(flow) - topology_.latency_s(old) + 2 * new_s, queue_.now());
    moved_.push_back({tag, from, to, false});
    ++rerouted_;
  }
  return moved_;
}

void Flows::cancel(TaskId task, double now_s, std::vector<std::uint64_t>& dropped) {
  network_.cancel_if([&](std::uint64_t tag) { return FlowTag::of(tag).task == task && FlowTag::of(tag).kind != FlowKind::kv; }, now_s, dropped);
  changed();
}

void Flows::cancel_kv(std::uint32_t transfer, double now_s) {
  std::vector<std::uint64_t> dropped;
  network_.cancel_if([&](std::uint64_t tag) { return FlowTag::of(tag).kind == FlowKind::kv && index(FlowTag::of(tag).task) == transfer; }, now_s, dropped);
  changed();
}

}  // namespace fleetsim::run
