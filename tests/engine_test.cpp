#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "fleetsim/engine.hpp"
#include "fleetsim/rng.hpp"

using fleetsim::EventQueue;

TEST_CASE("events pop in time order, equal times in insertion order", "[engine]") {
  EventQueue q;
  q.push(2.0, 0, 1);
  q.push(1.0, 0, 2);
  q.push(2.0, 0, 3);
  q.push(1.0, 0, 4);
  q.push(0.5, 0, 5);
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().subject);
  CHECK(order == std::vector<std::uint32_t>{5, 2, 4, 1, 3});
  CHECK(q.now() == 2.0);
}

TEST_CASE("the clock never goes backwards", "[engine]") {
  EventQueue q;
  q.push(1.0, 0, 0);
  q.pop();
  CHECK_THROWS_AS(q.push(0.5, 0, 0), fleetsim::InternalError);
  CHECK_NOTHROW(q.push(1.0, 0, 0));
}

TEST_CASE("the heap agrees with a stable sort on many random events", "[engine]") {
  fleetsim::Rng rng(7, 0, "engine-test");
  EventQueue q;
  struct Item {
    double t;
    std::uint32_t id;
  };
  std::vector<Item> items;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    const double t = static_cast<double>(rng.next() % 100);  // many ties on purpose
    items.push_back({t, i});
    q.push(t, 0, i);
  }
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.t < b.t; });
  for (const Item& expected : items) {
    const fleetsim::Event e = q.pop();
    REQUIRE(e.subject == expected.id);
    REQUIRE(e.time_s == expected.t);
  }
}

TEST_CASE("interleaved pushes and pops stay ordered", "[engine]") {
  fleetsim::Rng rng(11, 0, "hold");
  EventQueue q;
  for (int i = 0; i < 64; ++i) q.push(rng.uniform(), 0, 0);
  double last = 0;
  for (int i = 0; i < 20000; ++i) {
    const fleetsim::Event e = q.pop();
    REQUIRE(e.time_s >= last);
    last = e.time_s;
    q.push(last + rng.exponential(1.0), 0, 0);
  }
}

TEST_CASE("random streams are reproducible and independent", "[rng]") {
  fleetsim::Rng a(42, 0, "arrivals/0"), b(42, 0, "arrivals/0"), c(42, 0, "arrivals/1"), d(43, 0, "arrivals/0");
  const auto x = a.next();
  CHECK(x == b.next());
  CHECK(x != c.next());
  CHECK(x != d.next());
  // Fixed values guard against the derivation changing silently between versions or machines
  // (std::mt19937_64's output sequence is fixed by the C++ standard).
  CHECK(fleetsim::stream_seed(42, 0, "arrivals/0") == 17813799661234199452ull);
  CHECK(x == 10241056276370670769ull);
  fleetsim::Rng e(5, 0, "exp");
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += e.exponential(4.0);
  CHECK(sum / n == Approx(0.25).epsilon(0.01));  // mean 1/rate; 5 standard errors is about 1.1%
}
