// fleetsim side by side with SimGrid: the same DAGs on the same platform in both simulators.
//
// For each DAG, fleetsim runs it first (policy fifo); its trace gives each task's GPU and each GPU's
// order of tasks. SimGrid then replays that schedule on a platform built from fleetsim's own Topology:
// one host per GPU (speed = the GPU's bf16 peak), one link per directed fleetsim link (same capacity
// and latency), and for each GPU pair that exchanges a tensor an explicit route made of the links of
// Topology::route. Tasks are Execs; edges between different GPUs are Comms of the same bytes.
// fleetsim's timing rules are written as dependencies: a task's inputs start moving when it is
// placed, that is when all its producers have ended and the previous task on its GPU has ended.
//
// SimGrid runs CM02 with its corrections off: latency factor 1, bandwidth factor 1, weight-S 0,
// TCP-gamma 0 (no window bound), no cross-traffic. Two differences remain in the models themselves:
// CM02 pays a flow's latency before its bytes (fleetsim after), and weighs each flow's max-min share
// by 1 / its route latency (fleetsim shares equally). Both vanish when the flows that share a link
// have equal route latencies; `--latency after` removes them in general by giving SimGrid zero-latency
// links and paying each route's latency after the bytes, as a zero-byte message over a private link.
//
// Timed: fleetsim, the simulate() call (cluster, topology and run; the scenario is built in memory
// beforehand). SimGrid, building the platform (hosts, links, routes), the activities' dependency graph
// (and, eager style, the activities), and Engine::run(); the Engine's construction and configuration
// are not timed. Each SimGrid run is a fork()ed child, as SimGrid allows one Engine per process. The two
// sides run --reps rounds per DAG, a timed run of each a round; the table gives each side's median wall time
// and the median of the rounds' ratios.
#include <simgrid/s4u.hpp>
#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "dags.hpp"
#include "fleetsim/simulation.hpp"

namespace sg4 = simgrid::s4u;
using fleetsim::bench::DagKind;

namespace {

enum class LatencyMode { links, after };
// eager: every SimGrid activity created before the run, started by its dependencies (SimGrid 3.32
// cleans such activities up with a scan of a list of them all: quadratic); lazy: each created when it
// can start, as a SimGrid user would write a large DAG.
enum class Style { lazy, eager };

struct Options {
  std::vector<std::uint32_t> sizes{100, 1000, 10000};
  std::vector<DagKind> kinds{DagKind::layered, DagKind::fork_join, DagKind::chains};
  std::string node_type = "hgx-h100-8";
  int nodes = 0;  // 0: grows with the DAG (2 nodes at 100 tasks, doubling per factor 10)
  LatencyMode latency = LatencyMode::links;
  Style style = Style::lazy;
  int reps = 3;   // rounds, a timed run of each side a round; medians reported
  double check = -1;  // exit 1 when a relative makespan difference exceeds this
  std::uint64_t seed = 1;
  std::vector<std::string> simgrid_cfg;  // extra --cfg KEY:VALUE, after the model's settings
  double sensitivity = 1e-6;  // relative FLOP change of SimGrid's self-comparison (DAGs up to 10k tasks); 0: none
};

// What SimGrid replays of fleetsim's run.
struct Replay {
  std::vector<std::uint32_t> gpu;                     // per task
  std::vector<std::vector<std::uint32_t>> gpu_order;  // per GPU, its tasks by start time
  std::uint32_t late_placements = 0;  // tasks fleetsim placed later than ready and GPU free (should be 0)
};

struct Routes {
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::vector<std::uint32_t>> by_pair;  // GPU pair -> links
  std::uint32_t ambiguous = 0;  // pairs with equal-cost alternatives (ECMP): the replay may differ there
};

struct SimgridResult {
  double makespan_s = 0;
  double wall_s = 0;     // platform + activities + run
  double run_wall_s = 0;  // Engine::run() alone
  std::uint64_t activities = 0;
  std::uint64_t unfinished = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

fleetsim::Scenario make_scenario(fleetsim::Workflow wf, const Options& o, int nodes) {
  fleetsim::Scenario sc;
  sc.name = "simgrid-compare";
  sc.file = "(in memory)";
  sc.cluster = fleetsim::cluster_of(o.node_type, nodes);
  // Pure FLOP / peak on both sides: no kernel launch overhead.
  for (fleetsim::NodeGroup& g : sc.cluster.groups) g.gpu.launch_overhead_s = 0;
  sc.workflows.push_back(std::move(wf));
  fleetsim::Tenant tenant;
  tenant.name = "bench";
  sc.tenants.push_back(tenant);
  sc.streams.emplace_back();  // tenant 0, workflow 0, one arrival at time 0
  sc.policy.name = "fifo";
  return sc;
}

Replay replay_of(const fleetsim::RunResult& run, const fleetsim::Workflow& wf) {
  Replay r;
  const std::size_t n = wf.tasks.size();
  r.gpu.assign(n, 0);
  r.gpu_order.resize(run.cluster.gpu_count());
  std::vector<const fleetsim::TaskRecord*> rec(n, nullptr);
  for (const fleetsim::TaskRecord& t : run.trace.tasks) {
    if (t.status != fleetsim::TaskStatus::completed) throw std::runtime_error("fleetsim left a task unfinished");
    rec[t.task] = &t;
    r.gpu[t.task] = fleetsim::index(run.trace.gpus[t.gpu_begin]);
  }
  for (std::uint32_t t = 0; t < n; ++t) r.gpu_order[r.gpu[t]].push_back(t);
  for (auto& order : r.gpu_order) {
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return rec[a]->start_s < rec[b]->start_s || (rec[a]->start_s == rec[b]->start_s && a < b);
    });
    double free_s = 0;
    for (std::uint32_t t : order) {
      const double expected = std::max(free_s, rec[t]->ready_s);
      if (rec[t]->start_s > expected + 1e-12 * std::max(1.0, expected)) ++r.late_placements;
      free_s = rec[t]->end_s;
    }
  }
  return r;
}

Routes routes_of(const fleetsim::Topology& topo, const fleetsim::Workflow& wf, const Replay& r) {
  Routes routes;
  std::vector<std::uint32_t> other;
  for (const fleetsim::EdgeSpec& e : wf.edges) {
    const std::uint32_t a = r.gpu[e.from], b = r.gpu[e.to];
    if (a == b) continue;
    auto [it, fresh] = routes.by_pair.try_emplace({a, b});
    if (!fresh) continue;
    const std::uint32_t va = topo.gpu_vertex(fleetsim::make_id<fleetsim::GpuId>(a));
    const std::uint32_t vb = topo.gpu_vertex(fleetsim::make_id<fleetsim::GpuId>(b));
    topo.route(va, vb, 0, it->second);
    // fleetsim picks among equal-cost paths by a hash of each flow's key; probe a few keys.
    for (std::uint64_t key : {0x9e3779b97f4a7c15ull, 0x2545f4914f6cdd1dull, 12345ull}) {
      other.clear();
      topo.route(va, vb, key, other);
      if (other != it->second) {
        ++routes.ambiguous;
        break;
      }
    }
  }
  return routes;
}

// The replay's SimGrid activities and their dependencies as plain data, so that they can be created
// all before the run (eager) or each when it can start (lazy).
struct ActivityGraph {
  enum class Kind : std::uint8_t { exec, comm };
  struct Activity {
    Kind kind;
    sg4::Host* host;  // an Exec's host, a Comm's source
    sg4::Host* to;    // a Comm's destination
    double amount;    // FLOP or bytes
  };
  std::vector<Activity> activities;
  std::vector<std::vector<std::uint32_t>> successors;
  std::vector<std::uint32_t> predecessors;  // how many each depends on
  std::vector<std::uint32_t> ids;           // each one's index, for Activity::set_data

  std::uint32_t size() const { return static_cast<std::uint32_t>(activities.size()); }
  std::uint32_t add(Kind kind, sg4::Host* host, sg4::Host* to, double amount) {
    const std::uint32_t id = size();
    activities.push_back({kind, host, to, amount});
    successors.emplace_back();
    predecessors.push_back(0);
    ids.push_back(id);
    return id;
  }
  void depend(std::uint32_t before, std::uint32_t after) {
    successors[before].push_back(after);
    ++predecessors[after];
  }
  sg4::ActivityPtr create(std::uint32_t id) const {
    const Activity& a = activities[id];
    if (a.kind == Kind::exec) {
      sg4::ExecPtr e = sg4::Exec::init();
      e->set_flops_amount(a.amount)->set_host(a.host);
      return e;
    }
    sg4::CommPtr c = sg4::Comm::sendto_init(a.host, a.to);
    c->set_payload_size(static_cast<std::uint64_t>(a.amount));
    return c;
  }
};

SimgridResult run_simgrid(const fleetsim::Workflow& wf, const fleetsim::Cluster& cluster,
                          const fleetsim::Topology& topo, const Replay& replay, const Routes& routes,
                          const Options& o, double flop_scale) {
  const LatencyMode latency = o.latency;
  int argc = 1;
  char name[] = "fleetsim_vs_simgrid";
  char* argv[] = {name, nullptr};
  xbt_log_control_set("root.thres:critical");
  sg4::Engine engine(&argc, argv);
  // CM02 without its TCP corrections: a max-min bottleneck model (see the file's opening comment).
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/latency-factor:1");
  sg4::Engine::set_config("network/bandwidth-factor:1");
  sg4::Engine::set_config("network/weight-S:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/crosstraffic:0");
  for (const std::string& c : o.simgrid_cfg) sg4::Engine::set_config(c);

  const auto t0 = std::chrono::steady_clock::now();
  auto* zone = sg4::create_full_zone("fleetsim");
  std::vector<sg4::Host*> hosts;
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
    const auto id = fleetsim::make_id<fleetsim::GpuId>(g);
    hosts.push_back(zone->create_host(cluster.gpu_name(id), cluster.gpu_type(id).peak_for(fleetsim::Dtype::bf16)));
  }
  std::vector<sg4::Link*> links;
  for (std::uint32_t l = 0; l < topo.links().size(); ++l) {
    const fleetsim::TopoLink& tl = topo.links()[l];
    links.push_back(zone->create_link(topo.link_name(l), tl.capacity_Bps)
                        ->set_latency(latency == LatencyMode::links ? tl.latency_s : 0.0)
                        ->seal());
  }
  // --latency after: one pair of hosts per distinct route latency, joined by a private link of that
  // latency; a zero-byte message between them after a transfer pays the latency after the bytes.
  std::map<double, std::pair<sg4::Host*, sg4::Host*>> delay_hosts;
  std::vector<sg4::LinkInRoute> path;
  for (const auto& [pair, route] : routes.by_pair) {
    path.clear();
    for (std::uint32_t l : route) path.emplace_back(links[l]);
    zone->add_route(hosts[pair.first]->get_netpoint(), hosts[pair.second]->get_netpoint(), nullptr, nullptr, path, false);
    const double lat = topo.latency_s(route);
    if (latency == LatencyMode::after && lat > 0 && !delay_hosts.contains(lat)) {
      const std::string tag = "delay" + std::to_string(delay_hosts.size());
      sg4::Host* src = zone->create_host(tag + ".src", 1.0);
      sg4::Host* dst = zone->create_host(tag + ".dst", 1.0);
      sg4::Link* wire = zone->create_link(tag, 1e30)->set_latency(lat)->set_sharing_policy(sg4::Link::SharingPolicy::FATPIPE)->seal();
      zone->add_route(src->get_netpoint(), dst->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(wire)}, false);
      delay_hosts.emplace(lat, std::pair{src, dst});
    }
  }
  zone->seal();

  // The replay as activities and dependencies; tasks' Execs first.
  ActivityGraph graph;
  const std::uint32_t n = static_cast<std::uint32_t>(wf.tasks.size());
  for (std::uint32_t t = 0; t < n; ++t) graph.add(ActivityGraph::Kind::exec, hosts[replay.gpu[t]], nullptr, wf.tasks[t].flop * flop_scale);
  std::vector<std::uint32_t> prev(n, UINT32_MAX);
  for (const auto& order : replay.gpu_order) {
    for (std::size_t i = 1; i < order.size(); ++i) prev[order[i]] = order[i - 1];
  }
  std::vector<std::uint32_t> gate;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> inputs;  // (transfer, its arrival)
  for (std::uint32_t c = 0; c < n; ++c) {
    // The task is placed when its producers and the previous task on its GPU have ended.
    gate.clear();
    inputs.clear();
    if (prev[c] != UINT32_MAX) gate.push_back(prev[c]);
    for (std::uint32_t e : wf.inputs(c)) {
      const fleetsim::EdgeSpec& edge = wf.edges[e];
      if (std::find(gate.begin(), gate.end(), edge.from) == gate.end()) gate.push_back(edge.from);
      const std::uint32_t a = replay.gpu[edge.from], b = replay.gpu[c];
      if (a == b) continue;  // read in place
      const std::uint32_t comm = graph.add(ActivityGraph::Kind::comm, hosts[a], hosts[b], edge.bytes);
      std::uint32_t arrival = comm;
      const double lat = topo.latency_s(routes.by_pair.at({a, b}));
      if (latency == LatencyMode::after && lat > 0) {
        const auto& [src, dst] = delay_hosts.at(lat);
        arrival = graph.add(ActivityGraph::Kind::comm, src, dst, 0);
        graph.depend(comm, arrival);
      }
      inputs.emplace_back(comm, arrival);
    }
    if (inputs.empty()) {
      for (std::uint32_t g : gate) graph.depend(g, c);
      continue;
    }
    std::vector<std::uint32_t> starters(gate);
    if (gate.size() * inputs.size() > 64) {
      // Many inputs behind many gates: one zero-FLOP placement step instead of gates x inputs edges.
      const std::uint32_t place = graph.add(ActivityGraph::Kind::exec, hosts[replay.gpu[c]], nullptr, 0);
      for (std::uint32_t g : gate) graph.depend(g, place);
      starters.assign(1, place);
    }
    for (auto& [comm, arrival] : inputs) {
      for (std::uint32_t s : starters) graph.depend(s, comm);
      graph.depend(arrival, c);
    }
  }
  std::vector<sg4::ActivityPtr> all(graph.size());
  // Lazy style: how many activities each still waits for, and where each SimGrid activity is in the graph.
  std::vector<std::uint32_t> waiting = graph.predecessors;
  std::unordered_map<const sg4::Activity*, std::uint32_t> ids;
  if (o.style == Style::eager) {
    for (std::uint32_t a = 0; a < graph.size(); ++a) all[a] = graph.create(a);
    for (std::uint32_t a = 0; a < graph.size(); ++a) {
      for (std::uint32_t b : graph.successors[a]) {
        if (auto* exec = dynamic_cast<sg4::Exec*>(all[a].get())) {
          exec->add_successor(all[b]);
        } else {
          static_cast<sg4::Comm*>(all[a].get())->add_successor(all[b]);
        }
      }
    }
    for (const sg4::ActivityPtr& a : all) a->vetoable_start();
  } else {
    const auto start = [&all, &graph, &ids](std::uint32_t a) {
      all[a] = graph.create(a);
      ids.emplace(all[a].get(), a);
      all[a]->start();
    };
    // Each activity is created and started when the last one it depends on has finished.
    sg4::Activity::on_completion_cb([&graph, &waiting, &ids, start](const sg4::Activity& done) {
      const auto it = ids.find(&done);
      if (it == ids.end() || done.get_state() != sg4::Activity::State::FINISHED) return;
      for (std::uint32_t b : graph.successors[it->second]) {
        if (--waiting[b] == 0) start(b);
      }
    });
    for (std::uint32_t a = 0; a < graph.size(); ++a) {
      if (waiting[a] == 0) start(a);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  engine.run();
  SimgridResult r;
  r.run_wall_s = seconds_since(t1);
  r.wall_s = seconds_since(t0);
  r.makespan_s = sg4::Engine::get_clock();
  r.activities = all.size();
  for (const sg4::ActivityPtr& a : all) r.unfinished += a == nullptr || a->get_state() != sg4::Activity::State::FINISHED;
  return r;
}

// SimGrid allows one Engine per process: each run is a child process that reports through a pipe.
SimgridResult run_simgrid_in_child(const fleetsim::Workflow& wf, const fleetsim::Cluster& cluster,
                                   const fleetsim::Topology& topo, const Replay& replay, const Routes& routes,
                                   const Options& o, double flop_scale = 1) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    close(fds[0]);
    int status = 0;
    SimgridResult r;
    try {
      r = run_simgrid(wf, cluster, topo, replay, routes, o, flop_scale);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "SimGrid run failed: %s\n", e.what());
      status = 1;
    }
    if (status == 0 && write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) status = 1;
    close(fds[1]);
    _exit(status);  // skip SimGrid's teardown: not part of what is measured
  }
  close(fds[1]);
  SimgridResult r;
  const ssize_t got = read(fds[0], &r, sizeof r);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (got != static_cast<ssize_t>(sizeof r) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("the SimGrid child process failed");
  }
  return r;
}

std::string format_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g%%", 100 * fraction);
  return buf;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--sizes") {
      o.sizes.clear();
      for (const std::string& s : split(value())) o.sizes.push_back(static_cast<std::uint32_t>(std::stoul(s)));
    } else if (a == "--kinds") {
      o.kinds.clear();
      for (const std::string& s : split(value())) {
        const auto k = fleetsim::bench::parse_dag_kind(s);
        if (!k) throw std::invalid_argument("unknown DAG kind " + s + " (layered, fork-join, chains)");
        o.kinds.push_back(*k);
      }
    } else if (a == "--node-type") {
      o.node_type = value();
    } else if (a == "--nodes") {
      o.nodes = std::stoi(value());
    } else if (a == "--latency") {
      const std::string v = value();
      if (v != "links" && v != "after") throw std::invalid_argument("--latency is links or after");
      o.latency = v == "links" ? LatencyMode::links : LatencyMode::after;
    } else if (a == "--simgrid-style") {
      const std::string v = value();
      if (v != "lazy" && v != "eager") throw std::invalid_argument("--simgrid-style is lazy or eager");
      o.style = v == "lazy" ? Style::lazy : Style::eager;
    } else if (a == "--reps") {
      o.reps = std::max(1, std::stoi(value()));
    } else if (a == "--check") {
      o.check = std::stod(value());
    } else if (a == "--sensitivity") {
      o.sensitivity = std::stod(value());
    } else if (a == "--cfg") {
      o.simgrid_cfg.push_back(value());
    } else if (a == "--seed") {
      o.seed = std::stoull(value());
    } else {
      throw std::invalid_argument(
          "usage: fleetsim_vs_simgrid [--sizes 100,1000,10000] [--kinds layered,fork-join,chains] "
          "[--node-type hgx-h100-8] [--nodes N] [--latency links|after] [--simgrid-style lazy|eager] [--reps 3] [--check 0.01] [--sensitivity 1e-6] [--seed 1] [--cfg simgrid/key:value]...");
    }
  }
  return o;
}

int nodes_for(std::uint32_t tasks, const Options& o) {
  if (o.nodes > 0) return o.nodes;
  int nodes = 2;
  for (std::uint32_t t = 1000; t <= tasks && nodes < 64; t *= 10) nodes *= 2;
  return nodes;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  std::printf("| DAG | tasks | edges | transfers | GPUs | fleetsim makespan (s) | SimGrid makespan (s) | difference "
              "| fleetsim wall (ms) | SimGrid wall (ms) | SimGrid run only (ms) | SimGrid / fleetsim | SimGrid self-spread |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::fflush(stdout);
  double worst = 0;
  bool trouble = false;
  for (std::uint32_t size : o.sizes) {
    for (DagKind kind : o.kinds) {
      const int nodes = nodes_for(size, o);
      const auto gpus = static_cast<std::uint32_t>(fleetsim::cluster_of(o.node_type, nodes).gpu_count());
      const std::uint32_t width = kind == DagKind::fork_join ? gpus : 2 * gpus;
      const fleetsim::Scenario sc =
          make_scenario(fleetsim::bench::make_dag(kind, size, width, o.seed + size), o, nodes);
      const fleetsim::Workflow& wf = sc.workflows[0];
      // A first fleetsim run gives the schedule SimGrid replays (untimed: it pays the process's once-only costs).
      // Then --reps rounds of one timed run of each side, so that the machine's slow spells (a minute or so in
      // which single runs take up to 60% longer) fall on both; the table gives each side's median and the median
      // of the rounds' ratios. After each SimGrid child, fleetsim runs once untimed: after a fork() every page it
      // writes faults once (copy on write, though the child is gone), which made its next run 40-60% slower.
      const fleetsim::RunResult run = fleetsim::simulate(sc);
      const Replay replay = replay_of(run, wf);
      const Routes routes = routes_of(run.topology, wf, replay);
      std::uint64_t transfers = 0;
      for (const fleetsim::EdgeSpec& e : wf.edges) transfers += replay.gpu[e.from] != replay.gpu[e.to];

      std::vector<double> walls, ratios;
      std::vector<SimgridResult> sg;
      for (int i = 0; i < o.reps; ++i) {
        sg.push_back(run_simgrid_in_child(wf, run.cluster, run.topology, replay, routes, o));
        (void)fleetsim::simulate(sc);
        const auto t0 = std::chrono::steady_clock::now();
        const fleetsim::RunResult timed = fleetsim::simulate(sc);
        walls.push_back(seconds_since(t0));
        ratios.push_back(sg.back().wall_s / walls.back());
      }
      const auto middle = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double fleetsim_wall = middle(walls), ratio = middle(ratios);
      std::sort(sg.begin(), sg.end(), [](const SimgridResult& a, const SimgridResult& b) { return a.wall_s < b.wall_s; });
      const SimgridResult median = sg[sg.size() / 2];  // SimGrid's median run
      // SimGrid against itself with every task's FLOP changed by a relative +-sensitivity (about a
      // nanosecond per task): how far rounding-size differences carry on this DAG, the floor for any agreement.
      double spread = 0;
      const bool self_check = o.sensitivity > 0 && size <= 10000;  // two more SimGrid runs: small DAGs only
      if (self_check) {
        for (double sign : {1.0, -1.0}) {
          const SimgridResult p = run_simgrid_in_child(wf, run.cluster, run.topology, replay, routes, o,
                                                       1 + sign * o.sensitivity);
          spread = std::max(spread, std::abs(p.makespan_s - median.makespan_s) / median.makespan_s);
        }
      }
      const double fs = run.summary.makespan_s;
      const double diff = (median.makespan_s - fs) / fs;
      worst = std::max(worst, std::abs(diff));
      std::printf("| %s | %zu | %zu | %llu | %u | %.6f | %.6f | %+.2g%% | %.2f | %.2f | %.2f | %.1fx | %s |\n",
                  std::string(dag_kind_name(kind)).c_str(), wf.tasks.size(), wf.edges.size(),
                  static_cast<unsigned long long>(transfers), gpus, fs, median.makespan_s, 100 * diff,
                  1e3 * fleetsim_wall, 1e3 * median.wall_s, 1e3 * median.run_wall_s, ratio,
                  self_check ? format_percent(spread).c_str() : "-");
      std::fflush(stdout);
      if (replay.late_placements > 0 || routes.ambiguous > 0 || median.unfinished > 0) {
        std::fprintf(stderr,
                     "warning: %s %u: %u tasks placed late by fleetsim, %u GPU pairs with equal-cost routes, "
                     "%llu SimGrid activities unfinished: the replay is not exact\n",
                     std::string(dag_kind_name(kind)).c_str(), size, replay.late_placements, routes.ambiguous,
                     static_cast<unsigned long long>(median.unfinished));
        trouble = true;
      }
    }
  }
  std::fprintf(stderr, "largest makespan difference: %.4f%%\n", 100 * worst);
  if (o.check >= 0 && (worst > o.check || trouble)) {
    std::fprintf(stderr, "FAIL: makespans differ by more than %.4f%%\n", 100 * o.check);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 2;
}
