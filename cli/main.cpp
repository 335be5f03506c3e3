// fleetsim: the one command-line front end. Parse, call the libraries, print. Errors thrown by the
// libraries become messages and exit codes here and nowhere else.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "fleetsim/error.hpp"
#include "fleetsim/report.hpp"
#include "fleetsim/simulation.hpp"

namespace {

enum ExitCode { kOk = 0, kFailure = 1, kBadInput = 2, kBadPolicy = 3 };

struct SimulateArgs {
  std::string scenario;
  std::optional<std::uint64_t> seed;
  std::string out_dir;
  bool json = false;
};

void write_file(const std::filesystem::path& path, const std::string& what,
                const std::function<void(std::ostream&)>& write) {
  std::ofstream out(path, std::ios::binary);
  if (!out) throw std::runtime_error("cannot write " + what + " to " + path.string());
  write(out);
  if (!out) throw std::runtime_error("error while writing " + path.string());
}

int run_simulate(const SimulateArgs& args) {
  const fleetsim::Scenario scenario = fleetsim::load_scenario(args.scenario);
  const fleetsim::RunResult run = fleetsim::simulate(scenario, {.seed = args.seed, .record_link_samples = !args.out_dir.empty()});
  if (!args.out_dir.empty()) {
    const std::filesystem::path dir(args.out_dir);
    std::filesystem::create_directories(dir);
    write_file(dir / "summary.json", "the summary", [&](std::ostream& o) { o << fleetsim::summary_json(run.summary); });
    write_file(dir / "trace.csv", "the trace", [&](std::ostream& o) { fleetsim::write_trace_csv(o, scenario, run); });
    write_file(dir / "trace.json", "the trace", [&](std::ostream& o) { fleetsim::write_trace_json(o, scenario, run); });
  }
  if (args.json) {
    std::cout << fleetsim::summary_json(run.summary);
  } else {
    fleetsim::write_summary_text(std::cout, scenario, run.summary);
    if (!args.out_dir.empty()) std::cout << "\nwrote summary.json, trace.csv, trace.json to " << args.out_dir << "\n";
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fleetsim: discrete-event simulator and capacity planner for GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "fleetsim 0.1.0");

  bool catalog_json = false;
  CLI::App* catalog = app.add_subcommand("catalog", "List the hardware catalog: GPU, node and link types");
  catalog->add_flag("--json", catalog_json, "Print the whole catalog as JSON, with sources");

  SimulateArgs sim;
  CLI::App* simulate = app.add_subcommand("simulate", "Simulate a scenario and print its summary");
  simulate->add_option("scenario", sim.scenario, "Scenario file (JSON)")->required();
  simulate->add_option("--seed", sim.seed, "Random seed (default: the scenario's)")->check(CLI::NonNegativeNumber);
  simulate->add_option("--out", sim.out_dir, "Write summary.json, trace.csv and trace.json to this directory");
  simulate->add_flag("--json", sim.json, "Print the summary as JSON on stdout");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a usage error is invalid input like any other.
    return app.exit(e) == 0 ? kOk : kBadInput;
  }

  try {
    if (*catalog) {
      const fleetsim::Catalog& c = fleetsim::Catalog::builtin();
      if (catalog_json) {
        std::cout << fleetsim::catalog_json(c);
      } else {
        fleetsim::write_catalog_text(std::cout, c);
      }
      return kOk;
    }
    if (*simulate) return run_simulate(sim);
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
