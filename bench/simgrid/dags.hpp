// Synthetic workflow DAGs for the side-by-side comparison with SimGrid: random layered graphs,
// fork-join stages and independent chains, each task a single-GPU compute of random FLOP and each
// edge a tensor of random size. Generated from a seed with fleetsim's own fixed-width arithmetic,
// so a (kind, size, width, seed) gives the same graph on every machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fleetsim/workflow.hpp"

namespace fleetsim::bench {

enum class DagKind : std::uint8_t { layered, fork_join, chains };
std::string_view dag_kind_name(DagKind kind);
std::optional<DagKind> parse_dag_kind(std::string_view name);

struct DagSizes {
  double min_flop = 2e11, max_flop = 2e12;   // per task: 0.2 to 2 ms on an H100 at its bf16 peak
  double min_bytes = 16e6, max_bytes = 256e6;  // per edge, whole bytes
};

// About `tasks` tasks (exactly, for layered and chains; fork-join rounds to whole stages).
//   layered: layers of `width` tasks; each task after the first layer reads 1 to 3 distinct tasks of
//            the layer before.
//   fork-join: a source, `width` branches, a join that is the next stage's source, and so on.
//   chains: `width` independent chains of equal length.
// Tasks are bf16, one GPU, no model weights, no working set, no memory traffic: their time is FLOP / peak.
Workflow make_dag(DagKind kind, std::uint32_t tasks, std::uint32_t width, std::uint64_t seed,
                  const DagSizes& sizes = {});

}  // namespace fleetsim::bench
