#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>
#include <unistd.h>

#include "fleetsim/compute.hpp"
#include "fleetsim/cpu_kernels.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"
#include "replay.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {

using Clock = std::chrono::steady_clock;


// Records when the last member of a gang reached the barrier, before any member goes on.
struct Stamp {
  const Clock::time_point* t0;
  double* last_s;
  void operator()() noexcept { *last_s = std::chrono::duration<double>(Clock::now() - *t0).count(); }
};

// One multi-GPU task's rendezvous: its members pass each phase together.
struct Gang {
  double last_s = 0;
  std::barrier<Stamp> barrier;
  Gang(std::ptrdiff_t members, const Clock::time_point* t0) : barrier(members, Stamp{t0, &last_s}) {}
  double pass() {
    barrier.arrive_and_wait();
    return last_s;
  }
};

// A device's memory, sized from the plan and written once before the clock starts.
struct Device {
  cpu::Scratch scratch;
  std::vector<std::byte> outbox;    // edge tensors produced here, read by consumers on other devices
  std::vector<std::byte> inbox;     // edge tensors copied in
  std::vector<std::byte> weights;   // the resident model's weights
  std::vector<float> collective;    // this member's buffer in a gang's collective
  std::vector<std::uint32_t> order; // task records, in the plan's start order
};

class CpuRun {
 public:
  CpuRun(const Scenario& sc, const RunResult& plan, const ExecOptions& options)
      : sc_(sc), plan_(plan), options_(options), trace_(plan.trace) {}

  RunResult run() {
    index_plan();
    check_memory();
    if (transport_) return run_as_rank();
    const auto workers = static_cast<std::uint32_t>(devices_.size());
    const auto active = std::count_if(devices_.begin(), devices_.end(), [](const auto& d) { return d != nullptr; });
    std::latch ready(active + 1);
    std::latch go(1);
    std::vector<std::jthread> threads;
    threads.reserve(workers);
    for (std::uint32_t g = 0; g < workers; ++g) {
      if (!devices_[g]) continue;
      threads.emplace_back([this, g, &ready, &go] {
        allocate(g);
        ready.count_down();
        go.wait();
        for (std::uint32_t rec : devices_[g]->order) run_task(g, rec);
      });
    }
    ready.arrive_and_wait();
    t0_ = Clock::now();
    go.count_down();
    threads.clear();  // joins
    return result();
  }

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  // One process of several (mpirun): this rank's one device runs on this thread, from the ranks'
  // common epoch; rank 0 gathers every member's times and returns the whole measured run.
  RunResult run_as_rank() {
    const auto g = static_cast<std::uint32_t>(std::find(rank_of_.begin(), rank_of_.end(), me_) - rank_of_.begin());
    allocate(g);
    devices_[g]->scratch.between_tiles([this] { transport_->progress(); });
    warm_up(g);
    t0_ = Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ranks::common_epoch_s())));
    for (std::uint32_t rec : devices_[g]->order) run_task(g, rec);
    transport_->finish();
    for (std::uint32_t i = 0; i < trace_.weight_loads.size(); ++i) {
      const WeightLoad& load = trace_.weight_loads[i];
      if (load.start_s != kNever) report_.loads.push_back({.load = i, .start_s = load.start_s, .end_s = load.end_s});
    }
    const std::vector<RankReport> reports = ranks::gather_reports(report_);
    if (me_ != 0) return result();  // this rank's own tasks only; rank 0 holds the run
    for (std::uint32_t rec : plan_index_.replayed) trace_.tasks[rec].status = TaskStatus::queued;  // the members' reports say
    merge_rank_reports(trace_, reports, [&](std::uint32_t rec) { return group_of_.contains(rec) && spec(rec).collective; });
    for (std::uint32_t rec : plan_index_.replayed) {
      if (trace_.tasks[rec].status != TaskStatus::failed) trace_.tasks[rec].status = TaskStatus::completed;
    }
    replay::order_phases(sc_, plan_index_, trace_);
    return result();
  }

  const TaskSpec& spec(std::uint32_t rec) const {
    const TaskRecord& r = trace_.tasks[rec];
    return sc_.workflows[r.workflow].tasks[r.task];
  }
  GpuId gpu(std::uint32_t rec, std::uint32_t member) const { return trace_.gpus[trace_.tasks[rec].gpu_begin + member]; }
  std::uint32_t record_of(InstanceId instance, std::uint32_t task) const { return plan_index_.record_of(instance, task); }

  // Which device runs what, in which order; what each device must hold.
  void index_plan() {
    const std::size_t gpus = plan_.cluster.gpu_count();
    devices_.resize(gpus);
    plan_index_ = replay::index_plan(plan_, trace_);
    const ranks::World world = ranks::mpi_world();
    if (world.size > 1) {
      rank_of_ = rank_of_each_gpu(plan_, static_cast<unsigned>(world.size));
      me_ = world.rank;
    }
    std::map<std::vector<int>, std::size_t> group_index;  // one communicator per set of ranks, in member order
    std::vector<std::vector<int>> groups;
    const std::vector<std::uint32_t>& replayed = plan_index_.replayed;
    gangs_.resize(trace_.tasks.size());
    sizes_.resize(gpus);
    for (std::uint32_t rec : replayed) {
      const TaskRecord& r = trace_.tasks[rec];
      const TaskSpec& s = spec(rec);
      if (r.gpu_count > 1 && rank_of_.empty()) gangs_[rec] = std::make_unique<Gang>(r.gpu_count, &t0_);
      if (r.gpu_count > 1 && !rank_of_.empty()) {
        std::vector<int> members;
        for (std::uint32_t m = 0; m < r.gpu_count; ++m) members.push_back(rank_of_[index(gpu(rec, m))]);
        const auto [at, added] = group_index.emplace(members, groups.size());
        if (added) groups.push_back(std::move(members));
        group_of_.emplace(rec, at->second);
      }
      if (mine(index(gpu(rec, 0)))) ++total_;
      for (std::uint32_t m = 0; m < r.gpu_count; ++m) {
        const std::uint32_t g = index(gpu(rec, m));
        if (!mine(g)) continue;
        if (!devices_[g]) devices_[g] = std::make_unique<Device>();
        devices_[g]->order.push_back(rec);
        Sizes& z = sizes_[g];
        z.weights = std::max(z.weights, s.weights_bytes / s.gpus);
        if (s.collective && r.gpu_count > 1) z.collective = std::max(z.collective, replay::collective_floats(s));
      }
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const GpuId from = gpu(record_of(r.instance, wf.edges[e].from), 0);
        if (from == gpu(rec, 0)) continue;
        if (!rank_of_.empty() && rank_of_[index(from)] != rank_of_[index(gpu(rec, 0))]) tag_of_.emplace(std::pair(rec, e), 2 * static_cast<int>(tag_of_.size()));
        sizes_[index(from)].outbox = std::max(sizes_[index(from)].outbox, wf.edges[e].bytes);
        sizes_[index(gpu(rec, 0))].inbox = std::max(sizes_[index(gpu(rec, 0))].inbox, wf.edges[e].bytes);
      }
    }
    for (std::uint32_t i = 0; i < trace_.weight_loads.size(); ++i) {
      trace_.weight_loads[i].start_s = trace_.weight_loads[i].end_s = kNever;  // measured, or never run
      if (mine(index(trace_.weight_loads[i].gpu))) host_weights_ = std::max(host_weights_, trace_.weight_loads[i].bytes);
    }
    if (rank_of_.empty()) return;
    transport_ = std::make_unique<ranks::Transport>(groups);
    if (2 * tag_of_.size() + 1 > static_cast<std::size_t>(transport_->max_tag())) {
      throw DeviceError(std::to_string(tag_of_.size()) + " tensors cross between ranks, more than this MPI's message tags can tell apart (" +
                        std::to_string(transport_->max_tag()) + " tags, two per tensor)");
    }
  }

  // Before the clock: each communicator's first meeting and first collective of each kind and size, and
  // one tensor of the largest size each way between ranks that pass tensors, as the single-process run
  // has every buffer written before it starts. Every member warms up a collective at the same task, in
  // plan order, so the ranks cannot wait on each other in a circle.
  void warm_up(std::uint32_t g) {
    Device& d = *devices_[g];
    std::set<std::size_t> met;
    std::set<std::tuple<std::size_t, CollectiveOp, std::size_t>> ran;
    for (std::uint32_t rec : d.order) {
      const auto group = group_of_.find(rec);
      if (group == group_of_.end()) continue;
      if (met.insert(group->second).second) transport_->meet(group->second, 0, false);
      const TaskSpec& s = spec(rec);
      if (s.collective && ran.emplace(group->second, s.collective->op, replay::collective_floats(s)).second) {
        transport_->collective(group->second, s.collective->op, d.collective.data(), replay::collective_floats(s));
      }
    }
    std::map<int, double> to, from;  // largest tensor per rank it goes to / comes from
    for (const auto& [edge, tag] : tag_of_) {
      const TaskRecord& r = trace_.tasks[edge.first];
      const Workflow& wf = sc_.workflows[r.workflow];
      const std::uint32_t producer = index(gpu(record_of(r.instance, wf.edges[edge.second].from), 0)), consumer = index(gpu(edge.first, 0));
      const double bytes = wf.edges[edge.second].bytes;
      if (producer == g) to[rank_of_[consumer]] = std::max(to[rank_of_[consumer]], bytes);
      if (consumer == g) from[rank_of_[producer]] = std::max(from[rank_of_[producer]], bytes);
    }
    const int warm_tag = 2 * static_cast<int>(tag_of_.size());
    for (const auto& [rank, bytes] : to) transport_->send(rank, warm_tag, d.outbox.data(), static_cast<std::size_t>(bytes));
    for (const auto& [rank, bytes] : from) transport_->receive(rank, warm_tag, d.inbox.data(), static_cast<std::size_t>(bytes));
    transport_->finish();
  }

  bool mine(std::uint32_t g) const { return rank_of_.empty() || rank_of_[g] == me_; }



  // Refuses a plan whose buffers would not fit in half of this machine's memory.
  void check_memory() const {
    double need = host_weights_;
    for (std::size_t g = 0; g < devices_.size(); ++g) {
      if (!devices_[g]) continue;
      const Sizes& z = sizes_[g];
      need += z.outbox + z.inbox + z.weights + 2.0 * sizeof(float) * static_cast<double>(z.collective) + 100e6;
    }
    const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    if (need > physical / 2) {
      throw InputError({Problem{sc_.file, "", "the CPU backend would need " + format_quantity(need, Dimension::bytes) +
                                                  " of memory for this scenario's weights and tensors; this machine has " +
                                                  format_quantity(physical, Dimension::bytes) +
                                                  " (scale the work down, e.g. fleetsim run --work-scale 0.001)"}});
    }
  }

  void allocate(std::uint32_t g) {
    Device& d = *devices_[g];
    const Sizes& z = sizes_[g];
    d.outbox.assign(static_cast<std::size_t>(z.outbox), std::byte{1});
    d.inbox.assign(static_cast<std::size_t>(z.inbox), std::byte{0});
    d.weights.assign(static_cast<std::size_t>(z.weights), std::byte{0});
    d.collective.assign(2 * z.collective, 1.0f);
    std::call_once(host_once_, [&] { host_store_.assign(static_cast<std::size_t>(host_weights_), std::byte{1}); });
  }
  // Blocks until the task's instance has arrived and every producer has ended. Returns the reason
  // the task cannot run ("" when it can) and its ready time. A producer on another rank says when it
  // ended, and whether it completed, to the task's first member only; the others learn it at the
  // first meeting.
  std::pair<std::string, double> wait_ready(std::uint32_t rec, std::uint32_t member) {
    const TaskRecord& r = trace_.tasks[rec];
    const Workflow& wf = sc_.workflows[r.workflow];
    const double arrival_s = trace_.instances[index(r.instance)].arrival_s;
    std::unique_lock lock(mutex_);
    const auto arrival = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s));
    changed_.wait_until(lock, arrival, [&] { return Clock::now() >= arrival; });
    double ready_s = arrival_s;
    std::string reason;
    for (std::uint32_t e : wf.inputs(r.task)) {
      const std::uint32_t producer = record_of(r.instance, wf.edges[e].from);
      bool completed = true;
      if (const auto tag = tag_of_.find(std::pair(rec, e)); tag != tag_of_.end()) {
        if (member != 0) continue;
        EdgeNote note{};
        lock.unlock();
        transport_->receive(rank_of_[index(gpu(producer, 0))], tag->second, &note, sizeof note);
        lock.lock();
        ready_s = std::max(ready_s, note.end_s);
        completed = note.completed != 0;
      } else if (rank_of_.empty() || member == 0) {  // another member's producers may be on other ranks
        changed_.wait(lock, [&] { return ended_[producer]; });
        ready_s = std::max(ready_s, trace_.tasks[producer].end_s);
        completed = trace_.tasks[producer].status == TaskStatus::completed;
      }
      if (!completed) reason = "its producer " + wf.tasks[wf.edges[e].from].name + " did not complete";
    }
    return {reason, ready_s};
  }

  void run_task(std::uint32_t g, std::uint32_t rec) {
    const TaskSpec& s = spec(rec);
    std::uint32_t member = 0;
    while (index(gpu(rec, member)) != g) ++member;
    Gang* gang = gangs_[rec].get();
    const auto group = group_of_.find(rec);  // the gang's communicator when it spans ranks
    const bool spans_ranks = group != group_of_.end();
    Device& d = *devices_[g];

    // Plain variables, not a structured binding: lambdas below capture them (clang 14 cannot).
    std::string failure;
    double ready_s = 0;
    bool any_failed = false;  // whether a member on another rank had failed at the last meeting
    auto pass = [&] {
      if (spans_ranks) {
        const ranks::Transport::Meeting m = transport_->meet(group->second, now(), !failure.empty());
        any_failed = m.any_failed;
        return m.last_s;
      }
      return gang != nullptr ? gang->pass() : now();
    };
    std::tie(failure, ready_s) = wait_ready(rec, member);
    const double start_s = pass();
    if (any_failed && failure.empty()) failure = "another member of its gang could not start";
    auto attempt = [&](auto&& work) {
      if (!failure.empty()) return;
      try {
        work();
      } catch (const std::exception& e) {
        failure = "on " + plan_.cluster.gpu_name(make_id<GpuId>(g)) + ": " + e.what();
      }
    };
    std::unique_ptr<std::byte[]> working_set;
    attempt([&] {
      working_set = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(s.working_set_bytes) + 1);
      for (std::uint32_t i : plan_index_.loads_of[rec]) {
        WeightLoad& load = trace_.weight_loads[i];
        if (index(load.gpu) != g) continue;
        load.start_s = now();
        const Device* peer = load.peer ? devices_[index(*load.peer)].get() : nullptr;
        const bool from_peer = peer != nullptr && static_cast<double>(peer->weights.size()) >= load.bytes;  // else the peer ran nothing this big
        const std::byte* from = from_peer ? peer->weights.data() : host_store_.data();
        std::memcpy(d.weights.data(), from, static_cast<std::size_t>(load.bytes));
        load.end_s = now();
      }
      if (member != 0) return;
      const TaskRecord& r = trace_.tasks[rec];
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const GpuId from = gpu(record_of(r.instance, wf.edges[e].from), 0);
        if (index(from) == g || tag_of_.contains(std::pair(rec, e))) continue;
        std::memcpy(d.inbox.data(), devices_[index(from)]->outbox.data(), static_cast<std::size_t>(wf.edges[e].bytes));
      }
    });
    receive_inputs(rec, member, d);
    const double compute_start_s = pass();
    attempt([&] {
      const double share = trace_.tasks[rec].work_scale / s.gpus, per_launch = 1.0 / std::max<std::uint32_t>(s.launches, 1);
      for (std::uint32_t l = 0; l < std::max<std::uint32_t>(s.launches, 1); ++l) {
        d.scratch.gemm(s.flop * share * per_launch, s.dtype);
        d.scratch.stream(s.bytes * share * per_launch);
      }
    });
    const bool communicates = s.collective && (gang != nullptr || spans_ranks);
    const double comm_start_s = communicates ? pass() : kNever;
    if (communicates && spans_ranks) {
      transport_->collective(group->second, s.collective->op, d.collective.data(), replay::collective_floats(s));
    } else if (communicates) {
      // Every member takes every step, even after a failure, so no member waits forever.
      std::vector<float*> buffers;
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) buffers.push_back(devices_[index(gpu(rec, m))]->collective.data());
      cpu::collective(s.collective->op, buffers, replay::collective_floats(s), member, [&] { gang->pass(); });
    }
    working_set.reset();
    TaskRecord& r = trace_.tasks[rec];
    if (!failure.empty()) {
      std::lock_guard lock(mutex_);
      r.status = TaskStatus::failed;
      r.reason = trace_.add_reason(failure);
    }
    const double end_s = pass();  // after every member's failure is recorded
    if (transport_) {
      report_.members.push_back({.record = rec, .member = member, .arrived_s = start_s, .loaded_s = compute_start_s,
                                 .computed_s = communicates ? comm_start_s : 0.0, .done_s = end_s, .failure = failure});
    }
    if (member != 0) return;
    {
      std::lock_guard lock(mutex_);
      r.ready_s = ready_s;
      r.start_s = start_s;
      r.compute_start_s = compute_start_s;
      r.comm_start_s = comm_start_s;
      r.end_s = end_s;
      if (any_failed && r.status != TaskStatus::failed) {
        r.status = TaskStatus::failed;
        r.reason = trace_.add_reason("a member of its gang failed on another rank");  // rank 0 puts the member's own reason
      }
      if (r.status != TaskStatus::failed) r.status = TaskStatus::completed;
      ended_[rec] = 1;
      changed_.notify_all();
      ++done_;
      if (options_.progress) options_.progress(done_, total_);
    }
    send_outputs(rec, d);
  }

  // Tensors from producers on other ranks, received even when the task fails, so every send is matched.
  void receive_inputs(std::uint32_t rec, std::uint32_t member, Device& d) {
    if (!transport_ || member != 0) return;
    const TaskRecord& r = trace_.tasks[rec];
    const Workflow& wf = sc_.workflows[r.workflow];
    for (std::uint32_t e : wf.inputs(r.task)) {
      const auto tag = tag_of_.find(std::pair(rec, e));
      if (tag == tag_of_.end()) continue;
      const int from = rank_of_[index(gpu(record_of(r.instance, wf.edges[e].from), 0))];
      transport_->receive(from, tag->second + 1, d.inbox.data(), static_cast<std::size_t>(wf.edges[e].bytes));
    }
  }

  // To each consumer on another rank: when this task ended and whether it completed, then the tensor.
  void send_outputs(std::uint32_t rec, const Device& d) {
    if (!transport_) return;
    const TaskRecord& r = trace_.tasks[rec];
    const Workflow& wf = sc_.workflows[r.workflow];
    for (std::uint32_t e : wf.outputs(r.task)) {
      const std::uint32_t consumer = record_of(r.instance, wf.edges[e].to);
      const auto tag = tag_of_.find(std::pair(consumer, e));
      if (tag == tag_of_.end()) continue;  // same rank, or a consumer the plan did not run
      const int to = rank_of_[index(gpu(consumer, 0))];
      notes_.push_back({.end_s = r.end_s, .completed = r.status == TaskStatus::completed ? 1U : 0U});
      transport_->send(to, tag->second, &notes_.back(), sizeof(EdgeNote));
      transport_->send(to, tag->second + 1, d.outbox.data(), static_cast<std::size_t>(wf.edges[e].bytes));
    }
  }

  RunResult result() { return replay::measured_result(sc_, plan_, std::move(trace_)); }


  struct Sizes {
    double outbox = 0, inbox = 0, weights = 0;
    std::size_t collective = 0;
  };
  // What a producer tells a consumer on another rank before the tensor itself.
  struct EdgeNote {
    double end_s = 0;
    std::uint64_t completed = 0;
  };

  const Scenario& sc_;
  const RunResult& plan_;
  const ExecOptions& options_;
  Trace trace_;
  Clock::time_point t0_;
  std::vector<std::unique_ptr<Device>> devices_;  // per GPU of the plan; null when it runs nothing
  std::vector<Sizes> sizes_;
  replay::PlanIndex plan_index_;
  std::vector<std::unique_ptr<Gang>> gangs_;
  double host_weights_ = 0;
  std::vector<std::byte> host_store_;  // weights in host memory, the source of loads
  std::once_flag host_once_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::uint8_t> ended_ = std::vector<std::uint8_t>(trace_.tasks.size(), 0);
  std::size_t done_ = 0, total_ = 0;
  // Several processes (mpirun): one device each; empty / null in one process.
  std::vector<int> rank_of_;  // per GPU of the plan
  int me_ = 0;
  std::unique_ptr<ranks::Transport> transport_;
  std::map<std::uint32_t, std::size_t> group_of_;                        // task record -> its gang's communicator
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> tag_of_;       // (consumer record, edge) crossing ranks -> its tag
  std::deque<EdgeNote> notes_;                                            // sent; kept until the sends are done
  RankReport report_;
};

}  // namespace

RunResult execute_on_cpu(const Scenario& scenario, const RunResult& plan, const ExecOptions& options) {
  return CpuRun(scenario, plan, options).run();
}

double cpu_seconds_estimate(const Scenario& scenario, const RunResult& plan) {
  const GpuType& core = *Catalog::builtin().gpu("cpu-core");
  std::vector<double> busy(plan.cluster.gpu_count(), 0.0);
  for (const TaskRecord& r : plan.trace.tasks) {
    if (r.status != TaskStatus::completed) continue;
    const TaskSpec& s = scenario.workflows[r.workflow].tasks[r.task];
    const double share = r.work_scale / s.gpus;
    const double t = estimate_compute(core, s.flop * share, s.bytes * share, s.dtype, s.launches).total_s();
    for (std::uint32_t m = 0; m < r.gpu_count; ++m) busy[index(plan.trace.gpus[r.gpu_begin + m])] += t;
  }
  return busy.empty() ? 0.0 : *std::max_element(busy.begin(), busy.end());
}

Scenario scale_work(Scenario scenario, double factor) {
  for (Workflow& wf : scenario.workflows) {
    for (TaskSpec& t : wf.tasks) {
      t.weights_bytes *= factor;
      t.working_set_bytes *= factor;
      t.flop *= factor;
      t.bytes *= factor;
      if (t.collective) t.collective->bytes *= factor;
    }
    for (EdgeSpec& e : wf.edges) e.bytes *= factor;
  }
  return scenario;
}

}  // namespace fleetsim
