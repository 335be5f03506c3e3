// WfCommons WfFormat (schema 1.4, 1.5 and 1.6) instances: tasks with parents and files, and measured
// runtimes. Each task becomes a single-GPU task whose work takes its recorded runtime on the
// reference GPU (at its bf16 peak); an edge carries the files the parent writes and the child reads.
#include <cmath>
#include <map>
#include <set>

#include "../json_reader.hpp"
#include "fleetsim/import.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {

bool is_wfcommons_instance(std::string_view json_text) {
  const detail::Json doc = detail::Json::parse(json_text.begin(), json_text.end(), nullptr, false);
  return doc.is_object() && doc.contains("schemaVersion") && doc.contains("workflow");
}

Workflow import_wfcommons(std::string_view json_text, const std::string& file_name, const GpuType& reference) {
  using detail::Json;
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  auto fail = [&](const std::string& pointer, const std::string& message) {
    problems.add(pointer, message);
    problems.throw_if_any();
  };
  if (!doc.is_object() || !doc.contains("workflow") || !doc["workflow"].is_object()) {
    fail("", "expected a WfFormat instance: an object with \"schemaVersion\" and \"workflow\"");
  }
  const Json version_value = doc.contains("schemaVersion") ? doc["schemaVersion"] : Json();
  const std::string version = version_value.is_string() ? version_value.get<std::string>() : "";
  // 1.6 keeps 1.5's specification and execution and adds optional metrics (wfcommons/WfFormat's README);
  // earlier versions name their fields otherwise.
  if (version != "1.4" && version != "1.5" && version != "1.6") {
    fail("/schemaVersion", "expected \"1.4\", \"1.5\" or \"1.6\" (the WfFormat versions this importer reads), found " + detail::describe(version_value));
  }
  const Json& w = doc["workflow"];

  struct Raw {
    std::string id, name;
    double runtime_s = 0;
    std::vector<std::string> parents;
    std::set<std::string> inputs, outputs;
  };
  std::vector<Raw> raw;
  std::map<std::string, double> file_bytes;
  auto strings = [&](const Json& v, const std::string& at) {
    std::vector<std::string> out;
    if (v.is_null()) return out;
    if (!v.is_array()) fail(at, "expected an array of ids, found " + detail::describe(v));
    for (const Json& x : v) {
      if (!x.is_string()) fail(at, "expected an array of ids, found " + detail::describe(x));
      out.push_back(x.get<std::string>());
    }
    return out;
  };
  // A file's size: a non-negative number of bytes where it is given (a negative one was once simulated as
  // "edge tensors -93.8 GB").
  auto record_size = [&](const Json& f, const std::string& name, const std::string& at) {
    const auto it = f.find("sizeInBytes");
    if (it == f.end()) return;
    if (!it->is_number() || !(it->get<double>() >= 0) || !std::isfinite(it->get<double>())) {
      fail(at + "/sizeInBytes", "expected a non-negative number of bytes, found " + detail::describe(*it));
    }
    file_bytes[name] = it->get<double>();
  };
  auto runtime_of = [&](const Json& t, const std::string& at) {
    const auto it = t.find("runtimeInSeconds");
    if (it == t.end() || !it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= kLongestSeconds)) {
      fail(at + "/runtimeInSeconds", "expected a number of seconds from 0 to 1e9" + (it == t.end() ? std::string() : ", found " + detail::describe(*it)));
      return 0.0;
    }
    return it->get<double>();
  };

  const bool v15 = w.contains("specification");  // 1.5 and 1.6: specification + execution; 1.4 and earlier: tasks
  if (v15) {
    const Json& spec = w["specification"];
    if (!spec.contains("tasks") || !spec["tasks"].is_array()) fail("/workflow/specification/tasks", "expected an array of tasks");
    const Json files = spec.value("files", Json::array());
    for (std::size_t i = 0; files.is_array() && i < files.size(); ++i) {
      const Json& f = files[i];
      if (f.is_object() && f.contains("id") && f["id"].is_string()) record_size(f, f["id"].get<std::string>(), "/workflow/specification/files/" + std::to_string(i));
    }
    std::map<std::string, double> runtimes;
    const Json& exec = w.value("execution", Json::object());
    const Json& exec_tasks = exec.value("tasks", Json::array());
    for (std::size_t i = 0; i < exec_tasks.size(); ++i) {
      const std::string at = "/workflow/execution/tasks/" + std::to_string(i);
      if (!exec_tasks[i].is_object() || !exec_tasks[i].contains("id") || !exec_tasks[i]["id"].is_string()) fail(at, "expected a task with a string \"id\"");
      runtimes[exec_tasks[i]["id"].get<std::string>()] = runtime_of(exec_tasks[i], at);
    }
    for (std::size_t i = 0; i < spec["tasks"].size(); ++i) {
      const Json& t = spec["tasks"][i];
      const std::string at = "/workflow/specification/tasks/" + std::to_string(i);
      if (!t.is_object() || !t.contains("id") || !t["id"].is_string()) fail(at, "expected a task with a string \"id\"");
      Raw r;
      r.id = t["id"].get<std::string>();
      r.name = t.value("name", r.id);
      if (runtimes.count(r.id) == 0) fail(at, "task \"" + r.id + "\" has no runtime in /workflow/execution/tasks");
      r.runtime_s = runtimes[r.id];
      r.parents = strings(t.value("parents", Json::array()), at + "/parents");
      for (const std::string& f : strings(t.value("inputFiles", Json::array()), at + "/inputFiles")) r.inputs.insert(f);
      for (const std::string& f : strings(t.value("outputFiles", Json::array()), at + "/outputFiles")) r.outputs.insert(f);
      raw.push_back(std::move(r));
    }
  } else {  // 1.4 and earlier: tasks carry runtimes and files
    if (!w.contains("tasks") || !w["tasks"].is_array()) fail("/workflow/tasks", "expected an array of tasks");
    for (std::size_t i = 0; i < w["tasks"].size(); ++i) {
      const Json& t = w["tasks"][i];
      const std::string at = "/workflow/tasks/" + std::to_string(i);
      if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) fail(at, "expected a task with a string \"name\"");
      Raw r;
      r.name = t["name"].get<std::string>();
      r.id = t.value("id", r.name);
      r.runtime_s = runtime_of(t, at);
      r.parents = strings(t.value("parents", Json::array()), at + "/parents");
      const Json files = t.value("files", Json::array());
      for (std::size_t k = 0; files.is_array() && k < files.size(); ++k) {
        const Json& f = files[k];
        if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) continue;
        const std::string name = f["name"].get<std::string>();
        record_size(f, name, at + "/files/" + std::to_string(k));
        (f.contains("link") && f["link"] == "output" ? r.outputs : r.inputs).insert(name);
      }
      raw.push_back(std::move(r));
    }
  }

  // Parents may be named by id or by name; ids are unique.
  std::map<std::string, std::uint32_t> index_of;
  for (std::uint32_t i = 0; i < raw.size(); ++i) {
    if (!index_of.emplace(raw[i].id, i).second) {
      fail(std::string(w.contains("specification") ? "/workflow/specification/tasks/" : "/workflow/tasks/") + std::to_string(i),
           "duplicate task id \"" + raw[i].id + "\" (task " + std::to_string(index_of[raw[i].id]) + " has it too)");
    }
  }
  for (std::uint32_t i = 0; i < raw.size(); ++i) index_of.emplace(raw[i].name, i);
  Workflow wf;
  wf.file = file_name;
  wf.name = doc.value("name", "WfCommons instance") + " (WfFormat " + version + ")";
  // The run as recorded: 1.5 and 1.6 keep it under execution, 1.4 beside the tasks.
  const Json execution = v15 ? w.value("execution", Json::object()) : Json::object();
  const Json& run = v15 ? execution : w;
  const std::string run_at = v15 ? "/workflow/execution" : "/workflow";
  if (const auto it = run.find("makespanInSeconds"); it != run.end()) {
    if (!it->is_number() || !(it->get<double>() >= 0) || !std::isfinite(it->get<double>())) {
      fail(run_at + "/makespanInSeconds", "expected a non-negative number of seconds, found " + detail::describe(*it));
    }
    wf.recorded = RecordedRun{.makespan_s = it->get<double>(), .machines = ""};
    if (const auto m = run.find("machines"); m != run.end()) {
      if (!m->is_array()) fail(run_at + "/machines", "expected an array of machines, found " + detail::describe(*m));
      // How many, their cores (cpu.coreCount from 1.5, cpu.count in 1.4) where every one says, and their
      // architecture where they share one.
      double cores = 0;
      bool all_cores = !m->empty();
      std::set<std::string> architectures;
      for (const Json& machine : *m) {
        const Json cpu = machine.is_object() ? machine.value("cpu", Json::object()) : Json::object();
        const Json count = cpu.is_object() ? cpu.value(v15 ? "coreCount" : "count", Json()) : Json();
        if (count.is_number() && count.get<double>() > 0) {
          cores += count.get<double>();
        } else {
          all_cores = false;
        }
        if (machine.is_object() && machine.contains("architecture") && machine["architecture"].is_string()) {
          architectures.insert(machine["architecture"].get<std::string>());
        }
      }
      if (!m->empty()) {
        std::string& d = wf.recorded->machines;
        d = std::to_string(m->size()) + (m->size() == 1 ? " machine" : " machines");
        if (all_cores) d += ", " + std::to_string(static_cast<long long>(cores)) + " cores";
        if (architectures.size() == 1) d += " (" + *architectures.begin() + ")";
      }
    }
  }
  for (const Raw& r : raw) {
    TaskSpec t;
    t.name = r.id;
    t.flop = r.runtime_s * reference.peak_for(Dtype::bf16);
    t.dtype = Dtype::bf16;
    wf.tasks.push_back(std::move(t));
  }
  std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
  for (std::uint32_t child = 0; child < raw.size(); ++child) {
    for (const std::string& p : raw[child].parents) {
      const auto it = index_of.find(p);
      if (it == index_of.end()) fail("", "task \"" + raw[child].id + "\" names an unknown parent \"" + p + "\"");
      if (!seen.insert({it->second, child}).second) continue;
      double bytes = 0;
      for (const std::string& f : raw[it->second].outputs) {
        if (raw[child].inputs.count(f) != 0) bytes += file_bytes[f];
      }
      wf.edges.push_back(EdgeSpec{it->second, child, bytes});
    }
  }
  if (wf.tasks.empty()) fail("", "the instance has no tasks");
  wf.finalize();
  return wf;
}

}  // namespace fleetsim
