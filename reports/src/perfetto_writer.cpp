// Chrome / Perfetto trace-event JSON: one process per node with one thread per GPU (task slices:
// inputs and weight loads, compute, collective; each weight load nested in its task's first phase),
// VRAM counters per GPU, load counters for every link that carried traffic, and the number of ready
// tasks waiting. Times in microseconds, as the format wants.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"
#include "gpu_lanes.hpp"
#include "json_stream.hpp"
#include "json_writer.hpp"

namespace fleetsim {

void write_perfetto_json(std::ostream& out, const Scenario& sc, const RunResult& run) {
  using nlohmann::ordered_json;
  const Cluster& cluster = run.cluster;
  // Events are written as they are made: a large run's trace never exists whole as a JSON tree.
  out << "{\"traceEvents\":";
  JsonArrayStream events(out);
  auto us = [](double s) { return s * 1e6; };
  const int network_pid = static_cast<int>(cluster.node_count());

  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    const NodeId node = make_id<NodeId>(n);
    events.add({{"ph", "M"}, {"name", "process_name"}, {"pid", n},
                      {"args", {{"name", "n" + std::to_string(n) + " (" + cluster.group(node).node.id + ")"}}}});
    for (std::uint32_t i = 0; i < cluster.gpus_in(node); ++i) {
      const GpuId g = make_id<GpuId>(index(cluster.first_gpu(node)) + i);
      events.add({{"ph", "M"}, {"name", "thread_name"}, {"pid", n}, {"tid", index(g)},
                        {"args", {{"name", cluster.gpu_name(g) + " (" + cluster.gpu_type(g).id + ")"}}}});
    }
  }
  // Lane k > 0 of GPU g is thread k * gpus + g, named when first used.
  const GpuLanes lanes = gpu_lanes(run.trace, cluster.gpu_count(), run.summary.end_s);
  const std::vector<std::uint32_t>& lane = lanes.lane;
  const std::uint32_t most = *std::max_element(lanes.per_gpu.begin(), lanes.per_gpu.end());
  std::vector<std::uint8_t> named(std::size_t{most} * cluster.gpu_count(), 0);
  auto tid = [&](std::uint32_t entry) {
    const GpuId g = run.trace.gpus[entry];
    const std::size_t t = std::size_t{lane[entry]} * cluster.gpu_count() + index(g);
    if (lane[entry] > 0 && named[t] == 0) {
      named[t] = 1;
      events.add({{"ph", "M"}, {"name", "thread_name"}, {"pid", index(cluster.node_of(g))}, {"tid", t},
                        {"args", {{"name", cluster.gpu_name(g) + " (shared, lane " + std::to_string(lane[entry]) + ")"}}}});
    }
    return t;
  };
  events.add({{"ph", "M"}, {"name", "process_name"}, {"pid", network_pid}, {"args", {{"name", "network"}}}});
  // The many events below are written without a JSON tree each (json_writer.hpp).
  JsonWriter event, args;
  // A slice ("X") or a counter ("C", no category, thread or duration).
  auto add = [&](const char* ph, std::string_view name, const char* cat, std::size_t pid, std::optional<std::size_t> thread,
                 double ts_us, std::optional<double> dur_us, std::string_view args_json) {
    event.clear();
    event.begin_object().key("ph").value(ph).key("name").value(name);
    if (cat != nullptr) event.key("cat").value(cat);
    event.key("pid").value(pid);
    if (thread) event.key("tid").value(*thread);
    event.key("ts").value(ts_us);
    if (dur_us) event.key("dur").value(*dur_us);
    events.add_text(event.key("args").raw(args_json).end_object().text());
  };
  const int scheduler_pid = network_pid + 1;
  events.add({{"ph", "M"}, {"name", "process_name"}, {"pid", scheduler_pid}, {"args", {{"name", "scheduler"}}}});

  for (const TaskRecord& t : run.trace.tasks) {
    if (t.start_s == kNever) continue;
    const Workflow& wf = sc.workflows[t.workflow];
    const std::string name = wf.id + "/" + wf.tasks[t.task].name;
    const double end = t.end_s == kNever ? run.summary.end_s : t.end_s;
    args.clear();
    args.begin_object().key("instance").value(index(t.instance)).key("tenant").value(sc.tenants[index(t.tenant)].name);
    args.key("status").value(task_status_name(t.status));
    if (t.compute_bound_s + t.memory_bound_s + t.fixed_s > 0) {  // why the compute takes what it takes
      args.key("compute_bound_s").value(t.compute_bound_s).key("memory_bound_s").value(t.memory_bound_s).key("fixed_s").value(t.fixed_s);
    }
    args.end_object();
    // One slice per phase on every GPU of the gang.
    struct Phase {
      const char* label;
      double from, to;
    };
    const double compute_start = t.compute_start_s == kNever ? end : t.compute_start_s;
    const double comm_start = t.comm_start_s == kNever ? end : t.comm_start_s;
    const Phase phases[] = {{t.resized_s != kNever ? "restart+weights" : "inputs+weights", gang_start_s(t), compute_start},
                            {"compute", compute_start, std::min(comm_start, end)},
                            {"collective", comm_start, end}};
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
      const GpuId g = run.trace.gpus[t.gpu_begin + i];
      for (const Phase& p : phases) {
        if (p.to <= p.from) continue;
        const std::size_t thread = tid(t.gpu_begin + i);  // may name the lane first
        add("X", name + " " + p.label, p.label, index(cluster.node_of(g)), thread, us(p.from), us(p.to - p.from), args.text());
      }
    }
  }
  // Gangs before a resize or a stop: one slice per GPU.
  for (const LeftGang& left : run.trace.left_gangs) {
    const TaskRecord& t = run.trace.tasks[index(left.task)];
    const Workflow& wf = sc.workflows[t.workflow];
    for (std::uint32_t i = 0; i < left.gpu_count && left.end_s > left.start_s; ++i) {
      const GpuId g = run.trace.gpus[left.gpu_begin + i];
      const std::size_t thread = tid(left.gpu_begin + i);
      args.clear();
      args.begin_object().key("instance").value(index(t.instance)).key("gang").value(left.gpu_count).end_object();
      add("X", wf.id + "/" + wf.tasks[t.task].name + (left.stopped ? " until stopped" : " until resized"), "compute", index(cluster.node_of(g)), thread, us(left.start_s),
          us(left.end_s - left.start_s), args.text());
    }
  }
  for (const WeightLoad& w : run.trace.weight_loads) {
    const double end = w.end_s == kNever ? run.summary.end_s : w.end_s;
    if (end <= w.start_s) continue;
    // On its task's lane of the GPU, inside the task's first phase.
    const auto entry = load_entry(run.trace, w);
    const std::size_t thread = entry ? tid(*entry) : std::size_t{index(w.gpu)};
    args.clear();
    args.begin_object().key("GB").value(w.bytes / 1e9);
    args.key("from").value(w.peer ? cluster.gpu_name(*w.peer) : w.from_storage ? "storage" : "host").end_object();
    add("X", "weight load", "weight load", index(cluster.node_of(w.gpu)), thread, us(w.start_s), us(end - w.start_s), args.text());
  }
  // Ready tasks waiting for GPUs: +1 when a task becomes ready, -1 when it starts (or the run ends).
  std::vector<std::pair<double, int>> queue;
  for (const TaskRecord& t : run.trace.tasks) {
    if (t.ready_s == kNever) continue;
    queue.emplace_back(t.ready_s, 1);
    queue.emplace_back(t.start_s != kNever ? t.start_s : run.summary.end_s, -1);
  }
  std::sort(queue.begin(), queue.end());
  int waiting = 0;
  for (std::size_t i = 0; i < queue.size(); ++i) {
    waiting += queue[i].second;
    if (i + 1 < queue.size() && queue[i + 1].first == queue[i].first) continue;  // one sample per instant
    args.clear();
    add("C", "ready tasks waiting", nullptr, scheduler_pid, std::nullopt, us(queue[i].first), std::nullopt,
        args.begin_object().key("tasks").value(waiting).end_object().text());
  }
  for (const VramSample& s : run.vram_samples) {
    args.clear();
    add("C", "VRAM " + cluster.gpu_name(s.gpu) + " (GB)", nullptr, index(cluster.node_of(s.gpu)), std::nullopt, us(s.time_s), std::nullopt,
        args.begin_object().key("GB").value(s.used_bytes / 1e9).end_object().text());
  }
  for (const LinkSample& s : run.link_samples) {
    args.clear();
    add("C", run.topology.link_name(s.link) + " (GB/s)", nullptr, network_pid, std::nullopt, us(s.time_s), std::nullopt,
        args.begin_object().key("GB/s").value(s.rate_Bps / 1e9).end_object().text());
  }
  events.close();
  const ordered_json rest{{"displayTimeUnit", "ms"}, {"otherData", {{"scenario", sc.name}, {"policy", run.summary.policy}, {"seed", run.summary.seed}}}};
  out << ',' << rest.dump().substr(1) << '\n';  // its members after traceEvents
}

}  // namespace fleetsim
