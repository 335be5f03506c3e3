#include "fleetsim/trace.hpp"

namespace fleetsim {

std::string_view task_status_name(TaskStatus status) {
  switch (status) {
    case TaskStatus::queued: return "queued";
    case TaskStatus::running: return "running";
    case TaskStatus::completed: return "completed";
    case TaskStatus::failed: return "failed";
  }
  return "?";
}

std::string_view decision_kind_name(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::placed: return "placed";
    case DecisionKind::preempted: return "preempted";
    case DecisionKind::failed: return "failed";
    case DecisionKind::stopped: return "stopped";
    case DecisionKind::resized: return "resized";
    case DecisionKind::node_started: return "node-started";
    case DecisionKind::node_kept: return "node-kept";
    case DecisionKind::node_draining: return "node-draining";
    case DecisionKind::node_off: return "node-off";
  }
  return "?";
}

std::uint32_t Trace::add_reason(std::string reason) {
  for (std::uint32_t i = 0; i < reasons.size(); ++i) {
    if (reasons[i] == reason) return i;
  }
  reasons.push_back(std::move(reason));
  return static_cast<std::uint32_t>(reasons.size() - 1);
}

}  // namespace fleetsim
