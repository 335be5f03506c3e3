#include "batching.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "events.hpp"
#include "fleetsim/memory.hpp"
#include "slots.hpp"

namespace fleetsim::run {

// A task whose work is FLOP and bytes batches only with instances of itself.
Batching::Batching(const Scenario& sc, const Predictions& predicted, EventQueue& queue, bool& round_wanted)
    : queue_(queue), round_wanted_(round_wanted) {
  std::map<std::tuple<std::uint32_t, std::string, std::uint32_t, double, double>, std::uint32_t> shared;
  std::uint32_t keys = 0;
  for (std::uint32_t w = 0; w < sc.workflows.size(); ++w) {
    auto& of = key_of_.emplace_back();
    for (std::uint32_t t = 0; t < sc.workflows[w].tasks.size(); ++t) {
      const TaskSpec& s = sc.workflows[w].tasks[t];
      const std::uint32_t model = predicted.model(w, t);
      const std::string work = work_identity(s);
      if (!s.batching || work.empty() || model == kNoModel) {
        of.push_back(keys++);
        continue;
      }
      const auto key = std::tuple{model, work, s.batching->max_size, s.batching->max_wait_s, s.batching->shared_bytes};
      const auto [it, added] = shared.emplace(key, keys);
      if (added) ++keys;
      of.push_back(it->second);
    }
  }
  held_.resize(keys);
  hold_deadline_.assign(keys, 0.0);
}

std::string Batching::work_identity(const TaskSpec& s) {
  if (!s.op.empty() || !s.architecture) return s.op;
  const StepShape& a = s.shape;
  char text[256];
  std::snprintf(text, sizeof text, "%s/%g/%g/%g/%g/%g/%g/%s/%s", s.architecture->id.c_str(), a.width, a.height, a.frames, a.tokens,
                a.context, s.steps, std::string(dtype_name(s.dtype)).c_str(), std::string(runtime_name(a.runtime)).c_str());
  return text;
}

bool Batching::hold(std::uint32_t key, const ReadyTask& task, std::vector<ReadyTask>& ready) {
  const auto& batching = task.spec->batching;
  if (!batching || batching->max_wait_s <= 0) return false;
  held_[key].push_back(task);
  if (held_[key].size() >= batching->max_size) {
    release(key, ready);
  } else if (held_[key].size() == 1) {
    hold_deadline_[key] = queue_.now() + batching->max_wait_s;
    queue_.push(hold_deadline_[key], kBatchRelease, key);
  }
  return true;
}

bool Batching::release_due(std::uint32_t key, std::vector<ReadyTask>& ready) {
  if (held_[key].empty() || queue_.now() < hold_deadline_[key]) return false;
  release(key, ready);
  return true;
}

void Batching::release(std::uint32_t key, std::vector<ReadyTask>& ready) {
  ready.insert(ready.end(), held_[key].begin(), held_[key].end());
  held_[key].clear();
  round_wanted_ = true;
}

void Batching::forget(TaskId task) {
  for (auto& held : held_) std::erase_if(held, [&](const ReadyTask& r) { return r.task == task; });
}

std::uint32_t Batching::open(TaskId leader) {
  const std::uint32_t slot = take_slot(batches_, free_batches_);
  batches_[slot].members.assign(1, leader);
  batch_of_[index(leader)] = slot;
  return slot;
}

void Batching::join(std::uint32_t batch, TaskId member) {
  batches_[batch].members.push_back(member);
  batch_of_[index(member)] = batch;
}

void Batching::dissolve(TaskId member) {
  const std::uint32_t slot = batch_of_[index(member)];
  if (slot == kNone) return;
  for (TaskId m : batches_[slot].members) batch_of_[index(m)] = kNone;
  free_batches_.push_back(slot);
}

}  // namespace fleetsim::run
