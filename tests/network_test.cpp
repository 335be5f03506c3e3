// The network model against closed forms: max-min fairness on textbook cases, the flow model's
// timing of shared links, ring all-reduce against 2(n-1)/n * S/B + 2(n-1) * alpha, collectives that
// share links, and the bandwidth an oversubscribed fat-tree leaves between leaves.
#include <catch2/catch.hpp>
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/maxmin.hpp"
#include "fleetsim/nccl.hpp"
#include "fleetsim/network.hpp"
#include "fleetsim/rng.hpp"
#include "fleetsim/topology.hpp"
#include "helpers.hpp"

using namespace fleetsim;

namespace {

// Runs the network until every flow is delivered: (time, tag) of each delivery.
std::vector<std::pair<double, std::uint64_t>> deliveries(Network& net) {
  std::vector<std::pair<double, std::uint64_t>> seen;
  std::vector<FlowDelivery> done;
  while (net.flows_in_flight() > 0) {
    const double t = net.next_time();
    done.clear();
    net.advance(t, done);
    for (const auto& d : done) seen.emplace_back(t, d.tag);
  }
  return seen;
}

std::vector<double> max_min(const std::vector<double>& capacity, const std::vector<std::vector<std::uint32_t>>& flows,
                            bool always_fill = false) {
  std::vector<std::uint32_t> offsets{0}, links;
  for (const auto& f : flows) {
    links.insert(links.end(), f.begin(), f.end());
    offsets.push_back(static_cast<std::uint32_t>(links.size()));
  }
  std::vector<double> rates(flows.size());
  MaxMinSolver solver;
  solver.always_fill(always_fill);
  solver.solve(capacity, offsets, links, rates);
  return rates;
}

// A cluster of `count` nodes of a catalog node type, on the given fabric.
struct Built {
  Scenario scenario;
  Cluster cluster;
  Topology topology;
  explicit Built(Scenario sc) : scenario(std::move(sc)), cluster(scenario.cluster), topology(cluster, scenario.cluster.fabric) {}
};

Built build(const std::string& nodes, const std::string& fabric = R"({"topology": "single-switch"})") {
  return Built(test::unit_scenario(R"("cluster": {"nodes": )" + nodes + R"(, "fabric": )" + fabric + R"(},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
}

std::vector<GpuId> first_gpus(std::uint32_t n) {
  std::vector<GpuId> g;
  for (std::uint32_t i = 0; i < n; ++i) g.push_back(make_id<GpuId>(i));
  return g;
}

std::vector<std::uint32_t> route(const Topology& t, std::uint32_t from, std::uint32_t to, std::uint64_t key = 0) {
  std::vector<std::uint32_t> r;
  t.route(from, to, key, r);
  return r;
}

}  // namespace

TEST_CASE("max-min: flows sharing one link split it evenly", "[network][maxmin]") {
  // One link of 12: three flows get 4 each.
  CHECK(max_min({12}, {{0}, {0}, {0}}) == std::vector<double>{4, 4, 4});
}

TEST_CASE("max-min: a flow that crosses a link twice draws twice its rate there", "[network][maxmin]") {
  // A transfer staged in host memory (written, then read) beside one that only reads: 2r + r = 60.
  CHECK(max_min({60}, {{0, 0}, {0}}) == std::vector<double>{20, 20});
  // The same through the incremental network, alone and then beside the other.
  Network net({60.0});
  const std::vector<std::uint32_t> twice{0, 0}, once{0};
  const auto staged = net.start(twice, 60, 0, 0, 0.0);
  CHECK(net.next_time() == Approx(2.0));  // alone: 30 of the link's 60
  net.start(once, 20, 0, 1, 0.0);
  CHECK(net.next_time() == Approx(1.0));  // 20 each: the second ends at 1 s
  std::vector<FlowDelivery> done;
  net.advance(1.0, done);
  REQUIRE(done.size() == 1);
  CHECK(done[0].tag == 1);
  CHECK(net.next_time() == Approx(1.0 + 40.0 / 30));  // 40 left at 30 again
  (void)staged;
}

TEST_CASE("max-min: a bottleneck elsewhere frees capacity for the others", "[network][maxmin]") {
  // Links 0 (cap 10) and 1 (cap 1). Flow A crosses both and is held to 1 by link 1;
  // flow B, on link 0 alone, takes the remaining 9.
  const auto r = max_min({10, 1}, {{0, 1}, {0}});
  CHECK(r[0] == Approx(1));
  CHECK(r[1] == Approx(9));
}

TEST_CASE("max-min: the textbook line network", "[network][maxmin]") {
  // Bertsekas & Gallager's example shape: links 0 and 1 of capacity 1 in a line; flow 0 crosses both,
  // flows 1 and 2 one each. Every link is shared by two flows: all get 1/2.
  CHECK(max_min({1, 1}, {{0, 1}, {0}, {1}}) == std::vector<double>{0.5, 0.5, 0.5});
  // With link 1 at capacity 3: flow 0 is still held to 1/2 by link 0, so flow 2 gets 2.5.
  const auto r = max_min({1, 3}, {{0, 1}, {0}, {1}});
  CHECK(r[0] == Approx(0.5));
  CHECK(r[1] == Approx(0.5));
  CHECK(r[2] == Approx(2.5));
}

TEST_CASE("max-min: levels freeze in order", "[network][maxmin]") {
  // Link 0 (cap 3) carries flows 0, 1, 2; link 1 (cap 10) carries flows 2, 3.
  // Level 1: link 0 saturates at 1 each for flows 0, 1, 2; flow 3 then takes 10 - 1 = 9.
  const auto r = max_min({3, 10}, {{0}, {0}, {0, 1}, {1}});
  CHECK_THAT(r, Catch::Matchers::Approx(std::vector<double>{1, 1, 1, 9}));
  // No link is over capacity and every flow has a saturated link (the max-min conditions).
  CHECK(r[0] + r[1] + r[2] <= 3 + 1e-9);
  CHECK(r[2] + r[3] <= 10 + 1e-9);
}

TEST_CASE("max-min: a link every flow crosses, tighter than the rest, gives the filling's rates bit for bit", "[network][maxmin]") {
  // Forks: every flow leaves over one link (a NIC of capacity 50 or 7, odd so shares round; the last link, so that
  // others at its share come first in the filling's order of ties) and goes on over links drawn from a few
  // others, some shared, of capacities that sometimes tie with or undercut the NIC's share; now and then a flow
  // crosses a link twice. The shortcut must give exactly what the level-by-level filling gives, whether it takes
  // the problem or leaves it to the heap.
  std::size_t one_level = 0, filled = 0;
  for (std::uint64_t seed = 1; seed <= 2000; ++seed) {
    Rng rng(seed, 0, "maxmin-one-level");
    const std::size_t flows = 2 + rng.next() % 30;
    const double nic = std::array{50.0, 7.0, 0.3, 12.345}[seed % 4];
    const std::uint32_t others = 1 + static_cast<std::uint32_t>(rng.next() % 6);
    std::vector<double> capacity;
    for (std::uint32_t l = 0; l < others; ++l) {
      const double pick = rng.uniform();
      const double crossings = static_cast<double>(1 + rng.next() % 3);  // a link this many flows cross ties
      capacity.push_back(pick < 0.2 ? nic : pick < 0.5 ? nic / static_cast<double>(flows) * crossings : 1.0 + 100.0 * rng.uniform());
    }
    capacity.push_back(nic);
    std::vector<std::vector<std::uint32_t>> routes(flows, std::vector<std::uint32_t>{others});
    for (auto& r : routes) {
      const std::size_t hops = rng.next() % 3;
      for (std::size_t h = 0; h < hops; ++h) r.push_back(static_cast<std::uint32_t>(rng.next() % others));
      if (rng.uniform() < 0.05) r.push_back(others);  // twice over the NIC
    }
    const std::vector<double> shortcut = max_min(capacity, routes), full = max_min(capacity, routes, true);
    INFO("seed " << seed);
    CHECK(shortcut == full);
    const double level = nic / static_cast<double>(flows);
    ++(std::all_of(full.begin(), full.end(), [&](double r) { return r == level; }) ? one_level : filled);
  }
  // Both kinds of problem were drawn: every flow at the NIC's share, and levels split.
  CHECK(one_level >= 200);
  CHECK(filled >= 200);
}

TEST_CASE("max-min: random problems meet the max-min conditions, and flows that never meet on a full link get their narrowest", "[network][maxmin]") {
  // Each flow crosses a few shared links and, for most, a private one (a cap). Roomy shared links leave every flow
  // its narrowest link's capacity, exactly (the solver's way around its heap); tight ones make flows give way.
  // Either way: no link above capacity, and every flow has a bottleneck (a full link on which none gets more).
  std::size_t roomy = 0, tight = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed, 0, "maxmin-conditions");
    const std::uint32_t shared = 1 + static_cast<std::uint32_t>(rng.next() % 12);
    const std::size_t flows = 1 + rng.next() % 40;
    const double room = seed % 2 == 0 ? 100.0 : 1.0;  // shared links' capacity against the caps' (0.25 to 2 each)
    std::vector<double> capacity;
    for (std::uint32_t l = 0; l < shared; ++l) capacity.push_back(room * static_cast<double>(1 + rng.next() % 4));
    std::vector<std::vector<std::uint32_t>> routes(flows);
    for (auto& r : routes) {
      const std::size_t hops = 1 + rng.next() % 3;
      for (std::size_t h = 0; h < hops; ++h) r.push_back(static_cast<std::uint32_t>(rng.next() % shared));
      if (rng.uniform() < 0.8) {
        r.push_back(static_cast<std::uint32_t>(capacity.size()));
        capacity.push_back(0.25 * static_cast<double>(1 + rng.next() % 8));
      }
    }
    const std::vector<double> rates = max_min(capacity, routes);
    CHECK(rates == max_min(capacity, routes, true));  // the shortcuts give the heap's rates, bit for bit
    std::vector<double> load(capacity.size(), 0.0), most(capacity.size(), 0.0);
    for (std::size_t f = 0; f < flows; ++f) {
      for (std::uint32_t l : routes[f]) {
        load[l] += rates[f];
        most[l] = std::max(most[l], rates[f]);
      }
    }
    INFO("seed " << seed);
    for (std::size_t l = 0; l < capacity.size(); ++l) CHECK(load[l] <= capacity[l] * (1 + 1e-9));
    for (std::size_t f = 0; f < flows; ++f) {
      bool bottleneck = false;
      for (std::uint32_t l : routes[f]) bottleneck = bottleneck || (load[l] >= capacity[l] * (1 - 1e-9) && rates[f] >= most[l] * (1 - 1e-9));
      CHECK(bottleneck);
    }
    // Shared links (each crossing counted) that even every flow at its narrowest leaves room on: each gets exactly that.
    std::vector<double> demand(capacity.size(), 0.0);
    std::vector<int> crossings(capacity.size(), 0);
    std::vector<double> narrowest(flows, std::numeric_limits<double>::infinity());
    for (std::size_t f = 0; f < flows; ++f) {
      for (std::uint32_t l : routes[f]) narrowest[f] = std::min(narrowest[f], capacity[l]);
      for (std::uint32_t l : routes[f]) {
        demand[l] += narrowest[f];
        ++crossings[l];
      }
    }
    bool full = false;
    for (std::size_t l = 0; l < capacity.size(); ++l) full = full || (crossings[l] > 1 && demand[l] >= capacity[l] * (1 - 1e-12));
    ++(full ? tight : roomy);
    if (!full) CHECK(rates == narrowest);
  }
  CHECK(roomy > 10);
  CHECK(tight > 20);
}

TEST_CASE("flows share a link until one finishes, then the other speeds up", "[network]") {
  // One 1 GB/s link; flows of 1 GB and 2 GB start together with 1 ms of latency each.
  // Both send at 0.5 GB/s; the first finishes sending at 2 s (delivered 2.001 s); the second has 1 GB
  // left and sends it alone at 1 GB/s: done at 3 s, delivered 3.001 s.
  Network net({1e9});
  const std::uint32_t route[] = {0};
  net.start(route, 1e9, 1e-3, 1, 0.0);
  net.start(route, 2e9, 1e-3, 2, 0.0);
  const auto seen = deliveries(net);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].first == Approx(2.001));
  CHECK(seen[0].second == 1);
  CHECK(seen[1].first == Approx(3.001));
  CHECK(seen[1].second == 2);
  CHECK(net.link_bytes()[0] == Approx(3e9));
  // The max-min work: the two starts solved together (2 flows), the first's end re-solves the second
  // alone (1), the second's end leaves nothing to solve; never the whole component.
  CHECK(net.solve_counts().relevellings == 3);
  CHECK(net.solve_counts().flows_solved == 3);
  CHECK(net.solve_counts().component_solves == 0);
}

TEST_CASE("a link's total is the whole size of every flow that crossed it, and settle_all counts those still sending", "[network]") {
  // Flows of whole bytes over links of awkward capacities, sharing them in every way: each rate change settles a
  // flow by a rate times a time, and a flow ends once what it has left is within rounding of nothing. Totals built
  // from those pieces missed the residues; a flow's links are credited with its size when it leaves them, so each
  // total is the exact sum of whole numbers.
  const std::vector<double> capacity{3e9, 7e9 / 3, 1.1e9, 5e9 / 7, 2.2e9};
  std::vector<double> expected(capacity.size(), 0.0);
  const auto start_flows = [&](Network& net) {  // 200 flows, arriving over about 5 s; returns when the last started
    Rng rng(7, 0, "link-totals");
    std::fill(expected.begin(), expected.end(), 0.0);
    std::vector<FlowDelivery> done;
    double t = 0;
    for (std::uint32_t i = 0; i < 200; ++i) {
      std::vector<std::uint32_t> route;
      for (std::uint32_t l = 0; l < capacity.size(); ++l) {
        if (rng.uniform() < 0.4) route.push_back(l);
      }
      if (route.empty()) route.push_back(i % 5);
      const double bytes = std::floor(1e6 + rng.uniform() * 1e9);
      for (std::uint32_t l : route) expected[l] += bytes;
      t += rng.uniform() * 0.05;
      net.advance(t, done);
      net.start(route, bytes, 0.0, i, t);
    }
    return t;
  };
  Network net(capacity);
  (void)start_flows(net);
  (void)deliveries(net);
  CHECK(net.link_bytes() == expected);

  // Half way through, the flows still sending have sent part of their bytes: counted then, and not again later.
  Network halted(capacity);
  const double mid = start_flows(halted) + 0.5;
  std::vector<FlowDelivery> done;
  halted.advance(mid, done);
  halted.settle_all(mid);
  for (std::uint32_t l = 0; l < capacity.size(); ++l) CHECK(halted.link_bytes()[l] < expected[l]);
  (void)deliveries(halted);
  for (std::uint32_t l = 0; l < capacity.size(); ++l) CHECK(halted.link_bytes()[l] == Approx(expected[l]).epsilon(1e-15));
}

TEST_CASE("flows alone on their routes get the least their route or cap offers, and the rest the growing set", "[network][maxmin]") {
  // Links of 4, 1, 2, 8 and 2 GB/s. At 0 s, A crosses links 0 and 1 (1 GB) and B links 2 and 3 with a 0.5 GB/s cap
  // (1 GB): each alone on its route, so A gets link 1's 1 GB/s and B its cap, in one re-levelling without the
  // growing set. A's end at 1 s leaves links 0 and 1 with no flow: nothing to re-level, the same way. Then C (links 1
  // and 2) meets B on link 2, and E crosses link 4 twice (2 GB/s, so 1 GB/s): neither alone, the growing set solves
  // them: C gets link 1's 1 GB/s (link 2 has 1.5 left beside B's cap), E 1 GB/s, B keeps its cap.
  Network net({4e9, 1e9, 2e9, 8e9, 2e9});
  const std::uint32_t a_route[] = {0, 1}, b_route[] = {2, 3}, c_route[] = {1, 2}, e_route[] = {4, 4};
  const std::uint32_t a = net.start(a_route, 1e9, 0, 1, 0.0);
  const std::uint32_t b = net.start(b_route, 1e9, 0, 2, 0.0, 0.5e9);
  CHECK(net.rate(a) == 1e9);
  CHECK(net.rate(b) == 0.5e9);
  CHECK(net.solve_counts().relevellings == 1);
  CHECK(net.solve_counts().alone == 1);
  CHECK(net.solve_counts().flows_solved == 2);
  std::vector<FlowDelivery> delivered;
  CHECK(net.next_time() == 1.0);
  net.advance(1.0, delivered);
  REQUIRE(delivered.size() == 1);
  CHECK(delivered[0].tag == 1);
  CHECK(net.solve_counts().relevellings == 2);
  CHECK(net.solve_counts().alone == 2);
  const std::uint32_t c = net.start(c_route, 1e9, 0, 3, 1.0);
  const std::uint32_t e = net.start(e_route, 1e9, 0, 4, 1.0);
  CHECK(net.rate(c) == 1e9);
  CHECK(net.rate(e) == 1e9);
  CHECK(net.rate(b) == 0.5e9);
  CHECK(net.solve_counts().relevellings == 3);
  CHECK(net.solve_counts().alone == 2);
  CHECK(net.solve_counts().component_solves == 0);
}

TEST_CASE("a fork's flows with links of their own end as a processor-sharing class, and a flow joining one dissolves it", "[network][maxmin]") {
  // A 1 GB/s link shared by four flows of 1, 2, 3 and 4 GB, each going on over a 10 GB/s link of its own: a quarter
  // each until 4 s, then a third until 7 s, a half until 9 s, the last alone until 10 s. The start is the division of
  // the idle link among the new flows, which forms the class; the first and second ends are the class's; the third
  // leaves one flow, for the growing set.
  const std::vector<double> capacity{1e9, 10e9, 10e9, 10e9, 10e9, 10e9};
  Network net(capacity);
  std::vector<std::vector<std::uint32_t>> routes{{0, 1}, {0, 2}, {0, 3}, {0, 4}};
  for (std::uint32_t i = 0; i < 4; ++i) net.start(routes[i], 1e9 * (i + 1), 0, i, 0.0);
  const auto ends = deliveries(net);  // no latency: each delivered as it ends
  REQUIRE(ends.size() == 4);
  CHECK(ends[0].first == Approx(4.0));
  CHECK(ends[1].first == Approx(7.0));
  CHECK(ends[2].first == Approx(9.0));
  CHECK(ends[3].first == Approx(10.0));
  CHECK(net.solve_counts().forks == 1);
  CHECK(net.solve_counts().one_link == 3);
  CHECK(net.solve_counts().by_class == 2);
  CHECK(net.solve_counts().component_solves == 0);
  CHECK(net.link_bytes()[0] == Approx(10e9));
  CHECK(net.link_bytes()[3] == Approx(3e9));

  // Again, with a fifth flow joining the third's own link at 5 s: the class dissolves, and the growing set shares
  // the 1 GB/s link among four again (the newcomer too crosses it).
  Network joined(capacity);
  for (std::uint32_t i = 0; i < 4; ++i) joined.start(routes[i], 1e9 * (i + 1), 0, i, 0.0);
  std::vector<FlowDelivery> got;
  joined.advance(joined.next_time(), got);  // the first ends at 4 s, the class's division
  REQUIRE(got.size() == 1);
  CHECK(joined.solve_counts().by_class == 1);
  const std::uint32_t third_own[] = {3, 0};
  const std::uint32_t newcomer = joined.start(third_own, 1e9, 0, 9, 5.0);
  CHECK(joined.rate(newcomer) == Approx(0.25e9));
  // The second had 1 GB left at 4 s and sent 1/3 GB by 5 s; 2/3 GB at a quarter: 7 2/3 s.
  CHECK(joined.next_time() == Approx(5.0 + (2.0 / 3.0) / 0.25));
  CHECK(joined.solve_counts().by_class == 1);
}

TEST_CASE("a class whose other link's share the level reached divides on once that link's flows have left", "[network][maxmin]") {
  // A 1 GB/s link shared by A (1 GB), B (4 GB), C (3 GB) and D (4 GB), each going on over a 10 GB/s link of its own;
  // A and B also cross a 0.6 GB/s link, 0.3 GB/s each, above the level of a quarter: the class forms at the start
  // with that bound. A ends at 4 s: a third each is above the bound, but B alone on that link now has 0.6 GB/s, so the
  // class still divides. C ends at 10 s (2 GB at a third), B and D together at 12 s (1 GB each at a half).
  Network fast({1e9, 10e9, 10e9, 10e9, 10e9, 0.6e9});
  Network slow({1e9, 10e9, 10e9, 10e9, 10e9, 0.6e9});
  slow.always_relevel(true);
  const std::vector<std::vector<std::uint32_t>> routes{{0, 1, 5}, {0, 2, 5}, {0, 3}, {0, 4}};
  const double bytes[] = {1e9, 4e9, 3e9, 4e9};
  for (std::uint32_t i = 0; i < 4; ++i) {
    fast.start(routes[i], bytes[i], 0, i, 0.0);
    slow.start(routes[i], bytes[i], 0, i, 0.0);
  }
  std::vector<FlowDelivery> got, got_slow;
  std::vector<double> ends;
  while (fast.next_time() != std::numeric_limits<double>::infinity()) {
    const double t = fast.next_time();
    REQUIRE(t == slow.next_time());
    got.clear();
    got_slow.clear();
    fast.advance(t, got);
    slow.advance(t, got_slow);
    REQUIRE(got.size() == got_slow.size());
    for (std::size_t i = 0; i < got.size(); ++i) ends.push_back(t);
  }
  REQUIRE(ends.size() == 4);
  CHECK(ends[0] == Approx(4.0));
  CHECK(ends[1] == Approx(10.0));
  CHECK(ends[2] == Approx(12.0));
  CHECK(ends[3] == Approx(12.0));
  CHECK(fast.solve_counts().forks == 1);
  CHECK(fast.solve_counts().by_class == 2);
  CHECK(fast.solve_counts().component_solves == 0);
  CHECK(fast.link_bytes() == slow.link_bytes());
}

TEST_CASE("a flow joining a full link where every flow has room elsewhere gets the link's division and one held elsewhere the growing set", "[network][maxmin]") {
  // Links of 3, 8, 8, 8 and 0.5 GB/s. A crosses links 0 and 1: alone, 3 GB/s. B (links 0 and 2) joins link 0, full
  // with A: link 0's 3 GB/s over two, 1.5 each, by the division, which solves A and B once each where the growing set
  // solves B alone first (it gets nothing of the full link), then both. C (links 0 and 3) the same: 1 GB/s each.
  // D (links 0 and 4) is held to 0.5 GB/s by link 4, so the others get (3 - 0.5) / 3 each: the growing set.
  Network net({3e9, 8e9, 8e9, 8e9, 0.5e9});
  const std::uint32_t a_route[] = {0, 1}, b_route[] = {0, 2}, c_route[] = {0, 3}, d_route[] = {0, 4};
  const std::uint32_t a = net.start(a_route, 6e9, 0, 1, 0.0);
  CHECK(net.rate(a) == 3e9);
  CHECK(net.solve_counts().alone == 1);
  const std::uint32_t b = net.start(b_route, 6e9, 0, 2, 0.0);
  CHECK(net.rate(a) == 1.5e9);
  CHECK(net.rate(b) == 1.5e9);
  CHECK(net.solve_counts().one_link == 1);
  CHECK(net.solve_counts().flows_solved == 3);
  const std::uint32_t c = net.start(c_route, 6e9, 0, 3, 0.0);
  CHECK(net.rate(a) == 1e9);
  CHECK(net.rate(b) == 1e9);
  CHECK(net.rate(c) == 1e9);
  CHECK(net.solve_counts().one_link == 2);
  CHECK(net.solve_counts().flows_solved == 6);
  CHECK(net.next_time() == 6.0);  // all three at 1 GB/s
  const std::uint32_t d = net.start(d_route, 6e9, 0, 4, 0.0);
  CHECK(net.rate(d) == 0.5e9);
  CHECK(net.rate(a) == Approx(2.5e9 / 3).epsilon(1e-12));
  CHECK(net.rate(c) == Approx(2.5e9 / 3).epsilon(1e-12));
  CHECK(net.solve_counts().one_link == 2);
  CHECK(net.solve_counts().relevellings == 4);
  CHECK(net.solve_counts().component_solves == 0);
}

TEST_CASE("a flow joining a full link whose residue would fill a link other flows cross is left to the growing set", "[network][maxmin]") {
  // Links: f of 1 GB/s, l of 1.33333333345 GB/s, m of 1 GB/s. X (on f, capped at 0.05 B/s), A (f and l), O (l and m),
  // P1 and P2 (m): O, P1 and P2 get a third of m each, A what X leaves of f, and l is 0.03 B/s short of full. Then X
  // is stranded and N starts on f and l in one batch: f is still full, and the growing set's first solve gives N the
  // 0.05 B/s f has left, which fills l, so O (bottlenecked on m) joins the set and is re-solved. The division must not
  // answer it: both ways give the same rates, due times and link bytes to the bit.
  const std::vector<double> capacity{1e9, 1333333333.45, 1e9};
  Network fast(capacity), slow(capacity);
  slow.always_relevel(true);
  const std::uint32_t on_f[] = {0}, f_l[] = {0, 1}, l_m[] = {1, 2}, on_m[] = {2};
  std::vector<std::uint32_t> ids;
  for (Network* net : {&fast, &slow}) {
    ids.clear();
    ids.push_back(net->start(on_f, 1e9, 0, 0, 0.0, 0.05));
    ids.push_back(net->start(f_l, 5e9, 0, 1, 0.0));
    ids.push_back(net->start(l_m, 5e9, 0, 2, 0.0));
    ids.push_back(net->start(on_m, 5e9, 0, 3, 0.0));
    ids.push_back(net->start(on_m, 6e9, 0, 4, 0.0));
    REQUIRE(net->rate(ids[1]) == 1e9 - 0.05);
    net->strand(ids[0], 1.0);
    ids.push_back(net->start(f_l, 5e9, 0, 5, 1.0));
  }
  for (std::size_t i = 1; i < ids.size(); ++i) CHECK(fast.rate(ids[i]) == slow.rate(ids[i]));
  CHECK(fast.solve_counts().one_link == 0);
  std::vector<std::uint64_t> dropped;
  fast.cancel_if([](std::uint64_t tag) { return tag == 0; }, 1.0, dropped);
  slow.cancel_if([](std::uint64_t tag) { return tag == 0; }, 1.0, dropped);
  std::vector<FlowDelivery> got_fast, got_slow;
  while (fast.next_time() != std::numeric_limits<double>::infinity()) {
    const double t = fast.next_time();
    REQUIRE(t == slow.next_time());
    fast.advance(t, got_fast);
    slow.advance(t, got_slow);
  }
  CHECK(slow.next_time() == std::numeric_limits<double>::infinity());
  REQUIRE(got_fast.size() == got_slow.size());
  for (std::size_t i = 0; i < got_fast.size(); ++i) CHECK(got_fast[i].tag == got_slow[i].tag);
  CHECK(fast.link_bytes() == slow.link_bytes());
}

TEST_CASE("a capped flow takes no more than its cap and leaves the rest to the others", "[network]") {
  // One 1 GB/s link. A: 1 GB capped at 0.25 GB/s; B: 1.5 GB. A runs at its cap, B takes the other
  // 0.75 GB/s and finishes at 2 s; A, with 0.5 GB left, still runs at its cap: done at 4 s.
  Network net({1e9});
  const std::uint32_t route[] = {0};
  const std::uint32_t a = net.start(route, 1e9, 0, 1, 0.0, 0.25e9);
  const std::uint32_t b = net.start(route, 1.5e9, 0, 2, 0.0);
  CHECK(net.rate(a) == Approx(0.25e9));
  CHECK(net.rate(b) == Approx(0.75e9));
  const auto seen = deliveries(net);
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].first == Approx(2.0));
  CHECK(seen[0].second == 2);
  CHECK(seen[1].first == Approx(4.0));
}

TEST_CASE("routes longer than a slot's room move to new room, and a route given as another flow's is copied first", "[network]") {
  // Twelve links of 1 GB/s. A 12-hop flow takes a new slot; a 2-hop flow reuses it once the first is delivered; a
  // flow started on the first's route (a span into the network's own hops) and rerouted onto a 10-hop one of the
  // others' keeps its links right through the arrays' growth, and the rates follow the routes.
  Network net(std::vector<double>(12, 1e9));
  std::vector<std::uint32_t> twelve(12), two{0, 1}, ten;
  for (std::uint32_t l = 0; l < 12; ++l) twelve[l] = l;
  for (std::uint32_t l = 2; l < 12; ++l) ten.push_back(l);
  const std::uint32_t a = net.start(twelve, 1e9, 0, 1, 0);
  CHECK(std::vector<std::uint32_t>(net.route(a).begin(), net.route(a).end()) == twelve);
  CHECK(deliveries(net) == std::vector<std::pair<double, std::uint64_t>>{{1.0, 1}});
  const std::uint32_t b = net.start(two, 1e9, 0, 2, 1.0);  // a's slot, its room kept
  CHECK(b == a);
  const std::uint32_t c = net.start(net.route(b), 1e9, 0, 3, 1.0);  // b's own hops as the route
  CHECK(std::vector<std::uint32_t>(net.route(c).begin(), net.route(c).end()) == two);
  const std::uint32_t d = net.start(ten, 2e9, 0, 4, 1.0);
  net.reroute(c, net.route(d), 0, 1.0);  // longer than c's room: new room, d's hops copied first
  CHECK(std::vector<std::uint32_t>(net.route(c).begin(), net.route(c).end()) == ten);
  CHECK(std::vector<std::uint32_t>(net.route(b).begin(), net.route(b).end()) == two);
  // b alone on links 0-1 (1 GB in 1 s); c and d share links 2-11 (c's 1 GB at 0.5 GB/s, then d's last 1 GB alone).
  CHECK(deliveries(net) == std::vector<std::pair<double, std::uint64_t>>{{2.0, 2}, {3.0, 3}, {4.0, 4}});
}

TEST_CASE("a rerouted flow sends what it has left over its new route, then pays that route's latency", "[network][faults]") {
  // Two links: 1 GB/s (0) and 0.5 GB/s (1). A 2 GB flow starts on link 0 with 1 ms of latency, and at
  // 1 s (1 GB sent) moves to link 1 with 5 ms: its last 1 GB takes 2 s there, so it is delivered at
  // 3.005 s. A second flow on link 0 (1 GB) gets all of it from 1 s on: done at 1.5 s, delivered 1.5 s.
  Network net({1e9, 1e9 / 2});
  const std::uint32_t first[] = {0}, detour[] = {1};
  const auto moved = net.start(first, 2e9, 1e-3, 1, 0.0);
  std::vector<FlowDelivery> done;
  net.advance(0.5, done);  // alone on link 0 until 1 s: 1 GB/s
  CHECK(net.rate(moved) == Approx(1e9));
  std::vector<std::uint32_t> on_link;
  net.sending_on(0, on_link);
  CHECK(on_link == std::vector<std::uint32_t>{moved});
  net.reroute(moved, detour, 5e-3, 1.0);
  net.set_link_down(0, true);
  CHECK(net.rate(moved) == Approx(0.5e9));
  const auto seen = deliveries(net);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].first == Approx(3.005).epsilon(1e-12));
  CHECK(net.link_bytes()[0] == Approx(1e9));  // what it sent before the move
  CHECK(net.link_bytes()[1] == Approx(1e9));
  // A link that is down takes no new flow.
  CHECK_THROWS_AS(net.start(first, 1e9, 0, 2, 3.005), InternalError);
}

TEST_CASE("a stranded flow moves nothing until it is cancelled, and frees its link's share", "[network][faults]") {
  // Two 1 GB flows share a 1 GB/s link; at 0.5 s (0.25 GB each sent) one is stranded: the other gets the
  // whole link for its last 0.75 GB and is done at 1.25 s.
  Network net({1e9});
  const std::uint32_t route[] = {0};
  const auto kept = net.start(route, 1e9, 0, 1, 0.0);
  const auto cut = net.start(route, 1e9, 0, 2, 0.0);
  CHECK(net.rate(kept) == Approx(0.5e9));
  net.strand(cut, 0.5);
  CHECK(net.rate(kept) == Approx(1e9));
  CHECK(net.next_time() == Approx(1.25));
  CHECK(net.flows_in_flight() == 2);
  std::vector<std::uint64_t> dropped;
  net.cancel_if([](std::uint64_t tag) { return tag == 2; }, 0.6, dropped);
  CHECK(dropped == std::vector<std::uint64_t>{2});
  CHECK(net.flows_in_flight() == 1);
  net.settle_all(0.6);
  CHECK(net.link_bytes()[0] == Approx(0.5e9 + 0.1e9));  // 0.25 GB each, then kept's 0.1 GB by 0.6 s
}

TEST_CASE("flows on disjoint links do not affect each other", "[network]") {
  Network net({1e9, 2e9});
  const std::uint32_t a[] = {0}, b[] = {1};
  const auto fa = net.start(a, 1e9, 0, 1, 0.0);
  const auto fb = net.start(b, 1e9, 0, 2, 0.0);
  CHECK(net.rate(fa) == 1e9);
  CHECK(net.rate(fb) == 2e9);
  const auto fc = net.start(b, 1e9, 0, 3, 0.0);
  CHECK(net.rate(fa) == 1e9);  // untouched by the change on link 1
  CHECK(net.rate(fb) == 1e9);
  CHECK(net.rate(fc) == 1e9);
}

namespace {

// Random links and routes (some crossing a link twice); flows start in batches, finish, are cancelled or move to
// another route (as when a link fails), and after each change every flow's rate is held against what the solver
// gives on all flows in flight: within `allowed` of it (relative), and no link above its capacity. Returns the
// largest relative deviation seen. Capacities come from a few round values, so equal fair shares (ties) are common;
// the larger cases chain flows into one component, where the incremental solver may hand over to the full one. Odd
// seeds read the rates only every third change, so starts, cancels and moves pile up into one re-levelling.
double random_changes_against_scratch(double tolerance, double allowed) {
  double worst = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const bool batched = seed % 2 == 1;
    Rng rng(seed, 0, "incremental-maxmin");
    const std::uint32_t links = 2 + static_cast<std::uint32_t>(rng.next() % (seed % 4 == 0 ? 200 : 30));
    const std::size_t target = 1 + rng.next() % (seed % 4 == 0 ? 300 : 40);
    std::vector<double> capacity(links);
    for (double& c : capacity) c = 1e9 * static_cast<double>(1 + rng.next() % 4) * (rng.uniform() < 0.3 ? 2.5 : 1);
    Network net(capacity, tolerance);
    std::vector<std::vector<std::uint32_t>> route_of;  // by tag
    std::vector<double> cap_of;                         // by tag: infinity, or the flow's own cap
    std::vector<std::uint32_t> slot_of;                 // by tag: the network's flow id
    std::vector<std::uint64_t> in_flight;               // tags
    std::vector<FlowDelivery> delivered;
    std::vector<std::uint64_t> dropped;
    double now = 0;
    std::uint64_t next_tag = 0;
    const auto random_route = [&] {
      std::vector<std::uint32_t> r;
      const std::size_t hops = 1 + rng.next() % 4;
      while (r.size() < hops) {
        const auto l = static_cast<std::uint32_t>(rng.next() % links);
        if (std::find(r.begin(), r.end(), l) == r.end()) r.push_back(l);
      }
      // Some cross a link twice, as a transfer staged in host memory does.
      if (rng.uniform() < 0.1) r.push_back(r[rng.next() % r.size()]);
      return r;
    };
    for (int step = 0; step < 300; ++step) {
      const double u = rng.uniform();
      if (in_flight.size() < target && u < 0.55) {
        const std::size_t batch = 1 + rng.next() % 4;
        for (std::size_t k = 0; k < batch; ++k) {
          const std::vector<std::uint32_t> r = random_route();
          const double bytes = 1e6 * static_cast<double>(1 + rng.next() % 1000);
          // A tag indexes route_of, so deliveries and drops name their routes.
          // Some flows carry a cap of their own, below or above their fair share.
          const double cap = rng.uniform() < 0.3 ? 0.25e9 * static_cast<double>(1 + rng.next() % 8) : std::numeric_limits<double>::infinity();
          slot_of.push_back(net.start(r, bytes, 0, next_tag, now, cap));
          route_of.push_back(r);
          cap_of.push_back(cap);
          in_flight.push_back(next_tag++);
        }
      } else if (u < 0.6 && !in_flight.empty()) {
        const std::uint64_t k = rng.next() % 5;
        dropped.clear();
        net.cancel_if([&](std::uint64_t tag) { return tag % 5 == k; }, now, dropped);
        for (std::uint64_t t : dropped) in_flight.erase(std::find(in_flight.begin(), in_flight.end(), t));
      } else if (u < 0.65 && !in_flight.empty()) {
        const std::uint64_t moved = in_flight[rng.next() % in_flight.size()];
        route_of[moved] = random_route();
        net.reroute(slot_of[moved], route_of[moved], 0, now);
      } else if (!in_flight.empty()) {
        now = net.next_time();
        delivered.clear();
        net.advance(now, delivered);
        for (const FlowDelivery& d : delivered) in_flight.erase(std::find(in_flight.begin(), in_flight.end(), d.tag));
      }
      REQUIRE(net.flows_in_flight() == in_flight.size());
      if (in_flight.empty() || (batched && step % 3 != 2)) continue;
      // From scratch, a cap is a private link of its own.
      std::vector<std::vector<std::uint32_t>> routes;
      std::vector<double> with_caps = capacity;
      for (std::uint64_t t : in_flight) {
        routes.push_back(route_of[t]);
        if (cap_of[t] != std::numeric_limits<double>::infinity()) {
          routes.back().push_back(static_cast<std::uint32_t>(with_caps.size()));
          with_caps.push_back(cap_of[t]);
        }
      }
      const std::vector<double> expected = max_min(with_caps, routes);
      std::vector<double> load(capacity.size(), 0.0);
      for (std::size_t i = 0; i < in_flight.size(); ++i) {
        const double r = net.rate(slot_of[in_flight[i]]);
        INFO("seed " << seed << " step " << step << " flow " << in_flight[i]);
        const double deviation = std::abs(r - expected[i]) / expected[i];
        REQUIRE(deviation <= allowed);
        REQUIRE(r <= cap_of[in_flight[i]] * (1 + 1e-9));
        worst = std::max(worst, deviation);
        for (std::uint32_t l : route_of[in_flight[i]]) load[l] += r;
      }
      for (std::uint32_t l = 0; l < links; ++l) REQUIRE(load[l] <= capacity[l] * (1 + 1e-9));
    }
  }
  return worst;
}

}  // namespace

TEST_CASE("incremental re-levelling gives the from-scratch max-min allocation after every change", "[network][maxmin]") {
  random_changes_against_scratch(Network::kExactTolerance, 1e-9);
}

TEST_CASE("re-levellings answered by one full link's division (a class's among them) or by lone flows' routes get the growing set's rates and due times, bit for bit", "[network][maxmin]") {
  // Forks: one sender's transfers of many sizes share its link (the first of their routes) and go on over a few of
  // many other links, some of them other forks' (so a shared link can fill, or leave too little room); background
  // flows cross random links; in a third of the cases some fork flows carry a cap or cross a link twice; now and
  // then flows are cancelled, moved to another route or stranded (as when a link fails). Two networks take the same
  // calls, one re-levelling every change through the growing set: every rate, every delivery (its flow, tag and
  // time), the re-levelling counts and the bytes each link carried must be the same to the bit, exactly and within
  // a tolerance, and the division must have answered a good share of the re-levellings, some of them flows joining a
  // full link (which the growing set solves twice). Sparse: many senders and links, forks of one to three flows, so
  // that most flows start alone on their routes (as a chain's transfers do) and some meet others; lone flows' routes
  // must then answer a good share. Wide: few senders and thousands of other links taken in turn, so that a fork's
  // flows mostly have their other links to themselves and form a processor-sharing class, which must then answer
  // most divisions.
  enum Mode : std::uint64_t { dense, sparse, wide };
  for (const Mode mode : {dense, sparse, wide})
  for (const double tolerance : {Network::kExactTolerance, 1e-4}) {
    std::uint64_t shortcuts = 0, alone = 0, by_class = 0, forks = 0, relevellings = 0, saved = 0;
    for (std::uint64_t seed = 1; seed <= 30; ++seed) {
      Rng rng(seed, mode, "one-link-relevel");
      const double odd = seed % 3 == 0 ? 0.02 : 0.0;  // the share of fork flows with a cap, and crossing a link twice
      const std::uint32_t senders = mode == sparse ? 100 + static_cast<std::uint32_t>(rng.next() % 100) : 2 + static_cast<std::uint32_t>(rng.next() % 6);
      const std::uint32_t others = mode == sparse ? 300 + static_cast<std::uint32_t>(rng.next() % 300)
                                   : mode == wide ? 2000 + static_cast<std::uint32_t>(rng.next() % 2000)
                                                  : 8 + static_cast<std::uint32_t>(rng.next() % 80);
      // Most other links roomier than a sender's, as a fabric's are than one NIC; some as narrow.
      std::vector<double> capacity(senders + others);
      for (std::uint32_t l = 0; l < capacity.size(); ++l) {
        capacity[l] = 1e9 * static_cast<double>(1 + rng.next() % 4) * (l >= senders && rng.uniform() < 0.7 ? 8 : 1);
      }
      Network fast(capacity, tolerance), slow(capacity, tolerance);
      slow.always_relevel(true);
      std::vector<std::uint32_t> slot;  // by tag, the same in both (they take the same calls)
      std::vector<std::uint64_t> live, stranded;  // tags in flight; of them, stranded
      double now = 0;
      std::uint64_t next_tag = 0;
      std::vector<FlowDelivery> got_fast, got_slow;
      std::vector<std::uint64_t> drop_fast, drop_slow;
      const auto start = [&](const std::vector<std::uint32_t>& route, double bytes, double cap) {
        const std::uint32_t a = fast.start(route, bytes, 1e-6, next_tag, now, cap);
        const std::uint32_t b = slow.start(route, bytes, 1e-6, next_tag, now, cap);
        REQUIRE(a == b);
        slot.push_back(a);
        live.push_back(next_tag++);
      };
      const auto forget = [&](std::uint64_t tag) {
        live.erase(std::find(live.begin(), live.end(), tag));
        if (const auto it = std::find(stranded.begin(), stranded.end(), tag); it != stranded.end()) stranded.erase(it);
      };
      const auto cancel = [&](const std::function<bool(std::uint64_t)>& drop) {
        drop_fast.clear();
        drop_slow.clear();
        fast.cancel_if(drop, now, drop_fast);
        slow.cancel_if(drop, now, drop_slow);
        REQUIRE(drop_fast == drop_slow);
        for (std::uint64_t t : drop_fast) forget(t);
      };
      // Wide: the other links taken in turn, so that a link is taken again only after thousands of others.
      std::uint32_t next_other = 0;
      const auto other_link = [&] {
        return senders + (mode == wide ? next_other++ % others : static_cast<std::uint32_t>(rng.next() % others));
      };
      const auto fork_route = [&](std::uint32_t sender) {
        std::vector<std::uint32_t> route{sender};
        const std::size_t hops = 1 + rng.next() % 3;
        while (route.size() <= hops) {
          const std::uint32_t l = other_link();
          if (std::find(route.begin(), route.end(), l) == route.end()) route.push_back(l);
        }
        if (rng.uniform() < odd) route.push_back(route[rng.next() % route.size()]);
        return route;
      };
      for (int step = 0; step < 400; ++step) {
        const double u = rng.uniform();
        if (u < 0.12 && live.size() < 200) {
          const auto sender = static_cast<std::uint32_t>(rng.next() % senders);
          const std::size_t fan = mode == sparse ? 1 + rng.next() % 3 : 2 + rng.next() % 40;
          for (std::size_t k = 0; k < fan; ++k) {
            const std::vector<std::uint32_t> route = fork_route(sender);
            const double cap = rng.uniform() < odd ? 0.1e9 * static_cast<double>(1 + rng.next() % 8) : std::numeric_limits<double>::infinity();
            start(route, 1e6 * static_cast<double>(1 + rng.next() % 1000), cap);
          }
        } else if (u < 0.2) {
          std::vector<std::uint32_t> route{other_link()};
          if (rng.uniform() < 0.5) route.push_back(static_cast<std::uint32_t>(rng.next() % senders));
          start(route, 1e6 * static_cast<double>(1 + rng.next() % 1000), std::numeric_limits<double>::infinity());
        } else if (u < 0.21 && !live.empty()) {
          const std::uint64_t k = rng.next() % 7;
          cancel([&](std::uint64_t tag) { return tag % 7 == k; });
        } else if (u < 0.23 && !live.empty()) {  // a link failed under a sending flow: moved, or stranded
          const std::uint64_t tag = live[rng.next() % live.size()];
          const bool sending = fast.rate(slot[tag]) > 0;
          REQUIRE(sending == (slow.rate(slot[tag]) > 0));
          if (sending && rng.uniform() < 0.7) {
            const std::vector<std::uint32_t> route = fork_route(static_cast<std::uint32_t>(rng.next() % senders));
            fast.reroute(slot[tag], route, 1e-6, now);
            slow.reroute(slot[tag], route, 1e-6, now);
          } else if (sending) {
            fast.strand(slot[tag], now);
            slow.strand(slot[tag], now);
            stranded.push_back(tag);
          }
        } else if (!live.empty()) {
          const double t = fast.next_time();
          REQUIRE(t == slow.next_time());
          if (t == std::numeric_limits<double>::infinity()) {  // only stranded flows left: their owners give up
            cancel([&](std::uint64_t tag) { return std::find(stranded.begin(), stranded.end(), tag) != stranded.end(); });
            continue;
          }
          now = t;
          got_fast.clear();
          got_slow.clear();
          fast.advance(now, got_fast);
          slow.advance(now, got_slow);
          REQUIRE(got_fast.size() == got_slow.size());
          for (std::size_t i = 0; i < got_fast.size(); ++i) {
            REQUIRE(got_fast[i].flow == got_slow[i].flow);
            REQUIRE(got_fast[i].tag == got_slow[i].tag);
            forget(got_fast[i].tag);
          }
        }
        REQUIRE(fast.flows_in_flight() == live.size());
        REQUIRE(slow.flows_in_flight() == live.size());
        if (step % 3 != 2) continue;  // between reads, flows started at one instant are solved together
        std::uint64_t differs = next_tag;
        for (std::uint64_t tag = 0; tag < next_tag && differs == next_tag; ++tag) {
          if (fast.rate(slot[tag]) != slow.rate(slot[tag])) differs = tag;
        }
        INFO("tolerance " << tolerance << " seed " << seed << " step " << step);
        REQUIRE(differs == next_tag);
      }
      fast.settle_all(now);
      slow.settle_all(now);
      REQUIRE(fast.link_bytes() == slow.link_bytes());
      REQUIRE(fast.solve_counts().relevellings == slow.solve_counts().relevellings);
      // The growing set solves a flow joining a full link twice (alone, then with the link's others); the division once.
      REQUIRE(fast.solve_counts().flows_solved <= slow.solve_counts().flows_solved);
      REQUIRE(fast.solve_counts().component_solves == slow.solve_counts().component_solves);
      REQUIRE(slow.solve_counts().one_link == 0);
      REQUIRE(slow.solve_counts().alone == 0);
      saved += slow.solve_counts().flows_solved - fast.solve_counts().flows_solved;
      alone += fast.solve_counts().alone;
      shortcuts += fast.solve_counts().one_link;
      by_class += fast.solve_counts().by_class;
      forks += fast.solve_counts().forks;
      REQUIRE(slow.solve_counts().by_class == 0);
      REQUIRE(slow.solve_counts().forks == 0);
      relevellings += fast.solve_counts().relevellings;
    }
    INFO("tolerance " << tolerance << (mode == sparse ? ", sparse: " : mode == wide ? ", wide: " : ": ") << shortcuts << " of " << relevellings
                      << " re-levellings by one link's division (" << by_class << " a class's, " << forks << " a fork's start), " << alone
                      << " by lone flows' routes, " << saved << " solves saved");
    // Only a flow joining a full link by the division saves a solve (under the exact tolerance only).
    if (tolerance == Network::kExactTolerance) CHECK(saved > 0);
    else CHECK(saved == 0);
    if (mode == sparse) {
      CHECK(alone * 4 > relevellings);  // both ways taken often
      CHECK(alone * 4 < relevellings * 3);
    } else if (mode == dense) {
      CHECK(shortcuts * 8 > relevellings);
      CHECK(shortcuts * 2 < relevellings);
    }
    // Classes form only under the exact tolerance; where a fork's other links are its own, its flows' ends are mostly
    // answered by theirs.
    if (tolerance != Network::kExactTolerance) CHECK(by_class == 0);
    else if (mode == wide) CHECK(by_class * 2 > shortcuts);
    else CHECK(by_class > 0);
    // A fork leaving an idle sender is divided at its start, under the exact tolerance only (it may form a class).
    if (tolerance != Network::kExactTolerance) CHECK(forks == 0);
    else CHECK(forks > 0);
  }
}

TEST_CASE("max-min within a tolerance: a change smaller than it stops spreading", "[network][maxmin]") {
  // One link of 100 B/s. b1 and b2 are uncapped; w is capped at 0.002 B/s, so b1 = b2 = (100 - 0.002) / 2 = 49.999.
  // When w ends, the exact sharing gives b1 and b2 50 each. Within a relative 1e-4 the link, at 99.998 of 100, still
  // counts as full and each flow is within 1e-4 of its largest rate, so neither is re-levelled: they keep 49.999
  // (0.002% below 50), and no flow is re-solved.
  const std::uint32_t link[] = {0};
  for (const double tolerance : {Network::kExactTolerance, 1e-4}) {
    Network net({100.0}, tolerance);
    const std::uint32_t b1 = net.start(link, 1e6, 0, 1, 0.0);
    const std::uint32_t b2 = net.start(link, 1e6, 0, 2, 0.0);
    net.start(link, 0.002, 0, 3, 0.0, 0.002);  // w: done sending at 1 s
    CHECK(net.rate(b1) == Approx(49.999).epsilon(1e-12));
    CHECK(net.rate(b2) == Approx(49.999).epsilon(1e-12));
    const std::uint64_t before = net.solve_counts().flows_solved;
    std::vector<FlowDelivery> done;
    net.advance(net.next_time(), done);
    REQUIRE(done.size() == 1);
    CHECK(done[0].tag == 3);
    const double expected = tolerance == Network::kExactTolerance ? 50.0 : 49.999;
    CHECK(net.rate(b1) == Approx(expected).epsilon(1e-12));
    CHECK(net.rate(b2) == Approx(expected).epsilon(1e-12));
    CHECK(net.solve_counts().flows_solved - before == (tolerance == Network::kExactTolerance ? 2u : 0u));
  }
  CHECK_THROWS_AS(Network({100.0}, 0.0), InternalError);
  CHECK_THROWS_AS(Network({100.0}, 1.0), InternalError);
}

TEST_CASE("max-min within a tolerance stays feasible and near the exact sharing under random changes", "[network][maxmin]") {
  // The bounded-error option against the from-scratch solve, on the changes the exact test makes: no link above
  // capacity, no flow above its cap, and every rate within a bound of the exact one. The tolerance bounds each
  // check (a full link within it of its capacity, a bottlenecked flow within it of the link's largest rate), not each
  // rate: held rates feed the next re-levelling, so a deviation can exceed it. Measured here: 1.14e-4 at most; the
  // bound allows a few times that.
  const double worst = random_changes_against_scratch(1e-4, 3e-4);
  INFO("largest relative deviation " << worst);
  CHECK(worst > 1e-6);  // the option changed something on these cases
}

TEST_CASE("routes: NVLink inside a node, every hop across nodes, nothing through a GPU", "[network][topology]") {
  const Built b = build(R"([{"type": "unit-node-2", "count": 2}])");
  const Topology& t = b.topology;
  const auto inside = route(t, t.gpu_vertex(make_id<GpuId>(0)), t.gpu_vertex(make_id<GpuId>(1)));
  CHECK(inside.size() == 2);
  CHECK(t.link_name(inside[0]) == "n0.g0>n0.nvswitch");
  CHECK(t.latency_s(inside) == Approx(2e-6));
  CHECK(t.bottleneck_Bps(inside) == 100e9);
  const auto across = route(t, t.gpu_vertex(make_id<GpuId>(0)), t.gpu_vertex(make_id<GpuId>(3)));
  std::vector<std::string> names;
  for (auto l : across) names.push_back(t.link_name(l));
  CHECK(names == std::vector<std::string>{"n0.g0>n0.pcie0", "n0.pcie0>n0.nic0", "n0.nic0>switch", "switch>n1.nic0",
                                          "n1.nic0>n1.pcie0", "n1.pcie0>n1.g1"});
  CHECK(t.bottleneck_Bps(across) == 25e9);
  // The host reaches a GPU over PCIe.
  CHECK(route(t, t.host_vertex(make_id<NodeId>(1)), t.gpu_vertex(make_id<GpuId>(2))).size() == 2);
}

TEST_CASE("ECMP: one key, one path, many keys spread over the spines", "[network][topology]") {
  const Built b = build(R"([{"type": "unit-node-1", "count": 4}])", R"({"topology": "fat-tree", "nodes_per_leaf": 2, "spines": 4})");
  const Topology& t = b.topology;
  const std::uint32_t from = t.gpu_vertex(make_id<GpuId>(0)), to = t.gpu_vertex(make_id<GpuId>(3));
  CHECK(route(t, from, to, 7) == route(t, from, to, 7));
  std::set<std::string> spines_used;
  for (std::uint64_t key = 0; key < 64; ++key) {
    for (auto l : route(t, from, to, key)) {
      const std::string name = t.link_name(l);
      if (name.rfind("leaf0>spine", 0) == 0) spines_used.insert(name);
    }
  }
  CHECK(spines_used.size() == 4);
}

TEST_CASE("routes leave out down links: the other spines first, none when every path is cut", "[network][topology][faults]") {
  Built b = build(R"([{"type": "unit-node-1", "count": 4}])", R"({"topology": "fat-tree", "nodes_per_leaf": 2, "spines": 2})");
  Topology& t = b.topology;
  const std::uint32_t from = t.gpu_vertex(make_id<GpuId>(0)), to = t.gpu_vertex(make_id<GpuId>(3));
  const auto cable = [&](const std::string& name, bool down) {
    const auto link = t.find_link(name);
    REQUIRE(link);
    REQUIRE(t.is_cable(*link));
    t.set_link_down(*link, down);
    t.set_link_down(*t.reverse_link(*link), down);
  };
  const auto spines_used = [&] {
    std::set<std::string> used;
    for (std::uint64_t key = 0; key < 64; ++key) {
      for (auto l : route(t, from, to, key)) {
        if (t.link_name(l).rfind("leaf0>spine", 0) == 0) used.insert(t.link_name(l));
      }
    }
    return used;
  };
  CHECK(spines_used() == std::set<std::string>{"leaf0>spine0", "leaf0>spine1"});
  cable("spine0>leaf0", true);
  CHECK(t.any_link_down());
  CHECK(spines_used() == std::set<std::string>{"leaf0>spine1"});
  CHECK(route(t, from, to, 1).size() == 8);  // still the shortest: GPU, PCIe, NIC, leaf, spine, leaf, NIC, PCIe
  cable("leaf0>spine1", true);
  std::vector<std::uint32_t> none;
  CHECK_FALSE(t.try_route(from, to, 0, none));
  CHECK(none.empty());
  CHECK_FALSE(t.reachable(to, from));
  CHECK(t.reachable(from, t.gpu_vertex(make_id<GpuId>(1))));  // the same leaf: no spine needed
  cable("leaf0>spine0", false);
  CHECK(spines_used() == std::set<std::string>{"leaf0>spine0"});
  // Links inside a node are no cables; unknown names are not found.
  CHECK_FALSE(t.is_cable(*t.find_link("n0.g0>n0.pcie0")));
  CHECK_FALSE(t.find_link("leaf0>spine9"));
  CHECK_FALSE(t.find_link("leaf0"));
}

TEST_CASE("a route asked for again is the one walked the first time, appended after what is there", "[network][topology]") {
  // Two topologies of one cluster: the first answers every pair twice (the second time from its memo, after
  // links already in the vector), the second once; on fabrics where ECMP picks among paths.
  for (const char* fabric : {R"({"topology": "rail-optimized", "nodes_per_leaf": 2})", R"({"topology": "fat-tree", "nodes_per_leaf": 1, "spines": 3})"}) {
    INFO(fabric);
    Built a = build(R"([{"type": "hgx-h100-8", "count": 3}, {"type": "l40s-pcie-8", "count": 1}])", fabric);
    Built b = build(R"([{"type": "hgx-h100-8", "count": 3}, {"type": "l40s-pcie-8", "count": 1}])", fabric);
    const std::uint32_t n = a.topology.vertex_count();
    std::size_t pairs = 0, distinct = 0;
    for (std::uint32_t from = 0; from < n; from += 3) {
      for (std::uint32_t to = 0; to < n; to += 2) {
        for (std::uint64_t key : {std::uint64_t{7}, (std::uint64_t{from} << 32) | to}) {
          std::vector<std::uint32_t> first;
          if (!a.topology.try_route(from, to, key, first)) continue;  // from an NVSwitch: only its node's GPUs
          std::vector<std::uint32_t> again{99, 98};
          a.topology.route(from, to, key, again);
          REQUIRE(again.size() == first.size() + 2);
          CHECK(std::equal(first.begin(), first.end(), again.begin() + 2));
          CHECK(route(b.topology, from, to, key) == first);
          ++pairs;
          distinct += first != route(a.topology, from, to, key + 1) ? 1 : 0;
        }
      }
    }
    CHECK(pairs > 1000);
    CHECK(distinct > 0);  // the keys do choose among paths: a memo keyed wrongly would show
  }
}

TEST_CASE("routes from the fabric's structure are the ones the graph search walks, hop by hop and pick by pick", "[network][topology]") {
  // Two topologies of one cluster, one routing from the structure, the other always searching its graph:
  // every pair of vertices, under keys that make ECMP choose, on fabrics with mixed node types in one
  // group (rails of 8 and 2 NICs), a partial last group, slow spines, MIG and PCIe-only nodes, storage and
  // one switch.
  const char* clusters[][2] = {
      {R"([{"type": "hgx-h100-8", "count": 3}, {"type": "l40s-pcie-8", "count": 2}])", R"({"topology": "rail-optimized", "nodes_per_leaf": 2})"},
      {R"([{"type": "hgx-h100-8", "count": 2}, {"type": "unit-node-2", "count": 3, "mig": {"slices": 2}, "node_overrides": {"nics": 2, "host_memory_bandwidth": "100 GB/s"}}])",
       R"({"topology": "rail-optimized", "nodes_per_leaf": 3}, "storage": {"bandwidth": "7 GB/s", "latency": "100 us"})"},
      // Spine links of 20 us: between rails of one group, through a node (in on one rail, out on another) is shorter.
      {R"([{"type": "hgx-h100-8", "count": 3}, {"type": "l40s-pcie-8", "count": 2}])", R"({"topology": "rail-optimized", "nodes_per_leaf": 3, "link": "eth-25g"})"},
      {R"([{"type": "hgx-h100-8", "count": 3}, {"type": "l40s-pcie-8", "count": 2}])", R"({"topology": "fat-tree", "nodes_per_leaf": 2, "spines": 3})"},
      {R"([{"type": "hgx-h100-8", "count": 2}, {"type": "l40s-pcie-8", "count": 1}])", R"({"topology": "single-switch"}, "storage": {"bandwidth": "7 GB/s", "latency": "100 us"})"},
      // One node type: a route's class spans the groups (the last of them partial).
      {R"([{"type": "hgx-h100-8", "count": 5}])", R"({"topology": "rail-optimized", "nodes_per_leaf": 2})"},
      {R"([{"type": "l40s-pcie-8", "count": 5}])", R"({"topology": "fat-tree", "nodes_per_leaf": 2, "spines": 2})"},
      // One spine: a route between rails over it has no choice to make, and is not a class's (its spine links are no node's).
      {R"([{"type": "hgx-h100-8", "count": 2}])", R"({"topology": "rail-optimized", "nodes_per_leaf": 1})"},
      // Groups of two types where a GPU's way to another rail goes inside its node in one group and through the other
      // node in the next: a class must stay in its group.
      {R"([{"type": "l40s-pcie-8", "count": 3, "node_overrides": {"host_link": "eth-25g", "nic": "ib-ndr"}}, {"type": "hgx-h100-8", "count": 1, "node_overrides": {"host_link": "unit-nvlink"}}])",
       R"({"topology": "rail-optimized", "nodes_per_leaf": 2, "link": "eth-25g"})"},
  };
  for (const auto& [nodes, fabric] : clusters) {
    INFO(nodes << " on " << fabric);
    Built structure = build(nodes, fabric);
    Built graph = build(nodes, fabric);
    graph.topology.always_search_graph(true);
    const std::uint32_t n = structure.topology.vertex_count();
    std::size_t pairs = 0;
    for (std::uint32_t from = 0; from < n; ++from) {
      for (std::uint32_t to = 0; to < n; ++to) {
        CHECK(structure.topology.reachable(from, to) == graph.topology.reachable(from, to));
        for (std::uint64_t key : {std::uint64_t{from} * 7919 + to, std::uint64_t{to} * 104729 + from}) {
          std::vector<std::uint32_t> a, b;
          REQUIRE(structure.topology.try_route(from, to, key, a) == graph.topology.try_route(from, to, key, b));
          CHECK(a == b);
          pairs += a.empty() ? 0 : 1;
        }
      }
    }
    CHECK(pairs > 2000);
    CHECK(structure.topology.routes_from_class() > 0);  // some written from their class's route
    CHECK(graph.topology.routes_from_class() == 0);
  }
}

TEST_CASE("a DAG's GPU pairs on one switch are walked once a class", "[network][topology]") {
  // Eight HGX nodes on one switch: a GPU's route to another is one of 8 x 7 pairs of places in one node or 8 x 8 in
  // two, with no choice to make (a NIC a GPU), so 120 walks answer all 64 x 63 pairs, each the graph search's route.
  const char* nodes = R"([{"type": "hgx-h100-8", "count": 8}])";
  const char* fabric = R"({"topology": "single-switch"})";
  Built structure = build(nodes, fabric), graph = build(nodes, fabric);
  graph.topology.always_search_graph(true);
  for (std::uint32_t from = 0; from < 64; ++from) {
    for (std::uint32_t to = 0; to < 64; ++to) {
      if (from == to) continue;
      const std::uint32_t a = structure.topology.gpu_vertex(make_id<GpuId>(from)), b = structure.topology.gpu_vertex(make_id<GpuId>(to));
      std::vector<std::uint32_t> written, walked;
      REQUIRE(structure.topology.try_route(a, b, from * 64 + to, written, Topology::RouteMemo::skip));
      REQUIRE(graph.topology.try_route(a, b, from * 64 + to, walked, Topology::RouteMemo::skip));
      CHECK(written == walked);
    }
  }
  CHECK(structure.topology.routes_from_class() == 64 * 63 - 120);
  CHECK(structure.topology.routes_remembered() == 0);
  // A cable down: routes come from searches again, and no class answers them.
  const std::size_t before = structure.topology.routes_from_class();
  structure.topology.set_link_down(*structure.topology.find_link("n1.nic0>switch"), true);
  graph.topology.set_link_down(*graph.topology.find_link("n1.nic0>switch"), true);
  for (std::uint32_t to = 0; to < 64; to += 3) {
    const std::uint32_t a = structure.topology.gpu_vertex(make_id<GpuId>(8)), b = structure.topology.gpu_vertex(make_id<GpuId>(to));
    std::vector<std::uint32_t> written, walked;
    CHECK(structure.topology.try_route(a, b, to, written) == graph.topology.try_route(a, b, to, walked));
    CHECK(written == walked);
  }
  CHECK(structure.topology.routes_from_class() == before);
}

TEST_CASE("a route walked without the memo is the one kept in it, and a large all-to-all plans the same either way", "[network][topology]") {
  Built fabric = build(R"([{"type": "hgx-h100-8", "count": 40}])", R"({"topology": "fat-tree", "nodes_per_leaf": 4, "spines": 3})");
  const std::uint32_t gpus = 320;
  for (std::uint32_t from = 0; from < gpus; from += 37) {
    for (std::uint32_t to = 5; to < gpus; to += 41) {
      const std::uint32_t a = fabric.topology.gpu_vertex(make_id<GpuId>(from)), b = fabric.topology.gpu_vertex(make_id<GpuId>(to));
      std::vector<std::uint32_t> skipped, kept, again;
      REQUIRE(fabric.topology.try_route(a, b, from * 131 + to, skipped, Topology::RouteMemo::skip));
      REQUIRE(fabric.topology.try_route(a, b, from * 131 + to, kept));
      REQUIRE(fabric.topology.try_route(a, b, from * 131 + to, again));  // from the memo now
      CHECK(skipped == kept);
      CHECK(again == kept);
      CHECK_FALSE(kept.empty());
    }
  }
  // 300 ranks (past the 256 whose all-to-all routes are remembered): the plan's routes on a fresh topology, and on
  // one whose memo already holds the first 200 ranks' pairs (their own plan, remembered), are the same, and
  // neither plan adds to its topology's memo.
  std::vector<GpuId> ranks;
  for (std::uint32_t g = 0; g < 300; ++g) ranks.push_back(make_id<GpuId>(g));
  Built warm = build(R"([{"type": "hgx-h100-8", "count": 40}])", R"({"topology": "fat-tree", "nodes_per_leaf": 4, "spines": 3})");
  (void)plan_collective(warm.cluster, warm.topology, CollectiveOp::all_to_all, CollectiveAlgo::direct, std::span(ranks).first(200), 1e9);
  const std::size_t warmed = warm.topology.routes_remembered(), before = fabric.topology.routes_remembered();
  CHECK(warmed >= 200 * 199);
  const CollectivePlan cold_plan = plan_collective(fabric.cluster, fabric.topology, CollectiveOp::all_to_all, CollectiveAlgo::direct, ranks, 1e9);
  const CollectivePlan warm_plan = plan_collective(warm.cluster, warm.topology, CollectiveOp::all_to_all, CollectiveAlgo::direct, ranks, 1e9);
  CHECK(fabric.topology.routes_remembered() == before);
  CHECK(warm.topology.routes_remembered() == warmed);
  REQUIRE(cold_plan.steps.size() == 1);
  CHECK(cold_plan.steps.front().size() == 300 * 299);
  CHECK(cold_plan.route_links == warm_plan.route_links);
}

TEST_CASE("a pair with one path is walked once for every key, a pair with equal ways once a key", "[network][topology]") {
  // Walks on a topology whose memo stays empty (`skip` keeps nothing), against the routes another one remembers.
  const char* nodes = R"([{"type": "hgx-h100-8", "count": 8}])";
  const char* fat_tree = R"({"topology": "fat-tree", "nodes_per_leaf": 4, "spines": 3})";
  Built fresh = build(nodes, fat_tree), fabric = build(nodes, fat_tree);
  const auto gpu = [](const Built& b, std::uint32_t g) { return b.topology.gpu_vertex(make_id<GpuId>(g)); };
  // GPU 0 to GPU 9: the next node, under the same leaf (one path); GPU 0 to GPU 40: across the spines (three).
  for (const auto& [to, one_path] : {std::pair{9u, true}, std::pair{40u, false}}) {
    const std::size_t before = fabric.topology.routes_remembered();
    std::set<std::vector<std::uint32_t>> seen;
    for (std::uint64_t key = 1; key <= 50; ++key) {
      std::vector<std::uint32_t> walked, kept, again;
      REQUIRE(fresh.topology.try_route(gpu(fresh, 0), gpu(fresh, to), key, walked, Topology::RouteMemo::skip));
      REQUIRE(fabric.topology.try_route(gpu(fabric, 0), gpu(fabric, to), key, kept));
      REQUIRE(fabric.topology.try_route(gpu(fabric, 0), gpu(fabric, to), key, again));
      CHECK(kept == walked);
      CHECK(again == walked);
      seen.insert(walked);
    }
    CHECK(fresh.topology.routes_remembered() == 0);
    CHECK(seen.size() == (one_path ? 1u : 3u));
    CHECK(fabric.topology.routes_remembered() - before == (one_path ? 1u : 50u));
  }
}

TEST_CASE("every route is a lowest-latency path, as an exhaustive search finds it", "[network][topology]") {
  // Floyd-Warshall with only non-GPU vertices as intermediates (GPUs forward nothing), against the
  // routes the topology walks from its tables, on fabrics with NVSwitch, PCIe-only and MIG nodes,
  // rails, local storage and spines, before and after a cable fails.
  const auto check = [](Topology& t, std::uint32_t gpus, const char* what) {
    INFO(what);
    const std::uint32_t n = t.vertex_count();
    constexpr std::uint64_t inf = ~std::uint64_t{0} / 4;
    const auto weight = [&](std::uint32_t l) { return static_cast<std::uint64_t>(std::llround(t.links()[l].latency_s * 1e12)) + 1; };
    std::vector<bool> gpu(n, false);  // GPUs are the first vertices
    for (std::uint32_t g = 0; g < gpus; ++g) gpu[t.gpu_vertex(make_id<GpuId>(g))] = true;
    std::vector<std::uint64_t> d(std::size_t{n} * n, inf);
    for (std::uint32_t v = 0; v < n; ++v) d[std::size_t{v} * n + v] = 0;
    for (std::uint32_t l = 0; l < t.links().size(); ++l) {
      if (t.link_down(l)) continue;
      auto& e = d[std::size_t{t.links()[l].from} * n + t.links()[l].to];
      e = std::min(e, weight(l));
    }
    for (std::uint32_t k = 0; k < n; ++k) {
      if (gpu[k]) continue;
      for (std::uint32_t i = 0; i < n; ++i) {
        for (std::uint32_t j = 0; j < n; ++j) {
          d[std::size_t{i} * n + j] = std::min(d[std::size_t{i} * n + j], d[std::size_t{i} * n + k] + d[std::size_t{k} * n + j]);
        }
      }
    }
    std::size_t pairs = 0;
    for (std::uint32_t from = 0; from < n; ++from) {
      for (std::uint32_t to = 0; to < n; ++to) {
        if (from == to || (gpu[from] && gpu[to] && (from + to) % 3 != 0)) continue;  // a third of the GPU pairs
        const std::uint64_t best = d[std::size_t{from} * n + to];
        std::vector<std::uint32_t> r;
        REQUIRE(t.try_route(from, to, from * 31 + to, r) == (best < inf));
        CHECK(t.reachable(from, to) == (best < inf));
        if (best >= inf) continue;
        std::uint64_t total = 0;
        std::uint32_t at = from;
        for (std::uint32_t l : r) {
          REQUIRE(t.links()[l].from == at);
          CHECK_FALSE(t.link_down(l));
          if (t.links()[l].cls == LinkClass::host_memory) {
            // A resource the route draws on, not a hop: once where the route begins or ends in that node's
            // host memory; else twice, where it goes to or from that node (MIG) through its host.
            const std::string bus = t.link_name(l);
            const std::string node = bus.substr(0, bus.find('.') + 1);  // "nX."
            const auto in = [&](std::uint32_t v) { return t.vertex_name(v).starts_with(node); };
            const auto in_memory = [&](std::uint32_t v) {
              return in(v) && (t.vertex_name(v).ends_with(".host") || t.vertex_name(v).ends_with(".storage"));
            };
            const auto times = std::count(r.begin(), r.end(), l);
            INFO(t.vertex_name(from) << " to " << t.vertex_name(to) << " on " << bus);
            if (in_memory(from) || in_memory(to)) {
              CHECK(times == 1);
            } else {
              CHECK((in(from) || in(to)));
              CHECK(times == 2);
            }
            continue;
          }
          total += weight(l);
          at = t.links()[l].to;
        }
        CHECK(at == to);
        CHECK(total == best);
        ++pairs;
      }
    }
    CHECK(pairs > 100);
  };
  Built mixed = build(R"([{"type": "hgx-h100-8", "count": 2}, {"type": "l40s-pcie-8", "count": 2},
                          {"type": "unit-node-2", "count": 2, "mig": {"slices": 2}, "node_overrides": {"host_memory_bandwidth": "100 GB/s"}}])",
                      R"({"topology": "fat-tree", "nodes_per_leaf": 2, "spines": 2}, "storage": {"bandwidth": "7 GB/s", "latency": "100 us"})");
  check(mixed.topology, mixed.cluster.gpu_count(), "fat-tree of H100, L40S and MIG nodes with storage");
  Topology& t = mixed.topology;
  for (const char* cable : {"leaf0>spine0", "spine0>leaf0", "n4.nic0>leaf2", "leaf2>n4.nic0"}) t.set_link_down(*t.find_link(cable), true);
  check(t, mixed.cluster.gpu_count(), "the same with a spine cable and a MIG node's only NIC cable down");
  for (const char* cable : {"leaf0>spine0", "spine0>leaf0", "n4.nic0>leaf2", "leaf2>n4.nic0"}) t.set_link_down(*t.find_link(cable), false);
  check(t, mixed.cluster.gpu_count(), "the same with those cables repaired");
  Built single = build(R"([{"type": "hgx-h100-8", "count": 2}, {"type": "l40s-pcie-8", "count": 1}])");
  check(single.topology, single.cluster.gpu_count(), "one switch");
  Built rails = build(R"([{"type": "hgx-h100-8", "count": 3}])", R"({"topology": "rail-optimized", "nodes_per_leaf": 2})");
  check(rails.topology, rails.cluster.gpu_count(), "rail-optimized H100 nodes");
  // Cut a rail leaf off the spines: it is reached only through the nodes (in on one rail, out on another).
  Topology& r = rails.topology;
  for (std::uint32_t l = 0; l < r.links().size(); ++l) {
    const std::string name = r.link_name(l);
    if (name.rfind("leaf0.rail0>spine", 0) == 0 || (name.rfind("spine", 0) == 0 && name.ends_with(">leaf0.rail0"))) r.set_link_down(l, true);
  }
  check(r, rails.cluster.gpu_count(), "the same with rail 0 of the first leaf group off the spines");
  // The same with MIG nodes of two rails: what passes through a node between rails is not staged there.
  Built mig_rails = build(R"([{"type": "unit-node-2", "count": 3, "mig": {"slices": 2}, "node_overrides": {"nics": 2, "host_memory_bandwidth": "100 GB/s"}}])",
                          R"({"topology": "rail-optimized", "nodes_per_leaf": 2})");
  Topology& m = mig_rails.topology;
  for (std::uint32_t l = 0; l < m.links().size(); ++l) {
    const std::string name = m.link_name(l);
    if (name.rfind("leaf0.rail0>spine", 0) == 0 || (name.rfind("spine", 0) == 0 && name.ends_with(">leaf0.rail0"))) m.set_link_down(l, true);
  }
  check(m, mig_rails.cluster.gpu_count(), "rail-optimized MIG nodes with rail 0 of the first leaf group off the spines");
}

TEST_CASE("an oversubscribed fat-tree halves the bandwidth between leaves", "[network][topology]") {
  // Four 1-NIC nodes (25 GB/s NICs), two per leaf. At 2:1, a leaf's 50 GB/s of downlinks get 25 GB/s of
  // uplink (one spine): two flows leaving leaf 0 share it at 12.5 GB/s each, while a flow inside the
  // leaf runs at the NIC's 25 GB/s.
  const Built b = build(R"([{"type": "unit-node-1", "count": 4}])",
                        R"({"topology": "fat-tree", "nodes_per_leaf": 2, "oversubscription": 2})");
  const Topology& t = b.topology;
  Network net(t.capacities());
  auto gpu = [&](std::uint32_t i) { return t.gpu_vertex(make_id<GpuId>(i)); };
  const auto cross1 = net.start(route(t, gpu(0), gpu(2)), 1e9, 0, 0, 0.0);
  const auto cross2 = net.start(route(t, gpu(1), gpu(3)), 1e9, 0, 1, 0.0);
  CHECK(net.rate(cross1) == Approx(12.5e9));
  CHECK(net.rate(cross2) == Approx(12.5e9));
  // Without oversubscription the same two flows each get their NIC's full rate.
  const Built full = build(R"([{"type": "unit-node-1", "count": 4}])", R"({"topology": "fat-tree", "nodes_per_leaf": 2, "spines": 1})");
  Network net2(full.topology.capacities());
  auto gpu2 = [&](std::uint32_t i) { return full.topology.gpu_vertex(make_id<GpuId>(i)); };
  const auto a = net2.start(route(full.topology, gpu2(0), gpu2(2)), 1e9, 0, 0, 0.0);
  const auto c = net2.start(route(full.topology, gpu2(1), gpu2(3)), 1e9, 0, 1, 0.0);
  CHECK(net2.rate(a) == Approx(25e9));
  CHECK(net2.rate(c) == Approx(25e9));
}

TEST_CASE("rail-optimized: same-rail traffic stays on its leaf, cross-rail traffic changes rail inside the node", "[network][topology]") {
  const Built b = build(R"([{"type": "unit-node-2", "count": 2, "node_overrides": {"nics": 2}}])", R"({"topology": "rail-optimized"})");
  const Topology& t = b.topology;
  auto names = [&](std::uint32_t from, std::uint32_t to) {
    std::string s;
    for (auto l : route(t, t.gpu_vertex(make_id<GpuId>(from)), t.gpu_vertex(make_id<GpuId>(to)))) s += t.link_name(l) + " ";
    return s;
  };
  CHECK_THAT(names(0, 2), Catch::Contains("n0.nic0>leaf0.rail0") && Catch::Contains("leaf0.rail0>n1.nic0") && !Catch::Contains("spine"));
  // To GPU 1 of the other node: through a host to the other rail (4 us of PCIe), cheaper than
  // leaf>spine>leaf (6 us). The rail changes in either node: the two routes cost the same.
  const std::string cross = names(0, 3);
  CHECK_THAT(cross, !Catch::Contains("spine"));
  CHECK_THAT(cross, (Catch::Contains("n0.host>n0.pcie1") && Catch::Contains("leaf0.rail1>n1.nic1")) ||
                        (Catch::Contains("leaf0.rail0>n1.nic0") && Catch::Contains("n1.host>n1.pcie1")));
}

TEST_CASE("ring all-reduce on an 8-GPU H100 node is timed as NCCL's model times it", "[network][collective][nccl]") {
  // NCCL's search on 8 H100s (NVLink 18 x 20.6 = 370.8 GB/s): 6 ring channels of 60 GB/s, duplicated
  // to 12 of 30. Its table for ring all-reduce (tuning.cc): Simple 8.4 + 14 steps x 3.4 us = 56 us at
  // 12 x 30 x 8/14 GB/s; LL 6.6 + 14 x 0.6 = 15 us at min(141, 360 x 0.5) x 8/14 GB/s.
  const Built b(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  const auto gpus = first_gpus(8);
  const auto simple = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, gpus, 1e9,
                                      CollectiveProto::simple);
  CHECK(simple.channels == 12);
  CHECK(simple.nccl_s == Approx(56e-6 + 1e9 / (12 * 30e9 * 8 / 14)));
  const auto ll = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, gpus, 1e3);
  CHECK(ll.proto == CollectiveProto::ll);
  CHECK(ll.nccl_s == Approx(15e-6 + 1e3 / (141e9 * 8 / 14)));
  // On an idle network the flow model, the alpha-beta time and the model's estimate agree.
  const NcclModel model(*nccl_comm(b.cluster, gpus));
  for (double S : {1e3, 1e6, 1e9}) {
    INFO("S = " << S);
    const auto plan = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, gpus, S);
    CHECK(simulated_time_s(b.topology, plan) == Approx(model.estimate(CollectiveOp::all_reduce, S, CollectiveAlgo::ring)->time_s()).epsilon(1e-9));
    CHECK(analytical_time_s(b.topology, plan) == Approx(simulated_time_s(b.topology, plan)).epsilon(1e-9));
  }
}

TEST_CASE("ring all-reduce across nodes runs one channel per NIC rail", "[network][collective][nccl]") {
  // Two 8-GPU H100 nodes, 8 NDR NICs each (50 GB/s, behind PCIe Gen5 at NCCL's 48 GB/s): NCCL's search
  // gives 8 channels of 48 GB/s, one per rail. Its table (tuning.cc) for Simple: 8.4 us + 28 NVLink
  // steps x max(3.4, 3 x 1 us network overhead) + 2 network steps x 14 us = 131.6 us, x1.4 for the ring
  // plateau across nodes; 8 x 48 x 16/30 GB/s.
  const Built b(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 2}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  const double S = 4e9;
  const auto plan = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, first_gpus(16), S,
                                    CollectiveProto::simple);
  CHECK(plan.channels == 8);
  const double nccl = 131.6e-6 * 1.4 + S / (8 * 48e9 * 16 / 30);
  CHECK(plan.nccl_s == Approx(nccl));
  // No correction is measured across nodes, and the catalog's links are NCCL's reference: as NCCL says.
  CHECK(simulated_time_s(b.topology, plan) == Approx(nccl).epsilon(1e-9));
  // Every NIC carries one ring each way.
  std::vector<std::uint32_t> route;
  std::map<std::string, int> nic_flows;
  for (const auto& step : plan.steps) {
    for (const CollectiveFlow& f : step) {
      route.clear();
      b.topology.route(f.from, f.to, (std::uint64_t{f.from} << 32) | f.to, route);
      for (std::uint32_t l : route) {
        const std::string name = b.topology.link_name(l);
        if (name.find(".nic") != std::string::npos && name.find(">leaf") == std::string::npos && name.find(">switch") != std::string::npos) ++nic_flows[name];
      }
    }
  }
  CHECK(nic_flows.size() == 16);
  for (const auto& [name, flows] : nic_flows) CHECK(flows == 1);
  // Intra-node NVLink beats the 8 rails: one node is faster.
  const auto one_node = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, first_gpus(8), S);
  CHECK(simulated_time_s(b.topology, one_node) < simulated_time_s(b.topology, plan));
}

TEST_CASE("two all-reduces on the same GPUs share the links and each takes the shared-bandwidth time", "[network][collective]") {
  const Built b(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  const double S = 1e9;
  const auto plan = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, first_gpus(8), S);
  const std::vector<CollectivePlan> both{plan, plan};
  const auto times = simulated_times_s(b.topology, both);
  const double shared = 2.0 * 7 / 8 * S / (450e9 / 2) + 2 * 7 * 2e-6;  // each flow gets half of every NVLink
  CHECK(times[0] == Approx(shared).epsilon(0.01));
  CHECK(times[1] == Approx(shared).epsilon(0.01));
  // A ring on GPUs 0-3 and another on 4-7 share no link: neither slows the other.
  const std::vector<CollectivePlan> apart{
      plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring, first_gpus(4), S),
      plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::ring,
                      std::vector<GpuId>{make_id<GpuId>(4), make_id<GpuId>(5), make_id<GpuId>(6), make_id<GpuId>(7)}, S)};
  const auto apart_times = simulated_times_s(b.topology, apart);
  CHECK(apart_times[0] == Approx(simulated_time_s(b.topology, apart[0])));
  CHECK(apart_times[1] == Approx(apart_times[0]));
}

TEST_CASE("a plan keeps each flow's route, and groups run beside each other keep theirs", "[network][collective]") {
  const Built b(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 2}},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  std::vector<GpuId> all;
  for (std::uint32_t g = 0; g < 32; ++g) all.push_back(make_id<GpuId>(g));
  const auto same_routes = [&](const CollectivePlan& plan) {
    std::size_t flows = 0, mismatched = 0;
    std::vector<std::uint32_t> route;
    for (const auto& step : plan.steps) {
      for (const CollectiveFlow& f : step) {
        route.clear();
        b.topology.route(f.from, f.to, (std::uint64_t{f.from} << 32) | f.to, route);
        const auto kept = plan.route(f);
        ++flows;
        if (!std::equal(kept.begin(), kept.end(), route.begin(), route.end())) ++mismatched;
      }
    }
    return std::pair{flows, mismatched};
  };
  struct Case {
    CollectiveOp op;
    CollectiveAlgo algo;
    std::size_t gpus;
  };
  for (const Case& c : {Case{CollectiveOp::all_reduce, CollectiveAlgo::ring, 32}, Case{CollectiveOp::all_reduce, CollectiveAlgo::tree, 32},
                        Case{CollectiveOp::all_reduce, CollectiveAlgo::nvls, 8}, Case{CollectiveOp::all_to_all, CollectiveAlgo::direct, 32}}) {
    const auto [flows, mismatched] = same_routes(plan_collective(b.cluster, b.topology, c.op, c.algo, std::span(all).first(c.gpus), 1e9));
    CHECK(flows > 0);
    CHECK(mismatched == 0);
  }
  // Two groups (nodes 0-1, 2-3) run beside each other: the second's flows keep their own routes.
  CollectivePlan both = plan_collective(b.cluster, b.topology, CollectiveOp::all_to_all, CollectiveAlgo::direct, std::span(all).first(16), 1e9);
  const CollectivePlan second = plan_collective(b.cluster, b.topology, CollectiveOp::all_to_all, CollectiveAlgo::direct, std::span(all).last(16), 1e9);
  both.run_beside(second);
  CHECK(both.steps.size() == 1);
  CHECK(both.steps[0].size() == 2 * 16 * 15);
  CHECK(same_routes(both).second == 0);
  CHECK(simulated_time_s(b.topology, both) == Approx(simulated_time_s(b.topology, second)).epsilon(0.01));
}

TEST_CASE("plans whose flows never fill a shared link are timed without events and to the bit", "[network][collective]") {
  // Every collective at sizes from latency-bound to bandwidth-bound, alone and beside another, on a node, on a
  // fat-tree and on rails: where times_at_bounds_s answers, the model's events give the same times exactly; it must
  // answer for some (flows at NCCL's caps) and decline others (two collectives filling the same links).
  std::size_t answered = 0, declined = 0;
  for (const char* cluster : {R"("nodes": [{"type": "hgx-h100-8", "count": 1}])",
                              R"("nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "fat-tree", "nodes_per_leaf": 2})",
                              R"("nodes": [{"type": "hgx-h100-8", "count": 4}], "fabric": {"topology": "rail-optimized", "nodes_per_leaf": 2})",
                              R"("nodes": [{"type": "l40s-pcie-8", "count": 2}])"}) {
    const Built b(test::builtin_scenario(std::string(R"("cluster": {)") + cluster + R"(},
        "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
        "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
    const auto gpus = first_gpus(b.cluster.gpu_count());
    for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter, CollectiveOp::broadcast,
                            CollectiveOp::all_to_all, CollectiveOp::send_recv}) {
      for (double bytes : {1e3, 1e6, 3e8}) {
        for (std::size_t n : {std::size_t{2}, gpus.size() / 2, gpus.size()}) {
          const auto one = plan_collective(b.cluster, b.topology, op, CollectiveAlgo::automatic, std::span(gpus).first(n), bytes);
          const auto other = plan_collective(b.cluster, b.topology, op, CollectiveAlgo::automatic, std::span(gpus).last(n), bytes / 3);
          for (const std::vector<CollectivePlan>& plans : {std::vector{one}, std::vector{one, other}, std::vector{one, one}}) {
            INFO(cluster << " " << collective_op_name(op) << " " << bytes << " B on " << n << " GPUs, " << plans.size() << " plans");
            const auto without = times_at_bounds_s(b.topology, plans);
            const auto with = simulated_times_s(b.topology, plans, FlowEvents::every_flow);
            if (!without) {
              ++declined;
              continue;
            }
            ++answered;
            REQUIRE(without->size() == with.size());
            for (std::size_t p = 0; p < with.size(); ++p) CHECK((*without)[p] == with[p]);
          }
        }
      }
    }
  }
  INFO(answered << " answered, " << declined << " declined");
  CHECK(answered > 50);
  CHECK(declined > 50);
  // By hand, on one link of capacity C: two plans of one flow each, capped at 0.6 C, fill it together though
  // neither does alone (declined); capped at 0.4 C they leave it room (answered, as the events give it); a flow
  // alone on it, capped at 2 C, runs at C, its narrowest link (bytes / C + its latency).
  const Built b(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  const std::uint32_t link = 0;
  const TopoLink& l = b.topology.links()[link];
  const auto single = [&](double cap_share, double bytes) {
    CollectivePlan p{CollectiveOp::send_recv, CollectiveAlgo::ring};
    p.route_links = {link};
    p.steps = {{CollectiveFlow{l.from, l.to, bytes, 2e-6, cap_share * l.capacity_Bps, 0, 1}}};
    return p;
  };
  CHECK_FALSE(times_at_bounds_s(b.topology, std::vector{single(0.6, 1e9), single(0.6, 3e9)}));
  const std::vector roomy{single(0.4, 1e9), single(0.4, 3e9)};
  const auto at_bounds = times_at_bounds_s(b.topology, roomy);
  REQUIRE(at_bounds);
  CHECK(*at_bounds == simulated_times_s(b.topology, roomy, FlowEvents::every_flow));
  CHECK((*at_bounds)[1] == 3e9 / (0.4 * l.capacity_Bps) + 2e-6);
  const std::vector alone{single(2, 1e9)};
  REQUIRE(times_at_bounds_s(b.topology, alone));
  CHECK((*times_at_bounds_s(b.topology, alone))[0] == 1e9 / l.capacity_Bps + 2e-6);
  CHECK(simulated_times_s(b.topology, alone, FlowEvents::every_flow)[0] == 1e9 / l.capacity_Bps + 2e-6);
}

TEST_CASE("NVLS bus bandwidth exceeds the per-GPU link rate, ring's cannot", "[network][collective]") {
  const Built b(test::builtin_scenario(R"("cluster": {"nodes": [{"type": "hgx-h100-8", "count": 1}]},
      "workflows": {"w": {"tasks": [{"name": "t", "work": {"flop": "1 TFLOP"}}]}},
      "workload": [{"workflow": "w", "arrival": {"process": "once"}}])"));
  const double S = 8e9;
  auto busbw = [&](CollectiveAlgo algo) {
    const auto plan = plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, algo, first_gpus(8), S);
    return S / simulated_time_s(b.topology, plan) * bus_bandwidth_factor(CollectiveOp::all_reduce, 8);
  };
  CHECK(busbw(CollectiveAlgo::ring) <= 450e9);
  CHECK(busbw(CollectiveAlgo::nvls) > 450e9);
  CHECK(plan_collective(b.cluster, b.topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, first_gpus(8), S).algo ==
        CollectiveAlgo::nvls);
  // NVLS needs an NVSwitch.
  const Built pcie = build(R"([{"type": "unit-node-2", "count": 1, "node_overrides": {"gpu_link": "unit-pcie"}}])");
  CHECK_FALSE(algorithm_applies(pcie.cluster, pcie.topology, CollectiveOp::all_reduce, CollectiveAlgo::nvls, first_gpus(2)));
}

TEST_CASE("bus bandwidth factors are nccl-tests'", "[network][collective]") {
  CHECK(bus_bandwidth_factor(CollectiveOp::all_reduce, 8) == Approx(1.75));
  CHECK(bus_bandwidth_factor(CollectiveOp::all_gather, 8) == Approx(0.875));
  CHECK(bus_bandwidth_factor(CollectiveOp::reduce_scatter, 4) == Approx(0.75));
  CHECK(bus_bandwidth_factor(CollectiveOp::broadcast, 8) == 1.0);
  CHECK(bus_bandwidth_factor(CollectiveOp::all_to_all, 2) == Approx(0.5));
}

TEST_CASE("every collective runs on a multi-node gang", "[network][collective]") {
  const Built b = build(R"([{"type": "unit-node-2", "count": 2}])");
  const auto gpus = first_gpus(4);
  for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                          CollectiveOp::broadcast, CollectiveOp::reduce, CollectiveOp::all_to_all, CollectiveOp::send_recv}) {
    INFO(collective_op_name(op));
    const auto plan = plan_collective(b.cluster, b.topology, op, CollectiveAlgo::automatic, gpus, 1e9);
    const double t = simulated_time_s(b.topology, plan);
    CHECK(t > 0);
    CHECK(t >= analytical_time_s(b.topology, plan) * (1 - 1e-9));
  }
  CHECK_THROWS_AS(plan_collective(b.cluster, b.topology, CollectiveOp::all_gather, CollectiveAlgo::tree, gpus, 1e9),
                  std::invalid_argument);
  // Bytes that are not a size would make flows that never finish: refused, not planned.
  for (double bytes : {std::nan(""), std::numeric_limits<double>::infinity(), -1.0}) {
    CHECK_THROWS_AS(plan_collective(b.cluster, b.topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, gpus, bytes), std::invalid_argument);
  }
}

TEST_CASE("links with zero latency still route, by the fewest hops") {
  ClusterSpec spec = cluster_of("cpu-host", 1);
  spec.groups[0].gpu_link.latency_s = 0;
  spec.groups[0].host_link.latency_s = 0;
  const Cluster cluster(spec);
  const Topology topology(cluster, spec.fabric);
  std::vector<std::uint32_t> route;
  topology.route(topology.gpu_vertex(make_id<GpuId>(0)), topology.gpu_vertex(make_id<GpuId>(1)), 0, route);
  CHECK(route.size() == 2);  // g0 > pcie0 > g1
  CHECK(topology.latency_s(route) == 0);
}
