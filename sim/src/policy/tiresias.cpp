#include "tiresias.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"
#include "counting_walk.hpp"

namespace fleetsim::policies {
namespace {

// A job's priority falls as it receives service (GPUs x seconds, the "two dimensions"): it starts in
// queue 0 and moves down a queue as its attained service passes each threshold. Queues go in order;
// within one, LAS keeps running jobs ahead of waiting ones and then goes by the time each became
// ready (so it never preempts inside a queue), and Gittins goes by the job's Gittins index. Every round walks running
// and waiting jobs in that order, counting GPUs: the jobs that fit in the cluster's GPUs should run;
// running jobs that do not are suspended (they keep their work and pay `restore` to resume), and
// waiting jobs that do are placed as GPUs free up. A job that waited `starvation` times as long as it
// last ran goes back to queue 0 (its service counted from then on).
class Tiresias final : public CountingWalk {
 public:
  struct Settings {
    bool gittins;
    std::vector<double> thresholds_gpu_s;  // increasing; one queue more than thresholds
    double quantum_gpu_s;                  // Gittins' service quantum; 0: the best over all quanta
    double starvation;                     // 0: never promote
    bool preempt;
    double restore_s;
    std::vector<double> sizes_gpu_s;  // sorted past job sizes the index is over; empty: the workload's own
  };
  explicit Tiresias(Settings settings) : s_(std::move(settings)) {}

 private:
  struct Job {
    std::uint32_t queue;
    double service_gpu_s;  // received since it was last promoted
    double index;     // Gittins index (0 under LAS)
    bool waiting;     // ready, not running
    double ready_s;   // joined its queue
    std::uint32_t gpus;
    std::uint32_t ref;  // into ready, or into view.running()
    TaskId task;
    std::uint64_t version;  // which of the task's keys this is (see keys_)
  };

  bool preempts() const override { return s_.preempt; }

  // The walk's order: queue, then (Gittins) the index, highest first, or (LAS) running before waiting;
  // then the time it joined its queue; waiting jobs in ready order, running ones by task number.
  bool before(const Job& a, const Job& b) const {
    if (a.queue != b.queue) return a.queue < b.queue;
    if (s_.gittins && a.index != b.index) return a.index > b.index;
    if (!s_.gittins && a.waiting != b.waiting) return !a.waiting;
    if (a.ready_s != b.ready_s) return a.ready_s < b.ready_s;
    if (a.waiting != b.waiting) return !a.waiting;
    return a.waiting ? a.ref < b.ref : index(a.task) < index(b.task);
  }

  // jobs_ holds every job in walk order, kept from round to round: a job whose place cannot have moved
  // (a waiting job's service does not grow; a running job's LAS queue changes only at a threshold) keeps
  // it, and only the others are sorted in. A round costs what changed, not a sort of the whole queue
  // (under Gittins every running job's index moves: those are sorted every round).
  bool order(const ClusterView& view, std::span<const ReadyTask> ready, std::vector<std::uint32_t>& order) override {
    ++round_;
    fresh_.clear();
    for (std::uint32_t i = 0; i < ready.size(); ++i) {
      const ReadyTask& t = ready[i];
      double service = view.attained_s(t.instance) - promoted_at(t.instance);
      // Promotion: waited `starvation` times as long as it ran since it was last in queue 0. It joins
      // the back of queue 0.
      if (s_.starvation > 0 && queue_of(service) > 0 && view.now() - t.ready_s >= s_.starvation * service / t.gpus) {
        if (index(t.instance) >= promoted_.size()) promoted_.resize(index(t.instance) + 1);
        promoted_[index(t.instance)] = {view.attained_s(t.instance), view.now()};
        service = 0;
      }
      const double joined_s = index(t.instance) < promoted_.size() ? std::max(t.ready_s, promoted_[index(t.instance)].at_s) : t.ready_s;
      Key& k = key(t.task);
      const bool same = k.job.waiting && k.job.service_gpu_s == service && k.job.ready_s == joined_s && k.job.gpus == t.gpus;
      keep_or_renew(k, same, {queue_of(service), service, 0, true, joined_s, t.gpus, i, t.task, 0}, view);
    }
    const std::span<const RunningTask> running = view.running();
    for (std::uint32_t j = 0; j < running.size(); ++j) {
      const RunningTask& r = running[j];
      const double service = view.attained_now_s(r) - promoted_at(r.instance);
      const std::uint32_t queue = queue_of(service);
      Key& k = key(r.task);
      const bool same = !s_.gittins && !k.job.waiting && k.job.queue == queue && k.job.ready_s == r.ready_s && k.job.gpus == r.gpus;
      keep_or_renew(k, same, {queue, service, 0, false, r.ready_s, r.gpus, j, r.task, 0}, view);
    }
    // Jobs that left (placed, ended, suspended) or moved go; the rest take this round's ready index
    // and service (neither moves a job against its neighbours); the moved and new are merged in.
    std::erase_if(jobs_, [&](const Job& j) {
      const Key& k = keys_[index(j.task)];
      return k.round != round_ || k.job.version != j.version;
    });
    for (Job& j : jobs_) {
      const Job& now = keys_[index(j.task)].job;
      j.ref = now.ref;
      j.service_gpu_s = now.service_gpu_s;
    }
    const auto cmp = [this](const Job& a, const Job& b) { return before(a, b); };
    std::sort(fresh_.begin(), fresh_.end(), cmp);
    const auto kept = static_cast<std::ptrdiff_t>(jobs_.size());
    jobs_.insert(jobs_.end(), fresh_.begin(), fresh_.end());
    std::inplace_merge(jobs_.begin(), jobs_.begin() + kept, jobs_.end(), cmp);
    order.clear();
    for (const Job& j : jobs_) {
      if (j.waiting) order.push_back(j.ref);
    }
    return true;
  }

  struct Key {
    std::uint64_t round = 0;  // the last round the task was a job (waiting or running)
    Job job{};                // as of that round; job.version 0: never
  };
  Key& key(TaskId task) {
    if (index(task) >= keys_.size()) keys_.resize(index(task) + 1);
    return keys_[index(task)];
  }

  // The task's job this round: its place in jobs_ kept when `same` held last round too, else a new
  // version to sort in.
  void keep_or_renew(Key& k, bool same, Job job, const ClusterView& view) {
    if (k.job.version != 0 && k.round + 1 == round_ && same) {
      job.index = k.job.index;
      job.version = k.job.version;
    } else {
      job.index = gittins(view, job.service_gpu_s);
      job.version = ++versions_;
      fresh_.push_back(job);
    }
    k = Key{round_, job};
  }

  void begin_round(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override {
    // Without preemption running jobs keep their GPUs: only the free ones are handed out.
    const std::span<const RunningTask> running = view.running();
    begin_walk(view, s_.preempt);
    for (const Job& j : jobs_) {
      if (j.waiting) {
        walk_waiting(ready, j.ref);
      } else if (s_.preempt && !keeps_gpus(running[j.ref])) {
        out.suspend(running[j.ref].first_gpu, "a job of a higher-priority queue needs its GPUs (this job is in queue " + std::to_string(j.queue) + ")", s_.restore_s);
      }
    }
    if (held_back()) ask_to_wake(view, ready, out);
  }

  // A task that starts now while others wait: a round is wanted when it passes its threshold.
  void placed(const ClusterView& view, const ReadyTask& t, Decisions& out) override {
    if (held_back()) wake_at_threshold(view, view.attained_s(t.instance) - promoted_at(t.instance), t.gpus, out);
  }

  // While jobs are held back, the order changes when a running job passes a threshold (see also
  // placed()), or a held job's promotion comes due: a round is wanted then. A task allowed but not
  // placed (it does not fit) asks nothing: its service does not grow.
  void ask_to_wake(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) const {
    for (const Job& j : jobs_) {
      if (!j.waiting) {
        wake_at_threshold(view, j.service_gpu_s, j.gpus, out);
      } else if (s_.starvation > 0 && j.queue > 0 && !is_allowed(ready[j.ref])) {
        out.wake_at(ready[j.ref].ready_s + s_.starvation * j.service_gpu_s / j.gpus);
      }
    }
  }

  // When a job running on `gpus` with this service passes its queue's threshold (none in the last queue).
  void wake_at_threshold(const ClusterView& view, double service_gpu_s, std::uint32_t gpus, Decisions& out) const {
    const std::uint32_t q = queue_of(service_gpu_s);
    if (q < s_.thresholds_gpu_s.size()) out.wake_at(view.now() + (s_.thresholds_gpu_s[q] - service_gpu_s) / gpus);
  }

  std::uint32_t queue_of(double service_gpu_s) const {
    // A hair of tolerance, so that a wake-up at a threshold finds the job past it despite rounding.
    const double at = service_gpu_s + 1e-9 * std::max(1.0, std::abs(service_gpu_s));
    return static_cast<std::uint32_t>(std::upper_bound(s_.thresholds_gpu_s.begin(), s_.thresholds_gpu_s.end(), at) - s_.thresholds_gpu_s.begin());
  }

  double promoted_at(InstanceId instance) const {
    return index(instance) < promoted_.size() ? promoted_[index(instance)].service_gpu_s : 0.0;
  }

  // The Gittins index of a job that has received `a`, over the job sizes S (the `sizes` history, or the
  // workload's own): with quantum
  // d, P(S - a <= d | S > a) / E[min(S - a, d) | S > a], the rate at which d more service completes
  // it; without one, the best such rate over all d.
  double gittins(const ClusterView& view, double a) {
    if (!s_.gittins) return 0;
    const std::span<const double> x = s_.sizes_gpu_s.empty() ? view.job_sizes_gpu_s() : std::span<const double>(s_.sizes_gpu_s);
    if (prefix_.size() != x.size() + 1) {
      prefix_.assign(1, 0.0);
      for (double v : x) prefix_.push_back(prefix_.back() + v);
    }
    const auto k = static_cast<std::size_t>(std::upper_bound(x.begin(), x.end(), a) - x.begin());
    const auto n = static_cast<double>(x.size() - k);
    if (n == 0) return 0;  // past every size seen: nothing known; last
    // Service given to the n jobs above a, each served min(S - a, d): those done within d, plus d for the rest.
    const auto served = [&](std::size_t m, double d) { return prefix_[m] - prefix_[k] - static_cast<double>(m - k) * a + static_cast<double>(x.size() - m) * d; };
    if (s_.quantum_gpu_s > 0) {
      const auto m = static_cast<std::size_t>(std::upper_bound(x.begin(), x.end(), a + s_.quantum_gpu_s) - x.begin());
      const double service = served(m, s_.quantum_gpu_s);
      return service > 0 ? static_cast<double>(m - k) / service : 0;
    }
    double best = 0;
    for (std::size_t m = k + 1; m <= x.size(); ++m) {
      const double service = served(m, x[m - 1] - a);
      if (service > 0) best = std::max(best, static_cast<double>(m - k) / service);
    }
    return best;
  }

  Settings s_;
  std::vector<Job> jobs_;   // every job, in walk order
  std::vector<Job> fresh_;  // new or moved this round
  std::vector<Key> keys_;   // per task
  std::uint64_t versions_ = 0;
  std::vector<double> prefix_;             // prefix sums of the job-size sample
  struct Promotion {
    double service_gpu_s = 0;  // attained service when it was last promoted: counted from there on
    double at_s = 0;
  };
  std::vector<Promotion> promoted_;        // per instance
  std::uint64_t round_ = 0;
};

// "3250, 7200": increasing positive GPU-seconds.
std::vector<double> parse_thresholds(const std::string& text) {
  std::vector<double> out;
  std::size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    std::size_t b = at, e = comma;
    while (b < e && text[b] == ' ') ++b;
    while (e > b && text[e - 1] == ' ') --e;
    const double v = parse_number(std::string_view(text).substr(b, e - b)).value_or(0);
    if (!(v > 0) || (!out.empty() && v <= out.back())) {
      throw InputError({Problem{"", "thresholds", "expected increasing positive GPU-seconds separated by commas (\"3250, 7200\"), found \"" + text + "\""}});
    }
    out.push_back(v);
    at = comma + 1;
  }
  return out;
}

// A file of job sizes in GPU-seconds: one per line (the first column of a CSV), a header line allowed,
// as the Tiresias simulator's yarn-gput*.csv. Sorted.
std::vector<double> read_sizes(const std::string& path) {
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const InputError& e) {  // said at the parameter, with the file named
    throw InputError({Problem{"", "sizes", path + ": " + (e.problems().empty() ? std::string("cannot read it") : e.problems().front().message)}});
  }
  std::vector<double> sizes;
  std::size_t line_number = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    ++line_number;
    line = line.substr(0, std::min(line.find(','), line.size()));
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty()) continue;
    const std::optional<double> number = parse_number(line);
    if (!number && line_number == 1) continue;  // a header
    const double v = number.value_or(0);
    if (!(v > 0)) {
      throw InputError({Problem{"", "sizes", path + " line " + std::to_string(line_number) + ": expected a positive number of GPU-seconds, found \"" +
                                                 std::string(line.substr(0, 40)) + "\""}});
    }
    sizes.push_back(v);
  }
  if (sizes.empty()) throw InputError({Problem{"", "sizes", path + ": expected job sizes in GPU-seconds, one per line, found none"}});
  std::sort(sizes.begin(), sizes.end());
  return sizes;
}

Tiresias::Settings settings(const PolicyParams& p, bool gittins) {
  Tiresias::Settings s{gittins, parse_thresholds(p.string("thresholds")), gittins ? p.non_negative("quantum") : 0.0,
                       p.non_negative("starvation"), p.boolean("preempt"), p.non_negative("restore"), {}};
  if (gittins && !p.string("sizes").empty()) s.sizes_gpu_s = read_sizes(p.string("sizes"));
  return s;
}

}  // namespace

std::unique_ptr<Policy> make_las(const PolicyParams& p) { return std::make_unique<Tiresias>(settings(p, false)); }
std::unique_ptr<Policy> make_gittins(const PolicyParams& p) { return std::make_unique<Tiresias>(settings(p, true)); }

}  // namespace fleetsim::policies
