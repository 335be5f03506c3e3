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
  }
  Flow& f = flows_[id];
  f.route.assign(route.begin(), route.end());
  f.remaining_bytes = bytes;
  f.size_bytes = bytes;
  f.rate_Bps = 0;
  f.updated_s = now;
  f.latency_s = latency_s;
  f.tag = tag;
  ++f.version;
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

double Network::next_time() {
  // Entries superseded by a rate change are dropped here, so the answer is a real event.
  while (!events_.empty()) {
    const Event& e = events_.top();
    const Flow& f = flows_[e.subject];
    if (e.kind == f.version && f.phase != Phase::free) return e.time_s;
    events_.discard_top();
  }
  return std::numeric_limits<double>::infinity();
}

void Network::schedule(std::uint32_t flow, double time_s) {
  events_.push(time_s, flows_[flow].version, flow);
}

void Network::settle(std::uint32_t flow, double now) {
  Flow& f = flows_[flow];
  const double sent = std::min(f.remaining_bytes, f.rate_Bps * (now - f.updated_s));
  f.remaining_bytes -= sent;
  for (std::uint32_t l : f.route) link_bytes_[l] += sent;
  f.updated_s = now;
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
  while (!events_.empty() && events_.top().time_s <= now) {
    const double t = events_.top().time_s;
    // Everything due at this instant first, then one recomputation of the rates.
    while (!events_.empty() && events_.top().time_s == t) {
      const Event e = events_.pop();
      Flow& f = flows_[e.subject];
      if (e.kind != f.version || f.phase == Phase::free) continue;  // superseded
      if (f.phase == Phase::sending) {
        settle(e.subject, t);
        f.remaining_bytes = 0;  // its finish time was computed for exactly this
        f.rate_Bps = 0;
        detach(e.subject);
        f.phase = Phase::delivering;
        ++f.version;
        schedule(e.subject, t + f.latency_s);
      } else {
        f.phase = Phase::free;
        ++f.version;
        free_slots_.push_back(e.subject);
        --in_flight_;
        delivered.push_back(FlowDelivery{e.subject, f.tag});
      }
    }
    if (!links_touched_.empty()) reshare(t);
  }
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

  for (std::size_t i = 0; i < component_flows_.size(); ++i) {
    const std::uint32_t id = component_flows_[i];
    Flow& f = flows_[id];
    f.rate_Bps = local_rates_[i];
    ++f.version;
    // Snap residues: a flow with (almost) nothing left finishes now, not in a storm of tiny events.
    const bool done = f.remaining_bytes <= 1e-9 * f.size_bytes;
    schedule(id, done ? now : now + f.remaining_bytes / f.rate_Bps);
  }
  if (recording_) {
    for (std::uint32_t l : component_links_) {
      double total = 0;
      for (std::uint32_t f : link_flows_[l]) total += flows_[f].rate_Bps;
      samples_.push_back(LinkSample{now, l, total});
    }
  }
}

}  // namespace fleetsim
