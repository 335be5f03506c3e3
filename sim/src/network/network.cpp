#include "fleetsim/network.hpp"

#include <algorithm>
#include <bit>
#include <functional>

#include "fleetsim/error.hpp"

namespace fleetsim {

namespace {
// The growing set's budget: it gives up, for a solve of the whole component, once the flows it has solved pass the
// sending flows' number by this many (a change that spreads that far is cheaper solved whole).
constexpr std::size_t kBudgetSlack = 16;

// The two flows due first of those offered, by time, then flow: a total order, so the same two from any order of
// offering (kNoClass, the largest flow number, at no time, where fewer were offered).
struct FirstTwo {
  double first_s = std::numeric_limits<double>::infinity(), second_s = std::numeric_limits<double>::infinity();
  std::uint32_t first = 0xFFFFFFFFu, second = 0xFFFFFFFFu;
  void offer(std::uint32_t flow, double due_s) {
    if (due_s < first_s || (due_s == first_s && flow < first)) {
      second = first;
      second_s = first_s;
      first = flow;
      first_s = due_s;
    } else if (due_s < second_s || (due_s == second_s && flow < second)) {
      second = flow;
      second_s = due_s;
    }
  }
};
}  // namespace

Network::Network(std::vector<double> link_capacity_Bps, double tolerance)
    : tolerance_(tolerance),
      capacity_(std::move(link_capacity_Bps)),
      link_down_(capacity_.size(), 0),
      link_flows_(capacity_.size()),
      link_stamp_(capacity_.size(), 0),
      changed_mark_(capacity_.size(), 0),
      link_state_(capacity_.size()),
      link_state_valid_(capacity_.size(), 0),
      held_left_(capacity_.size(), 0.0),
      held_stamp_(capacity_.size(), 0),
      touched_(capacity_.size(), 0),
      was_full_(capacity_.size(), 0),
      owner_(capacity_.size(), kNoClass),
      queued_(capacity_.size(), kNoClass),
      second_(capacity_.size(), kNoClass),
      share_bound_(capacity_.size(), 0.0),
      link_bytes_(capacity_.size(), 0.0) {
  for (double c : capacity_) FLEETSIM_CHECK(c > 0, "link capacity must be positive");
  FLEETSIM_CHECK(tolerance_ >= kExactTolerance && tolerance_ < 1, "the max-min tolerance must be from 1e-10 and below 1");
}

// The route goes in the slot's room where it fits, else in new room at the arenas' end (the old left unused: a
// route longer than kHopRoom, rerouted longer still, or a slot first used for a long one).
void Network::set_route(Flow& f, std::span<const std::uint32_t> route) {
  const auto hops = static_cast<std::uint32_t>(route.size());
  std::vector<std::uint32_t> copy;  // outlives the copy below
  if (hops > f.hop_room) {
    // A route given as another flow's (a span into hop_link_) would move as the arrays grow: copied first.
    const std::less<const std::uint32_t*> before;  // a total order, also for pointers into other arrays
    if (!hop_link_.empty() && !before(route.data(), hop_link_.data()) && before(route.data(), hop_link_.data() + hop_link_.size())) {
      copy.assign(route.begin(), route.end());
      route = copy;
    }
    const std::uint32_t room = std::max(hops, kHopRoom);
    FLEETSIM_CHECK(hop_link_.size() + room <= std::numeric_limits<std::uint32_t>::max(), "too many hops in flight");
    f.hop_at = static_cast<std::uint32_t>(hop_link_.size());
    f.hop_room = room;
    hop_link_.resize(hop_link_.size() + room);
    hop_pos_.resize(hop_pos_.size() + room);
  }
  std::copy(route.begin(), route.end(), hop_link_.begin() + f.hop_at);  // in its own room, the route may be its own already
  f.hops = hops;
  const auto at = hop_link_.begin() + f.hop_at;
  f.crosses_twice = false;
  for (std::uint32_t i = 1; i < hops && !f.crosses_twice; ++i) f.crosses_twice = std::find(at, at + i, at[i]) != at + i;
}

std::uint32_t Network::new_slot() {
  if (!free_slots_.empty()) {
    const std::uint32_t id = free_slots_.back();
    free_slots_.pop_back();
    return id;
  }
  const auto id = static_cast<std::uint32_t>(flows_.size());
  flows_.emplace_back();
  flow_stamp_.push_back(0);
  heap_pos_.push_back(kNotQueued);
  in_set_.push_back(0);
  checked_.push_back(0);
  rate_.push_back(0);
  bottleneck_hop_.push_back(0);
  member_of_.push_back(kNoClass);
  due_.push_back(0);
  return id;
}

void Network::reserve(std::size_t flows) {
  flows_.reserve(flows);
  hop_link_.reserve(flows * kHopRoom);
  hop_pos_.reserve(flows * kHopRoom);
  flow_stamp_.reserve(flows);
  heap_pos_.reserve(flows);
  in_set_.reserve(flows);
  checked_.reserve(flows);
  rate_.reserve(flows);
  bottleneck_hop_.reserve(flows);
  member_of_.reserve(flows);
  due_.reserve(flows);
}

std::uint32_t Network::start(std::span<const std::uint32_t> route, double bytes, double latency_s,
                             std::uint64_t tag, double now, double cap_Bps) {
  FLEETSIM_CHECK(cap_Bps > 0, "a flow's cap must be positive");
  if (pending_ && now != pending_s_) flush();
  const std::uint32_t id = new_slot();
  Flow& f = flows_[id];
  set_route(f, route);
  f.remaining_bytes = bytes;
  f.size_bytes = bytes;
  f.credited_bytes = 0;
  rate_[id] = 0;
  f.updated_s = now;
  f.latency_s = latency_s;
  f.cap_Bps = cap_Bps;
  f.tag = tag;
  ++in_flight_;
  if (route.empty() || bytes <= 0) {
    f.phase = Phase::delivering;
    schedule(id, now + latency_s);
    return id;
  }
  attach(id, now);
  return id;
}

std::uint32_t Network::start_stranded(double bytes, double latency_s, std::uint64_t tag, double now) {
  const std::uint32_t id = new_slot();
  Flow& f = flows_[id];
  f.hops = 0;
  f.remaining_bytes = f.size_bytes = bytes;
  f.credited_bytes = 0;
  rate_[id] = 0;
  f.updated_s = now;
  f.latency_s = latency_s;
  f.cap_Bps = std::numeric_limits<double>::infinity();
  f.tag = tag;
  f.phase = Phase::stranded;
  ++in_flight_;
  return id;
}

void Network::attach(std::uint32_t flow, double now) {
  Flow& f = flows_[flow];
  f.phase = Phase::sending;
  ++sending_;
  const std::uint32_t* links = hop_link_.data() + f.hop_at;
  std::uint32_t* link_pos = hop_pos_.data() + f.hop_at;
  for (std::size_t i = 0; i < f.hops; ++i) {
    const std::uint32_t l = links[i];
    FLEETSIM_CHECK(l < capacity_.size(), "route names a link that does not exist");
    FLEETSIM_CHECK(link_down_[l] == 0, "a flow was routed over a link that is down");
    touch(l);
    link_pos[i] = static_cast<std::uint32_t>(link_flows_[l].size());
    link_flows_[l].push_back(flow);
  }
  // Solved when next asked, together with every other flow started at this instant.
  new_flows_.push_back(flow);
  pending_ = true;
  pending_s_ = now;
}

void Network::reroute(std::uint32_t flow, std::span<const std::uint32_t> route, double latency_s, double now) {
  if (pending_ && now != pending_s_) flush();
  Flow& f = flows_[flow];
  FLEETSIM_CHECK(f.phase == Phase::sending && !route.empty(), "only a sending flow is rerouted, and over some link");
  dissolve_class_of(flow);
  settle(flow, now);
  detach(flow);
  if (heap_pos_[flow] != kNotQueued) unschedule(flow);
  rate_[flow] = 0;
  set_route(f, route);
  f.latency_s = latency_s;
  attach(flow, now);
}

void Network::strand(std::uint32_t flow, double now) {
  if (pending_ && now != pending_s_) flush();
  Flow& f = flows_[flow];
  FLEETSIM_CHECK(f.phase == Phase::sending, "only a sending flow is stranded");
  dissolve_class_of(flow);
  settle(flow, now);
  detach(flow);
  if (heap_pos_[flow] != kNotQueued) unschedule(flow);
  rate_[flow] = 0;
  f.hops = 0;
  f.phase = Phase::stranded;
  pending_ = true;  // the others' rates are recomputed with the next solve
  pending_s_ = now;
}

void Network::sending_on(std::uint32_t link, std::vector<std::uint32_t>& out) const {
  const std::size_t first = out.size();
  out.insert(out.end(), link_flows_[link].begin(), link_flows_[link].end());
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
}

void Network::set_link_down(std::uint32_t link, bool down) {
  FLEETSIM_CHECK(!down || link_flows_[link].empty(), "a link went down with flows still on it");
  link_down_[link] = down ? 1 : 0;
}

void Network::flush() {
  if (!pending_) return;
  pending_ = false;
  reshare(pending_s_);
}

double Network::next_time() {
  flush();
  return heap_.empty() ? std::numeric_limits<double>::infinity() : heap_.front().time_s;
}

void Network::sift_up(std::size_t i) {
  const Due moving = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / kArity;
    if (!(moving < heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, moving);
}

void Network::sift_down(std::size_t i) {
  const Due moving = heap_[i];
  for (;;) {
    const std::size_t first = kArity * i + 1;
    if (first >= heap_.size()) break;
    std::size_t least = first;
    for (std::size_t c = first + 1; c < std::min(first + kArity, heap_.size()); ++c) {
      if (heap_[c] < heap_[least]) least = c;
    }
    if (!(heap_[least] < moving)) break;
    place(i, heap_[least]);
    i = least;
  }
  place(i, moving);
}

void Network::schedule(std::uint32_t flow, double due_s) {
  if (heap_pos_[flow] == kNotQueued) {
    heap_.push_back({due_s, flow});
    sift_up(heap_.size() - 1);
  } else {
    const std::size_t i = heap_pos_[flow];
    heap_[i].time_s = due_s;
    sift_up(i);
    sift_down(heap_pos_[flow]);
  }
}

bool Network::rebuild_cheaper(std::size_t count) const {
  // A rebuild costs about two moves an entry; a sift, one a level, each a likely cache miss.
  return count * static_cast<std::size_t>(std::bit_width(heap_.size() + count)) > 2 * (heap_.size() + count);
}

void Network::set_due(std::uint32_t flow, double due_s) {
  if (heap_pos_[flow] == kNotQueued) {
    heap_pos_[flow] = static_cast<std::uint32_t>(heap_.size());
    heap_.push_back({due_s, flow});
  } else {
    heap_[heap_pos_[flow]].time_s = due_s;
  }
}

void Network::rebuild_heap() {
  if (heap_.size() < 2) return;
  for (std::size_t i = (heap_.size() - 2) / kArity + 1; i-- > 0;) sift_down(i);
}

void Network::unschedule(std::uint32_t flow) {
  const std::size_t i = heap_pos_[flow];
  heap_pos_[flow] = kNotQueued;
  const Due last = heap_.back();
  heap_.pop_back();
  if (last.flow == flow) return;
  place(i, last);
  sift_up(i);
  sift_down(heap_pos_[last.flow]);
}

// When the flow ends at its rate. Residues snap: a flow with (almost) nothing left finishes now, not in a storm of tiny
// events.
double Network::due_at(std::uint32_t flow, double now) const {
  const Flow& f = flows_[flow];
  return f.remaining_bytes <= 1e-9 * f.size_bytes ? now : now + f.remaining_bytes / rate_[flow];
}

void Network::settle(std::uint32_t flow, double now) {
  Flow& f = flows_[flow];
  f.remaining_bytes -= std::min(f.remaining_bytes, rate_[flow] * (now - f.updated_s));
  f.updated_s = now;
}

// A flow's links are credited with what it sent when it leaves them (a flow that ends, its whole size), not at each
// change of its rate: a processor-sharing class settles all its flows at each division, and walking their routes
// for the totals was a tenth of a fork-join run.
void Network::credit(std::uint32_t flow) {
  Flow& f = flows_[flow];
  const double sent = f.size_bytes - f.remaining_bytes;
  if (sent == f.credited_bytes) return;
  const double bytes = sent - f.credited_bytes;
  for (std::uint32_t l : route(flow)) link_bytes_[l] += bytes;
  f.credited_bytes = sent;
}

void Network::settle_all(double now) {
  flush();
  for (std::uint32_t f = 0; f < flows_.size(); ++f) {
    if (flows_[f].phase != Phase::sending) continue;
    settle(f, now);
    credit(f);
  }
}

// Each hop leaves its link's flows by a swap with the last and a pop, at the first place the flow
// holds there (a link crossed twice holds it twice), so the lists keep the order they always had; the
// places kept per hop spare a search through a link's flows, thousands on a busy one.
void Network::detach(std::uint32_t flow) {
  credit(flow);  // settled by the caller
  const Flow& f = flows_[flow];
  const std::uint32_t* links = hop_link_.data() + f.hop_at;
  std::uint32_t* link_pos = hop_pos_.data() + f.hop_at;
  constexpr std::uint32_t kLeft = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < f.hops; ++i) {
    const std::uint32_t l = links[i];
    std::size_t hop = i;  // of this flow's hops still on l, the one at the first place
    for (std::size_t j = 0; j < f.hops && f.crosses_twice; ++j) {
      if (links[j] == l && link_pos[j] != kLeft && link_pos[j] < link_pos[hop]) hop = j;
    }
    touch(l);
    auto& on_link = link_flows_[l];
    const std::uint32_t at = link_pos[hop], last = static_cast<std::uint32_t>(on_link.size() - 1);
    FLEETSIM_CHECK(at <= last && on_link[at] == flow, "flow missing from its link");
    link_pos[hop] = kLeft;
    const std::uint32_t moved = on_link[last];
    on_link[at] = moved;
    on_link.pop_back();
    if (at != last) {
      const Flow& m = flows_[moved];
      const std::uint32_t* m_links = hop_link_.data() + m.hop_at;
      std::uint32_t* m_pos = hop_pos_.data() + m.hop_at;
      for (std::size_t j = 0; j < m.hops; ++j) {
        if (m_links[j] == l && m_pos[j] == last) m_pos[j] = at;
      }
    }
  }
  --sending_;
}

// Called before a link's flows change: the link is listed once for the next re-levelling, with whether it was
// full at the rates the last one left (no flow had its bottleneck on a link that was not).
void Network::touch(std::uint32_t link) {
  if (touched_[link] != batch_) {
    touched_[link] = batch_;
    was_full_[link] = full_now(link) ? 1 : 0;
    links_touched_.push_back(link);
  }
  link_state_valid_[link] = 0;
}

// A class's links are known without summing their flows, all at its level. Its full link is full: the sum was found
// so when the level was given, and link_state adds the same values the same way. Another of its links carries the
// class's flows only and offers each at least the class's share bound; where that is above the level by more than
// rounding over their number could make up (a billionth, for fewer than a million flows), they do not fill it.
bool Network::full_now(std::uint32_t link) {
  const std::uint32_t owner = owner_[link];
  if (owner == link) return true;
  if (owner != kNoClass) {
    const std::vector<std::uint32_t>& on = link_flows_[link];
    if (!on.empty() && on.size() < 1'000'000 && share_bound_[owner] > rate_[on.front()] * (1 + 1e-9)) return false;
  }
  return saturated(link, link_state(link));
}

void Network::advance(double now, std::vector<FlowDelivery>& delivered) {
  flush();
  while (!heap_.empty() && heap_.front().time_s <= now) {
    const double t = heap_.front().time_s;
    // Everything due at this instant first, then one recomputation of the rates.
    while (!heap_.empty() && heap_.front().time_s == t) {
      const std::uint32_t id = heap_.front().flow;
      Flow& f = flows_[id];
      if (f.phase == Phase::sending) {
        settle(id, t);
        f.remaining_bytes = 0;  // its due time was computed for exactly this
        detach(id);  // at the rate it had, which the link's state before the change counts
        if (member_of_[id] != kNoClass) leave_class(id);
        rate_[id] = 0;
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
  flush();
  for (std::uint32_t id = 0; id < flows_.size(); ++id) {
    Flow& f = flows_[id];
    if (f.phase == Phase::free || !drop(f.tag)) continue;
    if (f.phase == Phase::sending) {
      dissolve_class_of(id);
      settle(id, now);
      detach(id);
      rate_[id] = 0;
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
  ++solve_counts_.relevellings;
  ++batch_;  // changes from here on are the next re-levelling's
  list_new_flows();  // for the shortcuts: those before the last leave it as it is when they decline
  if (reshare_class(now) || reshare_alone(now) || reshare_fork(now) || reshare_one_link(now)) {
    links_touched_.clear();
    new_flows_.clear();
    return;
  }
  seed_links_.assign(links_touched_.begin(), links_touched_.end());
  if (reshare_incremental(now)) {
    new_flows_.clear();
    return;
  }
  links_touched_.assign(seed_links_.begin(), seed_links_.end());
  new_flows_.clear();
  reshare_component(now);
}

// set_: the new flows that send, each once, in the order the growing set joins them; checked_ marks them.
void Network::list_new_flows() {
  ++check_stamp_;
  set_.clear();
  for (std::uint32_t f : new_flows_) {
    if (flows_[f].phase != Phase::sending || checked_[f] == check_stamp_) continue;
    checked_[f] = check_stamp_;
    set_.push_back(f);
  }
}

// Changes after which every link they touched carries no flow, or one that started (or moved) in this batch: such a
// flow shares no link with any other, old or new, and no flow left elsewhere lost a link it shared. The re-levelling
// below would join just the new flows, offer each every link of its route whole (no other flow holds any of it), give
// each the least its route or its cap offers (solve_set's answer for one flow; the solver's bounds for several that
// share nothing), find each bottlenecked where it got its rate, and set their due times. That is done here, with the
// same rates and due times to the bit, without the passes. A chain's tasks, each reading its input from the last,
// start and end their transfers this way, one at a time. A flow crossing a link twice is two entries on it: not here.
bool Network::reshare_alone(double now) {
  if (always_relevel_ || recording_) return false;
  for (std::uint32_t l : links_touched_) {
    const std::vector<std::uint32_t>& on = link_flows_[l];
    if (on.size() > 1 || (on.size() == 1 && checked_[on[0]] != check_stamp_)) return false;
  }
  set_old_rate_.clear();
  for (std::uint32_t f : set_) {
    settle(f, now);  // as join does: at the rate it had
    set_old_rate_.push_back(rate_[f]);
    double rate = flows_[f].cap_Bps;
    for (std::uint32_t l : route(f)) rate = std::min(rate, capacity_[l]);
    rate_[f] = rate;
  }
  solve_counts_.flows_solved += set_.size();
  ++solve_counts_.alone;
  schedule_set(now);
  return true;
}

// New flows that share no link with an old flow, in groups that share none with each other, each group's flows
// crossing one link that they fill at an equal share (a lone flow is a group of its own): a fork's transfers leaving
// an idle GPU, some through its NIC for other nodes and some over NVLink to its own. The growing set below would join
// just them (no old flow lost a bottleneck: every touched link carries new flows only), offer them every link whole,
// solve them once and find each bottlenecked where it got its rate. The solver gives each group the link's capacity
// over their number, as no link of the group offers less and those that offer as much are crossed once by each of
// them: one_level does where the group is all the flows; else the heap, whose groups freeze apart, each first at
// that link (its key fresh, the bounds' sum on it meeting its capacity). A lone flow gets the least of its route.
// That is done here, with the same rates and due times to the bit, without the passes. Where every other link of a
// group offers more than the level, its flows form a processor-sharing class at once, as reshare_one_link would form
// it at their first end.
bool Network::reshare_fork(double now) {
  if (always_relevel_ || recording_ || tolerance_ != kExactTolerance || set_.size() < 2) return false;
  for (std::uint32_t l : links_touched_) {
    for (std::uint32_t g : link_flows_[l]) {
      if (checked_[g] != check_stamp_) return false;  // an old flow shares it
    }
  }
  // How many of them cross each link, numbered in the order the solver would number them.
  next_stamp();
  local_link_.resize(capacity_.size());
  component_links_.clear();
  for (std::uint32_t f : set_) {
    if (flows_[f].cap_Bps != std::numeric_limits<double>::infinity() || flows_[f].crosses_twice) return false;
    for (std::uint32_t l : route(f)) {
      if (link_stamp_[l] != stamp_) {
        link_stamp_[l] = stamp_;
        local_link_[l] = 0;
        component_links_.push_back(l);
      }
      ++local_link_[l];
    }
  }
  // Each flow's group is named by the first link of its route that most of them cross; every link's flows must be
  // of one group (else the groups share a link).
  constexpr std::uint32_t kNoLink = 0xFFFFFFFFu;
  link_group_.resize(capacity_.size());
  for (std::uint32_t l : component_links_) link_group_[l] = kNoLink;
  fork_group_.clear();
  for (std::uint32_t f : set_) {
    const std::span<const std::uint32_t> hops = route(f);
    std::uint32_t hub = hops.front();
    for (std::uint32_t l : hops) hub = local_link_[l] > local_link_[hub] ? l : hub;
    for (std::uint32_t l : hops) {
      if (link_group_[l] == kNoLink) link_group_[l] = hub;
      if (link_group_[l] != hub) return false;
    }
    fork_group_.push_back(hub);
  }
  // The flows by group, each group's in their order (a link's flows are all of one group, the hub's, whose count is
  // the group's size).
  fork_order_.resize(set_.size());
  for (std::uint32_t i = 0; i < fork_order_.size(); ++i) fork_order_[i] = i;
  std::sort(fork_order_.begin(), fork_order_.end(), [&](std::uint32_t a, std::uint32_t b) {
    return fork_group_[a] < fork_group_[b] || (fork_group_[a] == fork_group_[b] && a < b);
  });
  // Each group of two or more: its level, and the least share its other links offer.
  fork_levels_.clear();
  for (std::size_t begin = 0, end = 0; begin < fork_order_.size(); begin = end) {
    const std::uint32_t hub = fork_group_[fork_order_[begin]], k = local_link_[hub];
    end = begin + k;
    if (k < 2) continue;  // a lone flow: the least its route offers
    const auto group = std::span(fork_order_).subspan(begin, k);
    // The first of the links they all cross at the least share, in the solver's order (only the group's flows cross
    // its links, so it meets them in the same order as when walking all).
    std::uint32_t full = kNoLink;
    double level = 0;
    for (std::uint32_t i : group) {
      for (std::uint32_t l : route(set_[i])) {
        const double share = capacity_[l] / local_link_[l];
        if (local_link_[l] == k && (full == kNoLink || share < level)) {
          full = l;
          level = share;
        }
      }
    }
    double share_bound = std::numeric_limits<double>::infinity(), demand = 0;
    for (std::uint32_t i : group) {
      const std::span<const std::uint32_t> hops = route(set_[i]);
      double bound = capacity_[hops.front()];
      for (std::uint32_t l : hops) {
        const double share = capacity_[l] / local_link_[l];
        if (share < level || (share == level && local_link_[l] != k)) return false;
        if (l != full) share_bound = std::min(share_bound, share);
        bound = std::min(bound, capacity_[l]);
      }
      demand += bound;  // the solver's own test, in its order
    }
    if (demand < capacity_[full] * (1 - 1e-12)) return false;
    double load = 0;  // as link_state will sum it: the link full, their bottleneck
    for (std::uint32_t n = 0; n < k; ++n) load += level;
    if (load < capacity_[full] * (1 - tolerance_)) return false;
    fork_levels_.push_back(ForkLevel{static_cast<std::uint32_t>(begin), full, level, share_bound});
  }

  ++solve_counts_.forks;
  for (std::uint32_t l : component_links_) link_state_valid_[l] = 0;
  fork_flows_.assign(set_.begin(), set_.end());
  for (std::uint32_t i : fork_order_) {  // the lone flows
    if (local_link_[fork_group_[i]] != 1) continue;
    set_.assign(1, fork_flows_[i]);
    double rate = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : route(fork_flows_[i])) rate = std::min(rate, capacity_[l]);
    give_level(fork_group_[i], rate, now);
    schedule_set(now);
  }
  for (const ForkLevel& g : fork_levels_) {
    set_.clear();
    component_links_.clear();  // the group's other links
    for (std::uint32_t i : std::span(fork_order_).subspan(g.begin, local_link_[g.full])) {
      set_.push_back(fork_flows_[i]);
      for (std::uint32_t l : route(fork_flows_[i])) {
        if (l != g.full) component_links_.push_back(l);
      }
    }
    give_level(g.full, g.level, now);
    if (g.share_bound > g.level) {
      form_class(g.full, g.share_bound, now);
    } else {
      schedule_set(now);
    }
  }
  return true;
}

// Flows that left one full link, or joined it, and no other full one: when every flow on that link crosses it once,
// has no cap and no other link near full (after a join that leaves the link full, none that other flows cross), and
// finds room on each of its other links for the link's new fair share, the re-levelling below would give each the
// link's capacity over their number, and leave every other flow as it was. Leaving: its first pass looks only at full
// links, and finds none of the flows left bottlenecked elsewhere, so it joins exactly them. Joining (every new flow
// on that link): the new flows are solved first, get what the others leave of the link (nothing, to rounding), are
// found without a bottleneck, and the faster flows, the link's others, join them (or, where flows also left and the
// link is no longer full, the others join at once). Either way the last solve is the solver's one_level, with the
// same local capacities, summed in the same order, after which every flow has its bottleneck on that link, and no
// other flow had its bottleneck on a link that was not full. That is answered here in one pass over their routes,
// with the same rates and due times to the bit. A fork's transfers leaving one NIC end one by one this way; each end
// re-levelled all the others at several times the cost. A transfer that starts where another is sending (a chain's
// next input, a layer's reads meeting at a NIC) joins this way.
bool Network::reshare_one_link(double now) {
  if (always_relevel_ || recording_) return false;
  constexpr std::uint32_t kNoLink = 0xFFFFFFFFu;
  std::uint32_t full = kNoLink;
  for (std::uint32_t l : links_touched_) {
    if (was_full_[l] == 0) continue;
    if (full != kNoLink) return false;
    full = l;
  }
  if (full == kNoLink) return false;
  const std::vector<std::uint32_t>& flows = link_flows_[full];
  const std::size_t joining = set_.size();  // the new flows, listed by list_new_flows
  for (std::uint32_t f : set_) {  // each on that link
    const std::span<const std::uint32_t> hops = route(f);
    if (std::find(hops.begin(), hops.end(), full) == hops.end()) return false;
  }
  // Joining is left to the growing set under a coarser tolerance: there the new flows' first share may count as the
  // link's largest.
  if (joining > 0 && tolerance_ != kExactTolerance) return false;
  const LinkState& full_state = link_state(full);  // with the new flows at nothing yet
  const bool still_full = saturated(full, full_state);
  if (flows.size() < 2 || (joining == 0 && still_full)) return false;
  // The growing set's first solve gives the new flows what the full link has left (rounding's residue, or up to the
  // tolerance's share of it): that much more, crossing a link at most twice, and the sums' rounding, must not fill a
  // link other flows cross, or they would join the set. A leave has no such solve: a link is full as saturated says.
  const double pad = joining == 0 ? 0.0 : 2 * std::max(0.0, capacity_[full] - full_state.load_Bps);
  const double full_share = joining == 0 ? 1 - tolerance_ : 1 - tolerance_ - 1e-12;
  // The growing set gives up past its budget (and the component's solve settles other flows): so does this.
  if (joining > 0 && joining + flows.size() > sending_ + kBudgetSlack) return false;
  const double level = capacity_[full] / static_cast<double>(flows.size());

  // The flows of the link, each once and uncapped; on local_link_, how many of them cross each of their other links.
  ++set_stamp_;
  next_stamp();
  local_link_.resize(capacity_.size());
  component_links_.clear();
  for (std::uint32_t g : flows) {
    if (in_set_[g] == set_stamp_ || flows_[g].cap_Bps != std::numeric_limits<double>::infinity()) return false;
    in_set_[g] = set_stamp_;
    for (std::uint32_t l : route(g)) {
      if (l == full) continue;
      if (link_stamp_[l] != stamp_) {
        link_stamp_[l] = stamp_;
        local_link_[l] = 0;
        component_links_.push_back(l);
      }
      ++local_link_[l];
    }
  }
  if (joining == 0) {
    set_.assign(flows.begin(), flows.end());
  } else {
    for (std::uint32_t g : flows) {  // after the new flows, as the growing set lists them
      if (checked_[g] != check_stamp_) set_.push_back(g);
    }
  }
  // Their other links: not full (so none is bottlenecked there), with a share (what the other flows leave, over
  // their crossings) above the level, and every other flow on them bottlenecked (it stays so: its bottleneck is a
  // full link, and none of these is). The checks only decline, so their order does not matter. Where no other flow
  // crosses any of them, the flows form a processor-sharing class (under the exact tolerance: a coarser one could
  // find a link full on a later end that the class would not look at).
  bool pure = tolerance_ == kExactTolerance;
  double share_bound = std::numeric_limits<double>::infinity();
  for (std::uint32_t l : component_links_) {
    // The link's state (as link_state sums it) and what the others leave, in one pass.
    LinkState state;
    double left = capacity_[l];
    bool others = false;
    for (std::uint32_t g : link_flows_[l]) {
      const double r = rate_[g];
      state.load_Bps += r;
      state.max_rate_Bps = std::max(state.max_rate_Bps, r);
      if (in_set_[g] != set_stamp_) {
        left -= r;
        others = true;
      }
    }
    link_state_[l] = state;
    link_state_valid_[l] = 1;
    // Full, or filled by the new flows' first share. One that only the link's flows cross may be so when the link is
    // still full with the new flows at nothing: the growing set then joins all its flows after solving the new ones,
    // whatever their other bottlenecks.
    if (state.load_Bps + pad >= capacity_[l] * full_share && (others || !still_full)) return false;
    held_left_[l] = std::max(0.0, left);
    const double share = held_left_[l] / local_link_[l];
    if (!(share > level)) return false;
    share_bound = std::min(share_bound, share);
    if (!others) continue;
    pure = false;
    for (std::uint32_t g : link_flows_[l]) {
      if (in_set_[g] != set_stamp_ && !has_bottleneck(g)) return false;
    }
  }
  // The link full again at the level (as the checks after a solve sum it), and the solver's own demand test: the
  // sum of each flow's bound (its narrowest link in the local problem), none below the level (each share above it
  // is), so no sum below the level's, in the same order; summed only when that does not settle it.
  double load = 0;
  for (std::size_t i = 0; i < flows.size(); ++i) load += level;
  if (load < capacity_[full] * (1 - tolerance_)) return false;
  if (load < capacity_[full] * (1 - 1e-12)) {
    double demand = 0;
    for (std::uint32_t g : set_) {
      double bound = capacity_[full];
      for (std::uint32_t l : route(g)) bound = std::min(bound, l == full ? capacity_[full] : held_left_[l]);
      demand += bound;
    }
    if (demand < capacity_[full] * (1 - 1e-12)) return false;
  }

  give_level(full, level, now);
  for (std::uint32_t l : component_links_) link_state_valid_[l] = 0;  // their other links', each listed once
  if (pure) {
    form_class(full, share_bound, now);
  } else {
    schedule_set(now);
  }
  return true;
}

// Flows of one class ended, and nothing else changed on its links: reshare_one_link's division for flows leaving,
// without its walk over their routes. Its checks there hold without looking: every flow of the link is uncapped and
// crosses it once (a class's routes do not change), no other flow crosses their other links, and each of those links
// offers each of its flows at least share_bound_, the least share when the class formed or class_to_divide last
// looked (its flows there only leave since), above the new level; such a link then carries less than the (k + 1) / k of the level it carried
// before times its flows' number, far from full. Any other change declines, and dissolves the classes it touched.
bool Network::reshare_class(double now) {
  if (classes_ == 0) return false;
  const std::uint32_t full = class_to_divide();
  if (full == kNoClass) {
    for (std::uint32_t l : links_touched_) {
      if (owner_[l] != kNoClass) dissolve(owner_[l]);
    }
    return false;
  }
  // give_level and schedule_class in one pass, every flow being of the class: each settled at the rate it had, given
  // the level, and its due time recomputed where its rate moved (always: the level of fewer flows is more).
  const std::vector<std::uint32_t>& flows = link_flows_[full];
  const double level = capacity_[full] / static_cast<double>(flows.size());
  FirstTwo due;
  for (std::uint32_t g : flows) {
    settle(g, now);
    if (rate_[g] != level) {
      rate_[g] = level;
      due_[g] = due_at(g, now);
    }
    due.offer(g, due_[g]);
  }
  // The other links' states are never kept while the class lives: only the full link's to forget.
  link_state_valid_[full] = 0;
  solve_counts_.flows_solved += flows.size();
  ++solve_counts_.one_link;
  ++solve_counts_.by_class;
  queue(full, due.first);
  second_[full] = due.second;
  return true;
}

// The division's answer for the flows of set_, as join would but with no solve to come: each settled at the rate it
// had, then given the level.
void Network::give_level(std::uint32_t full, double level, double now) {
  set_old_rate_.clear();
  for (std::uint32_t g : set_) {
    settle(g, now);
    set_old_rate_.push_back(rate_[g]);
    rate_[g] = level;
  }
  link_state_valid_[full] = 0;
  solve_counts_.flows_solved += set_.size();
  ++solve_counts_.one_link;
}

// The class whose flows alone ended in this batch, the one full link it touched, where the division answers; else none.
std::uint32_t Network::class_to_divide() {
  if (!set_.empty() || always_relevel_ || recording_) return kNoClass;
  std::uint32_t full = kNoClass;
  for (std::uint32_t l : links_touched_) {
    if (was_full_[l] == 0) continue;
    if (full != kNoClass) return kNoClass;
    full = l;
  }
  if (full == kNoClass || owner_[full] != full) return kNoClass;
  for (std::uint32_t l : links_touched_) {  // the class's, or left with no flow
    if (owner_[l] != full && !(owner_[l] == kNoClass && link_flows_[l].empty())) return kNoClass;
  }
  // The link is not still full: its k flows are at the level of the k + 1 or more it had, so they carry at most
  // k / (k + 1) of it.
  const std::size_t k = link_flows_[full].size();
  const double level = capacity_[full] / static_cast<double>(k);
  if (k < 2) return kNoClass;
  if (!(share_bound_[full] > level)) {  // the bound kept may have grown since: looked at anew
    share_bound_[full] = class_share_bound(full);
    if (!(share_bound_[full] > level)) return kNoClass;
  }
  // Full again at the level, as reshare_one_link sums it (short of that by rounding: left to it, after dissolving).
  // Summed only for many flows: k terms each within half an ulp of capacity / k add up to within k ulps of the
  // capacity, so for up to 900 (1e-13) the sum cannot fall short of the 1e-12 margin.
  if (k <= 900) return full;
  double load = 0;
  for (std::size_t i = 0; i < k; ++i) load += level;
  return load >= capacity_[full] * (1 - 1e-12) ? full : kNoClass;
}

// The least share the class's other links offer now, as reshare_one_link would find it: each carries the class's
// flows only, so its capacity over their crossings. It only grows as flows leave, so the bound found when the class
// formed holds until the level reaches it; then this tells whether the class can still divide, where dissolving it
// would have the one-link division walk the same routes and form it again.
double Network::class_share_bound(std::uint32_t full) const {
  double bound = std::numeric_limits<double>::infinity();
  for (std::uint32_t g : link_flows_[full]) {
    for (std::uint32_t l : route(g)) {
      if (l != full) bound = std::min(bound, capacity_[l] / static_cast<double>(link_flows_[l].size()));
    }
  }
  return bound;
}

void Network::form_class(std::uint32_t link, double share_bound, double now) {
  ++classes_;
  owner_[link] = link;
  for (std::uint32_t l : component_links_) owner_[l] = link;
  share_bound_[link] = share_bound;
  queued_[link] = kNoClass;
  schedule_class(link, now);
}

// As schedule_set, but each due time kept beside its flow, and the first (by time, then flow, as the heap orders
// them) alone in the heap; the second is kept for when the first ends. After the loop every flow of set_ is of the
// class, and set_ holds all its flows, so the two are found in the same pass.
void Network::schedule_class(std::uint32_t link, double now) {
  FirstTwo due;
  for (std::size_t i = 0; i < set_.size(); ++i) {
    const std::uint32_t id = set_[i];
    const bool member = member_of_[id] == link;
    if (rate_[id] == set_old_rate_[i] && (member || heap_pos_[id] != kNotQueued)) {  // keeps its due time
      if (!member) due_[id] = heap_[heap_pos_[id]].time_s;
    } else {
      due_[id] = due_at(id, now);
    }
    if (!member) {
      if (heap_pos_[id] != kNotQueued) unschedule(id);
      member_of_[id] = link;
    }
    due.offer(id, due_[id]);
  }
  queue(link, due.first);
  second_[link] = due.second;
}

void Network::queue_first(std::uint32_t link) {
  FirstTwo due;
  for (std::uint32_t g : link_flows_[link]) {
    if (member_of_[g] == link) due.offer(g, due_[g]);
  }
  queue(link, due.first);
  second_[link] = due.second;
}

void Network::queue(std::uint32_t link, std::uint32_t first) {
  const std::uint32_t was = queued_[link];
  if (was != kNoClass && was != first) unschedule(was);
  queued_[link] = first;
  if (first != kNoClass) schedule(first, due_[first]);
}

// The flow due first ended sending (its heap entry goes on as its delivery's): the next in its place, at the due time
// it has at the rates of now, so that flows due at the same instant end in the same pass. The next is the second,
// kept since the due times were set (none has changed), unless that one ended too in this pass: then they are looked
// through again.
void Network::leave_class(std::uint32_t flow) {
  const std::uint32_t link = member_of_[flow];
  member_of_[flow] = kNoClass;
  for (std::uint32_t l : route(flow)) {
    if (link_flows_[l].empty()) owner_[l] = kNoClass;
  }
  const bool was_first = queued_[link] == flow;
  if (was_first) queued_[link] = kNoClass;
  if (link_flows_[link].empty()) {
    --classes_;
    return;
  }
  const std::uint32_t next = second_[link];
  if (was_first && next != kNoClass && member_of_[next] == link) {
    queue(link, next);
    second_[link] = kNoClass;
  } else {
    queue_first(link);
  }
}

// Each flow of the class queued at its due time, and the marks on its links cleared, as if it had never formed.
void Network::dissolve(std::uint32_t link) {
  for (std::uint32_t g : link_flows_[link]) {
    if (member_of_[g] != link) continue;  // joined in this batch
    member_of_[g] = kNoClass;
    if (g != queued_[link]) schedule(g, due_[g]);
    for (std::uint32_t l : route(g)) {
      owner_[l] = kNoClass;
      link_state_valid_[l] = 0;
    }
  }
  owner_[link] = kNoClass;
  queued_[link] = kNoClass;
  --classes_;
}

// A stamp no link or flow carries yet (all cleared when the counter wraps).
void Network::next_stamp() {
  if (++stamp_ != 0) return;
  std::fill(link_stamp_.begin(), link_stamp_.end(), 0);
  std::fill(flow_stamp_.begin(), flow_stamp_.end(), 0);
  stamp_ = 1;
}

void Network::join(std::uint32_t flow, double now) {
  settle(flow, now);  // at the rate it had
  in_set_[flow] = set_stamp_;
  for (std::uint32_t l : route(flow)) held_stamp_[l] = 0;  // what the others leave of its links is counted anew
  set_.push_back(flow);
  set_old_rate_.push_back(rate_[flow]);
  set_prev_rate_.push_back(rate_[flow]);
}

const Network::LinkState& Network::link_state(std::uint32_t link) {
  LinkState& s = link_state_[link];
  if (link_state_valid_[link] != 0) return s;
  link_state_valid_[link] = 1;
  s = LinkState{};
  for (std::uint32_t f : link_flows_[link]) {
    const double r = rate_[f];
    s.load_Bps += r;
    s.max_rate_Bps = std::max(s.max_rate_Bps, r);
  }
  return s;
}

// A flow's bottleneck: a saturated link of its route on which no flow gets more than it. A feasible
// allocation in which every flow has one is the max-min fair allocation.
// The hop last found to be the flow's bottleneck is looked at first: a flow mostly keeps its bottleneck, and
// the others' link states need not be brought up to date to find it (on a congested fabric most of a re-levelling
// went into such checks).
bool Network::has_bottleneck(std::uint32_t flow) {
  const double r = rate_[flow];
  const Flow& f = flows_[flow];
  if (r >= f.cap_Bps * (1 - tolerance_)) return true;  // its own cap
  const std::uint32_t* links = hop_link_.data() + f.hop_at;
  const auto bottleneck_at = [&](std::uint32_t hop) {
    const LinkState& s = link_state(links[hop]);
    return saturated(links[hop], s) && r >= s.max_rate_Bps * (1 - tolerance_);
  };
  std::uint32_t& hint = bottleneck_hop_[flow];
  if (hint < f.hops && bottleneck_at(hint)) return true;
  for (std::uint32_t hop = 0; hop < f.hops; ++hop) {
    if (hop != hint && bottleneck_at(hop)) {
      hint = hop;
      return true;
    }
  }
  return false;
}

// Whether `link`, one of the flow's, is its bottleneck, or its own cap is: enough to know it has one without
// walking its route.
bool Network::bottleneck_on(std::uint32_t flow, std::uint32_t link, const LinkState& s) const {
  const double r = rate_[flow];
  return r >= flows_[flow].cap_Bps * (1 - tolerance_) || (saturated(link, s) && r >= s.max_rate_Bps * (1 - tolerance_));
}

// Max-min over the flows of set_, with every other flow's rate held: each link offers what the
// others leave of it (kept per link through one re-levelling, until a flow of it joins the set).
void Network::solve_set() {
  solve_counts_.flows_solved += set_.size();
  next_stamp();
  local_link_.resize(capacity_.size());
  component_links_.clear();
  local_capacity_.clear();
  local_offsets_.assign(1, 0);
  local_route_links_.clear();
  for (std::uint32_t f : set_) {
    for (std::uint32_t l : route(f)) {
      if (link_stamp_[l] != stamp_) {
        link_stamp_[l] = stamp_;
        local_link_[l] = static_cast<std::uint32_t>(local_capacity_.size());
        component_links_.push_back(l);
        if (held_stamp_[l] != set_stamp_) {
          held_stamp_[l] = set_stamp_;
          double left = capacity_[l];
          for (std::uint32_t g : link_flows_[l]) {
            if (in_set_[g] != set_stamp_) left -= rate_[g];
          }
          held_left_[l] = left;
        }
        local_capacity_.push_back(std::max(0.0, held_left_[l]));
      }
      local_route_links_.push_back(local_link_[l]);
    }
    add_cap_link(f);
    local_offsets_.push_back(static_cast<std::uint32_t>(local_route_links_.size()));
  }
  if (set_.size() == 1) {  // alone, a flow gets the least any link of its route (or its cap) offers
    // A link it crosses twice (host memory it is staged in) offers it half.
    double rate = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : local_route_links_) {
      const auto crossings = std::count(local_route_links_.begin(), local_route_links_.end(), l);
      rate = std::min(rate, local_capacity_[l] / static_cast<double>(crossings));
    }
    rate_[set_[0]] = rate;
    return;
  }
  local_rates_.assign(set_.size(), 0.0);
  solver_.solve(local_capacity_, local_offsets_, local_route_links_, local_rates_);
  for (std::size_t i = 0; i < set_.size(); ++i) rate_[set_[i]] = local_rates_[i];
}

// Starts from the new flows and the links that lost flows; re-solves the set of flows whose rates
// may change, holding the others, and grows the set with every flow that is left without a
// bottleneck (its rate must change) or that takes more than a set flow on that flow's saturated
// links (it must give some up), until no flow needs to join. Gives up, leaving the rest to a solve
// of the whole component, when the set's solves have cost about as much as that would.
bool Network::reshare_incremental(double now) {
  ++set_stamp_;
  set_.clear();
  set_old_rate_.clear();
  set_prev_rate_.clear();
  for (std::uint32_t f : new_flows_) {
    if (flows_[f].phase == Phase::sending && in_set_[f] != set_stamp_) join(f, now);
  }
  ++changed_stamp_;
  changed_links_.clear();
  for (std::uint32_t l : links_touched_) {
    if (changed_mark_[l] == changed_stamp_) continue;
    changed_mark_[l] = changed_stamp_;
    changed_links_.push_back(l);
  }
  links_touched_.clear();
  bool solved = set_.empty(), first = true;
  std::size_t work = 0;
  const std::size_t budget = sending_ + kBudgetSlack;
  for (;;) {
    // Who must join: flows on changed links left without a bottleneck, and flows taking more than
    // a set flow on its saturated links when that flow has no bottleneck. A flow loses its bottleneck
    // only on a link that was full: the first pass, over the links whose flows came and went, looks
    // at those that were (on a congested fabric most a finishing flow leaves are not); later passes at
    // every link on which the solve moved a rate.
    ++check_stamp_;
    const std::size_t before = set_.size();
    bool stuck = false;
    for (std::uint32_t l : changed_links_) {
      if (first && was_full_[l] == 0) continue;
      const LinkState state = link_state(l);  // joining moves no rate
      for (std::uint32_t g : link_flows_[l]) {
        if (in_set_[g] == set_stamp_ || checked_[g] == check_stamp_) continue;
        checked_[g] = check_stamp_;
        if (!bottleneck_on(g, l, state) && !has_bottleneck(g)) join(g, now);
      }
    }
    if (solved) {
      for (std::size_t i = 0; i < before; ++i) {
        const std::uint32_t f = set_[i];
        if (has_bottleneck(f)) continue;
        const double r = rate_[f];
        const std::size_t joined = set_.size();
        for (std::uint32_t l : route(f)) {
          if (!saturated(l, link_state(l))) continue;
          for (std::uint32_t g : link_flows_[l]) {
            if (in_set_[g] != set_stamp_ && rate_[g] > r * (1 + tolerance_)) join(g, now);
          }
        }
        if (set_.size() == joined) stuck = true;
      }
    }
    if (set_.size() == before) {
      if (solved && !stuck) break;
      if (solved) return false;  // rounding left a flow without a bottleneck and nobody to blame
    }
    work += set_.size();
    if (work > budget) return false;
    solve_set();
    solved = true;
    first = false;
    ++changed_stamp_;
    changed_links_.clear();
    for (std::size_t i = 0; i < set_.size(); ++i) {
      const std::uint32_t f = set_[i];
      if (rate_[f] == set_prev_rate_[i]) continue;
      set_prev_rate_[i] = rate_[f];
      for (std::uint32_t l : route(f)) {
        link_state_valid_[l] = 0;
        if (changed_mark_[l] == changed_stamp_) continue;
        changed_mark_[l] = changed_stamp_;
        changed_links_.push_back(l);
      }
    }
  }

  // No link above capacity: the solver promises it; checking costs one pass over the set's links.
  for (std::uint32_t f : set_) {
    for (std::uint32_t l : route(f)) {
      FLEETSIM_CHECK(link_state(l).load_Bps <= capacity_[l] * (1 + 1e-9), "link above capacity");
    }
  }
  schedule_set(now);
  return true;
}

// The set's new due times (a flow whose rate did not move keeps its entry), and, when recording, the new totals of
// the links whose flows' rates moved.
void Network::schedule_set(double now) {
  ++changed_stamp_;
  const bool rebuild = rebuild_cheaper(set_.size());
  for (std::size_t i = 0; i < set_.size(); ++i) {
    const std::uint32_t id = set_[i];
    if (rate_[id] == set_old_rate_[i] && heap_pos_[id] != kNotQueued) continue;  // keeps its due time
    const double due_s = due_at(id, now);
    rebuild ? set_due(id, due_s) : schedule(id, due_s);
    if (recording_) {
      for (std::uint32_t l : route(id)) {
        if (changed_mark_[l] == changed_stamp_) continue;
        changed_mark_[l] = changed_stamp_;
        seed_links_.push_back(l);
      }
    }
  }
  if (rebuild) rebuild_heap();
  if (recording_) {
    last_rate_.resize(capacity_.size(), 0.0);
    for (std::uint32_t l : seed_links_) {
      if (changed_mark_[l] == changed_stamp_ + 1) continue;  // listed twice
      changed_mark_[l] = changed_stamp_ + 1;
      const double total = link_state(l).load_Bps;
      if (total == last_rate_[l]) continue;
      last_rate_[l] = total;
      samples_.push_back(LinkSample{now, l, total});
    }
    ++changed_stamp_;
  }
}

// A capped flow crosses a private link of its cap's capacity in the local problem.
void Network::add_cap_link(std::uint32_t flow) {
  const double cap = flows_[flow].cap_Bps;
  if (cap == std::numeric_limits<double>::infinity()) return;
  local_route_links_.push_back(static_cast<std::uint32_t>(local_capacity_.size()));
  local_capacity_.push_back(cap);
}

void Network::reshare_component(double now) {
  // Collect the component: links touched, their flows, those flows' links, and so on.
  next_stamp();
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
      for (std::uint32_t l : route(f)) {
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
    for (std::uint32_t l : route(f)) local_route_links_.push_back(local_link_[l]);
    add_cap_link(f);
    local_offsets_.push_back(static_cast<std::uint32_t>(local_route_links_.size()));
  }
  local_rates_.assign(component_flows_.size(), 0.0);
  ++solve_counts_.component_solves;
  solve_counts_.flows_solved += component_flows_.size();
  if (!component_flows_.empty()) solver_.solve(local_capacity_, local_offsets_, local_route_links_, local_rates_);

  // No link above capacity: the solver promises it; checking costs one pass over the routes.
  local_load_.assign(local_capacity_.size(), 0.0);
  for (std::size_t i = 0; i < component_flows_.size(); ++i) {
    for (std::uint32_t k = local_offsets_[i]; k < local_offsets_[i + 1]; ++k) local_load_[local_route_links_[k]] += local_rates_[i];
  }
  for (std::size_t l = 0; l < local_capacity_.size(); ++l) {
    FLEETSIM_CHECK(local_load_[l] <= local_capacity_[l] * (1 + 1e-9), "link above capacity");
  }
  const bool rebuild = rebuild_cheaper(component_flows_.size());
  for (std::size_t i = 0; i < component_flows_.size(); ++i) {
    const std::uint32_t id = component_flows_[i];
    rate_[id] = local_rates_[i];
    const double due_s = due_at(id, now);
    rebuild ? set_due(id, due_s) : schedule(id, due_s);
  }
  if (rebuild) rebuild_heap();
  for (std::uint32_t l : component_links_) link_state_valid_[l] = 0;
  if (recording_) {
    last_rate_.resize(capacity_.size(), 0.0);
    for (std::uint32_t l : component_links_) {
      double total = 0;
      for (std::uint32_t f : link_flows_[l]) total += rate_[f];
      if (total == last_rate_[l]) continue;
      last_rate_[l] = total;
      samples_.push_back(LinkSample{now, l, total});
    }
  }
}

}  // namespace fleetsim
