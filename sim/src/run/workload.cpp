#include "workload.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <string>

#include "events.hpp"
#include "fleetsim/error.hpp"

namespace fleetsim::run {


ArrivalDraws::ArrivalDraws(const ArrivalSpec& a, double horizon_s, Rng rng) : a_(&a), horizon_s_(horizon_s), rng_(std::move(rng)) {
  // Sorted by arrival time as computed (start + offset), so that offsets that round to one time keep their order.
  if (a.process == ArrivalProcess::times && !std::is_sorted(a.times_s.begin(), a.times_s.end())) {
    order_.resize(a.times_s.size());
    std::iota(order_.begin(), order_.end(), 0u);
    std::stable_sort(order_.begin(), order_.end(), [&](std::uint32_t x, std::uint32_t y) { return a.start_s + a.times_s[x] < a.start_s + a.times_s[y]; });
  }
}

// Each process draws as it would for the whole list at once, one arrival a call: the same numbers from
// the same stream, in the same order.
std::optional<ArrivalDraws::Arrival> ArrivalDraws::next() {
  const ArrivalSpec& a = *a_;
  if (done_) return std::nullopt;
  const auto emit = [&](double t, double scale = 1.0) -> std::optional<Arrival> {
    ++drawn_;
    return Arrival{t, scale};
  };
  switch (a.process) {
    case ArrivalProcess::once:
      if (drawn_ < a.count && a.start_s <= horizon_s_) return emit(a.start_s);
      break;
    case ArrivalProcess::periodic:
      if (const double t = a.start_s + a.interval_s * static_cast<double>(drawn_); more(t)) return emit(t);
      break;
    case ArrivalProcess::poisson:
      t_ = started_ ? t_ + rng_.exponential(a.rate_per_s) : a.start_s + rng_.exponential(a.rate_per_s);
      started_ = true;
      if (more(t_)) return emit(t_);
      break;
    case ArrivalProcess::times:
      if (static_cast<std::size_t>(drawn_) < a.times_s.size()) {
        const std::size_t k = order_.empty() ? static_cast<std::size_t>(drawn_) : order_[static_cast<std::size_t>(drawn_)];
        if (a.start_s + a.times_s[k] <= horizon_s_) return emit(a.start_s + a.times_s[k], a.work_scales.empty() ? 1.0 : a.work_scales[k]);
      }
      break;
    case ArrivalProcess::bursty:
      // Alternate exponential on and off periods, a Poisson process at each period's rate.
      if (!started_) {
        t_ = a.start_s;
        started_ = true;
      }
      while (true) {
        if (in_period_) {
          if (next_s_ < end_s_ && more(next_s_)) {
            const double t = next_s_;
            next_s_ += rng_.exponential(on_ ? a.rate_per_s : a.off_rate_per_s);
            return emit(t);
          }
          in_period_ = false;
          t_ = end_s_;
          on_ = !on_;
          continue;
        }
        if (!more(t_)) break;
        end_s_ = t_ + rng_.exponential(1.0 / (on_ ? a.on_s : a.off_s));
        if (const double rate = on_ ? a.rate_per_s : a.off_rate_per_s; rate > 0) {
          next_s_ = t_ + rng_.exponential(rate);  // the period's first arrival
          in_period_ = true;
        } else {
          t_ = end_s_;
          on_ = !on_;
        }
      }
      break;
    case ArrivalProcess::diurnal: {
      // Thinning: candidates at the peak rate, each kept with probability rate(t) / peak rate.
      const double peak_rate = a.rate_per_s * (1 + a.amplitude);
      while (true) {
        t_ = started_ ? t_ + rng_.exponential(peak_rate) : a.start_s + rng_.exponential(peak_rate);
        started_ = true;
        if (!more(t_)) break;
        const double rate = a.rate_per_s * (1 + a.amplitude * std::cos(2 * std::numbers::pi * (t_ - a.peak_s) / a.period_s));
        if (rng_.uniform() * peak_rate < rate) return emit(t_);
      }
      break;
    }
    case ArrivalProcess::closed:
      break;
  }
  done_ = true;
  return std::nullopt;
}

// Open-loop arrivals are drawn twice: once here, to count them (the run's tables are reserved once,
// and size-based policies rank by the job-size distribution), and again as they come.
Workload::Workload(const Scenario& sc, std::uint64_t seed, const std::vector<double>& job_gpu_s, EventQueue& queue,
                   Trace& trace)
    : sc_(sc), queue_(queue), trace_(trace), task_sizes_(seed, 0, "task-sizes") {
  // The job-size distribution size-based policies rank by: GPU-seconds of each open-loop instance as
  // predicted (declared sizes included), kept as at most 512 quantiles; counted as (size, count), since a
  // stream's instances are alike unless it replays a trace.
  std::vector<std::pair<double, std::uint64_t>> sizes_gpu_s;
  std::uint64_t open = 0;
  for (std::uint32_t s = 0; s < sc_.streams.size(); ++s) {
    const Stream& stream = sc_.streams[s];
    const std::uint64_t tasks = sc_.workflows[stream.workflow].tasks.size();
    const auto draws = [&] { return ArrivalDraws(stream.arrival, sc_.horizon_s, Rng(seed, 0, "arrivals/" + std::to_string(s))); };
    draws_.push_back(draws());
    think_rngs_.emplace_back(seed, 0, "think/" + std::to_string(s));
    if (stream.arrival.process == ArrivalProcess::closed) continue;
    std::uint64_t alike = 0;
    for (ArrivalDraws count = draws(); const auto a = count.next(); ++open) {
      if (a->scale == 1.0) {
        ++alike;
      } else {
        sizes_gpu_s.emplace_back(job_gpu_s[stream.workflow] * a->scale, 1);
      }
      most_tasks_ += tasks;
    }
    if (alike > 0) sizes_gpu_s.emplace_back(job_gpu_s[stream.workflow], alike);
  }
  std::sort(sizes_gpu_s.begin(), sizes_gpu_s.end());
  const std::uint64_t keep = std::min<std::uint64_t>(open, 512);
  std::uint64_t below = 0;  // instances in the pairs before `it`
  auto it = sizes_gpu_s.begin();
  for (std::uint64_t q = 0; q < keep; ++q) {
    const std::uint64_t rank = q * open / keep;
    while (below + it->second <= rank) below += (it++)->second;
    job_sizes_.push_back(it->first);
  }
  open_arrivals_ = static_cast<std::uint32_t>(open);
  // Closed-loop users: each user's workflows follow one another, subjects after the open-loop arrivals.
  std::uint64_t slots = open;
  for (std::uint32_t s = 0; s < sc_.streams.size(); ++s) {
    const ArrivalSpec& a = sc_.streams[s].arrival;
    if (a.process != ArrivalProcess::closed) continue;
    closed_.push_back({s, static_cast<std::uint32_t>(slots)});
    const std::uint64_t workflows = static_cast<std::uint64_t>(a.users) * static_cast<std::uint64_t>(std::max<std::int64_t>(a.count, 0));
    slots += workflows;
    most_tasks_ += workflows * sc_.workflows[sc_.streams[s].workflow].tasks.size();
  }
  most_instances_ = slots;
  FLEETSIM_CHECK(most_tasks_ <= std::numeric_limits<std::uint32_t>::max(), "more tasks than task ids (the loader's limit on tasks is lower)");
  // Tables an instance are held to the end of a run of many million: the closed-loop subjects only where a
  // stream is closed, the known work scales only where one replays a trace.
  scaled_ = std::any_of(sc_.streams.begin(), sc_.streams.end(), [](const Stream& s) { return !s.arrival.work_scales.empty(); });
  first_task_.reserve(most_instances_);
  remaining_.reserve(most_instances_);
  if (scaled_) scale_.reserve(most_instances_);
  if (!closed_.empty()) slot_of_.reserve(most_instances_);
  for (std::uint32_t s = 0; s < sc_.streams.size(); ++s) {
    next_.push_back({});
    if (const auto a = draws_[s].next()) {
      next_[s] = *a;
      heap_.push_back(s);
    }
  }
  std::make_heap(heap_.begin(), heap_.end(), Later{&next_});
  unfinished_ = most_instances_;
}

bool Workload::Later::operator()(std::uint32_t x, std::uint32_t y) const {
  const auto& n = *next;
  return n[x].time_s != n[y].time_s ? n[x].time_s > n[y].time_s : x > y;
}

void Workload::start_open_loops() {
  if (open_arrivals_ > 0) schedule_open(0);
}

void Workload::start_closed_loops() {
  for (const ClosedStream& c : closed_) {
    const ArrivalSpec& a = sc_.streams[c.stream].arrival;
    for (std::int64_t u = 0; u < a.users && a.count > 0; ++u) {
      if (a.start_s <= sc_.horizon_s) queue_.push(a.start_s, kArrival, c.first_slot + static_cast<std::uint32_t>(u * a.count));
    }
  }
}

// The earliest drawn arrival, the lowest stream's among equal times (as a stable sort of every stream's
// list in stream order would put them).
void Workload::schedule_open(std::uint32_t subject) {
  if (subject < open_arrivals_) queue_.push(next_[heap_.front()].time_s, kArrival, subject);
}

const Workload::ClosedStream& Workload::closed_stream(std::uint32_t slot) const {
  return *std::prev(std::upper_bound(closed_.begin(), closed_.end(), slot, [](std::uint32_t x, const ClosedStream& c) { return x < c.first_slot; }));
}

std::uint32_t Workload::admit(std::uint32_t subject) {
  std::uint32_t stream = 0;
  double scale = 1;
  if (subject < open_arrivals_) {
    std::pop_heap(heap_.begin(), heap_.end(), Later{&next_});
    stream = heap_.back();
    scale = next_[stream].scale;
    if (const auto a = draws_[stream].next()) {
      next_[stream] = *a;
      std::push_heap(heap_.begin(), heap_.end(), Later{&next_});
    } else {
      heap_.pop_back();
    }
  } else {
    stream = closed_stream(subject).stream;
  }
  const Stream& s = sc_.streams[stream];
  const Workflow& wf = sc_.workflows[s.workflow];
  const auto instance = static_cast<std::uint32_t>(trace_.instances_dropped + trace_.instances.size());
  trace_.instances.push_back(InstanceRecord{s.workflow, make_id<TenantId>(s.tenant), queue_.now(), kNever, false});
  if (scaled_) scale_.push_back(scale);
  if (!closed_.empty()) slot_of_.push_back(subject < open_arrivals_ ? kNoSlot : subject);
  first_task_.push_back(static_cast<std::uint32_t>(trace_.tasks_dropped + trace_.tasks.size()));
  remaining_.push_back(static_cast<std::uint32_t>(wf.tasks.size()));
  for (std::uint32_t t = 0; t < wf.tasks.size(); ++t) {
    TaskRecord r;
    r.instance = make_id<InstanceId>(instance);
    r.workflow = s.workflow;
    r.task = t;
    r.tenant = make_id<TenantId>(s.tenant);
    r.work_scale = scale * (wf.tasks[t].size == TaskSpec::Size::exponential ? task_sizes_.exponential(1.0) : 1.0);
    trace_.tasks.push_back(r);
  }
  return instance;
}

bool Workload::task_ended(std::uint32_t instance) {
  if (--remaining_[instance] != 0) return false;
  trace_.instance(instance).end_s = queue_.now();
  --in_flight_;
  --unfinished_;
  if (const std::uint32_t slot = slot_of_.empty() ? kNoSlot : slot_of_[instance]; slot != kNoSlot) {
    const ClosedStream& c = closed_stream(slot);
    const ArrivalSpec& a = sc_.streams[c.stream].arrival;
    if ((slot - c.first_slot + 1) % static_cast<std::uint64_t>(a.count) == 0) return true;  // the user's last
    Rng& rng = think_rngs_[c.stream];
    const double at = queue_.now() + (a.think_s > 0 ? rng.exponential(1.0 / a.think_s) : 0.0);
    if (at <= sc_.horizon_s) queue_.push(at, kArrival, slot + 1);
  }
  return true;
}

}  // namespace fleetsim::run
