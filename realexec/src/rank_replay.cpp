#include "rank_replay.hpp"

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>

#include "replay.hpp"

namespace fleetsim::replay {
namespace {

using Clock = std::chrono::steady_clock;

// What a producer tells a consumer on another rank before the tensor itself.
struct EdgeNote {
  double end_s = 0;
  std::uint64_t completed = 0;
};

class RankRun {
 public:
  RankRun(const Scenario& sc, const RunResult& plan, const ExecOptions& options, RankDevice& device)
      : sc_(sc), plan_(plan), options_(options), device_(device), trace_(plan.trace) {}

  RunResult run() {
    index_plan();
    transport_.emplace(groups_);
    if (2 * tag_of_.size() + 1 > static_cast<std::size_t>(transport_->max_tag())) {
      throw DeviceError(std::to_string(tag_of_.size()) + " tensors cross between ranks, more than this MPI's message tags can tell apart (" +
                        std::to_string(transport_->max_tag()) + " tags, two per tensor)");
    }
    device_.set_up(sizes_, groups_, *transport_);
    warm_up();
    t0_ = Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ranks::common_epoch_s())));
    for (std::uint32_t rec : order_) run_task(rec);
    transport_->finish();
    for (std::uint32_t i = 0; i < trace_.weight_loads.size(); ++i) {
      const WeightLoad& load = trace_.weight_loads[i];
      if (load.start_s != kNever) report_.loads.push_back({.load = i, .start_s = load.start_s, .end_s = load.end_s});
    }
    const std::vector<RankReport> reports = ranks::gather_reports(report_);
    if (me_ != 0) return measured_result(sc_, plan_, std::move(trace_));  // this rank's own tasks only
    for (std::uint32_t rec : plan_index_.replayed) trace_.tasks[rec].status = TaskStatus::queued;  // the members' reports say
    merge_rank_reports(trace_, reports, [&](std::uint32_t rec) { return group_of_.contains(rec) && communicates(spec(rec)); });
    for (std::uint32_t rec : plan_index_.replayed) {
      if (trace_.tasks[rec].status != TaskStatus::failed) trace_.tasks[rec].status = TaskStatus::completed;
    }
    order_phases(sc_, plan_index_, trace_);
    return measured_result(sc_, plan_, std::move(trace_));
  }

 private:
  double now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  // As it ran: an elastic training iteration at its gang's degree (its work and collectives there).
  const TaskSpec& spec(std::uint32_t rec) const {
    const TaskRecord& r = trace_.tasks[rec];
    return sc_.workflows[r.workflow].tasks[r.task].as_run_on(r.gpu_count);
  }
  std::uint32_t gpu(std::uint32_t rec, std::uint32_t member) const { return index(trace_.gpus[trace_.tasks[rec].gpu_begin + member]); }
  std::uint32_t producer_of(std::uint32_t rec, std::uint32_t edge) const {
    const TaskRecord& r = trace_.tasks[rec];
    return plan_index_.record_of(r.instance, sc_.workflows[r.workflow].edges[edge].from);
  }

  // This rank's device and its tasks, the gangs' rank sets, the tensors that cross ranks and their tags,
  // and what this device must hold.
  void index_plan() {
    plan_index_ = replay::index_plan(sc_, plan_, trace_);
    const ranks::World world = ranks::mpi_world();
    me_ = world.rank;
    rank_of_ = rank_of_each_gpu(plan_, static_cast<unsigned>(world.size));
    mine_ = static_cast<std::uint32_t>(std::find(rank_of_.begin(), rank_of_.end(), me_) - rank_of_.begin());
    std::map<std::vector<int>, std::size_t> group_index;
    for (std::uint32_t rec : plan_index_.replayed) {
      const TaskRecord& r = trace_.tasks[rec];
      const TaskSpec& s = spec(rec);
      std::vector<int> members;
      for (std::uint32_t m = 0; m < r.gpu_count; ++m) members.push_back(rank_of_[gpu(rec, m)]);
      if (r.gpu_count > 1) {
        const auto [at, added] = group_index.emplace(members, groups_.size());
        if (added) groups_.push_back(members);
        group_of_.emplace(rec, at->second);
      }
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const std::uint32_t from = gpu(producer_of(rec, e), 0), to = gpu(rec, 0);
        if (from == to) continue;  // rank per device: every other producer is on another rank
        tag_of_.emplace(std::pair(rec, e), 2 * static_cast<int>(tag_of_.size()));
        if (from == mine_) sizes_.outbox = std::max(sizes_.outbox, wf.edges[e].bytes);
        if (to == mine_) sizes_.inbox = std::max(sizes_.inbox, wf.edges[e].bytes);
      }
      if (std::find(members.begin(), members.end(), me_) == members.end()) continue;
      order_.push_back(rec);
      if (gpu(rec, 0) == mine_) ++total_;
      sizes_.weights = std::max(sizes_.weights, s.weights_bytes / s.gpus);
      if (r.gpu_count > 1) sizes_.collective_floats = std::max(sizes_.collective_floats, collective_floats(s));
      if (s.flop > 0 && std::find(sizes_.dtypes.begin(), sizes_.dtypes.end(), s.dtype) == sizes_.dtypes.end()) sizes_.dtypes.push_back(s.dtype);
    }
    for (WeightLoad& load : trace_.weight_loads) {
      load.start_s = load.end_s = kNever;  // measured, or never run
      if (index(load.gpu) == mine_) sizes_.host_weights = std::max(sizes_.host_weights, load.bytes);
    }
  }

  // Before the clock: each communicator's first meeting and first collective of each kind and size, and
  // one tensor of the largest size each way between ranks that pass tensors, as a one-process run has
  // every buffer written before it starts. Every member warms up a collective at the same task, in plan
  // order, so the ranks cannot wait on each other in a circle.
  void warm_up() {
    std::set<std::size_t> met;
    std::set<std::tuple<std::size_t, CollectiveOp, std::size_t>> ran;
    for (std::uint32_t rec : order_) {
      const auto group = group_of_.find(rec);
      if (group == group_of_.end()) continue;
      if (met.insert(group->second).second) transport_->meet(group->second, 0, false);
      for (const CollectiveSpec& c : spec(rec).collectives) {
        if (replays(c) && ran.emplace(group->second, c.op, collective_floats(c)).second) device_.collective(group->second, c.op, collective_floats(c));
      }
    }
    std::map<int, double> to, from;  // largest tensor per rank it goes to / comes from
    for (const auto& [edge, tag] : tag_of_) {
      const std::uint32_t producer = gpu(producer_of(edge.first, edge.second), 0), consumer = gpu(edge.first, 0);
      const TaskRecord& r = trace_.tasks[edge.first];
      const double bytes = sc_.workflows[r.workflow].edges[edge.second].bytes;
      if (producer == mine_) to[rank_of_[consumer]] = std::max(to[rank_of_[consumer]], bytes);
      if (consumer == mine_) from[rank_of_[producer]] = std::max(from[rank_of_[producer]], bytes);
    }
    const int warm_tag = 2 * static_cast<int>(tag_of_.size());
    for (const auto& [rank, bytes] : to) transport_->send(rank, warm_tag, device_.outgoing(bytes), static_cast<std::size_t>(bytes));
    for (const auto& [rank, bytes] : from) {
      transport_->receive(rank, warm_tag, device_.incoming(bytes), static_cast<std::size_t>(bytes));
      device_.arrived(bytes);
    }
    transport_->finish();
  }

  // Waits until the task's instance has arrived and, on its first member, every producer has ended
  // (a producer on another rank sends a note). Returns the reason it cannot run ("" when it can) and
  // its ready time. Other members learn of a producer's failure at the first meeting.
  std::pair<std::string, double> wait_ready(std::uint32_t rec, std::uint32_t member) {
    const TaskRecord& r = trace_.tasks[rec];
    const Workflow& wf = sc_.workflows[r.workflow];
    const double arrival_s = trace_.instances[index(r.instance)].arrival_s;
    // Waiting, in slices, so that this rank's sends still move on (MPI moves them only inside a call).
    const auto arrival = t0_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival_s));
    for (auto t = Clock::now(); t < arrival; t = Clock::now()) {
      transport_->progress();
      std::this_thread::sleep_for(std::min<Clock::duration>(arrival - t, std::chrono::milliseconds(1)));
    }
    double ready_s = arrival_s;
    std::string reason;
    if (member != 0) return {reason, ready_s};
    for (std::uint32_t e : wf.inputs(r.task)) {
      const std::uint32_t producer = producer_of(rec, e);
      EdgeNote note{.end_s = trace_.tasks[producer].end_s, .completed = trace_.tasks[producer].status == TaskStatus::completed};
      if (const auto tag = tag_of_.find(std::pair(rec, e)); tag != tag_of_.end()) {
        transport_->receive(rank_of_[gpu(producer, 0)], tag->second, &note, sizeof note);
      }  // else it ran before on this device
      ready_s = std::max(ready_s, note.end_s);
      if (note.completed == 0) reason = "its producer " + wf.tasks[wf.edges[e].from].name + " did not complete";
    }
    return {reason, ready_s};
  }

  void run_task(std::uint32_t rec) {
    const TaskSpec& s = spec(rec);
    TaskRecord& r = trace_.tasks[rec];
    std::uint32_t member = 0;
    while (gpu(rec, member) != mine_) ++member;
    const auto group = group_of_.find(rec);
    const bool gang = group != group_of_.end();
    const std::string where = "on " + plan_.cluster.gpu_name(make_id<GpuId>(mine_)) + ": ";

    std::string failure;
    double ready_s = 0;
    bool any_failed = false;  // whether any member had failed at the last meeting
    auto pass = [&] {
      if (!gang) return now();
      const ranks::Transport::Meeting m = transport_->meet(group->second, now(), !failure.empty());
      any_failed = m.any_failed;
      return m.last_s;
    };
    auto attempt = [&](auto&& work) {
      if (!failure.empty()) return;
      try {
        work();
      } catch (const std::exception& e) {
        failure = where + e.what();
      }
    };
    std::tie(failure, ready_s) = wait_ready(rec, member);
    const double start_s = pass();
    if (any_failed && failure.empty()) failure = "another member of its gang could not start";
    attempt([&] {
      device_.hold_working_set(s.working_set_bytes);
      for (std::uint32_t i : plan_index_.loads_of[rec]) {
        WeightLoad& load = trace_.weight_loads[i];
        if (index(load.gpu) != mine_) continue;
        const double begin_s = now();
        device_.load_weights(load.bytes);  // from host memory: a peer device is another rank
        std::tie(load.start_s, load.end_s) = std::pair(begin_s, now());  // only a load made has times
      }
    });
    receive_inputs(rec, member, attempt);
    const double compute_start_s = pass();
    attempt([&] {
      const double share = r.work_scale / s.gpus;
      const TaskWork w = work_on(s, plan_.cluster.gpu_type(make_id<GpuId>(gpu(rec, member))));
      device_.compute(w.flop * share, w.bytes * share, s.dtype, w.launches);
    });
    const bool communicates = gang && replay::communicates(s);
    const double comm_start_s = communicates ? pass() : kNever;
    if (communicates) {
      for (const CollectiveSpec& c : s.collectives) {
        if (replays(c)) device_.collective(group->second, c.op, collective_floats(c));  // even after a failure: every member takes part
      }
    }
    try {  // even after a failure, so a failed task does not keep its memory
      device_.release_working_set();
    } catch (const std::exception& e) {
      if (failure.empty()) failure = where + e.what();
    }
    const double end_s = pass();
    report_.members.push_back({.record = rec, .member = member, .arrived_s = start_s, .loaded_s = compute_start_s,
                               .computed_s = communicates ? comm_start_s : 0.0, .done_s = end_s, .failure = failure});
    if (member != 0) return;
    r.ready_s = ready_s;
    r.start_s = start_s;
    r.compute_start_s = compute_start_s;
    r.comm_start_s = comm_start_s;
    r.end_s = end_s;
    r.status = failure.empty() && !any_failed ? TaskStatus::completed : TaskStatus::failed;
    if (r.status == TaskStatus::failed) r.reason = trace_.add_reason(failure.empty() ? "a member of its gang failed" : failure);  // rank 0 merges the lowest member's
    if (options_.progress) options_.progress(++done_, total_);
    send_outputs(rec);
  }

  // Tensors from producers on other ranks, received even when the task fails, so every send is matched.
  template <typename Attempt>
  void receive_inputs(std::uint32_t rec, std::uint32_t member, Attempt& attempt) {
    if (member != 0) return;
    const TaskRecord& r = trace_.tasks[rec];
    const Workflow& wf = sc_.workflows[r.workflow];
    for (std::uint32_t e : wf.inputs(r.task)) {
      const auto tag = tag_of_.find(std::pair(rec, e));
      if (tag == tag_of_.end()) continue;
      const double bytes = wf.edges[e].bytes;
      transport_->receive(rank_of_[gpu(producer_of(rec, e), 0)], tag->second + 1, device_.incoming(bytes), static_cast<std::size_t>(bytes));
      attempt([&] { device_.arrived(bytes); });
    }
  }

  // To each consumer on another rank: when this task ended and whether it completed, then the tensor.
  void send_outputs(std::uint32_t rec) {
    const TaskRecord& r = trace_.tasks[rec];
    const Workflow& wf = sc_.workflows[r.workflow];
    for (std::uint32_t e : wf.outputs(r.task)) {
      const std::uint32_t consumer = plan_index_.record_of(r.instance, wf.edges[e].to);
      const auto tag = tag_of_.find(std::pair(consumer, e));
      if (tag == tag_of_.end()) continue;  // same device, or a consumer the plan did not run
      const int to = rank_of_[gpu(consumer, 0)];
      notes_.push_back({.end_s = r.end_s, .completed = r.status == TaskStatus::completed ? 1U : 0U});
      transport_->send(to, tag->second, &notes_.back(), sizeof(EdgeNote));
      const double bytes = wf.edges[e].bytes;
      transport_->send(to, tag->second + 1, device_.outgoing(bytes), static_cast<std::size_t>(bytes));
    }
  }

  const Scenario& sc_;
  const RunResult& plan_;
  const ExecOptions& options_;
  RankDevice& device_;
  Trace trace_;
  PlanIndex plan_index_;
  Clock::time_point t0_;
  int me_ = 0;
  std::vector<int> rank_of_;    // per GPU of the plan
  std::uint32_t mine_ = 0;      // this rank's device
  std::vector<std::uint32_t> order_;  // its task records, in the plan's start order
  std::vector<std::vector<int>> groups_;                           // each gang's ranks, in member order
  std::map<std::uint32_t, std::size_t> group_of_;                  // task record -> index into groups_
  std::map<std::pair<std::uint32_t, std::uint32_t>, int> tag_of_;  // (consumer record, edge) crossing ranks -> its tag
  Buffers sizes_;
  std::optional<ranks::Transport> transport_;
  std::deque<EdgeNote> notes_;  // sent; kept until the sends are done
  RankReport report_;
  std::size_t done_ = 0, total_ = 0;
};

}  // namespace

RunResult execute_as_rank(const Scenario& scenario, const RunResult& plan, const ExecOptions& options, RankDevice& device) {
  return RankRun(scenario, plan, options, device).run();
}

}  // namespace fleetsim::replay
