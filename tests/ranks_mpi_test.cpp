// The ranks' epoch, gather and transport over real MPI, run under mpirun with three ranks on one machine
// (tests/CMakeLists.txt). Each rank reports made-up phase times for its member of three gangs that span
// every rank, and one weight load; rank 0 gathers the reports, checks each is what its rank sent, merges
// them and checks that a phase ends with its last member and that the lowest failing member names the
// failure. Then the transport: meetings, every collective against the values it must leave, and
// messages received in another order than sent. Exit 0 when all holds, 1 with a message when not.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "fleetsim/ranks.hpp"

using namespace fleetsim;

namespace {

constexpr std::uint32_t kGangs = 3;

// What rank k sends: times that grow with k, and a failure of the last gang on every rank but 0.
RankReport report_of(int k) {
  RankReport r;
  const double s = 0.01 * k;
  for (std::uint32_t g = 0; g < kGangs; ++g) {
    r.members.push_back({.record = g, .member = static_cast<std::uint32_t>(k), .arrived_s = g + s, .loaded_s = g + 0.2 + s,
                         .computed_s = g + 0.5 + s, .done_s = g + 0.9 + s,
                         .failure = g == kGangs - 1 && k > 0 ? "failed on rank " + std::to_string(k) : ""});
  }
  r.loads.push_back({.load = static_cast<std::uint32_t>(k), .start_s = 10.0 + k, .end_s = 10.5 + k});
  return r;
}

bool same(const RankReport& a, const RankReport& b) { return encode_rank_report(a) == encode_rank_report(b); }

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (ok) return;
  std::printf("FAIL %s\n", what.c_str());
  ++failures;
}

// Every collective over the gang of all ranks (member k = rank k) and one over ranks {last, 0}, in that
// member order; each checked against the values it must leave. Member k's data: 100 k + i.
void check_transport(const ranks::World& w) {
  const std::vector<std::vector<int>> groups{[&] {
                                               std::vector<int> all(static_cast<std::size_t>(w.size));
                                               std::iota(all.begin(), all.end(), 0);
                                               return all;
                                             }(),
                                             {w.size - 1, 0}};
  ranks::Transport transport(groups);
  expect(transport.max_tag() >= 32767, "MPI allows at least 32767 tags");
  const ranks::Transport::Meeting m = transport.meet(0, w.rank, w.rank == 1);
  expect(m.last_s == w.size - 1 && m.any_failed, "a meeting gives every member the last arrival and any failure");

  const std::size_t count = 10, k = static_cast<std::size_t>(w.size), me = static_cast<std::size_t>(w.rank);
  auto chunk_begin = [&](std::size_t j) { return j * count / k; };
  auto data = [](std::size_t member, std::size_t i) { return static_cast<float>(100 * member + i); };
  std::vector<float> b(2 * count);
  auto fill = [&] {
    for (std::size_t i = 0; i < count; ++i) b[i] = data(me, i);
    std::fill(b.begin() + count, b.end(), -1.0f);
  };
  auto sum = [&](std::size_t i) {
    float total = 0;
    for (std::size_t j = 0; j < k; ++j) total += data(j, i);
    return total;
  };
  auto check = [&](CollectiveOp op, const std::function<bool(std::size_t i)>& holds) {
    bool ok = true;
    for (std::size_t i = 0; i < 2 * count; ++i) ok = ok && holds(i);
    expect(ok, std::string(collective_op_name(op)) + " leaves what it must on rank " + std::to_string(w.rank));
  };
  auto run = [&](CollectiveOp op) {
    fill();
    transport.collective(0, op, b.data(), count);
  };
  run(CollectiveOp::all_reduce);
  check(CollectiveOp::all_reduce, [&](std::size_t i) { return i >= count || b[i] == sum(i); });
  run(CollectiveOp::all_gather);
  check(CollectiveOp::all_gather, [&](std::size_t i) {
    std::size_t owner = 0;
    while (owner + 1 < k && chunk_begin(owner + 1) <= i) ++owner;
    return i >= count || b[i] == data(owner, i);
  });
  run(CollectiveOp::reduce_scatter);
  check(CollectiveOp::reduce_scatter, [&](std::size_t i) {
    const std::size_t mine = chunk_begin(me + 1) - chunk_begin(me);
    return i < count || i - count >= mine || b[i] == sum(chunk_begin(me) + i - count);
  });
  run(CollectiveOp::broadcast);
  check(CollectiveOp::broadcast, [&](std::size_t i) { return i >= count || b[i] == data(0, i); });
  run(CollectiveOp::reduce);
  check(CollectiveOp::reduce, [&](std::size_t i) { return i >= count || b[i] == (me == 0 ? sum(i) : data(me, i)); });
  run(CollectiveOp::all_to_all);
  check(CollectiveOp::all_to_all, [&](std::size_t i) {
    const std::size_t c = count / k;  // equal chunks: chunk j of member r lands in chunk r of member j
    return i < count || i - count >= k * c || b[i] == data((i - count) / c, me * c + (i - count) % c);
  });
  run(CollectiveOp::send_recv);
  check(CollectiveOp::send_recv, [&](std::size_t i) { return i < count || b[i] == (me == 0 ? -1.0f : data(me - 1, i - count)); });
  if (w.rank == 0 || w.rank == w.size - 1) {
    fill();
    transport.collective(1, CollectiveOp::send_recv, b.data(), count);  // member 0 is the last rank: it sends to rank 0
    const bool ok = w.rank != 0 || b[count + 3] == data(k - 1, 3);
    expect(ok, "a group's members are in the order given, not rank order");
  }

  // Each rank sends two tensors to the next, which takes the second first.
  const int to = (w.rank + 1) % w.size, from = (w.rank + w.size - 1) % w.size;
  const std::vector<char> first(1000, static_cast<char>('a' + w.rank)), second(3, static_cast<char>('A' + w.rank));
  transport.send(to, 5, first.data(), first.size());
  transport.send(to, 7, second.data(), second.size());
  transport.send(to, 9, nullptr, 0);
  std::vector<char> got_second(3), got_first(1000);
  transport.receive(from, 9, nullptr, 0);
  transport.receive(from, 7, got_second.data(), got_second.size());
  transport.receive(from, 5, got_first.data(), got_first.size());
  transport.finish();
  expect(got_first == std::vector<char>(1000, static_cast<char>('a' + from)) && got_second == std::vector<char>(3, static_cast<char>('A' + from)),
         "tensors arrive intact whatever order they are taken in");
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    const ranks::World w = ranks::mpi_world();
    const double epoch = ranks::common_epoch_s();
    std::vector<double> epochs(static_cast<std::size_t>(w.size));
    MPI_Allgather(&epoch, 1, MPI_DOUBLE, epochs.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
    for (double e : epochs) expect(e == epoch, "ranks on one machine share one epoch");
    const ranks::World machine = ranks::on_this_machine();
    std::vector<int> places(static_cast<std::size_t>(w.size));
    MPI_Allgather(&machine.rank, 1, MPI_INT, places.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::sort(places.begin(), places.end());
    for (int k = 0; k < w.size; ++k) expect(places[static_cast<std::size_t>(k)] == k && machine.size == w.size, "every rank has its own place on this machine");
    expect(ranks::everywhere(true) && !ranks::everywhere(w.rank != 1), "everywhere holds only when it holds on every rank");
    const std::vector<std::string> gathered = ranks::gather_on_machine(std::string(static_cast<std::size_t>(w.rank) + 1, 'x'));
    bool intact = gathered.size() == static_cast<std::size_t>(w.size);
    for (std::size_t k = 0; intact && k < gathered.size(); ++k) intact = gathered[k] == std::string(k + 1, 'x');
    expect(intact, "each rank's text is gathered on every rank of the machine, in order");
    const std::vector<RankReport> reports = ranks::gather_reports(report_of(w.rank));
    if (w.rank != 0) {
      expect(reports.empty(), "a rank other than 0 receives no reports");
    } else {
      expect(w.size > 1, "run under mpirun with more than one rank (" + std::to_string(w.size) + " now)");
      expect(epoch > 0, "the epoch is a steady-clock time");
      expect(reports.size() == static_cast<std::size_t>(w.size), "rank 0 receives one report per rank");
      for (int k = 0; k < static_cast<int>(reports.size()); ++k) expect(same(reports[k], report_of(k)), "rank " + std::to_string(k) + "'s report arrives intact");
      Trace trace;
      trace.tasks.resize(kGangs);
      for (TaskRecord& r : trace.tasks) r.gpu_count = static_cast<std::uint32_t>(w.size);
      trace.weight_loads.resize(static_cast<std::size_t>(w.size));
      merge_rank_reports(trace, reports, [](std::uint32_t record) { return record == 0; });
      const double last = 0.01 * (w.size - 1);
      for (std::uint32_t g = 0; g < kGangs; ++g) {
        const TaskRecord& r = trace.tasks[g];
        const std::string name = "gang " + std::to_string(g);
        expect(r.start_s == g + last && r.compute_start_s == g + 0.2 + last && r.end_s == g + 0.9 + last, name + " ends each phase with its last member");
        expect((r.comm_start_s == g + 0.5 + last) == (g == 0), name + " has a communication phase only where it communicates");
      }
      const TaskRecord& failed = trace.tasks[kGangs - 1];
      expect(failed.status == TaskStatus::failed && trace.reasons[failed.reason] == "failed on rank 1", "the lowest failing member names the failure");
      expect(trace.tasks[0].status != TaskStatus::failed, "a gang without failures is not failed");
      for (int k = 0; k < w.size; ++k) expect(trace.weight_loads[static_cast<std::size_t>(k)].end_s == 10.5 + k, "rank " + std::to_string(k) + "'s weight load keeps its times");
      if (failures == 0) std::printf("ok   %d ranks: reports gathered intact on rank 0 and merged\n", w.size);
    }
    check_transport(w);
    if (failures == 0) std::printf("ok   rank %d: meetings, collectives and tensors between ranks\n", w.rank);
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    ++failures;
  }
  int mine = failures, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  code = any == 0 ? 0 : 1;
  MPI_Finalize();
  return code;
}
