// Whole job traces replayed under every policy: wall time, jobs per second and peak memory, per policy.
//
// The trace is synthetic and Philly-shaped (not real data): Poisson submissions, gang sizes of 1 to 64
// GPUs with most jobs on one GPU, and log-normal durations with a heavy tail (median 10 minutes, mean
// about two hours, the longest weeks). Submissions come at `load` times the cluster's capacity, so queues
// grow long in busy spells: that is where a policy that rescans its queue every round slows down.
// Each run is a child process with a time limit, so its peak memory is its own and a run that would
// take hours is reported as such instead of waited for.
//
//   fleetsim_traces                         Philly's size: 82,247 jobs on 512 GPUs, every policy
//   fleetsim_traces --jobs 1000000 --gpus 4096 --policies fifo,las
//   options: --jobs N  --gpus G (a multiple of 8)  --load R (0.9)  --limit S (600)  --policies a,b  --seed K
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "fleetsim/policy.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/simulation.hpp"

namespace {

struct Options {
  std::int64_t jobs = 82'247;  // the jobs of Philly's public cluster job log
  std::int64_t gpus = 512;
  double load = 0.9;
  int limit_s = 600;
  std::uint64_t seed = 1;
  std::vector<std::string> policies;
};

struct Result {
  double wall_s = 0, peak_bytes = 0, mean_jct_s = 0, p95_jct_s = 0, utilization = 0;
  std::uint64_t events = 0, completed = 0, preempted = 0;
};

// The trace CSV, written once for every policy's run; returns the load it offers (GPU-seconds asked over
// GPU-seconds available until the last submission).
double write_trace(const Options& o, const std::string& path) {
  std::mt19937_64 rng(o.seed);
  // Gang sizes and their shares (chosen, Philly-like: mostly 1 GPU, a long tail of large gangs).
  const std::vector<int> sizes{1, 2, 4, 8, 16, 32, 64};
  const std::vector<double> weights{70, 10, 9, 7, 2.5, 1, 0.5};
  std::discrete_distribution<int> size_of(weights.begin(), weights.end());
  std::lognormal_distribution<double> duration_of(std::log(600.0), 2.0);
  // Mean GPU-seconds per job, to pace submissions at `load` of capacity.
  double mean_gpus = 0, total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) mean_gpus += sizes[i] * weights[i], total += weights[i];
  mean_gpus /= total;
  const double cap_s = 30 * 86400.0;  // durations capped at 30 days
  const double mean_duration_s = 600.0 * std::exp(2.0);  // lognormal mean, before the cap (close enough)
  const double rate = o.load * static_cast<double>(o.gpus) / (mean_gpus * mean_duration_s);
  std::exponential_distribution<double> gap(rate);
  std::ofstream out(path);
  out << "submit_time,gpus,duration\n";
  double t = 0, asked = 0;
  char line[96];
  for (std::int64_t j = 0; j < o.jobs; ++j) {
    t += gap(rng);
    const int gpus = std::min<int>(sizes[static_cast<std::size_t>(size_of(rng))], static_cast<int>(o.gpus));
    const double d = std::min(cap_s, std::max(1.0, std::round(duration_of(rng))));
    std::snprintf(line, sizeof line, "%.1f,%d,%.0f\n", t, gpus, d);
    out << line;
    asked += gpus * d;
  }
  return asked / (t * static_cast<double>(o.gpus));
}

Result run_here(const Options& o, const std::string& trace, const std::string& policy) {
  const std::string text = R"({"name": "trace-scale", "seed": 1,
    "cluster": {"nodes": [{"type": "hgx-h100-8", "count": )" + std::to_string(o.gpus / 8) + R"(}]},
    "workload": [{"trace": ")" + trace + R"(", "reference_gpu": "h100-sxm"}],
    "policy": {"name": ")" + policy + R"("}})";
  const fleetsim::Scenario sc = fleetsim::parse_scenario(text, "trace-scale.json", ".");
  const auto t0 = std::chrono::steady_clock::now();
  const fleetsim::RunResult run = fleetsim::simulate(sc);
  Result r;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  r.peak_bytes = static_cast<double>(u.ru_maxrss) * 1024.0;
  r.events = run.summary.events;
  r.completed = run.summary.workflows.completed;
  r.preempted = run.summary.tasks_preempted + run.summary.tasks_stopped;
  r.mean_jct_s = run.summary.latency_s.mean;
  r.p95_jct_s = run.summary.latency_s.p95;
  r.utilization = run.summary.gpu_utilization;
  return r;
}

// One run in a child process, killed at the time limit; nullopt-like: wall_s < 0 when it did not finish.
Result run_child(const Options& o, const std::string& trace, const std::string& policy) {
  int fd[2];
  if (pipe(fd) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    alarm(static_cast<unsigned>(o.limit_s));
    const Result r = run_here(o, trace, policy);
    if (write(fd[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
    _exit(0);
  }
  close(fd[1]);
  Result r;
  const ssize_t got = read(fd[0], &r, sizeof r);
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) r.wall_s = -1;
  return r;
}

}  // namespace

constexpr const char* kUsage =
    "usage: fleetsim_traces [--jobs N] [--gpus G (a multiple of 8)] [--load R (0.9)] [--limit S (600)] [--policies a,b] [--seed K]\n"
    "  a synthetic Philly-shaped job trace replayed under each policy (default: every one), one row each\n";

int main(int argc, char** argv) {
  Options o;
  if (argc % 2 == 0) {  // a lone word: --help, or an option without its value
    const bool help = std::strcmp(argv[argc - 1], "--help") == 0 || std::strcmp(argv[argc - 1], "-h") == 0;
    if (!help) std::fprintf(stderr, "fleetsim_traces: %s needs a value\n", argv[argc - 1]);
    std::fputs(kUsage, help ? stdout : stderr);
    return help ? 0 : 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--jobs") o.jobs = std::atoll(value.c_str());
    else if (key == "--gpus") o.gpus = std::atoll(value.c_str());
    else if (key == "--load") o.load = std::atof(value.c_str());
    else if (key == "--limit") o.limit_s = std::atoi(value.c_str());
    else if (key == "--seed") o.seed = std::strtoull(value.c_str(), nullptr, 10);
    else if (key == "--policies") {
      for (std::size_t b = 0, e; b <= value.size(); b = e + 1) {
        e = value.find(',', b);
        if (e == std::string::npos) e = value.size();
        o.policies.push_back(value.substr(b, e - b));
      }
    } else {
      std::fprintf(stderr, "fleetsim_traces: unknown option %s\n%s", key.c_str(), kUsage);
      return 2;
    }
  }
  if (o.jobs < 1 || o.gpus < 8 || o.gpus % 8 != 0 || o.load <= 0 || o.limit_s < 1) {
    std::fprintf(stderr, "expected --jobs >= 1, --gpus a multiple of 8, --load > 0, --limit >= 1\n");
    return 2;
  }
  if (o.policies.empty()) {
    for (const fleetsim::PolicyInfo& p : fleetsim::policy_registry()) o.policies.push_back(p.name);
  }
  const std::string trace = (std::filesystem::temp_directory_path() / ("fleetsim-trace-" + std::to_string(getpid()) + ".csv")).string();
  const double offered = write_trace(o, trace);
  std::printf("%lld jobs on %lld GPUs, offered load %.2f (asked for %.2f), seed %llu, limit %d s per run\n", static_cast<long long>(o.jobs),
              static_cast<long long>(o.gpus), offered, o.load, static_cast<unsigned long long>(o.seed), o.limit_s);
  std::printf("%-14s %9s %10s %11s %9s %12s %12s %6s %10s\n", "policy", "wall_s", "jobs/s", "events/s", "peak_MiB", "mean_jct_h",
              "p95_jct_h", "util", "stopped");
  for (const std::string& policy : o.policies) {
    const Result r = run_child(o, trace, policy);
    if (r.wall_s < 0) {
      std::printf("%-14s %9s  (did not finish within %d s)\n", policy.c_str(), "-", o.limit_s);
    } else {
      std::printf("%-14s %9.2f %10.0f %11.0f %9.0f %12.2f %12.2f %6.2f %10llu\n", policy.c_str(), r.wall_s,
                  static_cast<double>(r.completed) / r.wall_s, static_cast<double>(r.events) / r.wall_s, r.peak_bytes / 1048576.0,
                  r.mean_jct_s / 3600, r.p95_jct_s / 3600, r.utilization, static_cast<unsigned long long>(r.preempted));
      if (r.completed != static_cast<std::uint64_t>(o.jobs)) std::printf("               (only %llu jobs completed)\n", static_cast<unsigned long long>(r.completed));
    }
    std::fflush(stdout);
  }
  std::filesystem::remove(trace);
  return 0;
}
