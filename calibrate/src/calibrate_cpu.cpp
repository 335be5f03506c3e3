#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/cpu_kernels.hpp"
#include "fleetsim/fit.hpp"
#include "fleetsim/units.hpp"
#include "measure.hpp"

namespace fleetsim {
namespace {

using Clock = std::chrono::steady_clock;
using measure::fit_points;
using measure::median_of;
using measure::utc_now;

// An untimed run to warm the caches the point before left cold, then a timed one, each begun together
// with the other workers'.
double timed_run(const std::function<void()>& run, std::barrier<>& sync) {
  sync.arrive_and_wait();
  run();
  sync.arrive_and_wait();
  const auto t0 = Clock::now();
  run();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// (slowest - fastest) / median of a point's timed runs.
double spread_of(const std::vector<double>& times, double median) {
  const auto [fastest, slowest] = std::minmax_element(times.begin(), times.end());
  return times.empty() || median <= 0 ? 0 : (*slowest - *fastest) / median;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

}  // namespace

void fit_cpu_profile(Profile& profile, unsigned workers) {
  // The model charges a task's FLOP and bytes at a rate with no fixed part (launches are measured on
  // their own), so those fits go through the origin; a fixed part fitted here would be dropped by the
  // model and leave its rate too high. Copies run over links, which do have a latency.
  const AlphaBeta f32 = fit_points(profile.measurements, "gemm", Dtype::fp32, fit_rate);
  const AlphaBeta f64 = fit_points(profile.measurements, "gemm", Dtype::fp64, fit_rate);
  const AlphaBeta stream = fit_points(profile.measurements, "stream", Dtype::fp32, fit_rate);
  const AlphaBeta alone = fit_points(profile.measurements, "stream-alone", Dtype::fp32, fit_rate);
  const AlphaBeta copy = fit_points(profile.measurements, "memcpy", Dtype::fp32, fit_alpha_beta);
  const auto launch = std::find_if(profile.measurements.begin(), profile.measurements.end(), [](const Measurement& m) { return m.kernel == "launch"; });
  if (launch == profile.measurements.end()) throw std::invalid_argument("a CPU calibration needs its \"launch\" point");
  // A worker alone streams at its own bandwidth; all of them together share what the machine gives.
  // With one worker there is nothing to share: no bus.
  GpuCalibration core{.id = "cpu-core", .peak_flop_per_s = {}, .memory_bandwidth_Bps = workers > 1 ? alone.rate : stream.rate,
                      .launch_overhead_s = launch->seconds};
  if (workers > 1) core.shared_memory_bandwidth_Bps = std::min(stream.rate * workers, alone.rate * workers);
  // Likewise a worker alone computes at its own rate and all of them together at the "gemm" points'
  // rate each: the pool is what they deliver together in workers' worth. One fp32 GEMM alone sets the
  // ratio, taken for fp64 too, so that every worker on GEMMs gets the fitted rates of either.
  double alone_over_all = 1;
  if (workers > 1) {
    alone_over_all = std::max(1.0, fit_points(profile.measurements, "gemm-alone", Dtype::fp32, fit_rate).rate / f32.rate);
    core.compute_pool_devices = workers / alone_over_all;
  }
  core.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] = f32.rate * alone_over_all;
  core.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp64)] = f64.rate * alone_over_all;
  profile.gpus.push_back(core);
  profile.links.push_back({.id = "host-memcpy", .bandwidth_Bps = copy.rate, .latency_s = copy.alpha_s});
}

namespace {

constexpr double kTile = 2.0 * cpu::Scratch::kGemmTile * cpu::Scratch::kGemmTile * cpu::Scratch::kGemmTile;

struct Point {
  std::string kernel;
  Dtype dtype;
  double size;
};

unsigned workers_or_all(unsigned workers) { return workers > 0 ? workers : std::max(1u, std::thread::hardware_concurrency()); }

// Runs `plan` on `workers` threads, `repeats` passes over it, and keeps each point's median.
std::vector<Measurement> measure_points(const std::vector<Point>& plan, int repeats, unsigned workers,
                                        const std::function<void(std::size_t, std::size_t)>& progress) {
  std::vector<Measurement> measured;
  // Every point runs on `workers` threads at once, started together, because that is how the backend
  // runs a scenario: its devices share the machine's memory bandwidth, caches and clock boost, and a
  // core measured alone is faster than one of two busy cores (on a 2-core VM, the validation graph's
  // memory-bound tasks ran 15-30% slower than a lone-thread calibration predicted). Each thread keeps
  // the median of its runs; the point records the median over threads. The runs of a point are spread
  // over the whole calibration, one per pass over the plan, so that every point sees the same moments
  // of a machine whose speed drifts (a shared VM's GEMM rate moved by 2x within seconds): the fitted
  // figures then describe one machine, not several.
  std::size_t copy_bytes = 0;  // the copies' buffers, touched before any point is timed
  for (const Point& pt : plan) {
    if (pt.kernel == "memcpy") copy_bytes = std::max(copy_bytes, static_cast<std::size_t>(pt.size));
  }
  std::vector<std::vector<std::vector<double>>> runs(plan.size(), std::vector<std::vector<double>>(workers));  // point, worker
  std::barrier<> sync(static_cast<std::ptrdiff_t>(workers));
  std::atomic<std::uint64_t> leader_runs{0};  // worker 0's runs of the point it runs beside the others' work so far
  {
    std::vector<std::jthread> threads;
    for (unsigned w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        cpu::Scratch scratch;
        std::vector<std::byte> from(copy_bytes, std::byte{1}), to(copy_bytes, std::byte{0});
        const auto runner = [&](const Point& pt) {
          std::function<void()> run;
          if (pt.kernel == "gemm") run = [&] { scratch.gemm(pt.size, pt.dtype); };
          if (pt.kernel == "gemm-square") run = [&] { scratch.gemm_square(static_cast<int>(pt.size), pt.dtype); };
          if (pt.kernel == "stream") run = [&] { scratch.stream(pt.size); };
          // Worker 0 runs the point; the others wait (alone), or run the other kernel in small pieces
          // until worker 0 is done (beside).
          std::function<void()> mine, others_piece;
          if (pt.kernel == "stream-alone" || pt.kernel == "stream-beside-gemm") mine = [&] { scratch.stream(pt.size); };
          if (pt.kernel == "gemm-alone" || pt.kernel == "gemm-beside-stream") mine = [&] { scratch.gemm(pt.size, pt.dtype); };
          if (pt.kernel == "stream-beside-gemm") others_piece = [&] { scratch.gemm(kTile, Dtype::fp32); };
          if (pt.kernel == "gemm-beside-stream") others_piece = [&] { scratch.stream(12e6); };
          if (mine && !others_piece) run = w == 0 ? mine : [] {};
          // The closures outlive this call: they hold their own copies of `mine` and `others_piece`.
          if (mine && others_piece) {
            if (w == 0) {
              run = [&leader_runs, mine] {
                mine();
                leader_runs.fetch_add(1);
              };
            } else {
              // worker 0 cannot start the point before this worker reaches the barrier: the count is settled
              run = [&leader_runs, others_piece, seen = leader_runs.load()]() mutable {
                while (leader_runs.load() == seen) others_piece();
                seen = leader_runs.load();
              };
            }
          }
          if (pt.kernel == "memcpy") run = [&] { std::memcpy(to.data(), from.data(), static_cast<std::size_t>(pt.size)); };
          if (pt.kernel == "launch") {
            run = [&] {
              scratch.gemm(2.0 * cpu::Scratch::kGemmTile * cpu::Scratch::kGemmTile, Dtype::fp32);
              scratch.stream(3 * sizeof(float));
            };
          }
          return run;
        };
        for (int pass = 0; pass < repeats; ++pass) {
          for (std::size_t i = 0; i < plan.size(); ++i) {
            runs[i][w].push_back(timed_run(runner(plan[i]), sync));
            if (w == 0 && progress) progress(pass * plan.size() + i + 1, repeats * plan.size());
          }
        }
      });
    }
  }
  for (std::size_t i = 0; i < plan.size(); ++i) {
    // Points where worker 0 runs alone or beside the others' work keep its time; the others, the median
    // over workers of each one's median, and the spread of all their runs.
    const bool one = plan[i].kernel.ends_with("-alone") || plan[i].kernel.find("-beside-") != std::string::npos;
    std::vector<double> medians, all;
    for (unsigned w = 0; w < (one ? 1u : workers); ++w) {
      medians.push_back(median_of(runs[i][w]));
      all.insert(all.end(), runs[i][w].begin(), runs[i][w].end());
    }
    const double seconds = median_of(medians);
    measured.push_back({plan[i].kernel, plan[i].dtype, plan[i].size, seconds, one ? "0" : "", spread_of(all, seconds)});
  }

  return measured;
}

}  // namespace

Profile calibrate_cpu(const CalibrateOptions& options) {
  std::vector<Point> plan;
  for (Dtype d : {Dtype::fp32, Dtype::fp64}) {
    for (double tiles : {1.0, 2.5, 4.0, 8.0, 16.5, 32.0}) plan.push_back({"gemm", d, tiles * kTile});
    for (int n : {32, 64, 128, 256, 512, 1024}) plan.push_back({"gemm-square", d, static_cast<double>(n)});
  }
  // Sizes past the caches, where tasks' traffic, weights and tensors live; smaller ones would fit a
  // cache's bandwidth, not memory's.
  for (double mb : {32.0, 128.0, 256.0, 512.0}) plan.push_back({"stream", Dtype::fp32, mb * 1e6});
  // The memory bus the workers share (sim/src/node_shares.hpp): one worker streaming while the others
  // wait, and one streaming while the others run GEMMs, the mix the bus model must get right.
  for (double mb : {128.0, 256.0, 512.0}) plan.push_back({"stream-alone", Dtype::fp32, mb * 1e6});
  plan.push_back({"stream-beside-gemm", Dtype::fp32, 256e6});
  // The same for the compute they share: one worker's GEMM while the others wait, and while they stream
  // (the "gemm" points have every worker on GEMMs).
  for (Dtype d : {Dtype::fp32, Dtype::fp64}) plan.push_back({"gemm-alone", d, 8 * kTile});
  plan.push_back({"gemm-alone", Dtype::fp32, 32 * kTile});
  plan.push_back({"gemm-beside-stream", Dtype::fp32, 8 * kTile});
  for (double mb : {8.0, 32.0, 128.0, 256.0}) plan.push_back({"memcpy", Dtype::fp32, mb * 1e6});
  // A launch: one call of each kernel with next to no work (one GEMM column, one triad element).
  plan.push_back({"launch", Dtype::fp32, 0});

  const unsigned workers = workers_or_all(options.workers);
  Profile p;
  p.measurements = measure_points(plan, options.repeats, workers, options.progress);
  fit_cpu_profile(p, workers);

  p.provenance = {{"backend", "cpu"},
                  {"device", cpu_model_name()},
                  {"cores", std::to_string(std::thread::hardware_concurrency())},
                  {"date", utc_now()},
                  {"compiler", __VERSION__},
                  {"eigen", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                std::to_string(EIGEN_MINOR_VERSION)},
                  {"repeats", std::to_string(options.repeats)},
                  {"workers", std::to_string(workers)}};
  return p;
}

std::vector<ProfileFigure> check_cpu_profile(const Profile& profile, int repeats) {
  const auto core = std::find_if(profile.gpus.begin(), profile.gpus.end(), [](const GpuCalibration& g) { return g.id == "cpu-core"; });
  const bool complete = core != profile.gpus.end() && core->peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)] && core->memory_bandwidth_Bps;
  if (!complete) return {};
  // The points run on as many workers as the calibration had, so that each is measured as it was.
  unsigned workers = 0;
  for (const auto& [key, value] : profile.provenance) {
    if (key == "workers") workers = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 10));
  }
  workers = workers_or_all(workers);
  const double fp32 = *core->peak_flop_per_s[static_cast<std::size_t>(Dtype::fp32)];
  const double memory = *core->memory_bandwidth_Bps;
  // The rates the simulator gives each mix: a worker alone gets the peak and the memory bandwidth; every
  // worker at once, pool / workers of the peak and its share of the bus (profiles without them: the same).
  const double pool = std::min<double>(workers, core->compute_pool_devices.value_or(workers));
  const std::optional<double> bus = core->shared_memory_bandwidth_Bps;
  struct Check {
    const char* kernel;  // the calibration's point, fp32
    double size;
    const char* name;
    double rate;
  };
  std::vector<Check> checks;
  if (workers > 1) checks.push_back({"gemm-alone", 32 * kTile, "fp32 GEMM, one worker alone", fp32});
  checks.push_back({"gemm", 32 * kTile, workers > 1 ? "fp32 GEMM, every worker" : "fp32 GEMM", fp32 * pool / workers});
  if (workers > 1) checks.push_back({"stream-alone", 256e6, "stream, one worker alone", memory});
  checks.push_back({"stream", 256e6, workers > 1 ? "stream, every worker" : "stream", bus ? std::min(memory, *bus / workers) : memory});
  std::vector<Point> plan;
  for (const Check& c : checks) plan.push_back({c.kernel, Dtype::fp32, c.size});
  const std::vector<Measurement> measured = measure_points(plan, repeats, workers, nullptr);
  std::vector<ProfileFigure> figures;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const Dimension unit = plan[i].kernel.starts_with("gemm") ? Dimension::flop_rate : Dimension::bandwidth;
    figures.push_back({.name = checks[i].name, .unit = unit, .profile = checks[i].rate, .measured = measured[i].size / measured[i].seconds});
  }
  return figures;
}

}  // namespace fleetsim
