#include "backfill.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/hash.hpp"
#include "greedy.hpp"

namespace fleetsim::policies {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// GPUs free over time, as a step function from now: what running jobs give back when their estimates
// run out, less what reservations hold.
class Profile {
 public:
  struct Release {
    double at_s;  // estimated; earlier than now means now
    std::uint32_t gpus;
    TaskId task;
    bool operator<(const Release& o) const { return at_s < o.at_s || (at_s == o.at_s && index(task) < index(o.task)); }
  };

  // `releases` in time order.
  void reset(double now_s, std::uint32_t free_now, std::span<const Release> releases) {
    steps_.assign(1, Step{now_s, static_cast<std::int64_t>(free_now)});
    for (const Release& r : releases) {
      if (r.at_s > steps_.back().at_s) steps_.push_back(Step{r.at_s, steps_.back().free});
      steps_.back().free += r.gpus;
    }
    room_.clear();
  }

  // Whether `gpus` are free from now for `duration_s`.
  bool fits_now(std::uint32_t gpus, double duration_s) { return steps_[0].at_s + duration_s <= room_until(gpus); }

  // The earliest step at or after `after_s` from which `gpus` stay free for `duration_s` (infinity: never).
  double earliest(std::uint32_t gpus, double duration_s, double after_s) const {
    const auto need = static_cast<std::int64_t>(gpus);
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      if (steps_[i].at_s < after_s || steps_[i].free < need) continue;
      const double end_s = steps_[i].at_s + duration_s;
      std::size_t j = i + 1;
      while (j < steps_.size() && steps_[j].at_s < end_s && steps_[j].free >= need) ++j;
      if (j == steps_.size() || steps_[j].at_s >= end_s) return steps_[i].at_s;
      i = j;  // steps up to j cannot start a window: j lacks GPUs
    }
    return kInf;
  }

  // Holds `gpus` from `start_s` for `duration_s`.
  void reserve(double start_s, double duration_s, std::uint32_t gpus) {
    if (!std::isfinite(start_s)) return;
    const std::size_t first = split(start_s);
    const std::size_t last = std::isfinite(start_s + duration_s) ? split(start_s + duration_s) : steps_.size();
    for (std::size_t i = first; i < last; ++i) steps_[i].free -= gpus;
    room_.clear();
  }

 private:
  struct Step {
    double at_s;
    std::int64_t free;
  };

  // The index of a step starting at `at_s`, made if there is none.
  std::size_t split(double at_s) {
    const auto it = std::lower_bound(steps_.begin(), steps_.end(), at_s, [](const Step& s, double t) { return s.at_s < t; });
    const auto i = static_cast<std::size_t>(it - steps_.begin());
    if (it != steps_.end() && it->at_s == at_s) return i;
    steps_.insert(it, Step{at_s, steps_[i - 1].free});
    return i;
  }

  // When fewer than `gpus` are first free (infinity: never), cached per size until the profile changes:
  // a round asks this for most of a long queue.
  double room_until(std::uint32_t gpus) {
    for (const auto& [size, until_s] : room_) {
      if (size == gpus) return until_s;
    }
    double until_s = kInf;
    for (const Step& s : steps_) {
      if (s.free < static_cast<std::int64_t>(gpus)) {
        until_s = s.at_s;
        break;
      }
    }
    room_.emplace_back(gpus, until_s);
    return until_s;
  }

  std::vector<Step> steps_;
  std::vector<std::pair<std::uint32_t, double>> room_;
};

// Tasks in the order they became ready. Each round builds the profile of GPUs freed by running
// tasks' estimates; a task starts now only if the profile has its GPUs free for its whole estimate;
// the first `reservations` tasks that cannot start get the earliest slot the profile has for them,
// and later tasks must not take it. One reservation is EASY (the head is never delayed); one per
// task is conservative (no task is delayed by a later one). Only the first `depth` waiting tasks
// are looked at (0: all), as Slurm's bf_max_job_test.
class Backfill final : public Greedy {
 public:
  Backfill(std::size_t reservations, std::size_t depth, double overestimate)
      : reservations_(reservations), depth_(depth), overestimate_(overestimate) {}

 private:
  void begin_round(const ClusterView& view, std::span<const ReadyTask>, Decisions&) override {
    update_releases(view);
    profile_.reset(view.now(), view.free_gpu_count(), releases_);
    reserved_ = 0;
    considered_ = 0;
  }

  // The running tasks' estimated ends, kept in time order from round to round: only tasks that started,
  // or whose prediction moved, since the last round are sorted in. A round costs what changed, not a
  // sort of every running task.
  void update_releases(const ClusterView& view) {
    ++round_;
    fresh_.clear();
    for (const RunningTask& r : view.running()) {
      const double predicted_s = view.free_at_s(r.first_gpu) - r.started_s;
      const double end_s = r.started_s + predicted_s * factor(r.task);
      const std::uint32_t t = index(r.task);
      if (t >= seen_.size()) seen_.resize(t + 1, Seen{kNeverSeen, 0});
      if (seen_[t].round != round_ - 1 || seen_[t].end_s != end_s) fresh_.push_back({end_s, r.gpus, r.task});
      seen_[t] = Seen{round_, end_s};
    }
    std::erase_if(releases_, [&](const Profile::Release& r) { return seen_[index(r.task)].round != round_ || seen_[index(r.task)].end_s != r.at_s; });
    // A task whose end moved was in releases_ with its old end: the erase dropped it, fresh_ has its new one.
    std::sort(fresh_.begin(), fresh_.end());
    const auto kept = static_cast<std::ptrdiff_t>(releases_.size());
    releases_.insert(releases_.end(), fresh_.begin(), fresh_.end());
    std::inplace_merge(releases_.begin(), releases_.begin() + kept, releases_.end());
  }

  bool allowed(const ClusterView& view, const ReadyTask& task) override {
    if (depth_ > 0 && ++considered_ > depth_) return false;
    estimate_s_ = estimate_s(view, task);
    if (profile_.fits_now(task.gpus, estimate_s_)) return true;
    reserve(task, view.now());
    return false;
  }

  void placed(const ClusterView& view, const ReadyTask& task, Decisions&) override { profile_.reserve(view.now(), estimate_s_, task.gpus); }

  // The profile had room but the nodes' shape did not: a reservation from the next release on.
  void blocked(const ClusterView& view, const ReadyTask& task) override { reserve(task, std::nextafter(view.now(), kInf)); }
  bool notes_unplaced() const override { return true; }

  void reserve(const ReadyTask& task, double after_s) {
    if (reserved_ == reservations_) return;
    ++reserved_;
    profile_.reserve(profile_.earliest(task.gpus, estimate_s_, after_s), estimate_s_, task.gpus);
  }

  // What the scheduler is told a task takes: the predicted time on the slowest GPU type of the
  // cluster, times the task's overestimate.
  double estimate_s(const ClusterView& view, const ReadyTask& task) const {
    double longest = 0;
    for (const NodeGroup& g : view.cluster().spec().groups) {
      if (g.count > 0) longest = std::max(longest, view.compute_estimate_s(task, g.gpu));
    }
    return longest * factor(task.task);
  }

  // Users ask for more time than they use: each task's estimate is its run time times a factor drawn
  // uniformly from [1, overestimate] (the "f model" of Mu'alem & Feitelson 2001), fixed per task.
  double factor(TaskId task) const {
    if (overestimate_ == 1) return 1;
    const double u = static_cast<double>(splitmix64(index(task)) >> 11) * 0x1.0p-53;
    return 1 + (overestimate_ - 1) * u;
  }

  std::size_t reservations_, depth_;
  double overestimate_;
  Profile profile_;
  std::vector<Profile::Release> releases_, fresh_;
  static constexpr std::uint64_t kNeverSeen = ~std::uint64_t{0};
  struct Seen {
    std::uint64_t round;  // the last round it was seen running
    double end_s;         // and its estimated end then
  };
  std::vector<Seen> seen_;  // per task
  std::uint64_t round_ = 0;
  std::size_t reserved_ = 0, considered_ = 0;
  double estimate_s_ = 0;  // of the task allowed last
};

double overestimate(const PolicyParams& p) {
  const double f = p.number("overestimate");
  if (!(f >= 1) || !std::isfinite(f)) {
    throw InputError({Problem{"", "overestimate", "expected a factor of at least 1, found " + std::to_string(f)}});
  }
  return f;
}

}  // namespace

std::unique_ptr<Policy> make_easy_backfill(const PolicyParams& p) { return std::make_unique<Backfill>(1, 0, overestimate(p)); }

std::unique_ptr<Policy> make_conservative_backfill(const PolicyParams& p) {
  const std::int64_t depth = p.integer("depth");
  if (depth < 1) throw InputError({Problem{"", "depth", "expected at least 1 task, found " + std::to_string(depth)}});
  const auto d = static_cast<std::size_t>(depth);
  return std::make_unique<Backfill>(d, d, overestimate(p));
}

}  // namespace fleetsim::policies
