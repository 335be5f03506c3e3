#include "fleetsim/network.hpp"

#include <algorithm>

#include "fleetsim/error.hpp"

namespace fleetsim {

Network::Network(std::vector<double> link_capacity_Bps)
    : capacity_(std::move(link_capacity_Bps)),
      link_flows_(capacity_.size()),
      link_stamp_(capacity_.size(), 0),
      link_bytes_(capacity_.size(), 0.0) {
  for (double c : capacity_) FLEETSIM_CHECK(c > 0, "link capacity must be positive");
}

std::uint32_t Network::start(std::span<const std::uint32_t> route, double bytes, double latency_s,
                             std::uint64_t tag, double now) {
  std::uint32_t id;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
  } else {
    id = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_stamp_.push_back(0);
    heap_pos_.push_back(kNotQueued);
  }
  Flow& f = flows_[id];
  f.route.assign(route.begin(), route.end());
  f.remaining_bytes = bytes;
  f.size_bytes = bytes;
  f.rate_Bps = 0;
  f.updated_s = now;
  f.latency_s = latency_s;
  f.tag = tag;
  ++in_flight_;
  if (route.empty() || bytes <= 0) {
    f.phase = Phase::delivering;
    schedule(id, now + latency_s);
    return id;
  }
  f.phase = Phase::sending;
  for (std::uint32_t l : f.route) {
    FLEETSIM_CHECK(l < capacity_.size(), "route names a link that does not exist");
    link_flows_[l].push_back(id);
    links_touched_.push_back(l);
  }
  reshare(now);
  return id;
}

double Network::next_time() const {
  return heap_.empty() ? std::numeric_limits<double>::infinity() : flows_[heap_.front()].due_s;
}

void Network::sift_up(std::size_t i) {
  const std::uint32_t moving = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!earlier(moving, heap_[parent])) break;
    heap_[i] = heap_[parent];
    heap_pos_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = parent;
  }
  heap_[i] = moving;
  heap_pos_[moving] = static_cast<std::uint32_t>(i);
}

void Network::sift_down(std::size_t i) {
  const std::uint32_t moving = heap_[i];
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= heap_.size()) break;
    if (child + 1 < heap_.size() && earlier(heap_[child + 1], heap_[child])) ++child;
    if (!earlier(heap_[child], moving)) break;
    heap_[i] = heap_[child];
    heap_pos_[heap_[i]] = static_cast<std::uint32_t>(i);
    i = child;
  }
  heap_[i] = moving;
  heap_pos_[moving] = static_cast<std::uint32_t>(i);
}

void Network::schedule(std::uint32_t flow, double due_s) {
  flows_[flow].due_s = due_s;
  if (heap_pos_[flow] == kNotQueued) {
    heap_.push_back(flow);
    sift_up(heap_.size() - 1);
  } else {
    const std::size_t i = heap_pos_[flow];
    sift_up(i);
    sift_down(heap_pos_[flow]);
  }
}

void Network::unschedule(std::uint32_t flow) {
  const std::size_t i = heap_pos_[flow];
  heap_pos_[flow] = kNotQueued;
  const std::uint32_t last = heap_.back();
  heap_.pop_back();
  if (last == flow) return;
  heap_[i] = last;
  heap_pos_[last] = static_cast<std::uint32_t>(i);
  sift_up(i);
  sift_down(heap_pos_[last]);
}

void Network::settle(std::uint32_t flow, double now) {
  Flow& f = flows_[flow];
  const double sent = std::min(f.remaining_bytes, f.rate_Bps * (now - f.updated_s));
  f.remaining_bytes -= sent;
  for (std::uint32_t l : f.route) link_bytes_[l] += sent;
  f.updated_s = now;
}

void Network::settle_all(double now) {
  for (std::uint32_t f = 0; f < flows_.size(); ++f) {
    if (flows_[f].phase == Phase::sending) settle(f, now);
  }
}

void Network::detach(std::uint32_t flow) {
  for (std::uint32_t l : flows_[flow].route) {
    auto& on_link = link_flows_[l];
    const auto it = std::find(on_link.begin(), on_link.end(), flow);
    FLEETSIM_CHECK(it != on_link.end(), "flow missing from its link");
    *it = on_link.back();
    on_link.pop_back();
    links_touched_.push_back(l);
  }
}

void Network::advance(double now, std::vector<FlowDelivery>& delivered) {
  while (!heap_.empty() && flows_[heap_.front()].due_s <= now) {
    const double t = flows_[heap_.front()].due_s;
    // Everything due at this instant first, then one recomputation of the rates.
    while (!heap_.empty() && flows_[heap_.front()].due_s == t) {
      const std::uint32_t id = heap_.front();
      Flow& f = flows_[id];
      if (f.phase == Phase::sending) {
        settle(id, t);
        f.remaining_bytes = 0;  // its due time was computed for exactly this
        f.rate_Bps = 0;
        detach(id);
        f.phase = Phase::delivering;
        schedule(id, t + f.latency_s);
      } else {
        unschedule(id);
        f.phase = Phase::free;
        free_slots_.push_back(id);
        --in_flight_;
        delivered.push_back(FlowDelivery{id, f.tag});
      }
    }
    if (!links_touched_.empty()) reshare(t);
  }
}

void Network::cancel_if(const std::function<bool(std::uint64_t)>& drop, double now, std::vector<std::uint64_t>& dropped) {
  for (std::uint32_t id = 0; id < flows_.size(); ++id) {
    Flow& f = flows_[id];
    if (f.phase == Phase::free || !drop(f.tag)) continue;
    if (f.phase == Phase::sending) {
      settle(id, now);
      detach(id);
      f.rate_Bps = 0;
    }
    if (heap_pos_[id] != kNotQueued) unschedule(id);
    f.phase = Phase::free;
    free_slots_.push_back(id);
    --in_flight_;
    dropped.push_back(f.tag);
  }
  if (!links_touched_.empty()) reshare(now);
}

void Network::reshare(double now) {
  // Collect the component: links touched, their flows, those flows' links, and so on.
  if (++stamp_ == 0) {
    std::fill(link_stamp_.begin(), link_stamp_.end(), 0);
    std::fill(flow_stamp_.begin(), flow_stamp_.end(), 0);
    stamp_ = 1;
  }
  component_links_.clear();
  component_flows_.clear();
  for (std::uint32_t l : links_touched_) {
    if (link_stamp_[l] != stamp_) {
      link_stamp_[l] = stamp_;
      component_links_.push_back(l);
    }
  }
  links_touched_.clear();
  for (std::size_t i = 0; i < component_links_.size(); ++i) {
    for (std::uint32_t f : link_flows_[component_links_[i]]) {
      if (flow_stamp_[f] == stamp_) continue;
      flow_stamp_[f] = stamp_;
      component_flows_.push_back(f);
      for (std::uint32_t l : flows_[f].route) {
        if (link_stamp_[l] != stamp_) {
          link_stamp_[l] = stamp_;
          component_links_.push_back(l);
        }
      }
    }
  }

  // Solve on local indices.
  local_link_.resize(capacity_.size());
  local_capacity_.clear();
  for (std::size_t i = 0; i < component_links_.size(); ++i) {
    local_link_[component_links_[i]] = static_cast<std::uint32_t>(i);
    local_capacity_.push_back(capacity_[component_links_[i]]);
  }
  local_offsets_.assign(1, 0);
  local_route_links_.clear();
  for (std::uint32_t f : component_flows_) {
    settle(f, now);
    for (std::uint32_t l : flows_[f].route) local_route_links_.push_back(local_link_[l]);
    local_offsets_.push_back(static_cast<std::uint32_t>(local_route_links_.size()));
  }
  local_rates_.assign(component_flows_.size(), 0.0);
  if (!component_flows_.empty()) solver_.solve(local_capacity_, local_offsets_, local_route_links_, local_rates_);

  // No link above capacity: the solver promises it; checking costs one pass over the routes.
  local_load_.assign(component_links_.size(), 0.0);
  for (std::size_t i = 0; i < component_flows_.size(); ++i) {
    for (std::uint32_t k = local_offsets_[i]; k < local_offsets_[i + 1]; ++k) local_load_[local_route_links_[k]] += local_rates_[i];
  }
  for (std::size_t l = 0; l < component_links_.size(); ++l) {
    FLEETSIM_CHECK(local_load_[l] <= local_capacity_[l] * (1 + 1e-9), "link above capacity");
  }
  for (std::size_t i = 0; i < component_flows_.size(); ++i) {
    const std::uint32_t id = component_flows_[i];
    Flow& f = flows_[id];
    f.rate_Bps = local_rates_[i];
    // Snap residues: a flow with (almost) nothing left finishes now, not in a storm of tiny events.
    const bool done = f.remaining_bytes <= 1e-9 * f.size_bytes;
    schedule(id, done ? now : now + f.remaining_bytes / f.rate_Bps);
  }
  if (recording_) {
    last_rate_.resize(capacity_.size(), 0.0);
    for (std::uint32_t l : component_links_) {
      double total = 0;
      for (std::uint32_t f : link_flows_[l]) total += flows_[f].rate_Bps;
      if (total == last_rate_[l]) continue;
      last_rate_[l] = total;
      samples_.push_back(LinkSample{now, l, total});
    }
  }
}

}  // namespace fleetsim
