// Whole simulations at scale: tasks per second, events per second and peak memory on clusters of
// 1k to 100k GPUs (8-GPU H100 nodes, fat-tree 2:1, 16 nodes per leaf; or rail-optimized, a leaf per rail
// for every 16 nodes), and how wall time grows with tasks and with GPUs (the exponent of a least-squares
// line through log-log points).
//
// Workloads are built as scenario text in memory and parsed by the library, loading excluded from
// the timings. "compute" is a one-task workflow (1 GPU, no edges); "network" is a two-task chain
// whose 64 MB tensor crosses the fabric whenever the consumer lands on another GPU. Arrivals are
// Poisson at half the cluster's capacity, so tasks rarely wait for GPUs (no contention). "rails" is
// "network" on the rail-optimized fabric. "shuffle" is congestion: one task fanning out to 16 and back
// into one, 1 GB on every edge, on the rail-optimized fabric, at half the GPUs' capacity, so the fabric
// is busy and every transfer's start and end re-levels flows that share links. Each run
// is a child process, so its peak resident memory (getrusage) is its own. Runs keep no task records
// (RunOptions::keep_records false, as `fleetsim simulate` without outputs): ended instances' records are
// folded into the summary and dropped as the run goes. The last two columns are the
// network's max-min work: flows re-solved per re-levelling of rates (one per batch of flow starts and
// ends at an instant), and re-levellings that fell back to solving a whole connected component. The congested rows
// run again with links shared max-min within a relative 1e-4 (the scenario's max_min_tolerance, a bounded-error
// option): what it saves there, and reports/performance.md what it moves.
//
//   fleetsim_scale            the whole table (a few minutes on one core)
//   fleetsim_scale --quick    a smaller table, for a quick look
//   fleetsim_scale --target   the issue's target: 10M tasks on 102,400 GPUs
//   fleetsim_scale GPUS TASKS [compute|network|rails|shuffle [SEED [TOLERANCE]]]   one run (seed 1 unless given;
//                             exact max-min unless a TOLERANCE is given)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fleetsim/network.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/simulation.hpp"

namespace {

struct Point {
  std::int64_t gpus = 0, tasks = 0;
  bool network = false, rails = false, shuffle = false;
  double wall_s = 0, events = 0, peak_bytes = 0, base_bytes = 0, makespan_s = 0, transferred_bytes = 0;
  double latency_mean_s = 0, latency_p99_s = 0;  // workflow instances', arrival to end
  double relevellings = 0, flows_solved = 0, component_solves = 0;
  double tolerance = 0;  // the max-min tolerance, where one was given
  std::int64_t completed = 0;
};

double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

// One task fanning out to 16 and back into one, 1 GB on every edge, 10 TFLOP a task.
constexpr int kShuffleWidth = 16;
std::string shuffle_workflow() {
  std::string tasks = R"({"name": "split", "work": {"flop": "10 TFLOP"}}, {"name": "join", "work": {"flop": "10 TFLOP"}})";
  std::string edges;
  for (int i = 0; i < kShuffleWidth; ++i) {
    const std::string map = "\"map" + std::to_string(i) + "\"";
    tasks += R"(, {"name": )" + map + R"(, "work": {"flop": "10 TFLOP"}})";
    edges += std::string(i == 0 ? "" : ", ") + R"({"from": "split", "to": )" + map + R"(, "bytes": "1 GB"}, {"from": )" + map +
             R"(, "to": "join", "bytes": "1 GB"})";
  }
  return R"({"tasks": [)" + tasks + R"(], "edges": [)" + edges + "]}";
}

std::string scenario_text(std::int64_t gpus, std::int64_t instances, bool network, bool rails, double rate_per_s,
                          bool shuffle = false, std::int64_t seed = 1, double tolerance = 0) {
  const std::int64_t nodes = (gpus + 7) / 8;
  const std::string workflow =
      shuffle   ? shuffle_workflow()
      : network ? R"({"tasks": [{"name": "a", "work": {"flop": "50 TFLOP"}}, {"name": "b", "work": {"flop": "50 TFLOP"}}],
                   "edges": [{"from": "a", "to": "b", "bytes": "64 MB"}]})"
                : R"({"tasks": [{"name": "t", "work": {"flop": "100 TFLOP"}}]})";
  char rate[64], within[64] = "";
  std::snprintf(rate, sizeof rate, "%.17g /s", rate_per_s);
  if (tolerance > 0) std::snprintf(within, sizeof within, R"("max_min_tolerance": %.17g, )", tolerance);
  return std::string(R"({"name": "scale", "seed": )") + std::to_string(seed) + ", " + within + R"(
    "cluster": {"nodes": [{"type": "hgx-h100-8", "count": )" +
         std::to_string(nodes) + R"(}],
                "fabric": )" + (rails ? R"({"topology": "rail-optimized", "nodes_per_leaf": 16})"
                               : R"({"topology": "fat-tree", "nodes_per_leaf": 16, "oversubscription": 2})") + R"(},
    "workflows": {"w": )" + workflow + R"(},
    "workload": [{"workflow": "w", "arrival": {"process": "poisson", "rate": ")" + rate + R"(", "count": )" +
         std::to_string(instances) + R"(}}],
    "policy": {"name": "fifo"}})";
}

// One run, in this process.
Point run_here(std::int64_t gpus, std::int64_t tasks, bool network, bool rails = false, bool shuffle = false,
               std::int64_t seed = 1, double tolerance = 0) {
  const std::int64_t per_instance = shuffle ? kShuffleWidth + 2 : network ? 2 : 1;
  // A single instance first, alone on the cluster, gives the time one instance's GPUs are busy. The
  // shuffle's fan-out runs side by side, so for it: GPU-seconds, its tasks times one of them alone (a
  // tenth of the compute task's 100 TFLOP).
  const fleetsim::Scenario probe = fleetsim::parse_scenario(
      shuffle ? scenario_text(8, 1, false, rails, 1.0) : scenario_text(8, 1, network, rails, 1.0), "scale.json", ".");
  const double probe_s = fleetsim::simulate(probe).summary.makespan_s;
  const double busy_s = shuffle ? probe_s / 10.0 * static_cast<double>(per_instance) : probe_s;
  // Half the cluster's capacity: each instance keeps about `per_instance` GPU-busy spans of busy_s / per_instance.
  const double rate = 0.5 * static_cast<double>(gpus) / busy_s;
  const std::int64_t instances = std::max<std::int64_t>(1, tasks / per_instance);
  const fleetsim::Scenario sc =
      fleetsim::parse_scenario(scenario_text(gpus, instances, network, rails, rate, shuffle, seed, tolerance), "scale.json", ".");
  Point p;
  p.gpus = gpus;
  p.tasks = instances * per_instance;
  p.network = network;
  p.rails = rails;
  p.shuffle = shuffle;
  p.tolerance = tolerance;
  p.base_bytes = peak_rss_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  const fleetsim::RunResult run = fleetsim::simulate(sc, {.keep_records = false});
  p.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  p.peak_bytes = peak_rss_bytes();
  p.events = static_cast<double>(run.summary.events);
  p.completed = static_cast<std::int64_t>(run.summary.tasks.completed);
  p.makespan_s = run.summary.makespan_s;
  p.latency_mean_s = run.summary.latency_s.mean;
  p.latency_p99_s = run.summary.latency_s.p99;
  p.relevellings = static_cast<double>(run.summary.relevellings);
  p.flows_solved = static_cast<double>(run.summary.flows_solved);
  p.component_solves = static_cast<double>(run.summary.component_solves);
  p.transferred_bytes = run.summary.bytes_transferred;
  return p;
}

// One run, in a child process, so that its peak memory is its own.
Point run_child(std::int64_t gpus, std::int64_t tasks, bool network, bool rails = false, bool shuffle = false,
                double tolerance = 0) {
  int fd[2];
  if (pipe(fd) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    Point p = run_here(gpus, tasks, network, rails, shuffle, 1, tolerance);
    if (write(fd[1], &p, sizeof p) != static_cast<ssize_t>(sizeof p)) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  Point p;
  const ssize_t got = read(fd[0], &p, sizeof p);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof p) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "run of %lld tasks on %lld GPUs failed\n", static_cast<long long>(tasks),
                 static_cast<long long>(gpus));
    std::exit(1);
  }
  return p;
}

void print_header() {
  std::printf("%8s %10s %8s %9s %11s %11s %10s %12s %11s %10s %11s %10s\n", "gpus", "tasks", "traffic", "wall_s", "tasks/s",
              "events/s", "peak_MiB", "B/task", "B/GPU", "moved_GB", "flows/lev", "whole_lev");
}

void print(const Point& p) {
  std::printf("%8lld %10lld %8s %9.3f %11.0f %11.0f %10.0f %12.0f %11.0f %10.1f %11.1f %10.0f\n", static_cast<long long>(p.gpus),
              static_cast<long long>(p.tasks), p.shuffle ? "shuffle" : p.rails ? "rails" : p.network ? "network" : "compute", p.wall_s,
              static_cast<double>(p.tasks) / p.wall_s, p.events / p.wall_s, p.peak_bytes / 1048576.0,
              p.peak_bytes / static_cast<double>(p.tasks), p.peak_bytes / static_cast<double>(p.gpus),
              p.transferred_bytes / 1e9, p.relevellings > 0 ? p.flows_solved / p.relevellings : 0.0, p.component_solves);
  if (p.shuffle) {
    std::printf("         (makespan %.4f s, instance latency mean %.4f s, p99 %.4f s; links shared max-min ", p.makespan_s,
                p.latency_mean_s, p.latency_p99_s);
    p.tolerance > 0 ? std::printf("within a relative %g)\n", p.tolerance) : std::printf("exactly)\n");
  }
  if (p.completed != p.tasks) std::printf("         (only %lld tasks completed)\n", static_cast<long long>(p.completed));
  std::fflush(stdout);
}

// Least-squares slope of log(y) over log(x).
double exponent(const std::vector<double>& x, const std::vector<double>& y) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double n = static_cast<double>(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

// Peak memory = a + b * tasks + c * gpus, least squares (normal equations, Cramer's rule).
void memory_fit(const std::vector<Point>& pts) {
  double m[3][3] = {}, v[3] = {};
  for (const Point& p : pts) {
    const double row[3] = {1, static_cast<double>(p.tasks), static_cast<double>(p.gpus)};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) m[i][j] += row[i] * row[j];
      v[i] += row[i] * p.peak_bytes;
    }
  }
  auto det = [](const double a[3][3]) {
    return a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
           a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
  };
  const double d = det(m);
  double coef[3];
  for (int k = 0; k < 3; ++k) {
    double mk[3][3];
    std::memcpy(mk, m, sizeof m);
    for (int i = 0; i < 3; ++i) mk[i][k] = v[i];
    coef[k] = det(mk) / d;
  }
  std::printf("peak memory ~ %.0f MiB + %.0f B per task + %.0f B per GPU (least squares over the compute runs)\n",
              coef[0] / 1048576.0, coef[1], coef[2]);
}

constexpr const char* kUsage =
    "usage: fleetsim_scale [--quick | --target | GPUS TASKS [compute|network|rails|shuffle [SEED [TOLERANCE]]]]\n"
    "  (no argument)  the whole table: tasks grow on 1,024 GPUs, GPUs grow, with network traffic (a few minutes on one core)\n"
    "  --quick        a smaller table, for a quick look\n"
    "  --target       10,000,000 tasks on 102,400 GPUs\n"
    "  GPUS TASKS     one run; compute (default): one-task workflows; network: two-task chains with 64 MB tensors;\n"
    "                 rails: network on a rail-optimized fabric; shuffle: 1-to-16-to-1 fan-outs with 1 GB edges on\n"
    "                 a rail-optimized fabric, at half the GPUs' capacity (a congested fabric); SEED: the scenario's\n"
    "                 seed (1 unless given; arrivals and so the fabric's load follow it); TOLERANCE: links shared\n"
    "                 max-min within this relative tolerance (the scenario's max_min_tolerance; exact unless given)\n";

// A whole number from 1 up, or nothing.
std::optional<std::int64_t> count_of(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 1) return std::nullopt;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const auto is = [&](int i, const char* word) { return argc > i && std::strcmp(argv[i], word) == 0; };
  if (is(1, "--help") || is(1, "-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (argc >= 3) {
    const auto gpus = count_of(argv[1]), tasks = count_of(argv[2]);
    const bool kind_known = argc == 3 || (argc <= 6 && (is(3, "compute") || is(3, "network") || is(3, "rails") || is(3, "shuffle")));
    const auto seed = argc >= 5 ? count_of(argv[4]) : std::optional<std::int64_t>(1);
    char* end = nullptr;
    const double tolerance = argc == 6 ? std::strtod(argv[5], &end) : 0;
    const bool tolerance_ok = argc < 6 || (end != argv[5] && *end == '\0' && tolerance >= fleetsim::Network::kExactTolerance && tolerance <= 0.01);
    if (!gpus || !tasks || !kind_known || !seed || !tolerance_ok) {
      std::fprintf(stderr,
                   "fleetsim_scale: expected GPUS and TASKS as whole numbers from 1, then compute, network, rails or shuffle, then a seed "
                   "from 1, then a tolerance from 1e-10 to 0.01\n%s",
                   kUsage);
      return 2;
    }
    const bool shuffle = is(3, "shuffle");
    const bool rails = shuffle || is(3, "rails");
    const bool network = rails || is(3, "network");
    print_header();
    print(run_here(*gpus, *tasks, network, rails, shuffle, *seed, tolerance));
    return 0;
  }
  const bool quick = is(1, "--quick");
  const bool target = is(1, "--target");
  if (argc == 2 && !quick && !target) {
    std::fprintf(stderr, "fleetsim_scale: unknown argument \"%s\"\n%s", argv[1], kUsage);
    return 2;
  }
  print_header();
  if (target) {
    print(run_child(102'400, 10'000'000, false));
    return 0;
  }
  const std::int64_t k = quick ? 10 : 1;  // quick: a tenth of the tasks, at most 10k GPUs
  std::vector<Point> compute;

  std::printf("-- tasks grow, 1,024 GPUs\n");
  std::vector<double> tx, ty;
  for (std::int64_t tasks : {250'000, 500'000, 1'000'000, 2'000'000}) {
    const Point p = run_child(1'024, tasks / k, false);
    print(p);
    compute.push_back(p);
    tx.push_back(static_cast<double>(p.tasks));
    ty.push_back(p.wall_s);
  }
  const std::int64_t fixed_tasks = 100'000 / k;
  std::printf("-- GPUs grow, %lld tasks\n", static_cast<long long>(fixed_tasks));
  std::vector<double> gx, gy;
  for (std::int64_t gpus : {1'024, 10'240, 102'400}) {
    if (quick && gpus > 10'240) continue;
    const Point p = run_child(gpus, fixed_tasks, false);
    print(p);
    compute.push_back(p);
    gx.push_back(static_cast<double>(p.gpus));
    gy.push_back(p.wall_s);
  }
  std::printf("-- with network traffic (two-task chains, 64 MB edges; rails: on a rail-optimized fabric)\n");
  print(run_child(1'024, 1'000'000 / k, true));
  print(run_child(10'240, fixed_tasks, true));
  print(run_child(10'240, fixed_tasks, true, true));
  std::printf("-- congested fabric (1-to-16-to-1 shuffles, 1 GB edges, rail-optimized; 2,000 and 5,000 instances)\n");
  for (std::int64_t instances : {2'000, 5'000}) print(run_child(1'024, instances / k * (kShuffleWidth + 2), true, true, true));
  for (std::int64_t instances : {2'000, 5'000}) print(run_child(1'024, instances / k * (kShuffleWidth + 2), true, true, true, 1e-4));
  std::printf("wall time ~ tasks^%.2f (1,024 GPUs); ~ GPUs^%.2f (%lld tasks)\n", exponent(tx, ty), exponent(gx, gy),
              static_cast<long long>(fixed_tasks));
  memory_fit(compute);
  return 0;
}
