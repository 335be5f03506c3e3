#include "fleetsim/ranks.hpp"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "fleetsim/realexec.hpp"

namespace fleetsim {
namespace {

template <typename T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}
void put_text(std::string& out, const std::string& text) {
  put(out, static_cast<std::uint64_t>(text.size()));
  out += text;
}

// Reads values off the front of a buffer, refusing to read past its end.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    T value{};
    need(sizeof value, what);
    std::memcpy(&value, bytes_.data(), sizeof value);
    bytes_.remove_prefix(sizeof value);
    return value;
  }
  std::string text(const char* what) {
    const auto n = get<std::uint64_t>(what);
    need(n, what);
    std::string out(bytes_.substr(0, n));
    bytes_.remove_prefix(n);
    return out;
  }
  bool done() const { return bytes_.empty(); }

 private:
  void need(std::size_t n, const char* what) const {
    if (bytes_.size() < n) throw std::invalid_argument(std::string("a rank's report ends inside ") + what);
  }
  std::string_view bytes_;
};

}  // namespace

std::vector<int> rank_of_each_gpu(const RunResult& plan, unsigned ranks) {
  std::vector<int> out(plan.cluster.gpu_count(), -1);
  for (const TaskRecord& r : plan.trace.tasks) {
    if (r.status != TaskStatus::completed) continue;  // the replay runs only these
    for (std::uint32_t m = 0; m < r.gpu_count; ++m) out[index(plan.trace.gpus[r.gpu_begin + m])] = 0;
  }
  int working = 0;
  for (int& rank : out) {
    if (rank == 0) rank = working++;  // in GPU index order
  }
  if (static_cast<unsigned>(working) != ranks) {
    throw DeviceError("the plan runs work on " + std::to_string(working) + " device(s) but " + std::to_string(ranks) +
                      " MPI rank(s) were started; start one rank per device (mpirun -np " + std::to_string(working) + ")");
  }
  return out;
}

std::string encode_rank_report(const RankReport& report) {
  std::string out;
  put(out, static_cast<std::uint64_t>(report.members.size()));
  for (const MemberTimes& m : report.members) {
    put(out, m.record);
    put(out, m.member);
    for (double t : {m.arrived_s, m.loaded_s, m.computed_s, m.done_s}) put(out, t);
    put_text(out, m.failure);
  }
  put(out, static_cast<std::uint64_t>(report.loads.size()));
  for (const LoadTimes& l : report.loads) {
    put(out, l.load);
    put(out, l.start_s);
    put(out, l.end_s);
  }
  return out;
}

RankReport decode_rank_report(std::string_view bytes) {
  Reader in(bytes);
  RankReport report;
  const auto members = in.get<std::uint64_t>("the member count");
  for (std::uint64_t i = 0; i < members; ++i) {
    MemberTimes m;
    m.record = in.get<std::uint32_t>("a member's record");
    m.member = in.get<std::uint32_t>("a member's index");
    m.arrived_s = in.get<double>("a member's times");
    m.loaded_s = in.get<double>("a member's times");
    m.computed_s = in.get<double>("a member's times");
    m.done_s = in.get<double>("a member's times");
    m.failure = in.text("a member's failure");
    report.members.push_back(std::move(m));
  }
  const auto loads = in.get<std::uint64_t>("the load count");
  for (std::uint64_t i = 0; i < loads; ++i) {
    LoadTimes l;
    l.load = in.get<std::uint32_t>("a load's index");
    l.start_s = in.get<double>("a load's times");
    l.end_s = in.get<double>("a load's times");
    report.loads.push_back(l);
  }
  if (!in.done()) throw std::invalid_argument("a rank's report has bytes after its last load");
  return report;
}

void merge_rank_reports(Trace& trace, std::span<const RankReport> reports, const std::function<bool(std::uint32_t record)>& communicates) {
  // Members in (record, member) order, so the lowest member's failure is met first.
  std::vector<const MemberTimes*> members;
  for (const RankReport& r : reports) {
    for (const MemberTimes& m : r.members) {
      if (m.record >= trace.tasks.size()) throw std::invalid_argument("a rank's report names task record " + std::to_string(m.record) + ", past the trace's end");
      members.push_back(&m);
    }
  }
  std::stable_sort(members.begin(), members.end(), [](const MemberTimes* a, const MemberTimes* b) {
    return a->record != b->record ? a->record < b->record : a->member < b->member;
  });
  std::set<std::uint32_t> seen;
  for (const MemberTimes* m : members) {
    TaskRecord& r = trace.tasks[m->record];
    if (seen.insert(m->record).second) {  // the first member: times start from it
      r.start_s = m->arrived_s;
      r.compute_start_s = m->loaded_s;
      r.comm_start_s = communicates(m->record) ? m->computed_s : kNever;
      r.end_s = m->done_s;
    } else {
      r.start_s = std::max(r.start_s, m->arrived_s);
      r.compute_start_s = std::max(r.compute_start_s, m->loaded_s);
      if (r.comm_start_s != kNever) r.comm_start_s = std::max(r.comm_start_s, m->computed_s);
      r.end_s = std::max(r.end_s, m->done_s);
    }
    if (!m->failure.empty() && r.status != TaskStatus::failed) {
      r.status = TaskStatus::failed;
      r.reason = trace.add_reason(m->failure);
    }
  }
  for (const RankReport& rep : reports) {
    for (const LoadTimes& l : rep.loads) {
      if (l.load >= trace.weight_loads.size()) throw std::invalid_argument("a rank's report names weight load " + std::to_string(l.load) + ", past the trace's end");
      trace.weight_loads[l.load].start_s = l.start_s;
      trace.weight_loads[l.load].end_s = l.end_s;
    }
  }
}

}  // namespace fleetsim
