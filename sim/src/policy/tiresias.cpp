#include "tiresias.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"
#include "fleetsim/workflow.hpp"
#include "counting_walk.hpp"

namespace fleetsim::policies {
namespace {

// A job's priority falls as it receives service (GPUs x seconds, the "two dimensions"): it starts in
// queue 0 and moves down a queue as its attained service passes each threshold. The restore a resumed job
// pays is not service (ClusterView::attained_s): were it, a restore longer than the first queue's threshold
// would demote a job before it computed anything, and two starving jobs could take turns forever. Queues go in order;
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
  explicit Tiresias(Settings settings) : s_(std::move(settings)), waiting_(WalkOrder{s_.gittins}) {}

 private:
  struct Job {
    std::uint32_t queue;
    double index;          // Gittins index (0 under LAS)
    bool waiting;          // ready, not running
    double ready_s;        // joined its queue
    std::uint64_t joined;  // waiting: the ready queue's count when it joined (ReadyTask::joined)
    TaskId task;
    std::uint32_t gpus;
    double service_gpu_s;  // received since it was last promoted
    std::uint32_t ref;     // running: into view.running()
    std::uint64_t version; // running: which of the task's entries in running_ this is
  };
  // The walk's order: queue, then (Gittins) the index, highest first, or (LAS) running before waiting;
  // then the time it joined its queue; waiting jobs in ready order, running ones by task number.
  struct WalkOrder {
    bool gittins;
    bool operator()(const Job& a, const Job& b) const {
      if (a.queue != b.queue) return a.queue < b.queue;
      if (gittins && a.index != b.index) return a.index > b.index;
      if (!gittins && a.waiting != b.waiting) return !a.waiting;
      if (a.ready_s != b.ready_s) return a.ready_s < b.ready_s;
      if (a.waiting != b.waiting) return !a.waiting;
      return a.waiting ? a.joined < b.joined : index(a.task) < index(b.task);
    }
  };

  bool preempts() const override { return s_.preempt; }

  // Waiting jobs stay keyed in walk order from round to round (waiting_): a waiting job's key moves only when
  // its instance's service grows (a task of it ran: ClusterView::attained_changed), its instance is promoted,
  // or its gang size moves (an elastic task's). A round keys the tasks that joined and those, sorts the
  // running jobs (their service grows as they run), and walks both together until every GPU is counted
  // for: it costs what changed and what it allows, not the queue's length. A task that left the queue is
  // dropped when a walk meets it, or in a sweep once the keys hold twice the queue.
  bool order(const ClusterView& view, std::span<const ReadyTask> ready, std::vector<std::uint32_t>& /*order*/) override {
    ++round_;
    if (!ready.empty()) {  // the tasks that joined since the last round are at the queue's end
      for (std::size_t i = joined_after(ready, last_joined_); i < ready.size(); ++i) key(view, ready[i]);
      last_joined_ = std::max(last_joined_, ready.back().joined);
    }
    for (InstanceId instance : view.attained_changed()) {
      if (index(instance) >= instance_round_.size()) instance_round_.resize(index(instance) + 1, 0);
      if (instance_round_[index(instance)] == round_) continue;
      instance_round_[index(instance)] = round_;
      rekey_instance(view, ready, instance);
    }
    std::erase_if(elastic_, [&](TaskId task) {
      if (rekey(view, ready, task)) return false;
      listed_[index(task)] &= ~kElastic;
      return true;
    });
    if (s_.starvation > 0) {
      // Promotions come due with time: the jobs whose due time has come (key() checks the condition itself,
      // by the same sum and limit, so a wake-up asked for a due time finds it come).
      due_now_.clear();
      const double limit = due_limit(view.now());
      for (auto d = due_.begin(); d != due_.end() && d->at_s <= limit; ++d) due_now_.push_back(d->task);
      for (TaskId task : due_now_) rekey(view, ready, task);
      while (!promoted_now_.empty()) {  // a promotion moves every waiting task of its instance
        const InstanceId instance = promoted_now_.back();
        promoted_now_.pop_back();
        rekey_instance(view, ready, instance);
      }
    }
    order_running(view);
    if (waiting_.size() > 2 * ready.size() + 1024) {
      for (auto w = waiting_.begin(); w != waiting_.end();) {
        const Job& j = *w++;
        if (!place_of(ready, j.joined)) forget(j.task);
      }
    }
    return true;  // the walk gives the order (narrow)
  }

  // running_ in walk order. Under LAS a running job keeps its place from round to round until it passes a
  // threshold (its service grows, but its key is its queue and when it joined): only the new and those that
  // changed queue are sorted in, so a round costs a pass over the running jobs, not a sort of them. Under
  // Gittins every running job's index (and at times its queue) moves, but little from one round to the next:
  // the jobs still running keep last round's order, take their new keys and are sorted again from it (an
  // insertion sort, a pass where few pairs swapped); only new jobs, and jobs restarted or resized (another
  // ready_s or gang), are sorted in.
  void order_running(const ClusterView& view) {
    fresh_.clear();
    const std::span<const RunningTask> running = view.running();
    for (std::uint32_t j = 0; j < running.size(); ++j) {
      const RunningTask& r = running[j];
      const double service = view.attained_now_s(r) - promoted_at(r.instance);
      Job job{queue_of(service), gittins(view, service), false, r.ready_s, 0, r.task, r.gpus, service, j, 0};
      if (index(r.task) >= ran_.size()) ran_.resize(index(r.task) + 1);
      Ran& k = ran_[index(r.task)];
      const bool kept = k.version != 0 && k.round + 1 == round_ && (s_.gittins || k.queue == job.queue) && k.ready_s == job.ready_s &&
                        k.gpus == job.gpus;
      job.version = kept ? k.version : ++versions_;
      if (!kept) fresh_.push_back(job);
      k = {round_, job.version, job.ready_s, service, job.index, job.queue, job.gpus, j};
    }
    // Those that stopped or are sorted in afresh go; the rest take this round's service, keys and place in
    // view.running().
    std::erase_if(running_, [&](Job& j) {
      const Ran& k = ran_[index(j.task)];
      if (k.round != round_ || k.version != j.version) return true;
      j.service_gpu_s = k.service_gpu_s;
      j.queue = k.queue;
      j.index = k.index;
      j.ref = k.ref;
      return false;
    });
    const WalkOrder before{s_.gittins};
    if (s_.gittins) sort_from(running_, before);
    std::sort(fresh_.begin(), fresh_.end(), before);
    const auto kept = static_cast<std::ptrdiff_t>(running_.size());
    running_.insert(running_.end(), fresh_.begin(), fresh_.end());
    std::inplace_merge(running_.begin(), running_.begin() + kept, running_.end(), before);
  }

  // Keys the waiting task afresh where its service, queue time or gang size moved (or it is new), promoting
  // it first where it waited `starvation` times as long as it ran since it was last in queue 0.
  void key(const ClusterView& view, const ReadyTask& t) {
    double service = view.attained_s(t.instance) - promoted_at(t.instance);
    if (s_.starvation > 0 && queue_of(service) > 0 && promotion_due_s(t, service) <= due_limit(view.now())) {
      if (index(t.instance) >= promoted_.size()) promoted_.resize(index(t.instance) + 1);
      promoted_[index(t.instance)] = {view.attained_s(t.instance), view.now()};
      promoted_now_.push_back(t.instance);
      service = 0;  // it joins the back of queue 0
    }
    const double joined_s = index(t.instance) < promoted_.size() ? std::max(t.ready_s, promoted_[index(t.instance)].at_s) : t.ready_s;
    if (index(t.task) >= keyed_.size()) {
      keyed_.resize(index(t.task) + 1);
      next_of_task_.resize(index(t.task) + 1, 0);
      listed_.resize(index(t.task) + 1, 0);
    }
    Keyed& k = keyed_[index(t.task)];
    const bool keyed = k.job.joined != 0;
    if (keyed && k.job.joined == t.joined && k.job.service_gpu_s == service && k.job.ready_s == joined_s && k.job.gpus == t.gpus) return;
    // A new stay in the queue: listed where its key may move, unless still listed from an earlier one. (Only
    // here do the lists grow, so a rekey may key the tasks of a list as it walks it.)
    std::uint8_t& listed = listed_[index(t.task)];
    if ((listed & kOnInstanceList) == 0) {
      if (index(t.instance) >= first_of_instance_.size()) first_of_instance_.resize(index(t.instance) + 1, 0);
      next_of_task_[index(t.task)] = first_of_instance_[index(t.instance)];
      first_of_instance_[index(t.instance)] = index(t.task) + 1;
      listed |= kOnInstanceList;
    }
    if (t.spec->elastic && (listed & kElastic) == 0) {
      elastic_.push_back(t.task);
      listed |= kElastic;
    }
    if (keyed) forget(t.task);
    k.job = {queue_of(service), gittins(view, service), true, joined_s, t.joined, t.task, t.gpus, service, 0, 0};
    waiting_.insert(k.job);
    k.due_s = s_.starvation > 0 && k.job.queue > 0 ? promotion_due_s(t, service) : std::numeric_limits<double>::infinity();
    if (std::isfinite(k.due_s)) due_.insert({k.due_s, t.joined, t.task});
  }

  double promotion_due_s(const ReadyTask& t, double service_gpu_s) const { return t.ready_s + s_.starvation * service_gpu_s / t.gpus; }
  // The latest due time that has come at `now`: a hair of tolerance for the rounding of the sum.
  static double due_limit(double now) { return now + 1e-9 * std::max(1.0, std::abs(now)); }

  // key() for a listed task that still waits (true); false where it left the queue (its entries dropped).
  bool rekey(const ClusterView& view, std::span<const ReadyTask> ready, TaskId task) {
    const std::uint64_t joined = keyed_[index(task)].job.joined;
    const std::optional<std::uint32_t> place = joined != 0 ? place_of(ready, joined) : std::nullopt;
    if (!place) {
      if (joined != 0) forget(task);
      return false;
    }
    key(view, ready[*place]);
    return true;
  }

  // rekey() for the tasks of the instance's list; those no longer waiting leave it.
  void rekey_instance(const ClusterView& view, std::span<const ReadyTask> ready, InstanceId instance) {
    if (index(instance) >= first_of_instance_.size()) return;
    std::uint32_t* link = &first_of_instance_[index(instance)];
    while (*link != 0) {
      const TaskId task = make_id<TaskId>(*link - 1);
      if (rekey(view, ready, task)) {
        link = &next_of_task_[index(task)];
      } else {
        *link = next_of_task_[index(task)];
        listed_[index(task)] &= ~kOnInstanceList;
      }
    }
  }

  // Drops a task's entries (it left the queue, or is keyed afresh).
  void forget(TaskId task) {
    Keyed& k = keyed_[index(task)];
    waiting_.erase(k.job);
    if (std::isfinite(k.due_s)) due_.erase({k.due_s, k.job.joined, task});
    k.job.joined = 0;
  }

  void begin_round(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) override {
    // Without preemption running jobs keep their GPUs: only the free ones are handed out.
    const std::span<const RunningTask> running = view.running();
    begin_walk(view, s_.preempt);
    const WalkOrder before{s_.gittins};
    auto w = waiting_.begin();
    for (std::size_t r = 0; w != waiting_.end() || r < running_.size();) {
      if (w != waiting_.end() && (r == running_.size() || before(*w, running_[r]))) {
        if (walk_done()) {  // every job left waiting is held back
          w = waiting_.end();
          continue;
        }
        const TaskId task = w->task;
        const std::optional<std::uint32_t> place = place_of(ready, w->joined);
        ++w;
        if (place) {
          walk_waiting(ready, *place);
        } else {
          forget(task);  // it left the queue
        }
        continue;
      }
      const Job& j = running_[r++];
      if (s_.preempt && !keeps_gpus(running[j.ref])) {
        out.suspend(running[j.ref].first_gpu, "a job of a higher-priority queue needs its GPUs (this job is in queue " + std::to_string(j.queue) + ")", s_.restore_s);
      }
    }
    if (held_back()) ask_to_wake(view, ready, out);
  }

  // A task that starts now while others wait: a round is wanted when it passes its threshold.
  void placed(const ClusterView& view, const ReadyTask& t, Decisions& out) override {
    if (held_back()) wake_at_threshold(view, view.attained_s(t.instance) - promoted_at(t.instance), t.gpus, 0, out);
  }

  // While jobs are held back, the order changes when a running job passes a threshold (see also
  // placed()), or a held job's promotion comes due: a round is wanted then, at the earliest of them (the
  // earliest due of the jobs not allowed). A task allowed but not placed (it does not fit) asks nothing:
  // its service does not grow.
  void ask_to_wake(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) {
    for (const Job& j : running_) wake_at_threshold(view, j.service_gpu_s, j.gpus, view.running()[j.ref].restore_left_s(view.now()), out);
    for (auto d = due_.begin(); d != due_.end();) {
      const Due due = *d++;
      const std::optional<std::uint32_t> place = place_of(ready, due.joined);
      if (!place) {
        forget(due.task);
      } else if (!is_allowed(ready[*place])) {
        out.wake_at(due.at_s);
        break;
      }
    }
  }

  // When a job running on `gpus` with this service passes its queue's threshold (none in the last queue): its
  // service grows once the restore it pays (`restore_left_s` more; not yet known for a job just placed) is paid.
  void wake_at_threshold(const ClusterView& view, double service_gpu_s, std::uint32_t gpus, double restore_left_s, Decisions& out) const {
    const std::uint32_t q = queue_of(service_gpu_s);
    if (q < s_.thresholds_gpu_s.size()) out.wake_at(view.now() + restore_left_s + (s_.thresholds_gpu_s[q] - service_gpu_s) / gpus);
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
  std::set<Job, WalkOrder> waiting_;  // every waiting job keyed, in walk order
  std::vector<Job> running_;          // this round's running jobs, in walk order
  struct Ran {  // a running job as of the last round it ran in
    std::uint64_t round = 0;
    std::uint64_t version = 0;  // of its entry in running_ (0: never ran)
    double ready_s = 0, service_gpu_s = 0;
    double index = 0;  // its Gittins index (0 under LAS)
    std::uint32_t queue = 0, gpus = 0, ref = 0;
  };
  // Sorts jobs that were in order by their last keys: by insertion, which costs a pass and a move per pair out of
  // order, while the moves stay under the n log n a sort costs; past that, by a sort. Over running jobs (each task
  // once) the order is total, the task number last, so either way gives the same sequence.
  static void sort_from(std::vector<Job>& jobs, const WalkOrder& before) {
    const std::size_t n = jobs.size();
    std::size_t moves = 0;
    const std::size_t limit = n * static_cast<std::size_t>(std::bit_width(n));
    for (std::size_t i = 1; i < n; ++i) {
      if (!before(jobs[i], jobs[i - 1])) continue;
      Job moving = jobs[i];
      std::size_t at = i;
      for (; at > 0 && before(moving, jobs[at - 1]); --at) jobs[at] = jobs[at - 1];
      jobs[at] = moving;
      moves += i - at;
      if (moves > limit) {
        std::sort(jobs.begin(), jobs.end(), before);
        return;
      }
    }
  }
  std::vector<Ran> ran_;        // per task
  std::vector<Job> fresh_;      // running jobs sorted in afresh this round
  std::uint64_t versions_ = 0;
  struct Keyed {
    Job job{};                    // its entry in waiting_; job.joined 0: none
    double due_s = 0;             // its entry in due_ (infinite: none)
  };
  std::vector<Keyed> keyed_;      // per task
  struct Due {
    double at_s;  // when a waiting job in a queue below the first is promoted (starvation)
    std::uint64_t joined;
    TaskId task;
    bool operator<(const Due& o) const { return at_s < o.at_s || (at_s == o.at_s && joined < o.joined); }
  };
  std::set<Due> due_;
  // Each instance's tasks keyed while waiting (some since left: dropped when met), a list through its tasks:
  // 1 + the first task, 1 + the next (0: none).
  std::vector<std::uint32_t> first_of_instance_, next_of_task_;
  std::vector<TaskId> elastic_;         // elastic tasks keyed while waiting (their gang size moves)
  static constexpr std::uint8_t kOnInstanceList = 1, kElastic = 2;
  std::vector<std::uint8_t> listed_;    // per task: on which of the two lists
  std::vector<TaskId> due_now_;
  std::vector<InstanceId> promoted_now_;
  std::vector<std::uint64_t> instance_round_;     // per instance: the last round its tasks were keyed afresh
  std::uint64_t last_joined_ = 0;                 // the last task that joined the queue keyed
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
