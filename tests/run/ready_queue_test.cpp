#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "run/ready_queue.hpp"

using namespace fleetsim;

namespace {

ReadyTask task(std::uint32_t n) {
  ReadyTask t{};
  t.task = make_id<TaskId>(n);
  return t;
}

std::vector<std::uint32_t> numbers(const run::ReadyQueue& q) {
  std::vector<std::uint32_t> out;
  for (const ReadyTask& t : q) out.push_back(index(t.task));
  return out;
}

}  // namespace

TEST_CASE("the ready queue removes decided tasks near either end and keeps the others' order", "[run][ready]") {
  run::ReadyQueue q;
  for (std::uint32_t n = 0; n < 10; ++n) q.push_back(task(n));
  const std::vector<std::uint32_t> head{0, 2};  // nearer the front: the front advances
  q.remove(head);
  CHECK(numbers(q) == std::vector<std::uint32_t>{1, 3, 4, 5, 6, 7, 8, 9});
  const std::vector<std::uint32_t> tail{5, 7};  // nearer the back: the tail moves forward
  q.remove(tail);
  CHECK(numbers(q) == std::vector<std::uint32_t>{1, 3, 4, 5, 6, 8});
  CHECK(q.front().task == make_id<TaskId>(1));
  q.push_back(task(10));
  q.erase_if([](const ReadyTask& t) { return index(t.task) == 4; });
  CHECK(numbers(q) == std::vector<std::uint32_t>{1, 3, 5, 6, 8, 10});
  q.clear();
  CHECK(q.empty());
}

TEST_CASE("the ready queue agrees with a plain list under random arrivals and removals", "[run][ready]") {
  std::mt19937 rng(7);
  run::ReadyQueue q;
  std::vector<std::uint32_t> model;
  std::uint32_t next = 0;
  for (int round = 0; round < 3000; ++round) {
    const int arrivals = static_cast<int>(rng() % 4);
    for (int a = 0; a < arrivals; ++a) {
      q.push_back(task(next));
      model.push_back(next++);
    }
    if (model.empty()) continue;
    // Mostly the head (a FIFO on a busy cluster), sometimes anywhere.
    std::vector<std::uint32_t> removed;
    for (std::uint32_t i = 0; i < model.size(); ++i) {
      const bool near_head = i < 3 && rng() % 2 == 0;
      if (near_head || rng() % 50 == 0) removed.push_back(i);
    }
    q.remove(removed);
    for (std::size_t k = removed.size(); k-- > 0;) model.erase(model.begin() + removed[k]);
    REQUIRE(numbers(q) == model);
    REQUIRE(q.size() == model.size());
  }
}
