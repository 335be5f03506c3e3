// The discrete-event core: a clock and a queue of small timestamped events.
// Events are ordered by (time, sequence number), so events at equal times keep their insertion
// order and nothing depends on floating-point equality. The queue is a 4-ary heap over one vector:
// once it has grown to its working size, pushing and popping allocate nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "fleetsim/error.hpp"

namespace fleetsim {

struct Event {
  double time_s;
  std::uint64_t seq;
  std::uint32_t kind;     // meaning chosen by the model that schedules it
  std::uint32_t subject;  // usually an id (task, instance, flow)
};

class EventQueue {
 public:
  void reserve(std::size_t n) { heap_.reserve(n); }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  const Event& top() const { return heap_.front(); }
  double now() const { return now_s_; }
  std::uint64_t pushed() const { return next_seq_; }

  // Schedules an event; the past is not allowed.
  void push(double time_s, std::uint32_t kind, std::uint32_t subject) {
    FLEETSIM_CHECK(time_s >= now_s_, "event scheduled in the past");
    heap_.push_back(Event{time_s, next_seq_++, kind, subject});
    sift_up(heap_.size() - 1);
  }

  // Removes the earliest event and advances the clock to it.
  Event pop() {
    const Event first = heap_.front();
    discard_top();
    now_s_ = first.time_s;
    return first;
  }

  // Removes the earliest event without advancing the clock (a superseded event).
  void discard_top() {
    heap_.front() = heap_.back();
    heap_.pop_back();
    if (!heap_.empty()) sift_down(0);
  }

 private:
  static constexpr std::size_t kArity = 4;

  static bool before(const Event& a, const Event& b) {
    return a.time_s < b.time_s || (a.time_s == b.time_s && a.seq < b.seq);
  }

  void sift_up(std::size_t i) {
    const Event moving = heap_[i];
    while (i > 0) {
      const std::size_t parent = (i - 1) / kArity;
      if (!before(moving, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = moving;
  }

  void sift_down(std::size_t i) {
    const Event moving = heap_[i];
    const std::size_t n = heap_.size();
    for (;;) {
      const std::size_t first_child = i * kArity + 1;
      if (first_child >= n) break;
      std::size_t best = first_child;
      const std::size_t last_child = first_child + kArity < n ? first_child + kArity : n;
      for (std::size_t c = first_child + 1; c < last_child; ++c) {
        if (before(heap_[c], heap_[best])) best = c;
      }
      if (!before(heap_[best], moving)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = moving;
  }

  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
  double now_s_ = 0.0;
};

}  // namespace fleetsim
