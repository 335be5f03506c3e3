// The flow-level network model. A transfer is a flow of bytes over a route of directed links;
// the links' capacities are shared max-min fairly among the flows crossing them, and a flow is
// delivered its route's latency after its last byte left. A flow may carry a cap of its own (the rate
// its sender can drive, such as a protocol's), which acts as a private link of that capacity. A route
// may list a link twice (host memory a transfer is staged in): the flow then draws twice its rate there.
// The sharing is exact up to rounding by default (kExactTolerance). A larger tolerance bounds the cost of a
// change on a congested fabric: a link within that share of its capacity counts as full, and a flow within it of
// the largest rate on such a link as bottlenecked there, so changes smaller than it stop spreading (the rates are
// then max-min fair within the tolerance; reports/performance.md measures what that costs in accuracy).
// When a flow starts or ends, rates are
// recomputed only for the flows whose rates can change: the solver re-levels a growing set of flows
// (with every other flow's rate held) until every flow has a bottleneck, a saturated link on which
// no flow gets more, which characterizes the max-min allocation, so the result is the allocation a
// solve from scratch gives. Flows started at one instant are solved together.
//
// As a resource model it answers two questions: when does the next flow finish (next_time), and
// advance to time t (advance), which reports the flows delivered by then.
//
// When a link fails, its sending flows are rerouted (what they have left goes on over the new route)
// or, when no route is left, stranded: in flight, moving nothing, until their owner cancels them. A
// link marked down must carry no flow; start and reroute check it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "fleetsim/maxmin.hpp"

namespace fleetsim {

struct FlowDelivery {
  std::uint32_t flow;
  std::uint64_t tag;  // the owner's label, given at start
};

// One change of a link's load: from `time_s` on, its flows carry `rate_Bps` in total.
struct LinkSample {
  double time_s;
  std::uint32_t link;
  double rate_Bps;
};

class Network {
 public:
  static constexpr double kExactTolerance = 1e-10;  // room for rounding only
  explicit Network(std::vector<double> link_capacity_Bps, double tolerance = kExactTolerance);

  std::size_t link_count() const { return capacity_.size(); }
  double capacity(std::uint32_t link) const { return capacity_[link]; }

  // Starts a flow at `now`, moving at most `cap_Bps`. An empty route or zero bytes means only the
  // latency is paid.
  std::uint32_t start(std::span<const std::uint32_t> route, double bytes, double latency_s, std::uint64_t tag,
                      double now, double cap_Bps = std::numeric_limits<double>::infinity());
  // When the next flow finishes sending or is delivered; infinity when none is in flight.
  double next_time();
  // Room for `flows` in flight without growing (a caller that starts many at once: a large all-to-all's
  // million), so that starting them moves no flow already kept.
  void reserve(std::size_t flows);
  // Starts a flow that no route can carry: in flight, moving nothing, until cancelled.
  std::uint32_t start_stranded(double bytes, double latency_s, std::uint64_t tag, double now);
  // Moves a sending flow to `route` at `now`: the bytes it has left go on from there, and it is
  // delivered `latency_s` after its last byte.
  void reroute(std::uint32_t flow, std::span<const std::uint32_t> route, double latency_s, double now);
  // Takes a sending flow off its route at `now` (bytes sent so far are counted): it moves nothing more.
  void strand(std::uint32_t flow, double now);
  // Appends the flows sending over `link` now, in id order.
  void sending_on(std::uint32_t link, std::vector<std::uint32_t>& out) const;
  // A flow's route, valid until the next flow is started or rerouted.
  std::span<const std::uint32_t> route(std::uint32_t flow) const { return {hop_link_.data() + flows_[flow].hop_at, flows_[flow].hops}; }
  double latency_s(std::uint32_t flow) const { return flows_[flow].latency_s; }
  double cap_Bps(std::uint32_t flow) const { return flows_[flow].cap_Bps; }
  std::uint64_t tag(std::uint32_t flow) const { return flows_[flow].tag; }
  // A link marked down must have no sending flow, and no flow may start or be rerouted over it.
  void set_link_down(std::uint32_t link, bool down);

  // Advances to `now` (not past next_time()) and appends the flows delivered by then.
  void advance(double now, std::vector<FlowDelivery>& delivered);
  // Stops every flow in flight whose tag `drop` accepts, at `now` (bytes sent so far are counted),
  // and appends their tags to `dropped`. The others' rates are recomputed.
  void cancel_if(const std::function<bool(std::uint64_t tag)>& drop, double now, std::vector<std::uint64_t>& dropped);

  std::size_t flows_in_flight() const { return in_flight_; }
  double rate(std::uint32_t flow) {
    flush();
    return rate_[flow];
  }
  // Bytes each link has carried: the flows that have left it, and those still on it as far as settle_all took them.
  const std::vector<double>& link_bytes() const { return link_bytes_; }
  // The work of keeping rates max-min fair so far: re-levellings (one per batch of changes at an
  // instant), the flows they re-solved in all (a flow solved twice in one counts twice), and how many
  // fell back to a solve of the whole connected component.
  // Of the re-levellings, `one_link` were one full link's flows given its capacity over their number, and `alone` new
  // flows each alone on its route (or links left with no flow) given what their routes offer.
  // Of the one-link divisions, `by_class` were a processor-sharing class's, answered without walking its flows' routes,
  // and `forks` re-levellings new flows' alone, in groups that each fill one link of theirs (a fork leaving an idle GPU).
  struct SolveCounts {
    std::uint64_t relevellings = 0, flows_solved = 0, component_solves = 0, one_link = 0, alone = 0, by_class = 0, forks = 0;
  };
  const SolveCounts& solve_counts() const { return solve_counts_; }
  // Counts every sending flow's bytes up to `now`, as at the end of a run.
  void settle_all(double now);
  // Every change of a link's total rate, in time order; only when recording is on.
  void record_samples(bool on) { recording_ = on; }
  // Re-levels every change through the growing set, even where one link's division, or a lone flow's route, gives the
  // same rates (for the tests that hold the two to that, bit for bit).
  void always_relevel(bool on) { always_relevel_ = on; }
  const std::vector<LinkSample>& samples() const { return samples_; }

 private:
  enum class Phase : std::uint8_t { free, sending, delivering, stranded };
  // A flow's route lies in hop_link_ from hop_at, `hops` links, in room for hop_room kept between uses of the slot
  // (at least kHopRoom, so routes of a fabric's usual lengths never move); hop_pos_ beside it holds, while it
  // sends, each hop's place in that link's flows.
  struct Flow {
    std::uint32_t hop_at = 0, hops = 0, hop_room = 0;
    double remaining_bytes = 0;
    double size_bytes = 0;
    double credited_bytes = 0;  // of what it sent, the bytes its links' totals hold
    double updated_s = 0;
    double latency_s = 0;
    double cap_Bps = std::numeric_limits<double>::infinity();
    std::uint64_t tag = 0;
    Phase phase = Phase::free;
    bool crosses_twice = false;  // a link of its route (host memory it is staged in)
  };

  static constexpr std::uint32_t kHopRoom = 8;
  std::vector<std::uint32_t> hop_link_, hop_pos_;
  void set_route(Flow& f, std::span<const std::uint32_t> route);
  std::uint32_t new_slot();
  void settle(std::uint32_t flow, double now);  // its remaining bytes, at the rate it had since last settled
  void credit(std::uint32_t flow);              // its links' totals, with what it sent since last credited
  double due_at(std::uint32_t flow, double now) const;  // at its rate, residues snapped to now
  void attach(std::uint32_t flow, double now);  // onto its route's links, to be solved with the flows of `now`
  void detach(std::uint32_t flow);
  void touch(std::uint32_t link);  // before its flows change
  bool full_now(std::uint32_t link);  // at the rates the last re-levelling left
  void flush();              // solves the flows started at pending_s_
  void reshare(double now);  // new rates after the changes on links_touched_ and new_flows_
  void list_new_flows();                 // into set_, each once; checked_ marks them
  bool reshare_alone(double now);        // false: not that case, nothing changed
  bool reshare_fork(double now);         // false: not that case, nothing changed
  bool reshare_one_link(double now);     // false: not that case, nothing changed that matters
  bool reshare_class(double now);        // false: not that case, and every class a touched link belongs to dissolved
  void give_level(std::uint32_t full, double level, double now);  // set_, the flows of `full`
  bool reshare_incremental(double now);  // false: gave up, nothing scheduled
  void schedule_set(double now);         // due times of set_ after its new rates
  // Processor-sharing classes. When the one-link division gives a full link's flows its level and each of their other
  // links carries only flows of that link (a fork's transfers leaving one NIC for their own receivers), the flows form
  // a class: while its links change only by its flows ending, each end is answered by the division again, which needs
  // none of its checks over the flows' routes (every other link still offers a flow more than the level: the shares
  // only grow as flows leave), and only the flow due first has an entry in the heap (the others keep their due times
  // beside it), so an end costs the settling of the class's flows and one heap entry moved. Anything else that
  // touches a link of the class (a flow joining it, a cancel, a move) dissolves it first: its flows are queued at
  // their due times and the re-levelling goes on as without it, so rates, due times and bytes are the same to the
  // bit either way.
  static constexpr std::uint32_t kNoClass = 0xFFFFFFFFu;
  std::uint32_t class_to_divide();  // the class whose own ends alone make this batch, where its division answers
  void form_class(std::uint32_t link, double share_bound, double now);  // instead of schedule_set
  double class_share_bound(std::uint32_t link) const;  // what its other links offer each flow now, at least
  void schedule_class(std::uint32_t link, double now);  // due times of set_, its flows; the first queued
  void queue_first(std::uint32_t link);                 // the class's flow due first, in the heap
  void queue(std::uint32_t link, std::uint32_t first);  // that flow the class's one in the heap
  void leave_class(std::uint32_t flow);                 // a flow of a class that ended sending, detached
  void dissolve(std::uint32_t link);
  void dissolve_class_of(std::uint32_t flow) {
    if (member_of_[flow] != kNoClass) dissolve(member_of_[flow]);
  }
  void reshare_component(double now);    // recomputes the component(s) around links_touched_
  void add_cap_link(std::uint32_t flow);
  // Incremental re-levelling: the set of flows being re-solved, and the state of links under the
  // current rates (cached until a flow of the link changes rate, arrives or leaves).
  void join(std::uint32_t flow, double now);
  void solve_set();
  bool has_bottleneck(std::uint32_t flow);
  struct LinkState {
    double load_Bps = 0;
    double max_rate_Bps = 0;
  };
  const LinkState& link_state(std::uint32_t link);
  bool saturated(std::uint32_t link, const LinkState& s) const { return s.load_Bps >= capacity_[link] * (1 - tolerance_); }
  bool bottleneck_on(std::uint32_t flow, std::uint32_t link, const LinkState& s) const;
  // Each flow in flight has exactly one entry in a heap ordered by (due time, flow): when it finishes
  // sending, or is delivered. A rate change moves the entry instead of leaving stale ones behind. The
  // heap is 4-ary with each entry's time in it, so a sift compares four children side by side (64
  // bytes) instead of reading each flow's record (a million-flow all-to-all spent a fifth of its time
  // sifting a binary heap of flow numbers).
  void schedule(std::uint32_t flow, double due_s);
  void unschedule(std::uint32_t flow);
  // Many due times at once (a re-levelling's): when they are a good part of the heap (rebuild_cheaper),
  // each is set in place (set_due) and the heap rebuilt in linear time (rebuild_heap), instead of each
  // entry sifted through it. The order of entries is total, so either way the flows come due in the
  // same order.
  bool rebuild_cheaper(std::size_t count) const;
  void set_due(std::uint32_t flow, double due_s);
  void rebuild_heap();
  struct Due {
    double time_s;
    std::uint32_t flow;
    bool operator<(const Due& o) const { return time_s < o.time_s || (time_s == o.time_s && flow < o.flow); }
  };
  static constexpr std::size_t kArity = 4;
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void place(std::size_t i, Due entry) {
    heap_[i] = entry;
    heap_pos_[entry.flow] = static_cast<std::uint32_t>(i);
  }

  double tolerance_;  // relative: of a link's capacity, and of the largest rate on it
  std::vector<double> capacity_;
  std::vector<std::uint8_t> link_down_;
  std::vector<std::vector<std::uint32_t>> link_flows_;  // sending flows per link
  std::vector<Flow> flows_;
  std::vector<double> rate_;  // per flow, apart from the rest: the solver's hot loops read only these
  std::vector<std::uint32_t> bottleneck_hop_;  // per flow: the hop of its route last found its bottleneck (a hint)
  std::vector<std::uint32_t> free_slots_;
  std::vector<Due> heap_;
  std::vector<std::uint32_t> heap_pos_;  // per flow: its index in heap_, or kNotQueued
  static constexpr std::uint32_t kNotQueued = 0xFFFFFFFFu;
  std::size_t in_flight_ = 0;
  std::size_t sending_ = 0;
  bool pending_ = false;  // flows started at pending_s_ not yet solved
  double pending_s_ = 0;
  std::vector<std::uint32_t> new_flows_;

  // Scratch for reshare().
  std::vector<std::uint32_t> links_touched_;
  std::vector<std::uint32_t> link_stamp_, flow_stamp_;
  std::uint32_t stamp_ = 0;
  void next_stamp();
  std::vector<std::uint32_t> component_links_, component_flows_, local_link_;
  // reshare_fork's: per link, the group of new flows crossing it (named by a link of theirs); per new flow, its group;
  // the new flows' places, by group; per group of two or more, where it begins there and its division.
  struct ForkLevel {
    std::uint32_t begin = 0, full = 0;
    double level = 0, share_bound = 0;
  };
  std::vector<std::uint32_t> link_group_, fork_group_, fork_order_, fork_flows_;
  std::vector<ForkLevel> fork_levels_;
  std::vector<double> local_capacity_, local_rates_, local_load_;
  std::vector<std::uint32_t> local_offsets_, local_route_links_;
  MaxMinSolver solver_;
  std::vector<std::uint32_t> set_, seed_links_, changed_links_;
  std::vector<double> set_old_rate_, set_prev_rate_;
  std::vector<std::uint64_t> in_set_, checked_, changed_mark_;  // stamps
  std::vector<LinkState> link_state_;
  std::vector<std::uint8_t> link_state_valid_;
  // Per link, during a re-levelling: the capacity the flows outside the set leave (valid while held_stamp_ is the
  // set's stamp; a flow of the link joining the set clears it).
  std::vector<double> held_left_;
  std::vector<std::uint64_t> held_stamp_;
  // Per link: the last batch of changes (between two re-levellings) that touched it, and whether it was full
  // before that batch's first change to it.
  std::vector<std::uint64_t> touched_;
  std::vector<std::uint8_t> was_full_;
  std::uint64_t batch_ = 1;
  std::uint64_t set_stamp_ = 0, check_stamp_ = 0, changed_stamp_ = 0;
  // Processor-sharing classes.
  std::vector<std::uint32_t> owner_;      // per link: the full link whose class its flows belong to, or kNoClass
  std::vector<std::uint32_t> queued_;     // per class's link: the flow of it in the heap
  std::vector<std::uint32_t> second_;     // per class's link: the flow due next after it, at the same due times
  std::vector<double> share_bound_;       // per class's link: each other link offers each flow at least this
  std::vector<std::uint32_t> member_of_;  // per flow: its class's link, or kNoClass
  std::vector<double> due_;               // per flow of a class: its due time
  std::size_t classes_ = 0;

  std::vector<double> link_bytes_;
  SolveCounts solve_counts_;
  bool recording_ = false;
  bool always_relevel_ = false;
  std::vector<LinkSample> samples_;
  std::vector<double> last_rate_;  // per link, the last recorded total
};

}  // namespace fleetsim
