// Writers of a run's results: the human summary, the machine-readable JSON summary, and the
// task-level trace as CSV and JSON. Also the catalog listing. Output is deterministic: the same
// run gives the same bytes.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <span>
#include <string>

#include "fleetsim/calibrate.hpp"
#include "fleetsim/catalog.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/compare.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/measured_kernels.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/nccl_tests.hpp"
#include "fleetsim/output.hpp"
#include "fleetsim/plan.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/serving.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/trace_diff.hpp"
#include "fleetsim/training.hpp"

namespace fleetsim {

// A run directory, as `fleetsim simulate --out` makes it: summary.json, trace.csv, trace.json, decisions.csv,
// links.csv, link_timeline.csv, vram_timeline.csv, cost_timeline.csv, trace.perfetto.json, report.html,
// and `manifest` (how the run was made) as run.json, all or nothing (write_output_directory). Returns the
// names written, in that order.
std::vector<std::string> run_directory_names();  // what write_run_directory writes, before the run
std::vector<std::string> write_run_directory(const std::filesystem::path& dir, const Scenario& scenario, const RunResult& run,
                                             const std::string& manifest);

void write_summary_text(std::ostream& out, const Scenario& scenario, const Summary& summary);
// Each task of the run: where and when it ran, what it waited for, and its compute split into
// compute-bound, memory-bound and fixed time. For a run of a few workflows.
void write_task_breakdown_text(std::ostream& out, const Scenario& scenario, const RunResult& run);
std::string summary_json(const Summary& summary);  // pretty-printed, ends with a newline

void write_trace_csv(std::ostream& out, const Scenario& scenario, const RunResult& run);
void write_trace_json(std::ostream& out, const Scenario& scenario, const RunResult& run);
// Every link: class, capacity, bytes carried, mean utilization over the run.
void write_links_csv(std::ostream& out, const RunResult& run);
// Every change of a link's load (needs RunOptions::record_link_samples).
void write_link_timeline_csv(std::ostream& out, const RunResult& run);
// The scheduling decisions in time order, an audit log: placed (with the GPUs), preempted, failed
// by the policy, stopped by a failure, with the reason (also needs record_link_samples).
void write_decisions_csv(std::ostream& out, const Scenario& scenario, const RunResult& run);
// The billing rate at every change and the cost accrued, ending at the run's end (needs record_link_samples).
void write_cost_timeline_csv(std::ostream& out, const RunResult& run);
// Every change of a GPU's VRAM use (also needs record_link_samples).
void write_vram_timeline_csv(std::ostream& out, const RunResult& run);
// Chrome/Perfetto trace-event JSON (ui.perfetto.dev opens it): a track per GPU with each task's
// phases, VRAM counters per GPU and load counters per link (counters need record_link_samples).
void write_perfetto_json(std::ostream& out, const Scenario& scenario, const RunResult& run);

void write_catalog_text(std::ostream& out, const Catalog& catalog);

// A plan as a schedule: per GPU, its tasks in start order with predicted start and end.
void write_schedule_text(std::ostream& out, const Scenario& scenario, const RunResult& plan);
// Predicted against measured: task errors and makespans; per task as CSV.
void write_trace_diff_text(std::ostream& out, const TraceDiff& diff);
// A CPU profile's figures measured before and after a validation's real runs (check_cpu_profile):
// how far the machine is from its calibration, beside the errors.
void write_profile_check_text(std::ostream& out, std::span<const ProfileFigure> before, std::span<const ProfileFigure> after);
// The errors' summary and every task's pair; with a profile check, its figures too.
std::string trace_diff_json(const TraceDiff& diff, std::span<const ProfileFigure> before = {}, std::span<const ProfileFigure> after = {});
void write_trace_diff_csv(std::ostream& out, const Scenario& scenario, const Trace& measured, const TraceDiff& diff);
// Predicted against measured task durations as a self-contained SVG scatter on log-log axes.
void write_trace_diff_svg(std::ostream& out, const std::string& title, const TraceDiff& diff);

// A calibration profile: the file `--profile` reads, and a readable table of its points and fits.
std::string profile_json(const Profile& profile);
void write_profile_text(std::ostream& out, const Profile& profile);
// An nccl-tests log against the calibrated model, size by size, and the fitted link.
void write_nccl_tests_fit_text(std::ostream& out, const NcclTestsLog& log, CollectiveOp op, const NcclTestsFit& fit);

// One training iteration: time, throughput, MFU, bubble, communication and memory per stage; a
// sweep over one setting (dp, tp, pp, micro, global) as a scaling table.
void write_training_text(std::ostream& out, const TrainingJob& job, const TrainingStep& step);
// A serving run: the deployment, its KV cache, throughput, TTFT/TPOT/E2E percentiles, SLO verdicts,
// goodput, and what was assumed.
void write_serving_text(std::ostream& out, const ServingDeployment& d, const ServingResult& r);
std::string serving_json(const ServingDeployment& d, const ServingResult& r);
// The page of a serving run: the verdicts, the summary, TTFT and TPOT distributions with their
// targets, sequences and KV cache over time.
void write_serving_html(std::ostream& out, const ServingDeployment& d, const ServingResult& r);
// A serving plan: per rate, each line's fewest replicas meeting the SLOs, and the cheapest of them.
void write_serving_plan_text(std::ostream& out, const ServingPlan& plan, const ServingPlanResult& r);
std::string serving_plan_json(const ServingPlan& plan, const ServingPlanResult& r);
std::string training_json(const TrainingJob& job, const TrainingStep& step);
void write_training_sweep_text(std::ostream& out, const std::string& key, const std::vector<TrainingJob>& jobs,
                               const std::vector<TrainingStep>& steps);
// A search over parallelisms: how many were searched, refused, did not fit; the fastest `top` ranked.
void write_training_search_text(std::ostream& out, const TrainingJob& base, const TrainingSearch& search, std::size_t top, double wall_s);
std::string training_search_json(const TrainingJob& base, const TrainingSearch& search, std::size_t top);

// A capacity plan: the recommendation per load, every point and the frontiers as text; the same as
// JSON and CSV; and an HTML page with the frontier chart (SVG) and the table.
void write_plan_text(std::ostream& out, const PlanSpec& spec, const PlanResult& result);
std::string plan_json(const PlanSpec& spec, const PlanResult& result);
void write_plan_csv(std::ostream& out, const PlanResult& result);
void write_plan_html(std::ostream& out, const PlanSpec& spec, const PlanResult& result);

// One self-contained HTML page per result, charts as inline SVG, no network needed. A run: summary,
// per-GPU Gantt chart, GPU utilization, queue length and VRAM over time, latency CDF per tenant and
// a link-utilization heatmap (timelines need RunOptions::record_link_samples). A comparison: each
// metric's mean and 95% confidence interval per policy.
void write_run_report_html(std::ostream& out, const Scenario& scenario, const RunResult& run);
void write_comparison_html(std::ostream& out, const std::string& scenario, const std::vector<PolicyRuns>& results);
// A validation: the predicted-vs-measured scatter and the error table (as write_trace_diff_text gives it).
void write_validation_html(std::ostream& out, const std::string& title, const std::string& table, const TraceDiff& diff);

// A policy comparison: one row per metric, one column per policy, mean +- 95% CI half-width.
void write_comparison_text(std::ostream& out, const std::string& scenario, unsigned seeds,
                           const std::vector<PolicyRuns>& results);
void write_comparison_csv(std::ostream& out, const std::vector<PolicyRuns>& results);  // one row per run
std::string comparison_json(const std::string& scenario, const std::vector<PolicyRuns>& results);

void write_policies_text(std::ostream& out);
std::string policies_json();

// nccl-tests' table layout: size, count, type, redop, root, then the algorithm, protocol and channels
// chosen, the time (us) and NCCL's own estimate, algbw and busbw (GB/s = 1e9 B/s). `notes` are printed
// as comment lines (what the model sees and what it assumes).
void write_collective_table(std::ostream& out, CollectiveOp op, std::size_t ranks, const std::string& where,
                            const std::vector<CollectivePoint>& points, const std::vector<std::string>& notes);
// One kernel's estimate and its breakdown.
void write_kernel_estimate(std::ostream& out, const GpuType& gpu, const KernelCall& call, Dtype dtype, const KernelEstimate& e,
                           const std::vector<std::string>& notes);
std::string kernel_estimate_json(const GpuType& gpu, const KernelCall& call, Dtype dtype, const KernelEstimate& e);
// One model step on a GPU type: its time, where it goes by kernel class and by layer, FLOP and the
// achieved share of peak.
void write_model_step(std::ostream& out, const GpuType& gpu, const Architecture& arch, const StepShape& shape, Dtype dtype, const StepEstimate& step,
                      const std::vector<std::string>& notes);
std::string model_step_json(const GpuType& gpu, const Architecture& arch, const StepShape& shape, Dtype dtype, const StepEstimate& step);
// Predicted against measured kernels: median, p90, median signed error (bias) and worst, by class and by
// operation (the measured name's last part).
void write_kernel_comparison(std::ostream& out, const GpuType& gpu, const std::vector<MeasuredKernel>& measured,
                             const std::vector<KernelEstimate>& predicted, const std::vector<std::string>& notes);
std::string kernel_comparison_json(const GpuType& gpu, const std::vector<MeasuredKernel>& measured, const std::vector<KernelEstimate>& predicted,
                                   const std::vector<std::string>& notes);

// How far predictions are from measurements (points and measured rows size by size).
struct CollectiveErrors {
  std::size_t sizes = 0;
  double median_abs = 0;
  double worst = 0;  // signed, the largest in magnitude
  double worst_bytes = 0;
};
CollectiveErrors collective_errors(const std::vector<CollectivePoint>& points, const MeasuredCollective& measured);
// The prediction beside each measured row, the error per row, and the median and worst |error|.
void write_collective_comparison(std::ostream& out, CollectiveOp op, std::size_t ranks, const std::string& where,
                                 const std::vector<CollectivePoint>& points, const MeasuredCollective& measured,
                                 const std::vector<std::string>& notes);
std::string collective_json(CollectiveOp op, std::size_t ranks, const std::string& where, const std::vector<CollectivePoint>& points,
                            const std::vector<std::string>& notes, const MeasuredCollective* measured = nullptr);
std::string catalog_json(const Catalog& catalog);

}  // namespace fleetsim
