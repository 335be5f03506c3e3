// Dense, strongly typed ids. Per-run state lives in arrays indexed by them.
#pragma once

#include <cstdint>

namespace fleetsim {

enum class GpuId : std::uint32_t {};
enum class NodeId : std::uint32_t {};
enum class TaskId : std::uint32_t {};      // a task of one workflow instance, across the whole run
enum class InstanceId : std::uint32_t {};  // one arrival of a workflow
enum class TenantId : std::uint32_t {};

template <typename Id>
constexpr std::uint32_t index(Id id) {
  return static_cast<std::uint32_t>(id);
}

template <typename Id>
constexpr Id make_id(std::uint64_t i) {
  return static_cast<Id>(static_cast<std::uint32_t>(i));
}

}  // namespace fleetsim
