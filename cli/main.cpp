// fleetsim: the one command-line front end. Parse, call the libraries, print. Errors thrown by the
// libraries become messages and exit codes here and nowhere else.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <cerrno>
#include <cmath>
#include <charconv>
#include <limits>
#include <optional>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <utility>

#include "distributed.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/nccl.hpp"
#include "fleetsim/compare.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/import.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/units.hpp"
#include "fleetsim/calibrate.hpp"
#include "fleetsim/profile.hpp"
#include "fleetsim/realexec.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"
#include "fleetsim/suggest.hpp"

namespace {

enum ExitCode { kOk = 0, kFailure = 1, kBadInput = 2, kBadPolicy = 3 };

bool quiet = false;  // --quiet: no progress lines or notes on stderr


struct SimulateArgs {
  std::string scenario;
  std::string cluster;  // NODE_TYPE[:COUNT]: `scenario` is one workflow, run once on that cluster
  std::optional<std::uint64_t> seed;
  std::string out_dir;
  std::string report;
  std::vector<std::string> sets;
  std::vector<std::string> plugins;
  std::string profile;
  bool json = false;
};

struct RunArgs {
  std::string scenario;
  std::string backend = "cpu";
  std::optional<std::uint64_t> seed;
  double work_scale = 1;
  double max_seconds = 600;
  std::string out_dir;
  std::vector<std::string> sets;
  std::string profile;
  std::string report;
  bool validate = false;  // a validation report: profile required, every file plus a scatter chart
  std::uint64_t repeat = 1;  // real runs of the plan; errors against their median
  bool dry_run = false;
  bool json = false;
};

struct CompareArgs {
  std::string scenario;
  std::string policies;
  unsigned seeds = 5;
  unsigned threads = 0;
  std::vector<std::string> sets;
  std::vector<std::string> plugins;
  std::string profile;
  std::string out_dir;
  std::string report;
  bool json = false;
};

struct CollectiveArgs {
  std::string op = "all-reduce";
  bool op_given = false;
  std::string cluster;
  int gpus = 8;
  bool gpus_given = false;
  std::string algo = "auto";
  std::string proto = "auto";
  std::string nccl;
  std::string measured;
  std::string min = "8";
  std::string max = "8G";
  double factor = 2;
  std::string profile;
  bool json = false;
};

struct KernelsArgs {
  std::string gpu, gemm, dtype = "bf16", measured, constants, fit, model, shape, runtime, attention = "flash2";
  bool json = false;
};

struct NcclTestsArgs {
  std::string file, node_type, op, algo = "auto", out;
  bool json = false;
};

// "8", "64K", "8G" as nccl-tests reads them (binary multiples), a number of bytes ("1e9"), or a size with a unit ("1 GB").
double parse_size(const std::string& option, const std::string& text) {
  try {
    double value = 0;
    if (!text.empty() && std::string("KMG").find(text.back()) != std::string::npos &&
        text.find_first_not_of("0123456789") == text.size() - 1 && text.size() > 1) {
      const double scale = text.back() == 'K' ? 1024.0 : text.back() == 'M' ? 1048576.0 : 1073741824.0;
      value = fleetsim::parse_number(std::string_view(text).substr(0, text.size() - 1)).value_or(0) * scale;
    } else if (!text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos) {
      const auto bytes = fleetsim::parse_number(text);  // bytes, a number alone ("8", "1e9")
      if (!bytes || *bytes != std::floor(*bytes)) throw fleetsim::UnitError("expected a whole number of bytes from 1 to 1e18, found \"" + text + "\"");
      value = *bytes;
    } else {
      value = fleetsim::parse_quantity(text, fleetsim::Dimension::bytes);
    }
    // At most an exabyte: beyond it every time in the table is overflow, not a prediction.
    if (!(value >= 1) || value > 1e18) throw fleetsim::UnitError("expected a size from 1 B up to 1 EB, found \"" + text + "\"");
    return value;
  } catch (const fleetsim::UnitError& e) {
    throw fleetsim::InputError({fleetsim::Problem{option, "", std::string(e.what()) + " (or 8, 64K, 1M, 8G as nccl-tests reads them)"}});
  }
}

std::vector<fleetsim::ScenarioEdit> parse_sets(const std::vector<std::string>& sets) {
  std::vector<fleetsim::ScenarioEdit> edits;
  for (const std::string& s : sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || s.empty() || s[0] != '/') {
      throw fleetsim::InputError({fleetsim::Problem{"--set", "", "expected /json/pointer=value, found \"" + s + "\""}});
    }
    edits.push_back({s.substr(0, eq), s.substr(eq + 1)});
  }
  return edits;
}

// One workflow (a ComfyUI graph, a WfCommons instance or a fleetsim workflow) arriving once on
// COUNT nodes of a catalog node type: the scenario behind `simulate FILE --cluster NODE[:COUNT]`.
fleetsim::Scenario one_run_scenario(const std::string& workflow, const std::string& cluster, const std::vector<fleetsim::ScenarioEdit>& edits) {
  const auto colon = cluster.find(':');
  const std::string type = cluster.substr(0, colon);
  int count = 1;
  if (colon != std::string::npos) {
    const std::string n = cluster.substr(colon + 1);
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
    if (ec != std::errc() || end != n.data() + n.size() || count < 1) {
      throw fleetsim::InputError({fleetsim::Problem{"--cluster", "", "expected NODE_TYPE or NODE_TYPE:COUNT with a count of 1 or more, found \"" + cluster + "\""}});
    }
  }
  fleetsim::cluster_of(type, count);  // an unknown node type is named here, with the known ones
  const std::filesystem::path path = std::filesystem::absolute(workflow);
  const nlohmann::json doc{{"name", path.stem().string()},
                           {"cluster", {{"nodes", {{{"type", type}, {"count", count}}}}}},
                           {"workflows", {{path.stem().string(), path.string()}}},
                           {"workload", {{{"workflow", path.stem().string()}, {"arrival", {{"process", "once"}}}}}}};
  return fleetsim::parse_scenario(doc.dump(), workflow + " on " + cluster, path.parent_path().string(), edits);
}

// The scenario as every command reads it: edits applied, then a calibration profile if one is given.
fleetsim::Scenario read_scenario(const std::string& path, const std::vector<std::string>& sets, const std::string& profile,
                                 const std::string& cluster = "") {
  fleetsim::Scenario scenario = cluster.empty() ? fleetsim::load_scenario(path, parse_sets(sets)) : one_run_scenario(path, cluster, parse_sets(sets));
  if (!profile.empty() && fleetsim::apply_profile(scenario.cluster, fleetsim::load_profile(profile)) == 0 && !quiet) {
    std::cerr << "fleetsim: note: " << profile << " calibrates no GPU or link type of " << path << "\n";
  }
  for (const std::string& b : fleetsim::borrowed_kernel_constants(scenario.cluster, scenario.workflows, !scenario.serving.empty())) {
    if (!quiet) std::cerr << "fleetsim: note: model steps on " << b << "\n";
  }
  for (const fleetsim::Workflow& wf : scenario.workflows) {
    if (quiet || wf.assumptions.empty()) continue;
    std::cerr << "fleetsim: note: workflow " << wf.id << " (from " << wf.file << ") assumes:\n";
    for (const std::string& a : wf.assumptions) std::cerr << "  " << a << "\n";
  }
  return scenario;
}

// Refuses, before any work, an --out directory or --report file that could not be written.
void check_outputs(const std::string& out_dir, const std::vector<std::string>& names, const std::string& report) {
  if (!out_dir.empty()) fleetsim::check_output_directory(out_dir, names, "--out");
  if (!report.empty()) fleetsim::check_output_file(report, "--report");
}

// An imported workflow on stdout, or written to `out` with a one-line report.
int emit_workflow(const fleetsim::Workflow& wf, const std::string& out) {
  const std::string json = fleetsim::workflow_json(wf);
  if (out.empty()) {
    std::cout << json;
  } else {
    fleetsim::write_output_file(out, "the workflow", [&](std::ostream& o) { o << json; });
    std::cout << "wrote " << wf.tasks.size() << " tasks and " << wf.edges.size() << " edges to " << out << "\n";
  }
  if (!quiet && !wf.assumptions.empty()) {
    std::cerr << "fleetsim: note: what the import assumed (check it):\n";
    for (const std::string& a : wf.assumptions) std::cerr << "  " << a << "\n";
  }
  return kOk;
}

// A progress line with an ETA on stderr, on a terminal only: logs and pipes stay clean.
std::function<void(std::size_t, std::size_t)> progress_line(std::string unit) {
  if (quiet || isatty(fileno(stderr)) == 0) return {};
  return [unit = std::move(unit), started = std::chrono::steady_clock::now()](std::size_t done, std::size_t total) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double eta = elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    std::fprintf(stderr, "\r  %zu/%zu %s, %.0f s left   ", done, total, unit.c_str(), eta);
    if (done == total) std::fprintf(stderr, "\r%50s\r", "");
  };
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : text + ",") {
    if (c != ',') {
      part += c;
    } else if (!part.empty()) {
      parts.push_back(part);
      part.clear();
    }
  }
  return parts;
}

int run_compare(const CompareArgs& args) {
  for (const std::string& plugin : args.plugins) fleetsim::load_policy_plugin(plugin);
  const fleetsim::Scenario scenario = read_scenario(args.scenario, args.sets, args.profile);
  std::vector<std::string> policies = split_commas(args.policies);
  if (policies.empty()) {
    for (const fleetsim::PolicyInfo& p : fleetsim::policy_registry()) policies.push_back(p.name);
  }
  const std::vector<std::string> out_names{"comparison.csv", "comparison.json", "report.html"};
  check_outputs(args.out_dir, out_names, args.report);
  const unsigned threads = args.threads > 0 ? args.threads : std::max(1u, std::thread::hardware_concurrency());
  fleetsim::find_policies(policies);  // an unknown name said once, before the ranks start
  // Under mpirun the ranks share the runs; rank 0 writes what they found.
  const Distributed mpi = start_distributed();
  const StopDistributed stop;
  if (!quiet && args.seeds > 1 && fleetsim::seed_use(scenario).empty()) {
    std::cerr << "fleetsim: note: " << args.scenario << " draws nothing at random (every seed gives the same run): one run per policy\n";
  }
  const auto results = fleetsim::compare_policies(scenario, policies, args.seeds, threads, mpi.rank == 0 ? progress_line("runs") : nullptr,
                                                  {.rank = mpi.rank, .ranks = mpi.ranks, .exchange = mpi.exchange});
  if (mpi.rank != 0) return kOk;  // every rank holds the runs; one writes them
  if (!args.out_dir.empty()) {
    fleetsim::write_output_directory(args.out_dir, {{out_names[0], "the runs", [&](std::ostream& o) { fleetsim::write_comparison_csv(o, results); }},
                                                    {out_names[1], "the comparison", [&](std::ostream& o) { o << fleetsim::comparison_json(scenario.name, results); }},
                                                    {out_names[2], "the report", [&](std::ostream& o) { fleetsim::write_comparison_html(o, scenario.name, results); }}});
  }
  if (!args.report.empty()) {
    fleetsim::write_output_file(args.report, "the report", [&](std::ostream& o) { fleetsim::write_comparison_html(o, scenario.name, results); });
  }
  if (args.json) {
    std::cout << fleetsim::comparison_json(scenario.name, results);
  } else {
    fleetsim::write_comparison_text(std::cout, scenario.name, static_cast<unsigned>(results.empty() ? 0 : results.front().runs.size()), results);
  }
  return kOk;
}

int run_collective(const CollectiveArgs& args) {
  auto bad = [](const std::string& option, std::string message) { return fleetsim::InputError({fleetsim::Problem{option, "", std::move(message)}}); };
  auto op = fleetsim::parse_collective_op(args.op);
  const auto algo = fleetsim::parse_collective_algo(args.algo);
  const auto proto = fleetsim::parse_collective_proto(args.proto);
  if (!op) throw bad("--op", "unknown collective \"" + args.op + "\" (expected all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all or send-recv)");
  if (!algo) throw bad("--algo", "unknown algorithm \"" + args.algo + "\" (expected auto, ring, tree, nvls, nvls-tree, pat or direct)");
  if (!proto) throw bad("--proto", "unknown protocol \"" + args.proto + "\" (expected auto, LL, LL128 or Simple)");
  int ranks = args.gpus;
  std::optional<fleetsim::MeasuredCollective> measured;
  if (!args.measured.empty()) {
    measured = fleetsim::load_measured_collective(args.measured);
    if (measured->op && args.op_given && *measured->op != *op) {
      throw bad("--op", args.op + " was asked for, but " + args.measured + " measures " + std::string(fleetsim::collective_op_name(*measured->op)));
    }
    if (measured->op) op = measured->op;
    if (measured->ranks > 0 && args.gpus_given && static_cast<std::size_t>(args.gpus) != measured->ranks) {
      throw bad("--gpus", std::to_string(args.gpus) + " GPUs were asked for, but " + args.measured + " ran on " + std::to_string(measured->ranks));
    }
    if (measured->ranks > 0) ranks = static_cast<int>(measured->ranks);
  }
  // Planned flow by flow, a collective over more ranks takes minutes (8,192 ranks on a fat-tree: 70 s), so
  // past this it is refused before any cluster is built.
  constexpr int kMaxRanks = 16384;
  if (ranks > kMaxRanks) throw bad("--gpus", "expected at most 16,384 ranks (a collective over 8,192 takes about a minute to plan), found " + std::to_string(ranks));
  if (*op == fleetsim::CollectiveOp::all_to_all && static_cast<std::size_t>(ranks) > fleetsim::kMaxAllToAllRanks) {
    throw bad("--gpus", "expected at most " + std::to_string(fleetsim::kMaxAllToAllRanks) + " ranks for an all-to-all (a flow from each to every other), found " + std::to_string(ranks));
  }
  // A node type gets as many nodes as the GPUs need; anything else is a file.
  fleetsim::ClusterSpec spec;
  if (const fleetsim::NodeType* node = fleetsim::Catalog::builtin().node(args.cluster)) {
    spec = fleetsim::cluster_of(args.cluster, std::max(1, (ranks + node->gpus - 1) / node->gpus));
  } else if (std::filesystem::exists(args.cluster) || args.cluster.find('/') != std::string::npos || args.cluster.ends_with(".json")) {
    spec = fleetsim::load_cluster(args.cluster);  // a file, or what looks like one: a missing one says so
  } else {
    spec = fleetsim::cluster_of(args.cluster, 1);  // reports the unknown node type
  }
  if (!args.profile.empty() && fleetsim::apply_profile(spec, fleetsim::load_profile(args.profile)) == 0) {
    std::cerr << "fleetsim: note: " << args.profile << " calibrates no GPU or link type of " << args.cluster << "\n";
  }
  const auto constants = args.nccl.empty() ? fleetsim::builtin_nccl_constants()
                                           : fleetsim::parse_nccl_constants(fleetsim::read_text_file(args.nccl), args.nccl);
  const fleetsim::Cluster cluster(spec);
  if (ranks < 1 || static_cast<std::uint32_t>(ranks) > cluster.gpu_count()) {
    throw bad("--gpus", "expected 1 to " + std::to_string(cluster.gpu_count()) + " GPUs for this cluster, found " + std::to_string(ranks));
  }
  const fleetsim::Topology topology(cluster, spec.fabric);
  std::vector<fleetsim::GpuId> gpus;
  for (int i = 0; i < ranks; ++i) gpus.push_back(fleetsim::make_id<fleetsim::GpuId>(i));
  std::vector<std::string> notes;
  if (const auto comm = fleetsim::nccl_comm(cluster, gpus)) {
    const fleetsim::NcclModel model(*comm, constants);
    notes.push_back(model.describe());
    for (const std::string& a : model.assumptions()) notes.push_back("assumed: " + a);
  } else {
    notes.push_back("not GPUs that NCCL runs: the collective follows the links alone (each flow at link speed, route latency per step)");
  }
  auto refused = [&](const std::invalid_argument& e) { return bad(args.proto != "auto" ? "--proto" : "--algo", e.what()); };
  std::vector<fleetsim::CollectivePoint> points;
  try {
    if (measured) {
      for (const auto& [bytes, seconds] : measured->rows) {
        points.push_back(fleetsim::collective_point(cluster, topology, *op, *algo, gpus, bytes, *proto, constants));
      }
    } else {
      const double min = parse_size("--min", args.min), max = parse_size("--max", args.max);
      if (max < min) throw bad("--max", "expected a size no smaller than --min");
      if (!(args.factor > 1)) throw bad("--factor", "expected a number above 1");
      if (std::log(max / min) / std::log(args.factor) > 10000) throw bad("--factor", "expected at most 10,000 sizes between --min and --max");
      points = fleetsim::sweep_collective(cluster, topology, *op, *algo, gpus, min, max, args.factor, *proto, constants);
    }
  } catch (const std::invalid_argument& e) {
    throw refused(e);
  }
  if (args.json) {
    std::cout << fleetsim::collective_json(*op, gpus.size(), args.cluster, points, notes, measured ? &*measured : nullptr);
  } else if (measured) {
    fleetsim::write_collective_comparison(std::cout, *op, gpus.size(), args.cluster, points, *measured, notes);
  } else {
    fleetsim::write_collective_table(std::cout, *op, gpus.size(), args.cluster, points, notes);
  }
  return kOk;
}

// "width=1024,height=1024,batch=2": a model step's shape.
fleetsim::StepShape parse_step_shape(const std::string& text) {
  fleetsim::StepShape shape;
  bool patches_given = false;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const double value = eq == std::string::npos ? -1 : fleetsim::parse_number(std::string_view(item).substr(eq + 1)).value_or(-1);
    bool good = value >= 0 && value <= 1e7;
    double* field = key == "batch" ? &shape.batch : key == "width" ? &shape.width : key == "height" ? &shape.height
                  : key == "frames" ? &shape.frames : key == "tokens" ? &shape.tokens : key == "context" ? &shape.context
                  : key == "tile" ? &shape.tiles.size : key == "tile_overlap" ? &shape.tiles.overlap
                  : key == "tile_frames" ? &shape.tiles.frames : key == "tile_frame_overlap" ? &shape.tiles.frame_overlap
                  : key == "sequence" ? &shape.sequence_parallel : key == "ring" ? &shape.ring_degree : key == "cfg" ? &shape.cfg_parallel
                  : key == "pipefusion" ? &shape.pipeline_stages : key == "patches" ? &shape.patches : nullptr;
    const bool degree = field == &shape.sequence_parallel || field == &shape.ring_degree || field == &shape.cfg_parallel || field == &shape.pipeline_stages ||
                        field == &shape.patches;
    if (degree) good = good && value >= 1 && value == std::floor(value) && (field != &shape.cfg_parallel || value <= 2);
    if (field == nullptr || !good) {
      throw fleetsim::InputError({fleetsim::Problem{"--shape", "", "expected key=value pairs of batch, width, height, frames, tokens, context, a "
                                                                 "VAE's tile, tile_overlap, tile_frames, tile_frame_overlap in latent units "
                                                                 "(numbers from 0 to 1e7), and one GPU's share of a parallel step: sequence, ring, "
                                                                 "cfg (1 or 2), pipefusion, patches (whole numbers from 1), such as "
                                                                 "width=1024,height=1024,batch=2; found \"" + item + "\""}});
    }
    *field = value;
    patches_given = patches_given || field == &shape.patches;
  }
  if (!patches_given) shape.patches = shape.pipeline_stages;  // as a workflow's default: a band a stage
  return shape;
}

// The built-in catalog's GPU type an option names, or an error that lists them.
const fleetsim::GpuType& catalog_gpu(const std::string& option, const std::string& id) {
  const fleetsim::GpuType* gpu = fleetsim::Catalog::builtin().gpu(id);
  if (gpu != nullptr) return *gpu;
  std::string known;
  for (const auto& [name, g] : fleetsim::Catalog::builtin().gpus()) known += (known.empty() ? "" : ", ") + name;
  throw fleetsim::InputError({fleetsim::Problem{option, "",
                                                "unknown GPU type \"" + id + "\" (expected one of " + known + ")" + fleetsim::did_you_mean_key(id, fleetsim::Catalog::builtin().gpus())}});
}

int run_kernels(const KernelsArgs& args) {
  auto bad = [](const std::string& option, std::string message) { return fleetsim::InputError({fleetsim::Problem{option, "", std::move(message)}}); };
  const fleetsim::GpuType* gpu = &catalog_gpu("--gpu", args.gpu);
  const auto dtype = fleetsim::parse_dtype(args.dtype);
  if (!dtype) throw bad("--dtype", "expected fp64, fp32, tf32, bf16, fp16, fp8 or int8, found \"" + args.dtype + "\"");
  if (gpu->peak_for(*dtype) <= 0) throw bad("--dtype", args.gpu + " has no peak for " + args.dtype);
  auto constants = args.constants.empty() ? fleetsim::builtin_kernel_constants()
                                          : fleetsim::parse_kernel_constants(fleetsim::read_text_file(args.constants), args.constants);
  if (!args.fit.empty()) {
    if (args.measured.empty()) throw bad("--fit", "needs --measured FILE, the kernels to fit to");
    fleetsim::check_output_file(args.fit, "--fit");
    constants = fleetsim::fit_kernel_constants(*gpu, *dtype, fleetsim::load_measured_kernels(args.measured), *constants,
                                               "fitted to " + args.measured + " by fleetsim kernels --fit (" + args.gpu + ", " + args.dtype + ")");
    fleetsim::write_output_file(args.fit, "the fitted constants", [&](std::ostream& o) { o << fleetsim::kernel_constants_json(*constants); });
  }
  const fleetsim::KernelModel model(*gpu, constants);
  const auto attention = fleetsim::parse_attention_backend(args.attention);
  if (!attention) throw bad("--attention", "expected " + fleetsim::attention_backend_choices() + ", found \"" + args.attention + "\"");
  std::vector<std::string> notes;
  if (const std::string guess = model.guess(); !guess.empty()) notes.push_back("assumed: " + gpu->id + " (" + std::string(fleetsim::gpu_arch_name(gpu->arch)) + "): " + guess);
  if (!args.model.empty()) {
    const fleetsim::Architecture* arch = fleetsim::Catalog::builtin().architecture(args.model);
    if (arch == nullptr) {
      std::string known;
      for (const auto& [id, a] : fleetsim::Catalog::builtin().architectures()) known += (known.empty() ? "" : ", ") + id;
      throw bad("--model", "unknown architecture \"" + args.model + "\" (expected one of " + known + ")" +
                           fleetsim::did_you_mean_key(args.model, fleetsim::Catalog::builtin().architectures()));
    }
    fleetsim::StepShape shape = parse_step_shape(args.shape);
    if (shape.tiles.size > 0 && shape.tiles.frames == 0) shape.tiles.frames = fleetsim::default_tile_frames(*arch);  // as a workflow's "tiles" default
    if (const auto problem = fleetsim::tiles_problem(*arch, shape.tiles)) {
      const std::string key = problem->field == "size" ? "tile" : "tile_" + problem->field;  // the --shape key of the Tiles field
      throw bad("--shape", key + ": " + problem->message);
    }
    if (const auto problem = fleetsim::parallel_problem(*arch, shape)) throw bad("--shape", problem->field + ": " + problem->message);
    if (shape.gpus() > 1) {
      notes.push_back("one GPU of a gang of " + std::to_string(static_cast<long long>(shape.gpus())) +
                      (shape.pipeline_stages > 1 ? ": the first PipeFusion stage's kernels, " + std::to_string(static_cast<long long>(shape.patches)) +
                                                       " bands a step (a run adds its warm-up steps and the pipeline's fill)"
                                                 : ": its share of the step") +
                      "; the gang's exchanges are not in these times");
    }
    if (args.runtime.empty()) {
      shape.runtime = fleetsim::default_runtime(*arch);
      notes.push_back("assumed: runs " + std::string(fleetsim::runtime_name(shape.runtime)) + " (--runtime says otherwise)");
    } else if (auto runtime = fleetsim::parse_runtime(args.runtime)) {
      shape.runtime = *runtime;
    } else {
      throw bad("--runtime", "expected " + fleetsim::runtime_choices() + ", found \"" + args.runtime + "\"");
    }
    if (const auto problem = fleetsim::runtime_problem(*arch, shape.runtime)) throw bad("--runtime", problem->message);
    shape.attention = *attention;
    if (const std::string guess = model.attention_guess(shape.attention); !guess.empty()) {
      notes.push_back("assumed: " + guess);
    } else if (shape.attention == fleetsim::AttentionBackend::cudnn) {
      notes.push_back("attention on cuDNN's kernels: " + std::string(fleetsim::gpu_arch_name(gpu->arch)) + "'s cudnn_attention in models/kernels.json, with its sources");
    }
    const fleetsim::StepEstimate step = fleetsim::estimate_step(*arch, shape, model, *dtype);
    if (args.json) {
      std::cout << fleetsim::model_step_json(*gpu, *arch, shape, *dtype, step);
    } else {
      fleetsim::write_model_step(std::cout, *gpu, *arch, shape, *dtype, step, notes);
    }
    return kOk;
  }
  if (args.measured.empty() == args.gemm.empty()) throw bad("--gemm", "expected one of --gemm M,N,K, --measured FILE or --model ARCHITECTURE");
  if (!args.gemm.empty()) {
    fleetsim::KernelCall call;
    double dims[3] = {0, 0, 0};
    std::stringstream in(args.gemm);
    std::string cell;
    int i = 0;
    for (; i < 3 && std::getline(in, cell, ','); ++i) {
      dims[i] = fleetsim::parse_number(cell).value_or(0);
      if (!(dims[i] >= 1) || dims[i] > 1e9) i = 99;
    }
    if (i != 3 || std::getline(in, cell, ',')) throw bad("--gemm", "expected three sizes from 1 to 1e9, M,N,K, such as 4096,4096,4096, found \"" + args.gemm + "\"");
    call.m = dims[0];
    call.n = dims[1];
    call.k = dims[2];
    const fleetsim::KernelEstimate e = model.estimate(call, *dtype);
    if (args.json) {
      std::cout << fleetsim::kernel_estimate_json(*gpu, call, *dtype, e);
    } else {
      fleetsim::write_kernel_estimate(std::cout, *gpu, call, *dtype, e, notes);
    }
    return kOk;
  }
  const auto measured = fleetsim::load_measured_kernels(args.measured);
  const bool cudnn_rows = std::any_of(measured.begin(), measured.end(), [](const fleetsim::MeasuredKernel& m) { return m.call.backend == fleetsim::AttentionBackend::cudnn; });
  if (const std::string guess = model.attention_guess(fleetsim::AttentionBackend::cudnn); cudnn_rows && !guess.empty()) notes.push_back("assumed: " + guess);
  std::vector<fleetsim::KernelEstimate> predicted;
  for (const auto& m : measured) predicted.push_back(fleetsim::estimate_measured(model, m, *dtype));
  if (args.json) {
    std::cout << fleetsim::kernel_comparison_json(*gpu, measured, predicted, notes);
  } else {
    fleetsim::write_kernel_comparison(std::cout, *gpu, measured, predicted, notes);
  }
  return kOk;
}

// A profile written where --out says, with the fleetsim that made it in its provenance.
void save_profile(fleetsim::Profile& profile, const std::string& out) {
  profile.provenance.emplace_back("fleetsim", FLEETSIM_VERSION);
  fleetsim::write_output_file(out, "the profile", [&](std::ostream& o) { o << fleetsim::profile_json(profile); });
}

int run_import_nccl_tests(const NcclTestsArgs& args) {
  const fleetsim::NcclTestsLog log = fleetsim::load_nccl_tests_log(args.file);
  std::optional<fleetsim::CollectiveOp> op = log.op;
  if (!args.op.empty()) {
    op = fleetsim::parse_collective_op(args.op);
    if (!op) throw fleetsim::InputError({fleetsim::Problem{"--op", "", "unknown collective \"" + args.op + "\""}});
  }
  if (!op) throw fleetsim::InputError({fleetsim::Problem{args.file, "", "the log does not name its test; say which collective ran with --op"}});
  const auto algo = fleetsim::parse_collective_algo(args.algo);
  if (!algo) {
    throw fleetsim::InputError({fleetsim::Problem{"--algo", "", "expected auto (NCCL's choice), ring, tree, nvls, nvls-tree, pat or direct, found \"" + args.algo + "\""}});
  }
  if (fleetsim::Catalog::builtin().node(args.node_type) == nullptr) {
    throw fleetsim::InputError({fleetsim::Problem{"--node-type", "", "unknown node type \"" + args.node_type + "\" (fleetsim catalog lists them)"}});
  }
  fleetsim::NcclTestsFit fit = fleetsim::fit_nccl_tests(log, *op, *algo, args.node_type);
  if (!args.out.empty()) save_profile(fit.profile, args.out);
  if (args.json) {
    std::cout << fleetsim::profile_json(fit.profile);
    return kOk;
  }
  fleetsim::write_nccl_tests_fit_text(std::cout, log, *op, fit);
  if (!args.out.empty()) std::cout << "wrote " << args.out << "\n";
  return kOk;
}

struct TrainArgs {
  std::string file, sweep;
  bool json = false, search = false;
  std::size_t top = 10;
  unsigned threads = 0;
};

// "dp=1,8,64": the job once per value of one setting.
int run_train(const TrainArgs& args) {
  const fleetsim::TrainingJob job = fleetsim::load_training_job(args.file);
  if (args.search) {
    if (!args.sweep.empty()) throw fleetsim::InputError({fleetsim::Problem{"--search", "", "searches every setting; expected no --sweep beside it"}});
    const auto started = std::chrono::steady_clock::now();
    // Under mpirun the ranks share the configurations; rank 0 writes what they found.
    const Distributed mpi = start_distributed();
    const StopDistributed stop;
    const fleetsim::TrainingSearch search =
        fleetsim::search_training(job, args.threads, mpi.rank == 0 ? progress_line("configurations") : nullptr,
                                  {.rank = mpi.rank, .ranks = mpi.ranks, .exchange = mpi.exchange, .keep = args.top});
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (mpi.rank != 0) return kOk;
    if (args.json) {
      std::cout << fleetsim::training_search_json(job, search, args.top);
    } else {
      fleetsim::write_training_search_text(std::cout, job, search, args.top, wall_s);
      if (mpi.ranks > 1) std::cout << "(the configurations shared by " << mpi.ranks << " MPI ranks)\n";
    }
    return kOk;
  }
  if (args.sweep.empty()) {
    const fleetsim::TrainingStep step = fleetsim::simulate_training_step(job);
    if (args.json) {
      std::cout << fleetsim::training_json(job, step);
    } else {
      fleetsim::write_training_text(std::cout, job, step);
    }
    // A configuration that does not fit is refused, after what it would need is shown.
    if (const auto oom = fleetsim::out_of_memory(job, step.counts); oom && oom->host) {
      std::cerr << args.file << ": /optimizer/offload: a node of stage " << oom->stage << " needs " << fleetsim::format_quantity(oom->needed_bytes, fleetsim::Dimension::bytes)
                << " of host memory for its GPUs' offloaded optimizer state and gradients" << (job.offload_parameters ? " and weights" : "") << ", more than its " << fleetsim::format_quantity(oom->vram_bytes, fleetsim::Dimension::bytes)
                << (job.offload_parameters     ? ": expected more nodes to shard the optimizer and the weights over (more DP), or the weights on the GPU (no offload_parameters)\n"
                    : job.zero_stage() >= 3    ? ": expected more nodes to shard the optimizer over (more DP)\n"
                                               : ": expected a smaller offload share (cpu_adam torch), or more DP over more nodes to shard the optimizer\n");
      return kBadInput;
    } else if (oom) {
      std::cerr << args.file << ": /parallel: stage " << oom->stage << " needs " << fleetsim::format_quantity(oom->needed_bytes, fleetsim::Dimension::bytes)
                << " a GPU (weights, gradients, optimizer state, activations), " << fleetsim::format_quantity(oom->needed_bytes - oom->vram_bytes, fleetsim::Dimension::bytes)
                << " more than its GPU's " << fleetsim::format_quantity(oom->vram_bytes, fleetsim::Dimension::bytes)
                << ": " << fleetsim::memory_advice(job) << "\n";
      return kBadInput;
    }
    return kOk;
  }
  const std::size_t eq = args.sweep.find('=');
  const std::string key = args.sweep.substr(0, eq);
  const fleetsim::SweepSetting* setting = eq == std::string::npos ? nullptr : fleetsim::sweep_setting(key);
  if (setting == nullptr) {
    const std::vector<fleetsim::SweepSetting>& settings = fleetsim::sweep_settings();
    std::string keys;
    for (std::size_t i = 0; i < settings.size(); ++i) keys += std::string(i == 0 ? "" : i + 1 == settings.size() ? " or " : ", ") + std::string(settings[i].key) + "=";
    throw fleetsim::InputError({fleetsim::Problem{"--sweep", "", "expected " + keys + " and values such as dp=1,8,64, found \"" + args.sweep + "\""}});
  }
  std::vector<fleetsim::TrainingJob> jobs;
  std::vector<fleetsim::TrainingStep> steps;
  for (const std::string& text : split_commas(args.sweep.substr(eq + 1))) {
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
      throw fleetsim::InputError({fleetsim::Problem{"--sweep", "", "expected positive integers, found \"" + text + "\""}});
    }
    fleetsim::TrainingJob j = job;
    j.*setting->field = value;
    // With more replicas the global batch grows with them, so each replica keeps its work.
    if (key == "dp") j.global_batch = job.global_batch / job.dp * value;
    try {
      fleetsim::check_training_job(j);
    } catch (const fleetsim::InputError& e) {
      // The job file is fine; the value swept into it is what breaks a rule.
      std::vector<fleetsim::Problem> problems;
      for (const fleetsim::Problem& p : e.problems()) problems.push_back({"--sweep", "", key + "=" + text + ": " + p.message + " (at " + p.pointer + ")"});
      throw fleetsim::InputError(std::move(problems));
    }
    steps.push_back(fleetsim::simulate_training_step(j));
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) throw fleetsim::InputError({fleetsim::Problem{"--sweep", "", "expected at least one value"}});
  fleetsim::write_training_sweep_text(std::cout, key, jobs, steps);
  return kOk;
}

struct PlanArgs {
  std::string file, out_dir, report, profile;
  unsigned threads = 0;
  bool exhaustive = false, json = false;
};

// A plan file naming a serving deployment: the cheapest deployment meeting its SLOs at each rate.
int run_serving_plan(const PlanArgs& args) {
  for (const auto& [given, option] : {std::pair{!args.report.empty(), "--report"}, {!args.profile.empty(), "--profile"}, {args.exhaustive, "--exhaustive"}}) {
    if (given) throw fleetsim::InputError({fleetsim::Problem{option, "", "is for cluster plans; a serving plan takes --threads, --out and --json"}});
  }
  const fleetsim::ServingPlan plan = fleetsim::load_serving_plan(args.file);
  check_outputs(args.out_dir, {"plan.json"}, "");
  const auto started = std::chrono::steady_clock::now();
  const fleetsim::ServingPlanResult result = fleetsim::plan_serving(plan, args.threads);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!args.out_dir.empty()) {
    fleetsim::write_output_directory(args.out_dir, {{"plan.json", "the plan", [&](std::ostream& o) { o << fleetsim::serving_plan_json(plan, result); }}});
  }
  if (args.json) {
    std::cout << fleetsim::serving_plan_json(plan, result);
    return kOk;
  }
  fleetsim::write_serving_plan_text(std::cout, plan, result);
  std::printf("\n%zu points in %.1f s\n", result.points.size(), wall_s);
  return kOk;
}

int run_plan(const PlanArgs& args) {
  if (fleetsim::is_serving_plan(fleetsim::read_text_file(args.file))) return run_serving_plan(args);
  const fleetsim::PlanSpec spec = fleetsim::load_plan(args.file);
  const std::optional<fleetsim::Profile> profile = args.profile.empty() ? std::nullopt : std::optional(fleetsim::load_profile(args.profile));
  const auto started = std::chrono::steady_clock::now();
  const std::vector<std::string> out_names{"plan.json", "plan.csv", "plan.html"};
  check_outputs(args.out_dir, out_names, args.report);
  const Distributed mpi = start_distributed();
  const StopDistributed stop;
  const fleetsim::PlanResult result = fleetsim::run_plan(spec, {.threads = args.threads,
                                                                .exhaustive = args.exhaustive,
                                                                .progress = mpi.rank == 0 ? progress_line("points") : nullptr,
                                                                .rank = mpi.rank,
                                                                .ranks = mpi.ranks,
                                                                .exchange = mpi.exchange,
                                                                .profile = profile ? &*profile : nullptr});
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (mpi.rank != 0) return kOk;  // every rank holds the result; one writes it
  if (!args.out_dir.empty()) {
    fleetsim::write_output_directory(args.out_dir, {{out_names[0], "the plan", [&](std::ostream& o) { o << fleetsim::plan_json(spec, result); }},
                                                    {out_names[1], "the points", [&](std::ostream& o) { fleetsim::write_plan_csv(o, result); }},
                                                    {out_names[2], "the chart", [&](std::ostream& o) { fleetsim::write_plan_html(o, spec, result); }}});
  }
  if (!args.report.empty()) fleetsim::write_output_file(args.report, "the report", [&](std::ostream& o) { fleetsim::write_plan_html(o, spec, result); });
  if (args.json) {
    std::cout << fleetsim::plan_json(spec, result);
    return kOk;
  }
  fleetsim::write_plan_text(std::cout, spec, result);
  std::printf("\n%zu points in %.1f s%s\n", result.points.size(), wall_s, mpi.ranks > 1 ? (" on " + std::to_string(mpi.ranks) + " MPI ranks").c_str() : "");
  if (!args.out_dir.empty()) std::cout << "wrote plan.json, plan.csv, plan.html to " << args.out_dir << "\n";
  return kOk;
}

// What `fleetsim report RUN_DIR` needs to make the run again: the simulation is deterministic, so
// the same scenario, edits, profile, plugins and seed give the same run.
std::string run_manifest(const SimulateArgs& args, std::uint64_t seed) {
  const auto absolute = [](const std::string& p) { return p.empty() ? p : std::filesystem::absolute(p).lexically_normal().string(); };
  nlohmann::ordered_json plugins = nlohmann::ordered_json::array();
  for (const std::string& p : args.plugins) plugins.push_back(absolute(p));
  const nlohmann::ordered_json j{{"command", "simulate"}, {"scenario", absolute(args.scenario)}, {"set", args.sets}, {"seed", seed},
                                 {"profile", absolute(args.profile)}, {"policy_plugins", plugins}};
  return j.dump(1) + "\n";
}

// A run directory's report, made again from its run.json.
int run_report(const std::string& run_dir, std::string out) {
  const std::filesystem::path manifest = std::filesystem::path(run_dir) / "run.json";
  const auto bad = [&](const std::string& pointer, const std::string& why) {
    return fleetsim::InputError({fleetsim::Problem{manifest.string(), pointer, why}});
  };
  if (!std::filesystem::exists(manifest)) throw bad("", "not found: `fleetsim simulate SCENARIO --out DIR` writes it");
  const nlohmann::json j = nlohmann::json::parse(fleetsim::read_text_file(manifest.string()), nullptr, false);
  if (j.is_discarded() || !j.is_object()) throw bad("", "expected a JSON object");
  SimulateArgs args;
  const auto text = [&](const char* key, std::string& into) {
    if (!j.contains(key) || !j[key].is_string()) throw bad(std::string("/") + key, "expected a string");
    into = j[key].get<std::string>();
  };
  const auto texts = [&](const char* key, std::vector<std::string>& into) {
    if (!j.contains(key) || !j[key].is_array()) throw bad(std::string("/") + key, "expected an array of strings");
    for (const auto& v : j[key]) {
      if (!v.is_string()) throw bad(std::string("/") + key, "expected an array of strings");
      into.push_back(v.get<std::string>());
    }
  };
  text("scenario", args.scenario);
  text("profile", args.profile);
  texts("set", args.sets);
  texts("policy_plugins", args.plugins);
  if (!j.contains("seed") || !j["seed"].is_number_unsigned()) throw bad("/seed", "expected a non-negative integer");
  args.seed = j["seed"].get<std::uint64_t>();
  if (out.empty()) out = (std::filesystem::path(run_dir) / "report.html").string();
  fleetsim::check_output_file(out, "--out");
  for (const std::string& plugin : args.plugins) fleetsim::load_policy_plugin(plugin);
  const fleetsim::Scenario scenario = read_scenario(args.scenario, args.sets, args.profile);
  const fleetsim::RunResult run = fleetsim::simulate(scenario, {.seed = args.seed, .record_link_samples = true});
  fleetsim::write_output_file(out, "the report", [&](std::ostream& o) { fleetsim::write_run_report_html(o, scenario, run); });
  std::cout << "wrote " << out << "\n";
  return kOk;
}

int run_simulate(const SimulateArgs& args) {
  for (const std::string& plugin : args.plugins) fleetsim::load_policy_plugin(plugin);
  const fleetsim::Scenario scenario = read_scenario(args.scenario, args.sets, args.profile, args.cluster);
  check_outputs(args.out_dir, fleetsim::run_directory_names(), args.report);
  const bool timelines = !args.out_dir.empty() || !args.report.empty();
  // The records of every task only where a file or the task breakdown lists them: a long run without
  // outputs holds those of the instances in flight.
  const fleetsim::RunResult run = fleetsim::simulate(scenario, {.seed = args.seed, .record_link_samples = timelines,
                                                                .progress = progress_line("workflows"),
                                                                .keep_records = timelines || !args.cluster.empty()});
  if (!args.report.empty()) {
    fleetsim::write_output_file(args.report, "the report", [&](std::ostream& o) { fleetsim::write_run_report_html(o, scenario, run); });
  }
  std::vector<std::string> written;
  if (!args.out_dir.empty()) written = fleetsim::write_run_directory(args.out_dir, scenario, run, run_manifest(args, run.summary.seed));
  if (args.json) {
    std::cout << fleetsim::summary_json(run.summary);
  } else {
    fleetsim::write_summary_text(std::cout, scenario, run.summary);
    if (!args.cluster.empty()) fleetsim::write_task_breakdown_text(std::cout, scenario, run);
    if (!written.empty()) {
      std::cout << "\nwrote ";
      for (std::size_t i = 0; i < written.size(); ++i) std::cout << (i > 0 ? ", " : "") << written[i];
      std::cout << " to " << args.out_dir << "\n";
    }
  }
  return kOk;
}

int run_execute(const RunArgs& args) {
  if (args.backend != "cpu" && args.backend != "cuda") {
    throw fleetsim::InputError({fleetsim::Problem{"--backend", "", "expected cpu or cuda, found \"" + args.backend + "\""}});
  }
  // Finite and within what a real run can be asked to do: 1e300 scales every task to nothing measurable.
  if (!(args.work_scale > 0 && args.work_scale <= 1e6)) {
    throw fleetsim::InputError({fleetsim::Problem{"--work-scale", "", "expected a positive number up to 1e6"}});
  }
  if (!(args.max_seconds > 0 && std::isfinite(args.max_seconds))) {
    throw fleetsim::InputError({fleetsim::Problem{"--max-seconds", "", "expected a positive number of seconds"}});
  }
  if (std::string why; args.backend == "cuda" && !fleetsim::cuda_available(&why)) {
    throw fleetsim::DeviceError("the CUDA backend cannot run here: " + why);  // before planning, and before joining mpirun's ranks
  }
  std::vector<std::string> out_names{"summary.json", "trace.csv", "trace.json", "predicted_trace.csv", "task_errors.csv"};
  if (args.validate) out_names.insert(out_names.end(), {"validation.txt", "scatter.svg", "report.html"});
  check_outputs(args.out_dir, out_names, args.report);
  // Under mpirun each process runs one device of the plan; rank 0 gathers the run and writes it.
  const Distributed mpi = start_distributed();
  const StopDistributed stop;
  if (launcher_ranks() > 1 && mpi.ranks == 1) {
    throw fleetsim::DeviceError("this fleetsim was built without MPI, so it cannot spread a run over the " + std::to_string(launcher_ranks()) +
                                " processes mpirun started; run it without mpirun");
  }
  const fleetsim::Scenario scenario = fleetsim::scale_work(read_scenario(args.scenario, args.sets, args.profile), args.work_scale);
  const fleetsim::RunResult plan = fleetsim::simulate(scenario, {.seed = args.seed});
  if (args.dry_run) {
    if (mpi.rank == 0) fleetsim::write_schedule_text(std::cout, scenario, plan);
    return kOk;
  }
  const bool cuda = args.backend == "cuda";
  const double estimate_s = cuda ? 0.0 : fleetsim::cpu_seconds_estimate(scenario, plan);  // a CPU core's hours, not a GPU's
  if (estimate_s > args.max_seconds) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.2g", args.work_scale * args.max_seconds / estimate_s);
    throw fleetsim::InputError({fleetsim::Problem{args.scenario, "", "its work would keep one CPU core busy for about " +
        fleetsim::format_quantity(estimate_s, fleetsim::Dimension::time) + " (above --max-seconds); run it with --work-scale " + scale + " or less"}});
  }
  const fleetsim::ExecOptions options{.progress = mpi.rank == 0 ? progress_line("tasks") : nullptr};
  // A CPU validation measures its profile's rates again before and after the real runs: how far the
  // machine has moved from its calibration, beside the errors.
  std::optional<fleetsim::Profile> checked;
  if (args.validate && !cuda && mpi.ranks == 1) checked = fleetsim::load_profile(args.profile);
  std::vector<fleetsim::ProfileFigure> before, after;
  if (checked) before = fleetsim::check_cpu_profile(*checked);
  // The first run's files are written; the errors are against the median of every run.
  std::vector<fleetsim::Trace> runs;
  std::optional<fleetsim::RunResult> first;
  for (std::uint64_t i = 0; i < args.repeat; ++i) {
    fleetsim::RunResult r = cuda ? fleetsim::execute_on_cuda(scenario, plan, options) : fleetsim::execute_on_cpu(scenario, plan, options);
    runs.push_back(r.trace);
    if (!first) first.emplace(std::move(r));
  }
  if (!before.empty()) after = fleetsim::check_cpu_profile(*checked);
  const fleetsim::RunResult& measured = *first;
  if (mpi.rank != 0) return kOk;  // rank 0 holds the whole measured run
  const fleetsim::TraceDiff diff = fleetsim::diff_traces(plan.trace, runs);
  std::ostringstream comparison;
  comparison << "predicted (simulated" << (args.profile.empty() ? "" : ", profile " + args.profile) << ") against measured (backend "
             << args.backend << ")\n";
  fleetsim::write_trace_diff_text(comparison, diff);
  if (!diff.tasks.empty()) {
    // Tasks scaled down to microseconds time the run's own overheads (thread wake-ups, timers, launches), not their
    // work. Judged on the prediction, which a slow or busy machine does not move.
    std::vector<double> lengths;
    for (const fleetsim::TaskError& t : diff.tasks) lengths.push_back(t.predicted_s);
    std::nth_element(lengths.begin(), lengths.begin() + static_cast<std::ptrdiff_t>(lengths.size() / 2), lengths.end());
    if (const double median = lengths[lengths.size() / 2]; median < 1e-3) {
      char scale[32];
      std::snprintf(scale, sizeof scale, "%g", args.work_scale);
      comparison << "note: the median task is predicted to run for " << fleetsim::format_quantity(median, fleetsim::Dimension::time)
                 << ": that short, a real run measures its own overheads more than the work, so these errors say little; raise --work-scale (it is "
                 << scale << ")\n";
    }
  }
  if (!before.empty()) fleetsim::write_profile_check_text(comparison, before, after);
  std::vector<std::string> written;
  if (!args.out_dir.empty()) {
    std::vector<fleetsim::OutputFile> files{
        {out_names[0], "the summary", [&](std::ostream& o) { o << fleetsim::summary_json(measured.summary); }},
        {out_names[1], "the measured trace", [&](std::ostream& o) { fleetsim::write_trace_csv(o, scenario, measured); }},
        {out_names[2], "the measured trace", [&](std::ostream& o) { fleetsim::write_trace_json(o, scenario, measured); }},
        {out_names[3], "the plan", [&](std::ostream& o) { fleetsim::write_trace_csv(o, scenario, plan); }},
        {out_names[4], "the task errors", [&](std::ostream& o) { fleetsim::write_trace_diff_csv(o, scenario, measured.trace, diff); }}};
    if (args.validate) {
      files.push_back({out_names[5], "the validation table", [&](std::ostream& o) { o << comparison.str(); }});
      files.push_back({out_names[6], "the scatter chart", [&](std::ostream& o) { fleetsim::write_trace_diff_svg(o, scenario.name + ": predicted against measured", diff); }});
      files.push_back({out_names[7], "the report", [&](std::ostream& o) { fleetsim::write_validation_html(o, "fleetsim validate: " + scenario.name, comparison.str(), diff); }});
    }
    written = fleetsim::write_output_directory(args.out_dir, files);
  }
  if (!args.report.empty()) {
    fleetsim::write_output_file(args.report, "the report", [&](std::ostream& o) { fleetsim::write_validation_html(o, "fleetsim " + std::string(args.validate ? "validate" : "run") + ": " + scenario.name, comparison.str(), diff); });
  }
  if (args.json) {
    std::cout << (args.validate ? fleetsim::trace_diff_json(diff, before, after) : fleetsim::summary_json(measured.summary));
    return kOk;
  }
  if (!args.validate) {
    fleetsim::write_summary_text(std::cout, scenario, measured.summary);
    std::cout << '\n';
  }
  std::cout << comparison.str();
  if (!written.empty()) {
    std::cout << "\nwrote";
    for (std::size_t i = 0; i < written.size(); ++i) std::cout << (i ? ", " : " ") << written[i];
    std::cout << " to " << args.out_dir << "\n";
  }
  return kOk;
}

struct CalibrateArgs {
  std::string backend = "cpu", out, gpu_type, node_type;
  int repeats = 5;
  bool json = false;
};

fleetsim::Profile measure_profile(const CalibrateArgs& args) {
  if (args.backend == "cpu") {
    if (!args.gpu_type.empty() || !args.node_type.empty()) {
      throw fleetsim::InputError({fleetsim::Problem{"--gpu-type", "", "--gpu-type and --node-type are for --backend cuda; the CPU backend calibrates cpu-core"}});
    }
    return fleetsim::calibrate_cpu({.repeats = args.repeats, .progress = progress_line("points")});
  }
  if (args.backend == "cuda") {
    return fleetsim::calibrate_cuda({.repeats = args.repeats, .gpu_type = args.gpu_type, .node_type = args.node_type, .progress = progress_line("points")});
  }
  throw fleetsim::InputError({fleetsim::Problem{"--backend", "", "expected cpu or cuda, found \"" + args.backend + "\""}});
}

int run_calibrate(const CalibrateArgs& args, const std::string& command) {
  if (!args.out.empty()) fleetsim::check_output_file(args.out, "--out");  // before minutes of measuring
  fleetsim::Profile profile = measure_profile(args);
  profile.provenance.emplace_back("command", command);
  if (!args.out.empty()) save_profile(profile, args.out);
  if (args.json) {
    std::cout << fleetsim::profile_json(profile);
    return kOk;
  }
  fleetsim::write_profile_text(std::cout, profile);
  if (!args.out.empty()) std::cout << "\nwrote " << args.out << "\n";
  return kOk;
}

}  // namespace

// A whole number from `lo` to `hi`, with a range error that says so: "must be an integer from 1 to
// 1000, found \"0\"". `hi_text` names a bound too long to read in digits ("2^64-1").
CLI::Validator integer_from(std::uint64_t lo, std::uint64_t hi, const std::string& name, std::string hi_text = "") {
  if (hi_text.empty()) hi_text = std::to_string(hi);
  return CLI::Validator(
      [=](const std::string& text) {
        std::uint64_t v = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool ok = error == std::errc() && end == text.data() + text.size() && v >= lo && v <= hi;
        return ok ? std::string() : "must be an integer from " + std::to_string(lo) + " to " + hi_text + ", found \"" + text + "\"";
      },
      name);
}

// A seed as the random generators take it.
const CLI::Validator kSeed = integer_from(0, std::numeric_limits<std::uint64_t>::max(), "SEED", "2^64-1");

namespace {

// Each subcommand registers its options and what it runs; main runs the one parsed. Arguments live in
// the command's closure, so they outlive parsing.
struct Commands {
  std::vector<std::pair<const CLI::App*, std::function<int()>>> list;
  void add(const CLI::App* command, std::function<int()> run) { list.emplace_back(command, std::move(run)); }
};

void add_catalog(CLI::App& app, Commands& commands) {
  auto json = std::make_shared<bool>(false);
  CLI::App* catalog = app.add_subcommand("catalog", "List the hardware catalog: GPU, node and link types");
  catalog->add_flag("--json", *json, "Print the whole catalog as JSON, with sources");
  commands.add(catalog, [json] {
    const fleetsim::Catalog& c = fleetsim::Catalog::builtin();
    if (*json) {
      std::cout << fleetsim::catalog_json(c);
    } else {
      fleetsim::write_catalog_text(std::cout, c);
    }
    return kOk;
  });
}

// --max-events N: the scenario's "max_events", as an edit made after the --set ones.
void add_max_events(CLI::App& command, std::vector<std::string>& sets) {
  command
      .add_option_function<std::uint64_t>(
          "--max-events", [&sets](std::uint64_t n) { sets.push_back("/max_events=" + std::to_string(n)); },
          "Stop a run that pops more events than this, with an error (default: the scenario's max_events, 1,000,000,000)")
      ->check(integer_from(1, std::uint64_t{1} << 62, "N", "2^62"));
}

void add_simulate(CLI::App& app, Commands& commands) {
  auto sim = std::make_shared<SimulateArgs>();
  CLI::App* simulate = app.add_subcommand("simulate", "Simulate a scenario and print its summary");
  simulate->add_option("scenario", sim->scenario, "Scenario file (JSON), or with --cluster one workflow or ComfyUI graph")->required();
  simulate->add_option("--cluster", sim->cluster, "Run the file as one workflow arriving once on this cluster: NODE_TYPE[:COUNT], as hgx-h100-8:2; prints each task's times and why");
  simulate->add_option("--seed", sim->seed, "Random seed (default: the scenario's)")->check(kSeed);
  simulate->add_option("--out", sim->out_dir,
                       "Write the run directory here: summary.json, the trace (CSV, JSON, and trace.perfetto.json for ui.perfetto.dev), "
                       "decisions, link, VRAM and cost timelines, report.html and run.json");
  simulate->add_flag("--json", sim->json, "Print the summary as JSON on stdout");
  simulate->add_option("--report", sim->report, "Write an HTML report (Gantt chart, utilization, VRAM, queue, latency CDF, link heatmap) here");
  simulate->add_option("--set", sim->sets, "Change the scenario before it is read: /json/pointer=value (repeatable)");
  simulate->add_option("--policy-plugin", sim->plugins, "Load a policy from a shared library (repeatable)");
  simulate->add_option("--profile", sim->profile, "A calibration profile whose figures replace the catalog's (fleetsim calibrate)");
  add_max_events(*simulate, sim->sets);
  commands.add(simulate, [sim] { return run_simulate(*sim); });
}

void add_run(CLI::App& app, Commands& commands) {
  auto run = std::make_shared<RunArgs>();
  CLI::App* execute = app.add_subcommand("run", "Run a scenario's tasks for real on local devices, as the simulator scheduled them");
  execute->add_option("scenario", run->scenario, "Scenario file (JSON)")->required();
  execute->add_option("--backend", run->backend, "cpu (every machine) or cuda")->capture_default_str();
  execute->add_option("--seed", run->seed, "Random seed of the plan (default: the scenario's)")->check(kSeed);
  execute->add_option("--work-scale", run->work_scale, "Multiply every task's work, memory and tensors (shrinks GPU-sized scenarios)")->capture_default_str();
  execute->add_option("--max-seconds", run->max_seconds, "Refuse a run whose work would take one core longer than this")->capture_default_str();
  execute->add_option("--out", run->out_dir, "Write summary.json, trace.csv, trace.json (measured), predicted_trace.csv and task_errors.csv here");
  execute->add_option("--set", run->sets, "Change the scenario before it is read: /json/pointer=value (repeatable)");
  execute->add_flag("--dry-run", run->dry_run, "Print the schedule (each device's tasks in order) and run nothing");
  execute->add_flag("--json", run->json, "Print the measured summary as JSON on stdout");
  execute->add_option("--report", run->report, "Write an HTML page: predicted against measured (scatter) and the error table");
  execute->add_option("--profile", run->profile, "A calibration profile whose figures replace the catalog's in the plan");
  commands.add(execute, [run] { return run_execute(*run); });
}

void add_validate(CLI::App& app, Commands& commands) {
  auto val = std::make_shared<RunArgs>();
  val->validate = true;
  val->out_dir = "validation";
  CLI::App* validate = app.add_subcommand("validate", "Run a scenario for real and in simulation with one schedule; report the prediction error");
  validate->add_option("scenario", val->scenario, "Scenario file (JSON)")->required();
  validate->add_option("--profile", val->profile, "Calibration profile of this machine (fleetsim calibrate --out)")->required();
  validate->add_option("--backend", val->backend, "cpu (every machine) or cuda")->capture_default_str();
  validate->add_option("--seed", val->seed, "Random seed of the plan (default: the scenario's)")->check(kSeed);
  validate->add_option("--work-scale", val->work_scale, "Multiply every task's work, memory and tensors")->capture_default_str();
  validate->add_option("--max-seconds", val->max_seconds, "Refuse a run whose work would take one core longer than this")->capture_default_str();
  validate->add_option("--out", val->out_dir, "Report directory: validation.txt, scatter.svg, task_errors.csv, both traces, summary.json")->capture_default_str();
  validate->add_option("--set", val->sets, "Change the scenario before it is read: /json/pointer=value (repeatable)");
  validate->add_option("--report", val->report, "Write the HTML report (scatter chart and error table) here too");
  validate->add_flag("--json", val->json, "Print the errors (per task and makespan) as JSON instead of the table");
  validate->add_option("--repeat", val->repeat, "Run the real side this many times; errors against each task's median, with the run-to-run noise")
      ->capture_default_str()
      ->check(integer_from(1, 100, "N"));
  commands.add(validate, [val] { return run_execute(*val); });
}

void add_calibrate(CLI::App& app, Commands& commands, const std::string& command_line) {
  auto cal = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate = app.add_subcommand("calibrate", "Measure this machine's devices with microbenchmarks; fit a profile for --profile");
  calibrate->add_option("--backend", cal->backend, "cpu (every machine) or cuda")->capture_default_str();
  calibrate->add_option("--out", cal->out, "Write the profile (JSON) here");
  calibrate->add_option("--repeats", cal->repeats, "Timed runs per point (the median is kept)")->capture_default_str()->check(integer_from(1, 1000, "N"));
  calibrate->add_option("--gpu-type", cal->gpu_type, "cuda: the catalog GPU type to calibrate (default: read off local GPU 0's name)");
  calibrate->add_option("--node-type", cal->node_type, "cuda: the catalog node type whose links are calibrated (default: the smallest that holds the GPUs)");
  calibrate->add_flag("--json", cal->json, "Print the profile as JSON instead of the table");
  commands.add(calibrate, [cal, command_line] { return run_calibrate(*cal, command_line); });
}

void add_train(CLI::App& app, Commands& commands) {
  auto train = std::make_shared<TrainArgs>();
  CLI::App* train_cmd = app.add_subcommand("train", "One training iteration of a transformer under TP x PP x DP: time, MFU, bubble, memory per GPU");
  train_cmd->add_option("job", train->file, "Training job file (JSON): cluster, model, parallelism, batch, schedule, recompute")->required();
  train_cmd->add_option("--sweep", train->sweep, "One setting over several values, as a scaling table: dp=1,8,64 (global batch grows with dp), pp=, tp=, micro=, global=, recompute_layers= (with full recomputation)");
  train_cmd->add_flag("--json", train->json, "Print JSON instead of the table");
  train_cmd->add_flag("--search", train->search, "Rank the ways to run the job on all its cluster's GPUs: TP, PP, DP, micro-batch, recomputation, ZeRO-1 or FSDP");
  train_cmd->add_option("--top", train->top, "With --search: how many configurations to print")->capture_default_str()->check(CLI::Range(1, 100000));
  train_cmd->add_option("--threads", train->threads, "With --search: threads (0: all cores)")->capture_default_str();
  commands.add(train_cmd, [train] { return run_train(*train); });
}

struct ServeArgs {
  std::string file, out_dir, report;
  std::vector<std::string> sets;
  bool json = false;
};

int run_serve(const ServeArgs& args) {
  const fleetsim::ServingDeployment d = fleetsim::load_serving(args.file, parse_sets(args.sets));
  check_outputs(args.out_dir, {"serving.json", "report.html"}, args.report);
  const fleetsim::ServingResult result = fleetsim::simulate_serving(d);
  if (!args.out_dir.empty()) {
    fleetsim::write_output_directory(args.out_dir, {{"serving.json", "the results", [&](std::ostream& o) { o << fleetsim::serving_json(d, result); }},
                                                    {"report.html", "the report", [&](std::ostream& o) { fleetsim::write_serving_html(o, d, result); }}});
  }
  if (!args.report.empty()) fleetsim::write_output_file(args.report, "the report", [&](std::ostream& o) { fleetsim::write_serving_html(o, d, result); });
  if (args.json) {
    std::cout << fleetsim::serving_json(d, result);
  } else {
    fleetsim::write_serving_text(std::cout, d, result);
  }
  return kOk;
}

void add_serve(CLI::App& app, Commands& commands) {
  auto serve = std::make_shared<ServeArgs>();
  CLI::App* serve_cmd = app.add_subcommand("serve", "Serve LLM requests on engine replicas, iteration by iteration: TTFT, TPOT, throughput, goodput");
  serve_cmd->add_option("deployment", serve->file, "Serving deployment file (JSON): cluster, model, engine, TP, replicas, requests, SLOs")->required();
  serve_cmd->add_option("--set", serve->sets, "Change the deployment before it is read: /replicas=4, /requests/rate=\"20 /s\" (repeatable)");
  serve_cmd->add_flag("--json", serve->json, "Print JSON instead of the table");
  serve_cmd->add_option("--out", serve->out_dir, "Write serving.json and report.html here");
  serve_cmd->add_option("--report", serve->report, "Write the HTML page (TTFT and TPOT distributions, batches and KV cache over time) here");
  commands.add(serve_cmd, [serve] { return run_serve(*serve); });
}

void add_plan(CLI::App& app, Commands& commands) {
  auto plan = std::make_shared<PlanArgs>();
  CLI::App* plan_cmd = app.add_subcommand("plan", "Find the cheapest cluster that meets the SLOs, at today's load and grown loads");
  plan_cmd->add_option("plan", plan->file, "Plan file (JSON): base scenario, search space, SLOs, load growth")->required();
  plan_cmd->add_option("--threads", plan->threads, "Parallel searches (default: all cores)");
  plan_cmd->add_option("--out", plan->out_dir, "Write plan.json, plan.csv and plan.html (frontier chart) here");
  plan_cmd->add_flag("--exhaustive", plan->exhaustive, "Simulate every node count instead of bisecting (slower; checks the search)");
  plan_cmd->add_flag("--json", plan->json, "Print JSON instead of the table");
  plan_cmd->add_option("--report", plan->report, "Write the HTML report (frontier chart and every point) here");
  plan_cmd->add_option("--profile", plan->profile, "A calibration profile whose figures replace the catalog's in every candidate (fleetsim calibrate)");
  commands.add(plan_cmd, [plan] { return run_plan(*plan); });
}

void add_policies(CLI::App& app, Commands& commands) {
  auto json = std::make_shared<bool>(false);
  CLI::App* policies = app.add_subcommand("policies", "List the scheduling policies with their parameters");
  policies->add_flag("--json", *json, "Print JSON");
  commands.add(policies, [json] {
    if (*json) {
      std::cout << fleetsim::policies_json();
    } else {
      fleetsim::write_policies_text(std::cout);
    }
    return kOk;
  });
}

void add_compare(CLI::App& app, Commands& commands) {
  auto cmp = std::make_shared<CompareArgs>();
  CLI::App* compare = app.add_subcommand("compare", "Run a scenario under several policies and seeds; mean and 95% CI per metric");
  compare->add_option("scenario", cmp->scenario, "Scenario file (JSON)")->required();
  compare->add_option("--policies", cmp->policies, "Comma-separated policy names (default: all)")
      ->check(CLI::Validator([](const std::string& text) { return text.find_first_not_of(", ") == std::string::npos ? "expected one or more policy names" : ""; },
                             "NAMES"));
  compare->add_option("--seeds", cmp->seeds, "Seeds per policy: the scenario's seed and the next ones")->capture_default_str()->check(integer_from(1, 100000, "N"));
  compare->add_option("--threads", cmp->threads, "Parallel runs (default: all cores)");
  compare->add_option("--set", cmp->sets, "Change the scenario before it is read: /json/pointer=value (repeatable)");
  compare->add_option("--policy-plugin", cmp->plugins, "Load a policy from a shared library (repeatable)");
  compare->add_option("--profile", cmp->profile, "A calibration profile whose figures replace the catalog's (fleetsim calibrate)");
  compare->add_option("--out", cmp->out_dir, "Write comparison.csv (one row per run) and comparison.json here");
  compare->add_flag("--json", cmp->json, "Print JSON instead of the table");
  compare->add_option("--report", cmp->report, "Write an HTML report (each metric per policy with its confidence interval) here");
  add_max_events(*compare, cmp->sets);
  commands.add(compare, [cmp] { return run_compare(*cmp); });
}

void add_report(CLI::App& app, Commands& commands) {
  auto dir = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  CLI::App* report = app.add_subcommand("report", "Make the HTML report of a run directory (fleetsim simulate --out) again");
  report->add_option("run_dir", *dir, "A directory written by fleetsim simulate --out")->required();
  report->add_option("--out", *out, "Write the report here (default: RUN_DIR/report.html)");
  commands.add(report, [dir, out] { return run_report(*dir, *out); });
}

void add_import(CLI::App& app, Commands& commands) {
  CLI::App* import = app.add_subcommand("import", "Convert a graph from another tool into a fleetsim workflow");
  import->require_subcommand(1);

  struct ComfyArgs {
    std::string file, costs, registry, out, gpu, attention = "flash2";
    bool strict = false;
  };
  auto comfy = std::make_shared<ComfyArgs>();
  CLI::App* import_comfy = import->add_subcommand("comfyui", "A ComfyUI graph: the API format (Save (API Format)) or the UI workflow (Save)");
  import_comfy->add_option("file", comfy->file, "ComfyUI graph JSON")->required();
  import_comfy->add_option("--node-costs", comfy->costs, "Costs for node types fleetsim does not know (JSON)");
  import_comfy->add_option("--registry", comfy->registry,
                           "Node types, model families and file-name rules to add to the built-in models/comfyui.json (JSON)");
  import_comfy->add_option("--out", comfy->out, "Write the workflow here instead of stdout");
  import_comfy->add_flag("--strict", comfy->strict, "Refuse to guess: unknown node types, unknown model families, sizes no node sets");
  import_comfy->add_option("--gpu", comfy->gpu,
                           "Catalog GPU the graph runs on: a VAE decode its memory cannot hold falls back to tiles, as ComfyUI does (default: 80 GB)");
  import_comfy->add_option("--attention", comfy->attention, "Whose kernels run the models' attention: flash2 (FlashAttention-2, PyTorch up to 2.10) or cudnn (cuDNN's, PyTorch 2.11 on Hopper)")->capture_default_str();
  commands.add(import_comfy, [comfy] {
    if (!comfy->out.empty()) fleetsim::check_output_file(comfy->out, "--out");  // a bad --out is bad input, as for every command
    const fleetsim::GpuType* gpu = comfy->gpu.empty() ? nullptr : &catalog_gpu("--gpu", comfy->gpu);
    const auto attention = fleetsim::parse_attention_backend(comfy->attention);
    if (!attention) throw fleetsim::InputError({fleetsim::Problem{"--attention", "", "expected " + fleetsim::attention_backend_choices() + ", found \"" + comfy->attention + "\""}});
    const std::string costs = comfy->costs.empty() ? "" : fleetsim::read_text_file(comfy->costs);
    const std::string registry = comfy->registry.empty() ? "" : fleetsim::read_text_file(comfy->registry);
    return emit_workflow(fleetsim::import_comfyui(fleetsim::read_text_file(comfy->file), comfy->file, fleetsim::Catalog::builtin(),
                                                  {.node_costs_json = costs, .node_costs_file = comfy->costs, .registry_json = registry,
                                                   .registry_file = comfy->registry, .strict = comfy->strict, .gpu = gpu, .attention = *attention}),
                         comfy->out);
  });

  auto nccl = std::make_shared<NcclTestsArgs>();
  CLI::App* import_nccl = import->add_subcommand("nccl-tests", "An nccl-tests log (all_reduce_perf and friends), fitted to a node type's GPU link as a profile");
  import_nccl->add_option("file", nccl->file, "The log as nccl-tests printed it")->required();
  import_nccl->add_option("--node-type", nccl->node_type, "Catalog node type the run was made on (one node)")->required();
  import_nccl->add_option("--op", nccl->op, "The collective, where the log does not name its test (older nccl-tests)");
  import_nccl->add_option("--algo", nccl->algo, "The algorithm NCCL ran: auto (NCCL's own choice, NCCL_ALGO unset), ring, tree, nvls, nvls-tree, pat or direct")->capture_default_str();
  import_nccl->add_option("--out", nccl->out, "Write the profile here (for --profile)");
  import_nccl->add_flag("--json", nccl->json, "Print the fitted profile as JSON instead of the table");
  commands.add(import_nccl, [nccl] { return run_import_nccl_tests(*nccl); });

  struct TraceArgs {
    std::string format, file, out, tenant = "vc", columns, from, to, tenants;
    std::size_t min_gpus = 1;
  };
  auto trace = std::make_shared<TraceArgs>();
  CLI::App* import_trace = import->add_subcommand("trace", "A public cluster job log, as the job-trace CSV a scenario's workload replays");
  std::vector<std::string> trace_formats{"philly", "csv"};
  std::string format_help = "The log's format: philly (Microsoft Philly's cluster_job_log JSON), csv (any job log in CSV, columns named by --columns)";
  for (const fleetsim::JobLogFormat& f : fleetsim::job_log_formats()) {
    trace_formats.push_back(f.name);
    format_help += ", " + f.name + " (" + f.log + ")";
  }
  import_trace->add_option("--format", trace->format, format_help)->required()->check(CLI::IsMember(trace_formats));
  import_trace->add_option("file", trace->file, "The log")->required();
  import_trace->add_option("--tenant", trace->tenant, "philly: what names a job's tenant: vc (its virtual cluster), user, or none")
      ->check(CLI::IsMember({"vc", "user", "none"}))
      ->capture_default_str();
  import_trace->add_option("--columns", trace->columns,
                           "Which column is which, as KEY=COLUMN,...: submit, gpus, and duration or start and end; optionally tenant, status, "
                           "share=COLUMN/UNIT (the share of each GPU asked, in that unit) and job (rows that are one job's tasks). "
                           "Needed with --format csv; with a named log it changes that log's mapping");
  import_trace->add_option("--from", trace->from, "Keep jobs submitted at least this long after the log's first job (\"7 d\", \"3600 s\")");
  import_trace->add_option("--to", trace->to, "Keep jobs submitted less than this long after the log's first job");
  import_trace->add_option("--tenants", trace->tenants, "Keep only these tenants (comma-separated)");
  import_trace->add_option("--min-gpus", trace->min_gpus, "Keep only jobs of at least this many GPUs")->check(integer_from(1, 1000000, "GPUS"))->capture_default_str();
  import_trace->add_option("--out", trace->out, "Write the CSV here instead of stdout");
  commands.add(import_trace, [trace] {
    fleetsim::TraceFilter filter;
    const auto seconds = [](const std::string& text, const char* option) {
      try {
        return fleetsim::parse_quantity(text.find_first_not_of("0123456789.") == std::string::npos ? text + " s" : text, fleetsim::Dimension::time);
      } catch (const std::exception&) {
        throw fleetsim::InputError({fleetsim::Problem{option, "", "expected a duration such as \"7 d\" or \"3600 s\", found \"" + text + "\""}});
      }
    };
    if (!trace->from.empty()) filter.from_s = seconds(trace->from, "--from");
    if (!trace->to.empty()) filter.to_s = seconds(trace->to, "--to");
    for (std::size_t b = 0; !trace->tenants.empty() && b <= trace->tenants.size();) {
      const std::size_t e = std::min(trace->tenants.find(',', b), trace->tenants.size());
      filter.tenants.push_back(trace->tenants.substr(b, e - b));
      b = e + 1;
    }
    filter.min_gpus = trace->min_gpus;
    if (!trace->out.empty()) fleetsim::check_output_file(trace->out, "--out");
    const std::string text = fleetsim::read_text_file(trace->file);
    fleetsim::TraceImport imported;
    if (trace->format == "philly") {
      const auto tenant = trace->tenant == "vc" ? fleetsim::PhillyTenant::vc : trace->tenant == "user" ? fleetsim::PhillyTenant::user : fleetsim::PhillyTenant::none;
      imported = fleetsim::import_philly_trace(text, trace->file, tenant, filter);
    } else {
      const fleetsim::JobLogFormat* known = fleetsim::find_job_log_format(trace->format);
      if (known == nullptr && trace->columns.empty()) {
        throw fleetsim::InputError({fleetsim::Problem{"--columns", "", "--format csv needs --columns, e.g. submit=submit_time,gpus=gpu_num,duration=duration"}});
      }
      const fleetsim::JobCsvColumns columns =
          known == nullptr ? fleetsim::parse_job_csv_columns(trace->columns) : fleetsim::parse_job_csv_columns(trace->columns, known->mapping());
      imported = fleetsim::import_job_csv(text, trace->file, columns, filter);
    }
    if (imported.jobs == 0) {  // an empty trace replays nothing: say why rather than write it
      std::string why;
      for (const std::string& n : imported.notes) why += "\n  " + n;
      throw fleetsim::InputError({fleetsim::Problem{trace->file, "", "no job was kept (check --from, --to, --tenants and --min-gpus):" + why}});
    }
    if (trace->out.empty()) {
      std::cout << imported.csv;
    } else {
      fleetsim::write_output_file(trace->out, "the trace", [&](std::ostream& o) { o << imported.csv; });
      std::cout << "wrote " << imported.jobs << " jobs to " << trace->out << "\n";
    }
    if (!quiet) {
      std::cerr << "fleetsim: note: what the import kept, dropped and assumed:\n";
      for (const std::string& n : imported.notes) std::cerr << "  " << n << "\n";
    }
    return kOk;
  });

  struct WfcArgs {
    std::string file, out, reference = "h100-sxm";
  };
  auto wfc = std::make_shared<WfcArgs>();
  CLI::App* import_wfc = import->add_subcommand("wfcommons", "A WfCommons WfFormat instance (schema 1.4, 1.5 or 1.6)");
  import_wfc->add_option("file", wfc->file, "WfFormat JSON")->required();
  import_wfc->add_option("--reference-gpu", wfc->reference, "Catalog GPU on which a task's work takes its recorded runtime")->capture_default_str();
  import_wfc->add_option("--out", wfc->out, "Write the workflow here instead of stdout");
  commands.add(import_wfc, [wfc] {
    if (!wfc->out.empty()) fleetsim::check_output_file(wfc->out, "--out");
    return emit_workflow(fleetsim::import_wfcommons(fleetsim::read_text_file(wfc->file), wfc->file, catalog_gpu("--reference-gpu", wfc->reference)), wfc->out);
  });
}

void add_kernels(CLI::App& app, Commands& commands) {
  auto kern = std::make_shared<KernelsArgs>();
  CLI::App* kernels = app.add_subcommand("kernels", "Time one kernel on a GPU type, or check the kernel-time model against measured kernels");
  kernels->add_option("--gpu", kern->gpu, "A catalog GPU type, such as h100-sxm")->required();
  kernels->add_option("--gemm", kern->gemm, "A GEMM's M,N,K, such as 4096,4096,4096: its time and why");
  kernels->add_option("--dtype", kern->dtype, "The data type: fp64, fp32, tf32, bf16, fp16, fp8 or int8")->capture_default_str();
  kernels->add_option("--measured", kern->measured, "A CSV of measured kernels (name,kernel,m,n,k,time_us): the error by class and operation");
  kernels->add_option("--kernels", kern->constants, "Kernel-model constants in place of the built-in models/kernels.json (same shape)");
  kernels->add_option("--model", kern->model, "An architecture (fleetsim catalog lists them): one step's kernels and their time");
  kernels->add_option("--shape", kern->shape, "The step's shape for --model: batch, width, height, frames, tokens, context, a VAE's tile, tile_overlap, tile_frames, tile_frame_overlap (latent units), and a parallel step's sequence, ring, cfg, pipefusion, patches (one GPU's kernels), as width=1024,height=1024,batch=2");
  kernels->add_option("--runtime", kern->runtime, "How --model runs: comfyui or diffusers (their eager PyTorch code, models/runtimes.json), compiled (fused kernels, CUDA graphs), or hunyuanvideo (Tencent's own code, its VAE decoder); default by model");
  kernels->add_option("--attention", kern->attention, "Whose kernels run --model's attention: flash2 (FlashAttention-2, PyTorch's choice up to 2.10) or cudnn (cuDNN's, PyTorch 2.11 on Hopper)")->capture_default_str();
  kernels->add_option("--fit", kern->fit, "Fit the GPU architecture's constants to --measured and write them (models/kernels.json's shape) here");
  kernels->add_flag("--json", kern->json, "Print JSON instead of text");
  commands.add(kernels, [kern] { return run_kernels(*kern); });
}

void add_collective(CLI::App& app, Commands& commands) {
  auto coll = std::make_shared<CollectiveArgs>();
  CLI::App* collective = app.add_subcommand("collective", "Predict a collective's time and bandwidth, nccl-tests style");
  collective->add_option("--op", coll->op, "all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all, send-recv")->capture_default_str();
  collective->add_option("--cluster", coll->cluster, "A catalog node type (nodes added as --gpus needs) or a cluster/scenario file")->required();
  collective->add_option("--gpus", coll->gpus, "Number of GPUs (ranks), the first ones of the cluster")->capture_default_str();
  collective->add_option("--algo", coll->algo, "auto (NCCL's choice), ring, tree, nvls, nvls-tree, pat or direct")->capture_default_str();
  collective->add_option("--proto", coll->proto, "auto (NCCL's choice), LL, LL128 or Simple")->capture_default_str();
  collective->add_option("--measured", coll->measured,
                         "An nccl-tests log (or a CSV of bytes,time_us): predict at its sizes, beside its times, with the error per row");
  collective->add_option("--nccl", coll->nccl, "NCCL model constants in place of the built-in models/nccl.json (same shape)");
  collective->add_option("--min,-b", coll->min, "Smallest size (8, 64K, 1M, 8G as nccl-tests reads them)")->capture_default_str();
  collective->add_option("--max,-e", coll->max, "Largest size")->capture_default_str();
  collective->add_option("--factor,-f", coll->factor, "Size multiplier between rows")->capture_default_str();
  collective->add_flag("--json", coll->json, "Print JSON instead of the table");
  collective->add_option("--profile", coll->profile, "A calibration profile whose link figures replace the catalog's (fleetsim import nccl-tests)");
  commands.add(collective, [coll, collective] {
    coll->op_given = collective->count("--op") > 0;
    coll->gpus_given = collective->count("--gpus") > 0;
    return run_collective(*coll);
  });
}

// An unknown command is named, with the ones there are.
bool known_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return true;
  const std::function<bool(const CLI::App*)> every = [](const CLI::App*) { return true; };
  const auto all = app.get_subcommands(every);
  if (std::any_of(all.begin(), all.end(), [&](const CLI::App* c) { return c->check_name(argv[1]); })) return true;
  std::string names;
  for (const CLI::App* c : all) names += (names.empty() ? "" : ", ") + c->get_name();
  std::cerr << "fleetsim: unknown command \"" << argv[1] << "\" (commands: " << names << ")\n";
  return false;
}

}  // namespace

namespace {

// A command's exit code, unless what it printed did not reach stdout (a full disk, a closed pipe):
// then a failure, said on stderr, so a script never takes a cut-off table or JSON for a whole one.
int written(int code) {
  std::cout.flush();
  if (!std::cout.good() || std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::cerr << "fleetsim: could not write the output to stdout" << (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) << "\n";
    return kFailure;
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fleetsim: discrete-event simulator and capacity planner for GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fleetsim " FLEETSIM_VERSION);
  app.add_flag("--quiet,-q", quiet, "No progress lines or notes on stderr");
  app.fallthrough();  // --quiet after the command too

  std::string command_line = "fleetsim";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  Commands commands;
  add_catalog(app, commands);
  add_simulate(app, commands);
  add_run(app, commands);
  add_validate(app, commands);
  add_calibrate(app, commands, command_line);
  add_train(app, commands);
  add_serve(app, commands);
  add_plan(app, commands);
  add_policies(app, commands);
  add_compare(app, commands);
  add_report(app, commands);
  add_import(app, commands);
  add_kernels(app, commands);
  add_collective(app, commands);

  if (!known_command(app, argc, argv)) return kBadInput;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error is invalid input like any other.
    return app.exit(e) == 0 ? kOk : kBadInput;
  }

  if (launcher_rank() > 0) quiet = true;  // under mpirun one rank's notes and progress, not one copy a rank
  try {
    for (const auto& [command, run] : commands.list) {
      if (command->parsed()) return written(run());
    }
  } catch (const fleetsim::InputError& e) {
    std::cerr << "fleetsim: invalid input\n" << e.what() << "\n";
    return kBadInput;
  } catch (const fleetsim::PolicyError& e) {
    std::cerr << "fleetsim: " << e.what() << "\n";
    return kBadPolicy;
  } catch (const std::exception& e) {
    std::cerr << "fleetsim: " << e.what() << "\n";
    return kFailure;
  }
  return kOk;
}
