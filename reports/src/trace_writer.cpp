#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "csv.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"
#include "json_stream.hpp"
#include "json_writer.hpp"

namespace fleetsim {
namespace {

std::string gpu_list(const RunResult& run, const TaskRecord& t, char separator) {
  std::string list;
  for (std::uint32_t i = 0; i < t.gpu_count; ++i) {
    if (i > 0) list += separator;
    list += run.cluster.gpu_name(run.trace.gpus[t.gpu_begin + i]);
  }
  return list;
}

// Round-trip precision, and an empty field for times the task never reached. std::to_chars with a
// precision writes what printf's "%.17g" writes, several times faster.
void put_time(std::string& row, double t) {
  if (t == kNever) return;
  char buf[32];
  row.append(buf, std::to_chars(buf, buf + sizeof buf, t, std::chars_format::general, 17).ptr);
}
std::string time_field(double t) {
  std::string field;
  put_time(field, t);
  return field;
}
void put_field(std::string& row, const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) {
    row += s;
  } else {
    row += csv_quote(s);
  }
}

bool predicted(const TaskRecord& t) { return t.compute_bound_s + t.memory_bound_s + t.fixed_s > 0; }


}  // namespace

void write_trace_csv(std::ostream& out, const Scenario& sc, const RunResult& run) {
  out << "instance,workflow,task,tenant,status,gpus,ready_s,start_s,compute_start_s,comm_start_s,end_s,input_bytes,"
         "compute_bound_s,memory_bound_s,fixed_s,reason\n";
  std::string row;  // one write per row
  for (const TaskRecord& t : run.trace.tasks) {
    if (run.trace.instances[index(t.instance)].arrival_s == kNever) continue;  // a closed loop's, never came
    const Workflow& wf = sc.workflows[t.workflow];
    row.clear();
    char buf[16];
    row.append(buf, std::to_chars(buf, buf + sizeof buf, index(t.instance)).ptr) += ',';
    put_field(row, wf.id);
    row += ',';
    put_field(row, wf.tasks[t.task].name);
    row += ',';
    put_field(row, sc.tenants[index(t.tenant)].name);
    (row += ',') += task_status_name(t.status);
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) (row += i == 0 ? ',' : ' ') += run.cluster.gpu_name(run.trace.gpus[t.gpu_begin + i]);
    if (t.gpu_count == 0) row += ',';
    for (const double v : {t.ready_s, t.start_s, t.compute_start_s, t.comm_start_s, t.end_s, t.input_bytes}) put_time(row += ',', v);
    // The compute estimate's parts, or empty fields where there is none (a measured run).
    if (predicted(t)) {
      for (const double v : {t.compute_bound_s, t.memory_bound_s, t.fixed_s}) put_time(row += ',', v);
    } else {
      row += ",,,";
    }
    put_field(row += ',', run.trace.reasons[t.reason]);
    row += '\n';
    out.write(row.data(), static_cast<std::streamsize>(row.size()));
  }
}

void write_trace_json(std::ostream& out, const Scenario& sc, const RunResult& run) {
  using nlohmann::ordered_json;
  auto time_value = [](double t) { return t == kNever ? ordered_json(nullptr) : ordered_json(t); };
  // Written as it goes, one task at a time: a large run's trace never exists whole as a JSON tree.
  std::string head = ordered_json{{"scenario", sc.name}, {"seed", run.summary.seed}}.dump(1);
  head.resize(head.size() - 2);  // its closing "\n}"
  out << head << ",\n \"tasks\": ";
  JsonArrayStream tasks(out, 1, 1);
  JsonWriter row(1, 2);
  auto time = [&](const char* key, double t) {
    row.key(key);
    if (t == kNever) {
      row.null();
    } else {
      row.value(t);
    }
  };
  for (const TaskRecord& t : run.trace.tasks) {
    if (run.trace.instances[index(t.instance)].arrival_s == kNever) continue;
    const Workflow& wf = sc.workflows[t.workflow];
    row.clear();
    row.begin_object().key("instance").value(index(t.instance)).key("workflow").value(wf.id).key("task").value(wf.tasks[t.task].name);
    row.key("tenant").value(sc.tenants[index(t.tenant)].name).key("status").value(task_status_name(t.status));
    row.key("gpus").begin_array();
    for (std::uint32_t i = 0; i < t.gpu_count; ++i) row.value(run.cluster.gpu_name(run.trace.gpus[t.gpu_begin + i]));
    row.end_array();
    time("ready_s", t.ready_s);
    time("start_s", t.start_s);
    time("compute_start_s", t.compute_start_s);
    time("comm_start_s", t.comm_start_s);
    time("end_s", t.end_s);
    row.key("input_bytes").value(t.input_bytes);
    if (predicted(t)) {
      row.key("compute_parts_s").begin_object().key("compute_bound").value(t.compute_bound_s);
      row.key("memory_bound").value(t.memory_bound_s).key("fixed").value(t.fixed_s).end_object();
    }
    if (t.work_scale != 1) row.key("work_scale").value(t.work_scale);
    if (t.reason != 0) row.key("reason").value(run.trace.reasons[t.reason]);
    tasks.add_text(row.end_object().text());
  }
  tasks.close();
  out << ",\n \"weight_loads\": ";
  JsonArrayStream loads(out, 1, 1);
  for (const WeightLoad& w : run.trace.weight_loads) {
    loads.add({{"task", index(w.task)},
                     {"gpu", run.cluster.gpu_name(w.gpu)},
                     {"from", w.peer ? run.cluster.gpu_name(*w.peer) : w.from_storage ? "storage" : "host"},
                     {"bytes", w.bytes},
                     {"start_s", time_value(w.start_s)},
                     {"end_s", time_value(w.end_s)}});
  }
  loads.close();
  out << "\n}\n";
}

void write_links_csv(std::ostream& out, const RunResult& run) {
  out << "link,class,kind,capacity_Bps,bytes,mean_utilization\n";
  const double end_s = run.summary.end_s;
  for (std::uint32_t l = 0; l < run.topology.links().size(); ++l) {
    const TopoLink& link = run.topology.links()[l];
    const double bytes = run.link_bytes[l];
    out << run.topology.link_name(l) << ',' << link_class_name(link.cls) << ',' << link_kind_name(link.kind) << ','
        << time_field(link.capacity_Bps) << ',' << time_field(bytes) << ','
        << time_field(end_s > 0 ? bytes / (link.capacity_Bps * end_s) : 0.0) << '\n';
  }
}

void write_vram_timeline_csv(std::ostream& out, const RunResult& run) {
  out << "time_s,gpu,used_bytes,utilization\n";
  for (const VramSample& s : run.vram_samples) {
    const double capacity = run.cluster.gpu_type(s.gpu).vram_bytes;
    out << time_field(s.time_s) << ',' << run.cluster.gpu_name(s.gpu) << ',' << time_field(s.used_bytes) << ','
        << time_field(s.used_bytes / capacity) << '\n';
  }
}

void write_decisions_csv(std::ostream& out, const Scenario& sc, const RunResult& run) {
  out << "time_s,decision,instance,workflow,task,tenant,gpus,reason\n";
  std::string row;  // one write per row
  for (const Decision& d : run.trace.decisions) {
    row.clear();
    put_time(row, d.time_s);
    (row += ',') += decision_kind_name(d.kind);
    if (d.node) {  // the autoscaler's: no task, the node's GPUs
      row += ",,,,,";
      const std::uint32_t first = index(run.cluster.first_gpu(*d.node));
      for (std::uint32_t g = first; g < first + run.cluster.gpus_in(*d.node); ++g) (g > first ? row += ';' : row) += run.cluster.gpu_name(make_id<GpuId>(g));
      put_field(row += ',', run.trace.reasons[d.reason]);
      row += '\n';
      out.write(row.data(), static_cast<std::streamsize>(row.size()));
      continue;
    }
    const TaskRecord& t = run.trace.tasks[index(d.task)];
    const Workflow& wf = sc.workflows[t.workflow];
    char buf[16];
    row += ',';
    row.append(buf, std::to_chars(buf, buf + sizeof buf, index(t.instance)).ptr);
    put_field(row += ',', wf.id);
    put_field(row += ',', wf.tasks[t.task].name);
    put_field(row += ',', sc.tenants[index(t.tenant)].name);
    row += ',';
    for (std::uint32_t i = 0; i < d.gpu_count; ++i) (i > 0 ? row += ';' : row) += run.cluster.gpu_name(run.trace.gpus[d.gpu_begin + i]);
    put_field(row += ',', run.trace.reasons[d.reason]);
    row += '\n';
    out.write(row.data(), static_cast<std::streamsize>(row.size()));
  }
}

void write_cost_timeline_csv(std::ostream& out, const RunResult& run) {
  out << "time_s,usd_per_hour,cumulative_usd\n";
  double total = 0;
  for (std::size_t i = 0; i < run.cost_samples.size(); ++i) {
    const CostSample& c = run.cost_samples[i];
    if (i > 0) total += run.cost_samples[i - 1].usd_per_hour * (c.time_s - run.cost_samples[i - 1].time_s) / 3600;
    out << time_field(c.time_s) << ',' << time_field(c.usd_per_hour) << ',' << time_field(total) << '\n';
  }
  if (!run.cost_samples.empty()) {
    total += run.cost_samples.back().usd_per_hour * (run.summary.end_s - run.cost_samples.back().time_s) / 3600;
    out << time_field(run.summary.end_s) << ',' << time_field(run.cost_samples.back().usd_per_hour) << ',' << time_field(total) << '\n';
  }
}

void write_link_timeline_csv(std::ostream& out, const RunResult& run) {
  out << "time_s,link,rate_Bps,utilization\n";
  for (const LinkSample& s : run.link_samples) {
    const double capacity = run.topology.links()[s.link].capacity_Bps;
    out << time_field(s.time_s) << ',' << run.topology.link_name(s.link) << ',' << time_field(s.rate_Bps) << ','
        << time_field(s.rate_Bps / capacity) << '\n';
  }
}

void write_task_breakdown_text(std::ostream& out, const Scenario& sc, const RunResult& run) {
  auto time = [](double t) { return t == kNever ? std::string("-") : format_quantity(t, Dimension::time); };
  auto span = [&](double from, double to) { return from == kNever || to == kNever ? std::string("-") : time(to - from); };
  out << "\ntask                           GPUs                start      queued     in+weights compute    (compute-bound, memory-bound, fixed)  collective end\n";
  char line[512];
  for (const TaskRecord& t : run.trace.tasks) {
    if (run.trace.instances[index(t.instance)].arrival_s == kNever) continue;
    const Workflow& wf = sc.workflows[t.workflow];
    const double compute_end = t.comm_start_s != kNever ? t.comm_start_s : t.end_s;
    const std::string parts = predicted(t) ? "(" + time(t.compute_bound_s) + ", " + time(t.memory_bound_s) + ", " + time(t.fixed_s) + ")" : "";
    std::string name = wf.tasks[t.task].name;
    if (sc.workflows.size() > 1 || run.trace.instances.size() > 1) name = wf.id + "#" + std::to_string(index(t.instance)) + "/" + name;
    std::snprintf(line, sizeof line, "%-30s %-19s %-10s %-10s %-10s %-10s %-37s %-10s %s%s\n", name.c_str(), gpu_list(run, t, ' ').c_str(),
                  time(t.start_s).c_str(), span(t.ready_s, t.start_s).c_str(), span(t.start_s, t.compute_start_s).c_str(),
                  span(t.compute_start_s, compute_end).c_str(), parts.c_str(), span(t.comm_start_s, t.end_s).c_str(), time(t.end_s).c_str(),
                  t.status == TaskStatus::completed ? "" : ("  " + std::string(task_status_name(t.status))).c_str());
    out << line;
  }
}

}  // namespace fleetsim
