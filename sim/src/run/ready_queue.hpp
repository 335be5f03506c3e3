// The ready queue: tasks waiting for the policy, in the order they became ready. A round removes the
// tasks it decided on and keeps the others' order. A long backlog whose head is served (FIFO on a busy
// cluster) must not cost a move of the whole queue a round: the queue's live part starts at an offset,
// a removal moves whichever side of the decided tasks is shorter, and the dead front is given back
// only once it outgrows the live part, so a removal costs its distance from the nearer end, amortised.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fleetsim/policy.hpp"

namespace fleetsim::run {

class ReadyQueue {
 public:
  std::size_t size() const { return items_.size() - head_; }
  bool empty() const { return size() == 0; }
  ReadyTask& operator[](std::size_t i) { return items_[head_ + i]; }
  const ReadyTask& operator[](std::size_t i) const { return items_[head_ + i]; }
  const ReadyTask& front() const { return items_[head_]; }
  ReadyTask* begin() { return items_.data() + head_; }
  ReadyTask* end() { return items_.data() + items_.size(); }
  const ReadyTask* begin() const { return items_.data() + head_; }
  const ReadyTask* end() const { return items_.data() + items_.size(); }
  std::span<ReadyTask> tasks() { return {begin(), end()}; }
  std::span<const ReadyTask> tasks() const { return {begin(), end()}; }

  // Each task joins at the end, numbered (ReadyTask::joined).
  void push_back(const ReadyTask& task) {
    items_.push_back(task);
    items_.back().joined = ++joined_;
  }
  void append(std::span<const ReadyTask> tasks) {
    for (const ReadyTask& t : tasks) push_back(t);
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }
  template <class Pred>
  void erase_if(Pred pred) {
    items_.erase(std::remove_if(items_.begin() + static_cast<std::ptrdiff_t>(head_), items_.end(), pred), items_.end());
  }

  // Removes the tasks at the live indices `removed` (ascending, distinct), the others keeping their order.
  void remove(std::span<const std::uint32_t> removed) {
    if (removed.empty()) return;
    const std::size_t first = removed.front(), last = removed.back();
    std::size_t next = 0;  // into removed
    if (last + 1 <= size() - first) {
      // Nearer the front: the survivors before `last` move back over the removed, and the front advances.
      std::size_t to = head_ + last + 1;
      next = removed.size();
      for (std::size_t i = last + 1; i-- > 0;) {
        if (next > 0 && removed[next - 1] == i) {
          --next;
          continue;
        }
        items_[--to] = items_[head_ + i];
      }
      head_ += removed.size();
    } else {
      // Nearer the back: the survivors after `first` move forward.
      std::size_t to = head_ + first;
      for (std::size_t i = first; i < size(); ++i) {
        if (next < removed.size() && removed[next] == i) {
          ++next;
          continue;
        }
        items_[to++] = items_[head_ + i];
      }
      items_.resize(to);
    }
    if (head_ > size()) {
      items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  std::vector<ReadyTask> items_;
  std::size_t head_ = 0;  // items_ before it have left the queue
  std::uint64_t joined_ = 0;
};

}  // namespace fleetsim::run
