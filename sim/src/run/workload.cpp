#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <span>
#include <string>

#include "events.hpp"

namespace fleetsim::run {

namespace {

// Puts at each of the ascending `ranks` (within [first, last)) the value a sort would put there,
// without sorting the rest: a selection at the middle rank splits the others' ranges. A million
// arrivals' 512 quantiles cost a few passes instead of a sort.
void select_ranks(std::vector<double>& v, std::span<const std::size_t> ranks, std::size_t first, std::size_t last) {
  if (ranks.empty() || first >= last) return;
  const std::size_t mid = ranks.size() / 2;
  const std::size_t r = ranks[mid];
  std::nth_element(v.begin() + static_cast<std::ptrdiff_t>(first), v.begin() + static_cast<std::ptrdiff_t>(r),
                   v.begin() + static_cast<std::ptrdiff_t>(last));
  select_ranks(v, ranks.first(mid), first, r);
  select_ranks(v, ranks.subspan(mid + 1), r + 1, last);
}

}  // namespace

std::vector<double> arrival_times(const ArrivalSpec& a, double horizon_s, Rng& rng) {
  std::vector<double> times;
  const auto more = [&](double t) {
    return t <= horizon_s && (a.count < 0 || static_cast<std::int64_t>(times.size()) < a.count);
  };
  switch (a.process) {
    case ArrivalProcess::once:
      for (std::int64_t k = 0; k < a.count && a.start_s <= horizon_s; ++k) times.push_back(a.start_s);
      break;
    case ArrivalProcess::periodic:
      for (double t = a.start_s; more(t); t = a.start_s + a.interval_s * static_cast<double>(times.size())) {
        times.push_back(t);
      }
      break;
    case ArrivalProcess::poisson:
      for (double t = a.start_s + rng.exponential(a.rate_per_s); more(t); t += rng.exponential(a.rate_per_s)) {
        times.push_back(t);
      }
      break;
    case ArrivalProcess::times:
      for (double offset : a.times_s) {
        if (a.start_s + offset <= horizon_s) times.push_back(a.start_s + offset);
      }
      break;
    case ArrivalProcess::bursty: {
      // Alternate exponential on and off periods, a Poisson process at each period's rate.
      double t = a.start_s;
      for (bool on = true; more(t); on = !on) {
        const double end = t + rng.exponential(1.0 / (on ? a.on_s : a.off_s));
        const double rate = on ? a.rate_per_s : a.off_rate_per_s;
        if (rate > 0) {
          for (double next = t + rng.exponential(rate); next < end && more(next); next += rng.exponential(rate)) {
            times.push_back(next);
          }
        }
        t = end;
      }
      break;
    }
    case ArrivalProcess::diurnal: {
      // Thinning: candidates at the peak rate, each kept with probability rate(t) / peak rate.
      const double peak_rate = a.rate_per_s * (1 + a.amplitude);
      for (double t = a.start_s + rng.exponential(peak_rate); more(t); t += rng.exponential(peak_rate)) {
        const double rate = a.rate_per_s * (1 + a.amplitude * std::cos(2 * std::numbers::pi * (t - a.peak_s) / a.period_s));
        if (rng.uniform() * peak_rate < rate) times.push_back(t);
      }
      break;
    }
    case ArrivalProcess::closed:
      break;
  }
  return times;
}

// All arrivals are drawn up front, so the event loop allocates nothing per event.
Workload::Workload(const Scenario& sc, std::uint64_t seed, const std::vector<double>& job_gpu_s, EventQueue& queue,
                   Trace& trace)
    : sc_(sc), queue_(queue), trace_(trace) {
  struct Arrival {
    double time_s;
    std::uint32_t stream;
    double scale = 1;  // this arrival's work over the workflow's (trace replay)
  };
  std::vector<Arrival> arrivals;
  for (std::uint32_t s = 0; s < sc_.streams.size(); ++s) {
    const ArrivalSpec& a = sc_.streams[s].arrival;
    if (!a.work_scales.empty()) {
      for (std::size_t k = 0; k < a.times_s.size(); ++k) {
        if (a.start_s + a.times_s[k] <= sc_.horizon_s) arrivals.push_back({a.start_s + a.times_s[k], s, a.work_scales[k]});
      }
      continue;
    }
    Rng rng(seed, 0, "arrivals/" + std::to_string(s));
    for (double t : arrival_times(a, sc_.horizon_s, rng)) arrivals.push_back({t, s});
  }
  std::stable_sort(arrivals.begin(), arrivals.end(), [](const Arrival& a, const Arrival& b) { return a.time_s < b.time_s; });
  open_instances_ = static_cast<std::uint32_t>(arrivals.size());
  // The job-size distribution size-based policies rank by: GPU-seconds of each open-loop instance
  // as predicted (declared sizes included), kept as at most 512 quantiles.
  std::vector<double> sizes_gpu_s;
  for (const Arrival& a : arrivals) sizes_gpu_s.push_back(job_gpu_s[sc_.streams[a.stream].workflow] * a.scale);
  const std::size_t keep = std::min<std::size_t>(sizes_gpu_s.size(), 512);
  std::vector<std::size_t> ranks;
  for (std::size_t q = 0; q < keep; ++q) ranks.push_back(q * sizes_gpu_s.size() / keep);
  select_ranks(sizes_gpu_s, ranks, 0, sizes_gpu_s.size());
  for (std::size_t r : ranks) job_sizes_.push_back(sizes_gpu_s[r]);
  // Closed-loop users: each user's workflows follow one another; arrival times are set when they
  // come (kNever until then), after the open-loop instances.
  // Tables an instance are held to the end of a run of many million: the successors only where a stream
  // is closed, the known work scales (below) only where one replays a trace.
  const auto closed = [](const Stream& s) { return s.arrival.process == ArrivalProcess::closed; };
  if (std::any_of(sc_.streams.begin(), sc_.streams.end(), closed)) next_in_loop_.assign(arrivals.size(), kNoInstance);
  const bool scaled = std::any_of(sc_.streams.begin(), sc_.streams.end(), [](const Stream& s) { return !s.arrival.work_scales.empty(); });
  for (std::uint32_t s = 0; s < sc_.streams.size(); ++s) {
    const ArrivalSpec& a = sc_.streams[s].arrival;
    if (a.process != ArrivalProcess::closed) continue;
    for (std::int64_t u = 0; u < a.users; ++u) {
      for (std::int64_t k = 0; k < a.count; ++k) {
        arrivals.push_back({kNever, s});
        next_in_loop_.push_back(k + 1 < a.count ? static_cast<std::uint32_t>(arrivals.size()) : kNoInstance);
      }
    }
  }
  for (std::size_t s = 0; s < sc_.streams.size(); ++s) think_rngs_.emplace_back(seed, 0, "think/" + std::to_string(s));
  std::size_t total_tasks = 0;
  for (const Arrival& a : arrivals) total_tasks += sc_.workflows[sc_.streams[a.stream].workflow].tasks.size();
  trace_.instances.reserve(arrivals.size());
  trace_.tasks.reserve(total_tasks);
  Rng sizes(seed, 0, "task-sizes");
  for (const Arrival& a : arrivals) {
    const Stream& s = sc_.streams[a.stream];
    const Workflow& wf = sc_.workflows[s.workflow];
    const InstanceId id = make_id<InstanceId>(trace_.instances.size());
    trace_.instances.push_back(InstanceRecord{s.workflow, make_id<TenantId>(s.tenant), a.time_s, kNever, false});
    stream_of_.push_back(a.stream);
    if (scaled) scale_.push_back(a.scale);
    first_task_.push_back(static_cast<std::uint32_t>(trace_.tasks.size()));
    remaining_.push_back(static_cast<std::uint32_t>(wf.tasks.size()));
    for (std::uint32_t t = 0; t < wf.tasks.size(); ++t) {
      TaskRecord r;
      r.instance = id;
      r.workflow = s.workflow;
      r.task = t;
      r.tenant = make_id<TenantId>(s.tenant);
      r.work_scale = a.scale * (wf.tasks[t].size == TaskSpec::Size::exponential ? sizes.exponential(1.0) : 1.0);
      trace_.tasks.push_back(r);
    }
  }
  unfinished_ = trace_.instances.size();
}

void Workload::start_open_loops() {
  if (open_instances_ > 0) queue_.push(trace_.instances[0].arrival_s, kArrival, 0);
}

void Workload::start_closed_loops() {
  for (std::uint32_t i = open_instances_; i < trace_.instances.size(); ++i) {
    const bool first = i == open_instances_ || next_in_loop_[i - 1] != i;  // no predecessor points here
    const ArrivalSpec& a = sc_.streams[stream_of_[i]].arrival;
    if (first && a.start_s <= sc_.horizon_s) queue_.push(a.start_s, kArrival, i);
  }
}

void Workload::schedule_after(std::uint32_t instance) {
  if (instance + 1 < open_instances_) queue_.push(trace_.instances[instance + 1].arrival_s, kArrival, instance + 1);
}

bool Workload::task_ended(std::uint32_t instance) {
  if (--remaining_[instance] != 0) return false;
  trace_.instances[instance].end_s = queue_.now();
  --in_flight_;
  --unfinished_;
  if (const std::uint32_t next = next_in_loop_.empty() ? kNoInstance : next_in_loop_[instance]; next != kNoInstance) {
    const ArrivalSpec& a = sc_.streams[stream_of_[instance]].arrival;
    Rng& rng = think_rngs_[stream_of_[instance]];
    const double at = queue_.now() + (a.think_s > 0 ? rng.exponential(1.0 / a.think_s) : 0.0);
    if (at <= sc_.horizon_s) queue_.push(at, kArrival, next);
  }
  return true;
}

}  // namespace fleetsim::run
