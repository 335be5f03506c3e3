#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <latch>
#include <mutex>
#include <thread>
#include <tuple>
#include <unistd.h>

#include "fleetsim/compute.hpp"
#include "fleetsim/cpu_kernels.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/ranks.hpp"
#include "fleetsim/realexec.hpp"
#include "fleetsim/units.hpp"
#include "rank_replay.hpp"
#include "replay.hpp"

namespace fleetsim {
namespace {

using Clock = std::chrono::steady_clock;

// A task's work on one worker: `launches` calls of the GEMM and the triad.
void run_work(cpu::Scratch& scratch, double flop, double bytes, Dtype dtype, std::uint32_t launches) {
  const std::uint32_t n = std::max<std::uint32_t>(launches, 1);
  for (std::uint32_t l = 0; l < n; ++l) {
    scratch.gemm(flop / n, dtype);
    scratch.stream(bytes / n);
  }
}

// Refuses a plan whose buffers would not fit in half of this machine's memory.
void check_fits(const std::string& file, double need) {
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (need > physical / 2) {
    throw InputError({Problem{file, "", "the CPU backend would need " + format_quantity(need, Dimension::bytes) +
                                            " of memory for this scenario's weights and tensors; this machine has " +
                                            format_quantity(physical, Dimension::bytes) + " (scale the work down, e.g. fleetsim run --work-scale 0.001)"}});
  }
}


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

  // As it ran: an elastic training iteration at its gang's degree (its work and collectives there).
  const TaskSpec& spec(std::uint32_t rec) const {
    const TaskRecord& r = trace_.tasks[rec];
    return sc_.workflows[r.workflow].tasks[r.task].as_run_on(r.gpu_count);
  }
  GpuId gpu(std::uint32_t rec, std::uint32_t member) const { return trace_.gpus[trace_.tasks[rec].gpu_begin + member]; }
  std::uint32_t record_of(InstanceId instance, std::uint32_t task) const { return plan_index_.record_of(instance, task); }

  // Which device runs what, in which order; what each device must hold.
  void index_plan() {
    const std::size_t gpus = plan_.cluster.gpu_count();
    devices_.resize(gpus);
    plan_index_ = replay::index_plan(sc_, plan_, trace_);
    const std::vector<std::uint32_t>& replayed = plan_index_.replayed;
    gangs_.resize(trace_.tasks.size());
    sizes_.resize(gpus);
    for (std::uint32_t rec : replayed) {
      const TaskRecord& r = trace_.tasks[rec];
      const TaskSpec& s = spec(rec);
      if (r.gpu_count > 1) gangs_[rec] = std::make_unique<Gang>(r.gpu_count, &t0_);
      for (std::uint32_t m = 0; m < r.gpu_count; ++m) {
        const std::uint32_t g = index(gpu(rec, m));
        if (!devices_[g]) devices_[g] = std::make_unique<Device>();
        devices_[g]->order.push_back(rec);
        Sizes& z = sizes_[g];
        z.weights = std::max(z.weights, s.weights_bytes / s.gpus);
        if (r.gpu_count > 1) z.collective = std::max(z.collective, replay::collective_floats(s));
      }
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const GpuId from = gpu(record_of(r.instance, wf.edges[e].from), 0);
        if (from == gpu(rec, 0)) continue;
        sizes_[index(from)].outbox = std::max(sizes_[index(from)].outbox, wf.edges[e].bytes);
        sizes_[index(gpu(rec, 0))].inbox = std::max(sizes_[index(gpu(rec, 0))].inbox, wf.edges[e].bytes);
      }
    }
    for (std::uint32_t i = 0; i < trace_.weight_loads.size(); ++i) {
      trace_.weight_loads[i].start_s = trace_.weight_loads[i].end_s = kNever;  // measured, or never run
      host_weights_ = std::max(host_weights_, trace_.weight_loads[i].bytes);
    }
    total_ = replayed.size();
  }



  void check_memory() const {
    double need = host_weights_;
    for (std::size_t g = 0; g < devices_.size(); ++g) {
      if (!devices_[g]) continue;
      const Sizes& z = sizes_[g];
      need += z.outbox + z.inbox + z.weights + 2.0 * sizeof(float) * static_cast<double>(z.collective) + 100e6;
    }
    check_fits(sc_.file, need);
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
  // the task cannot run ("" when it can) and its ready time.
  std::pair<std::string, double> wait_ready(std::uint32_t rec) {
    double ready_s = trace_.instances[index(trace_.tasks[rec].instance)].arrival_s;
    std::unique_lock lock(mutex_);
    std::string reason = replay::wait_for_inputs(sc_, trace_, plan_index_, rec, t0_, lock, changed_, ended_,
                                                 [&](std::uint32_t p) { ready_s = std::max(ready_s, trace_.tasks[p].end_s); });
    return {std::move(reason), ready_s};
  }

  void run_task(std::uint32_t g, std::uint32_t rec) {
    const TaskSpec& s = spec(rec);
    std::uint32_t member = 0;
    while (index(gpu(rec, member)) != g) ++member;
    Gang* gang = gangs_[rec].get();
    auto pass = [&] { return gang != nullptr ? gang->pass() : now(); };
    Device& d = *devices_[g];

    // Plain variables, not a structured binding: lambdas below capture them (clang 14 cannot).
    std::string failure;
    double ready_s = 0;
    std::tie(failure, ready_s) = wait_ready(rec);
    const double start_s = pass();
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
        // A load scaled below a byte copies nothing (and its buffers may be empty: memcpy wants real pointers).
        if (const auto n = static_cast<std::size_t>(load.bytes); n > 0) std::memcpy(d.weights.data(), from, n);
        load.end_s = now();
      }
      if (member != 0) return;
      const TaskRecord& r = trace_.tasks[rec];
      const Workflow& wf = sc_.workflows[r.workflow];
      for (std::uint32_t e : wf.inputs(r.task)) {
        const GpuId from = gpu(record_of(r.instance, wf.edges[e].from), 0);
        if (index(from) == g) continue;
        if (const auto n = static_cast<std::size_t>(wf.edges[e].bytes); n > 0) std::memcpy(d.inbox.data(), devices_[index(from)]->outbox.data(), n);
      }
    });
    const double compute_start_s = pass();
    attempt([&] {
      const double share = trace_.tasks[rec].work_scale / s.gpus;
      const TaskWork w = work_on(s, plan_.cluster.gpu_type(gpu(rec, member)));
      run_work(d.scratch, w.flop * share, w.bytes * share, s.dtype, w.launches);
    });
    const bool communicates = replay::communicates(s) && gang != nullptr;
    const double comm_start_s = communicates ? pass() : kNever;
    if (communicates) {
      // Every member takes every step, even after a failure, so no member waits forever.
      std::vector<float*> buffers;
      for (std::uint32_t m = 0; m < trace_.tasks[rec].gpu_count; ++m) buffers.push_back(devices_[index(gpu(rec, m))]->collective.data());
      for (const CollectiveSpec& c : s.collectives) {
        if (replay::replays(c)) cpu::collective(c.op, buffers, replay::collective_floats(c), member, [&] { gang->pass(); });
      }
    }
    working_set.reset();
    TaskRecord& r = trace_.tasks[rec];
    if (!failure.empty()) {
      std::lock_guard lock(mutex_);
      r.status = TaskStatus::failed;
      r.reason = trace_.add_reason(failure);
    }
    const double end_s = pass();  // after every member's failure is recorded
    if (member != 0) return;
    std::lock_guard lock(mutex_);
    r.ready_s = ready_s;
    r.start_s = start_s;
    r.compute_start_s = compute_start_s;
    r.comm_start_s = comm_start_s;
    r.end_s = end_s;
    if (r.status != TaskStatus::failed) r.status = TaskStatus::completed;
    ended_[rec] = 1;
    changed_.notify_all();
    ++done_;
    if (options_.progress) options_.progress(done_, total_);
  }

  RunResult result() { return replay::measured_result(sc_, plan_, std::move(trace_)); }


  struct Sizes {
    double outbox = 0, inbox = 0, weights = 0;
    std::size_t collective = 0;
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
};

// One worker as the device of one rank of several (rank_replay.hpp): the same kernels and copies as a
// worker thread; tensors and collectives go over MPI.
class CpuRankDevice final : public replay::RankDevice {
 public:
  explicit CpuRankDevice(std::string file) : file_(std::move(file)) {}

  void set_up(const replay::Buffers& z, std::span<const std::vector<int>>, ranks::Transport& transport) override {
    // Every rank on this machine adds up what all of them need (each the same sum, so all refuse together).
    const double mine = z.outbox + z.inbox + z.weights + z.host_weights + 2.0 * sizeof(float) * static_cast<double>(z.collective_floats) + 100e6;
    double need = 0;
    for (const std::string& bytes : ranks::gather_on_machine(std::string(reinterpret_cast<const char*>(&mine), sizeof mine))) {
      double each = 0;
      std::memcpy(&each, bytes.data(), sizeof each);
      need += each;
    }
    check_fits(file_, need);
    transport_ = &transport;
    outbox_.assign(static_cast<std::size_t>(z.outbox), std::byte{1});
    inbox_.assign(static_cast<std::size_t>(z.inbox), std::byte{0});
    weights_.assign(static_cast<std::size_t>(z.weights), std::byte{0});
    host_.assign(static_cast<std::size_t>(z.host_weights), std::byte{1});
    collective_.assign(2 * z.collective_floats, 1.0f);
    scratch_.between_tiles([&transport] { transport.progress(); });
  }
  void hold_working_set(double bytes) override { working_set_ = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(bytes) + 1); }
  void release_working_set() override { working_set_.reset(); }
  void load_weights(double bytes) override {
    if (const auto n = static_cast<std::size_t>(bytes); n > 0) std::memcpy(weights_.data(), host_.data(), n);
  }
  void compute(double flop, double bytes, Dtype dtype, std::uint32_t launches) override { run_work(scratch_, flop, bytes, dtype, launches); }
  void collective(std::size_t group, CollectiveOp op, std::size_t count) override { transport_->collective(group, op, collective_.data(), count); }
  const void* outgoing(double) override { return outbox_.data(); }
  void* incoming(double) override { return inbox_.data(); }
  void arrived(double) override {}

 private:
  std::string file_;
  ranks::Transport* transport_ = nullptr;
  cpu::Scratch scratch_;
  std::vector<std::byte> outbox_, inbox_, weights_, host_;
  std::vector<float> collective_;
  std::unique_ptr<std::byte[]> working_set_;
};

}  // namespace

RunResult execute_on_cpu(const Scenario& scenario, const RunResult& plan, const ExecOptions& options) {
  if (ranks::mpi_world().size > 1) {
    CpuRankDevice device(scenario.file);
    return replay::execute_as_rank(scenario, plan, options, device);
  }
  return CpuRun(scenario, plan, options).run();
}

double cpu_seconds_estimate(const Scenario& scenario, const RunResult& plan) {
  const GpuType& core = *Catalog::builtin().gpu("cpu-core");
  std::vector<double> busy(plan.cluster.gpu_count(), 0.0);
  const ComputeModel compute;
  for (const TaskRecord& r : plan.trace.tasks) {
    if (r.status != TaskStatus::completed) continue;
    const TaskSpec& s = scenario.workflows[r.workflow].tasks[r.task].as_run_on(r.gpu_count);
    const double share = r.work_scale / s.gpus;
    const double t = compute.of(s, core, share).total_s();
    for (std::uint32_t m = 0; m < r.gpu_count; ++m) busy[index(plan.trace.gpus[r.gpu_begin + m])] += t;
  }
  return busy.empty() ? 0.0 : *std::max_element(busy.begin(), busy.end());
}

Scenario scale_work(Scenario scenario, double factor) {
  const auto scale = [&](TaskSpec& t) {
    t.weights_bytes *= factor;
    t.working_set_bytes *= factor;
    t.flop *= factor;
    t.bytes *= factor;
    for (CollectiveSpec& c : t.collectives) {
      c.bytes *= factor;
      for (double& b : c.block_bytes) b *= factor;  // a training job's stages' own bytes
    }
  };
  for (Workflow& wf : scenario.workflows) {
    for (TaskSpec& t : wf.tasks) {
      scale(t);
      if (!t.on_sizes) continue;
      std::vector<TaskSpec> sizes = *t.on_sizes;  // shared by the job's iterations: scaled once a task, on a copy
      for (TaskSpec& u : sizes) scale(u);
      t.on_sizes = std::make_shared<const std::vector<TaskSpec>>(std::move(sizes));
    }
    for (EdgeSpec& e : wf.edges) e.bytes *= factor;
  }
  return scenario;
}

}  // namespace fleetsim
