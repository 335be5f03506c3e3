#include "dags.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace fleetsim::bench {

std::string_view dag_kind_name(DagKind kind) {
  switch (kind) {
    case DagKind::layered: return "layered";
    case DagKind::fork_join: return "fork-join";
    case DagKind::chains: return "chains";
  }
  return "?";
}

std::optional<DagKind> parse_dag_kind(std::string_view name) {
  for (DagKind k : {DagKind::layered, DagKind::fork_join, DagKind::chains}) {
    if (dag_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

namespace {

// The standard library's distributions differ between implementations; these do not.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : gen_(seed) {}
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double between(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::uint32_t below(std::uint32_t n) { return static_cast<std::uint32_t>(uniform() * n); }

 private:
  std::mt19937_64 gen_;
};

class Builder {
 public:
  Builder(std::uint64_t seed, const DagSizes& sizes) : draw_(seed), sizes_(sizes) {}

  std::uint32_t task() {
    TaskSpec t;
    t.name = "t" + std::to_string(wf_.tasks.size());
    t.flop = std::round(draw_.between(sizes_.min_flop, sizes_.max_flop));
    t.dtype = Dtype::bf16;
    wf_.tasks.push_back(std::move(t));
    return static_cast<std::uint32_t>(wf_.tasks.size() - 1);
  }
  void edge(std::uint32_t from, std::uint32_t to) {
    // Whole bytes: SimGrid's payload sizes are integers.
    wf_.edges.push_back({from, to, std::round(draw_.between(sizes_.min_bytes, sizes_.max_bytes))});
  }
  Draw& draw() { return draw_; }
  Workflow finish(std::string id) {
    wf_.id = id;
    wf_.name = std::move(id);
    wf_.file = "(generated)";
    wf_.finalize();
    return std::move(wf_);
  }

 private:
  Draw draw_;
  DagSizes sizes_;
  Workflow wf_;
};

}  // namespace

Workflow make_dag(DagKind kind, std::uint32_t tasks, std::uint32_t width, std::uint64_t seed, const DagSizes& sizes) {
  Builder b(seed, sizes);
  width = std::max<std::uint32_t>(width, 1);
  tasks = std::max<std::uint32_t>(tasks, 1);
  switch (kind) {
    case DagKind::layered: {
      std::vector<std::uint32_t> previous, current;
      for (std::uint32_t made = 0; made < tasks;) {
        current.clear();
        for (std::uint32_t i = 0; i < width && made < tasks; ++i, ++made) {
          const std::uint32_t t = b.task();
          current.push_back(t);
          if (previous.empty()) continue;
          const std::uint32_t fan_in = std::min<std::uint32_t>(1 + b.draw().below(3), static_cast<std::uint32_t>(previous.size()));
          std::vector<std::uint32_t> picked;
          while (picked.size() < fan_in) {
            const std::uint32_t p = previous[b.draw().below(static_cast<std::uint32_t>(previous.size()))];
            if (std::find(picked.begin(), picked.end(), p) == picked.end()) picked.push_back(p);
          }
          for (std::uint32_t p : picked) b.edge(p, t);
        }
        std::swap(previous, current);
      }
      break;
    }
    case DagKind::fork_join: {
      std::uint32_t source = b.task();
      const std::uint32_t stages = std::max<std::uint32_t>(1, (tasks - 1) / (width + 1));
      for (std::uint32_t s = 0; s < stages; ++s) {
        std::vector<std::uint32_t> branches;
        for (std::uint32_t i = 0; i < width; ++i) {
          branches.push_back(b.task());
          b.edge(source, branches.back());
        }
        const std::uint32_t join = b.task();
        for (std::uint32_t t : branches) b.edge(t, join);
        source = join;
      }
      break;
    }
    case DagKind::chains: {
      const std::uint32_t length = std::max<std::uint32_t>(1, tasks / width);
      for (std::uint32_t c = 0; c < width; ++c) {
        std::uint32_t last = b.task();
        for (std::uint32_t i = 1; i < length; ++i) {
          const std::uint32_t t = b.task();
          b.edge(last, t);
          last = t;
        }
      }
      break;
    }
  }
  return b.finish(std::string(dag_kind_name(kind)) + "-" + std::to_string(tasks));
}

}  // namespace fleetsim::bench
