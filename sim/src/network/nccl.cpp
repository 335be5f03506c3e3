#include "fleetsim/nccl.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>

#include "../json_reader.hpp"
#include "fleetsim/cluster.hpp"

namespace fleetsim::embedded {
std::string_view nccl_json();
}  // namespace fleetsim::embedded

namespace fleetsim {

using Triple = std::array<double, 3>;  // per protocol: LL, LL128, Simple

// NCCL's tables indexed as NCCL indexes them: algorithm (tree, ring, nvls, nvls-tree, pat), link
// class (NVLink, PCIe, network), architecture (Volta, Ampere, Hopper, Blackwell), and nodes (one,
// two, more).
struct NcclConstants {
  std::string version;
  std::array<Triple, 5> base_us{};
  std::array<std::array<Triple, 5>, 3> hw_us{};
  std::array<double, 4> ll_one_node{};
  std::array<double, 2> ll_two_nodes{}, ll_more_nodes{};  // by CPU vendor
  std::array<Triple, 4> ring_ll128{}, tree_ll128{}, tree{}, nvls_tree{};
  double ring_ll = 0, ring_ll128_factor = 0, tree_factor = 0, tree_ll = 0, tree_ll128_one_node = 0, tree_ll128_factor = 0,
         pat_factor = 0;
  std::array<double, 4> nvls_efficiency{};
  std::array<std::vector<double>, 3> tree_correction;
  double pat_network_divisor = 1, pat_per_rank_us = 0;
  double plateau_before_ampere = 1, plateau_ampere = 1;
  std::array<double, 2> net_overhead_us{};
  std::array<std::vector<double>, 3> intra_speeds, inter_speeds;  // default, Hopper, Blackwell
  int max_ring_channels = 0, max_nvls_channels = 0;
  double next_speed_ratio = 0, duplicate_min = 0, duplicate_keep = 0;

  struct Achieved {
    double small_gang = 0;
    Triple latency_scale{1, 1, 1}, bandwidth_scale{1, 1, 1};
    Triple p2p_latency_us{}, p2p_bandwidth_scale{};  // by link class
  };
  Achieved ampere, hopper, fallback;
  Triple reference_latency_us{};      // by link class
  std::array<double, 3> net_scale{};  // InfiniBand, RoCE, Ethernet
};

namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;
using detail::Problems;

constexpr std::array<std::string_view, 5> kAlgoKeys{"tree", "ring", "nvls", "nvls-tree", "pat"};
constexpr std::array<std::string_view, 4> kArchKeys{"volta", "ampere", "hopper", "blackwell"};
constexpr std::array<std::string_view, 3> kClassKeys{"nvlink", "pcie", "net"};
enum Class { kNvlink = 0, kPcie = 1, kNet = 2 };

// ---- Reading models/nccl.json -------------------------------------------------------------------

std::vector<double> read_numbers(ObjectReader& r, std::string_view key, std::size_t count) {
  std::vector<double> out;
  const Json* v = r.field(key, Need::required);
  if (v == nullptr) return out;
  bool good = v->is_array() && (count == 0 ? !v->empty() : v->size() == count);
  if (good) {
    for (const Json& x : *v) good = good && x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() >= 0;
  }
  if (!good) {
    r.problem(key, "expected an array of " + (count == 0 ? std::string("one or more") : std::to_string(count)) +
                       " non-negative numbers, found " + detail::describe(*v));
    return out;
  }
  for (const Json& x : *v) out.push_back(x.get<double>());
  return out;
}

Triple read_triple(ObjectReader& r, std::string_view key) {
  const auto v = read_numbers(r, key, 3);
  return v.size() == 3 ? Triple{v[0], v[1], v[2]} : Triple{};
}

double read_number(ObjectReader& r, std::string_view key) { return r.number(key, Need::required).value_or(0); }

// Reads `key` as an object and hands it to `read`; reports its unknown fields.
template <typename Read>
void section(ObjectReader& r, std::string_view key, Read read) {
  const Json* v = r.field(key, Need::required);
  if (v == nullptr) return;
  ObjectReader s(*v, r.pointer(key), r.problems());
  if (!s.ok()) return;
  read(s);
  s.finish();
}

template <std::size_t N, typename T, typename Read>
void keyed(ObjectReader& r, const std::array<std::string_view, N>& keys, std::array<T, N>& into, Read read) {
  for (std::size_t i = 0; i < N; ++i) into[i] = read(r, keys[i]);
}

NcclConstants::Achieved read_achieved(ObjectReader& a) {
  NcclConstants::Achieved out;
  out.small_gang = a.number("small_gang", Need::required, 0.0, 7.9).value_or(0);
  out.latency_scale = read_triple(a, "latency_scale");
  out.bandwidth_scale = read_triple(a, "bandwidth_scale");
  section(a, "p2p_latency_us", [&](ObjectReader& s) { keyed(s, kClassKeys, out.p2p_latency_us, read_number); });
  section(a, "p2p_bandwidth_scale", [&](ObjectReader& s) { keyed(s, kClassKeys, out.p2p_bandwidth_scale, read_number); });
  for (double x : out.bandwidth_scale) {
    if (!(x > 0)) a.problem("bandwidth_scale", "expected positive scales");
  }
  for (double x : out.p2p_bandwidth_scale) {
    if (!(x > 0)) a.problem("p2p_bandwidth_scale", "expected positive scales");
  }
  return out;
}

NcclConstants read_constants(const Json& doc, Problems& problems) {
  NcclConstants k;
  ObjectReader top(doc, "", problems);
  if (!top.ok()) return k;
  top.string("about", Need::optional);
  k.version = top.string("version", Need::required).value_or("");
  auto sourced = [&](std::string_view key, auto read) {
    section(top, key, [&](ObjectReader& s) {
      s.string("source", Need::required);
      read(s);
    });
  };
  sourced("base_latency_us", [&](ObjectReader& s) { keyed(s, kAlgoKeys, k.base_us, read_triple); });
  sourced("hw_latency_us", [&](ObjectReader& s) {
    for (std::size_t c = 0; c < 3; ++c) {
      section(s, kClassKeys[c], [&](ObjectReader& t) { keyed(t, kAlgoKeys, k.hw_us[c], read_triple); });
    }
  });
  sourced("ll_max_bw_GBps", [&](ObjectReader& s) {
    section(s, "one_node", [&](ObjectReader& t) { keyed(t, kArchKeys, k.ll_one_node, read_number); });
    section(s, "two_nodes", [&](ObjectReader& t) { keyed(t, std::array<std::string_view, 2>{"intel", "amd"}, k.ll_two_nodes, read_number); });
    section(s, "more_nodes", [&](ObjectReader& t) { keyed(t, std::array<std::string_view, 2>{"intel", "amd"}, k.ll_more_nodes, read_number); });
  });
  sourced("per_channel_max_GBps", [&](ObjectReader& s) {
    section(s, "ring_ll128", [&](ObjectReader& t) { keyed(t, kArchKeys, k.ring_ll128, read_triple); });
    section(s, "tree_ll128", [&](ObjectReader& t) { keyed(t, kArchKeys, k.tree_ll128, read_triple); });
    section(s, "tree", [&](ObjectReader& t) { keyed(t, kArchKeys, k.tree, read_triple); });
    section(s, "nvls_tree", [&](ObjectReader& t) { keyed(t, kArchKeys, k.nvls_tree, read_triple); });
  });
  sourced("bandwidth_factors", [&](ObjectReader& s) {
    k.ring_ll = read_number(s, "ring_ll");
    k.ring_ll128_factor = read_number(s, "ring_ll128");
    k.tree_factor = read_number(s, "tree");
    k.tree_ll = read_number(s, "tree_ll");
    k.tree_ll128_one_node = read_number(s, "tree_ll128_one_node");
    k.tree_ll128_factor = read_number(s, "tree_ll128");
    k.pat_factor = read_number(s, "pat");
  });
  sourced("pat_latency", [&](ObjectReader& s) {
    k.pat_network_divisor = s.number("network_divisor", Need::required, 1e-6).value_or(1);
    k.pat_per_rank_us = read_number(s, "per_rank_us");
  });
  sourced("ring_plateau", [&](ObjectReader& s) {
    k.plateau_before_ampere = read_number(s, "before_ampere");
    k.plateau_ampere = read_number(s, "ampere_and_later");
  });
  sourced("nvls_efficiency", [&](ObjectReader& s) {
    k.nvls_efficiency[2] = read_number(s, "hopper");
    k.nvls_efficiency[3] = read_number(s, "blackwell");
  });
  sourced("tree_correction", [&](ObjectReader& s) {
    for (std::size_t p = 0; p < 3; ++p) k.tree_correction[p] = read_numbers(s, std::array{"ll", "ll128", "simple"}[p], 23);
  });
  sourced("net_overhead_us", [&](ObjectReader& s) { keyed(s, std::array<std::string_view, 2>{"intel", "amd"}, k.net_overhead_us, read_number); });
  sourced("search", [&](ObjectReader& s) {
    constexpr std::array<std::string_view, 3> variants{"default", "hopper", "blackwell"};
    section(s, "intra_speeds_GBps", [&](ObjectReader& t) { keyed(t, variants, k.intra_speeds, [](ObjectReader& r, std::string_view key) { return read_numbers(r, key, 0); }); });
    section(s, "inter_speeds_GBps", [&](ObjectReader& t) { keyed(t, variants, k.inter_speeds, [](ObjectReader& r, std::string_view key) { return read_numbers(r, key, 0); }); });
    k.max_ring_channels = static_cast<int>(s.integer("max_ring_channels", Need::required, 1, 64).value_or(1));
    k.max_nvls_channels = static_cast<int>(s.integer("max_nvls_channels", Need::required, 1, 64).value_or(1));
    k.next_speed_ratio = read_number(s, "next_speed_ratio");
    k.duplicate_min = read_number(s, "duplicate_min_GBps");
    k.duplicate_keep = read_number(s, "duplicate_keep_GBps");
    for (const auto* speeds : {&k.intra_speeds, &k.inter_speeds}) {
      for (const auto& v : *speeds) {
        if (!std::is_sorted(v.rbegin(), v.rend()) || (!v.empty() && !(v.back() > 0))) {
          s.problem("intra_speeds_GBps", "expected positive speeds, highest first");
        }
      }
    }
  });
  sourced("achieved", [&](ObjectReader& s) {
    section(s, "ampere", [&](ObjectReader& a) { k.ampere = read_achieved(a); });
    section(s, "hopper", [&](ObjectReader& a) { k.hopper = read_achieved(a); });
    section(s, "default", [&](ObjectReader& a) { k.fallback = read_achieved(a); });
    section(s, "reference_link_latency_us", [&](ObjectReader& t) { keyed(t, kClassKeys, k.reference_latency_us, read_number); });
    s.string("reference_link_latency_note", Need::optional);
    section(s, "net_bandwidth_scale", [&](ObjectReader& t) {
      keyed(t, std::array<std::string_view, 3>{"infiniband", "roce", "ethernet"}, k.net_scale, read_number);
    });
    s.string("net_bandwidth_note", Need::optional);
    s.string("p2p_guess", Need::optional);
  });
  top.finish();
  return k;
}

// ---- The topology search (src/graph/search.cc), in closed form for fleetsim's node shapes --------

constexpr double kTiny = 1e-6;

int compute_capability(GpuArch arch) {
  switch (arch) {
    case GpuArch::pascal: return 60;
    case GpuArch::volta: return 70;
    case GpuArch::turing: return 75;
    case GpuArch::ampere: return 80;
    case GpuArch::ada: return 89;
    case GpuArch::hopper: return 90;
    case GpuArch::blackwell: return 100;
    case GpuArch::unknown: break;
  }
  return 90;
}

// NCCL's compCapIndex: Volta, Ampere (Ada too), Hopper, Blackwell.
std::size_t arch_index(GpuArch arch) {
  const int cc = compute_capability(arch);
  return cc >= 100 ? 3 : cc >= 90 ? 2 : cc >= 80 ? 1 : 0;
}

const std::vector<double>& speeds(const NcclConstants& k, GpuArch arch, bool inter) {
  const int cc = compute_capability(arch);
  const std::size_t v = cc >= 100 ? 2 : cc >= 90 ? 1 : 0;
  return inter ? k.inter_speeds[v] : k.intra_speeds[v];
}

int floor_count(double capacity, double per) { return static_cast<int>(std::floor(capacity / per + kTiny)); }

// The ring search: starting from the fastest channel bandwidth the system allows, keep the best
// total (channels x bandwidth) while slower bandwidths are still more than next_speed_ratio of the
// best; stop once the total reaches the GPU's bandwidth. Then raise the bandwidth at the same channel
// count if it fits, and duplicate channels as ncclTopoDupChannels does. `fits(s)` is how many
// channels of bandwidth s the system carries.
NcclGraph search_ring(const NcclConstants& k, GpuArch arch, const std::vector<double>& sp, double max_bw,
                      double total_bw, const std::function<int(double)>& fits) {
  const int max_ch = k.max_ring_channels;
  auto channels = [&](double s) { return std::min(fits(s), max_ch); };
  std::size_t i = 0;
  while (i + 1 < sp.size() && (sp[i] > max_bw + kTiny || sp[i] > total_bw + kTiny)) ++i;
  int best_n = 0;
  double best_s = 0;
  for (;;) {
    const int n = channels(sp[i]);
    if (n >= 1 && n * sp[i] > best_n * best_s + kTiny) {
      best_n = n;
      best_s = sp[i];
    }
    if (best_n > 0 && best_n * best_s >= total_bw - kTiny) break;
    if (i + 1 < sp.size() && (best_n == 0 || sp[i + 1] / best_s > k.next_speed_ratio)) {
      ++i;
      continue;
    }
    break;
  }
  if (best_n == 0) return {1, 0.1, 0.1};  // NCCL's fallback: one channel in PCI order
  std::size_t j = static_cast<std::size_t>(std::find(sp.begin(), sp.end(), best_s) - sp.begin());
  while (j > 0 && channels(sp[j - 1]) >= best_n) best_s = sp[--j];
  if (best_s >= k.duplicate_min && !(compute_capability(arch) > 80 && best_s < k.duplicate_keep && best_n > 4)) {
    const int doubled = std::min(2 * best_n, max_ch);
    best_s /= (doubled + best_n - 1) / best_n;
    best_n = doubled;
  }
  return {best_n, best_s, best_s};
}

}  // namespace

std::shared_ptr<const NcclConstants> parse_nccl_constants(std::string_view text, const std::string& file) {
  Problems problems(file);
  const Json doc = detail::parse_json(text, problems);
  problems.throw_if_any();
  auto k = std::make_shared<NcclConstants>(read_constants(doc, problems));
  problems.throw_if_any();
  return k;
}

std::shared_ptr<const NcclConstants> builtin_nccl_constants() {
  static const std::shared_ptr<const NcclConstants> k = parse_nccl_constants(embedded::nccl_json(), "models/nccl.json (built in)");
  return k;
}

NcclModel::NcclModel(const NcclComm& comm, std::shared_ptr<const NcclConstants> constants)
    : comm_(comm), k_(std::move(constants)) {
  const NcclConstants& k = *k_;
  const int r = comm_.ranks, ppn = comm_.ppn();
  if (r <= 1) return;
  const double B = comm_.intra_GBps;
  // A node's share of the search: ndevs/(ndevs-1) lets non-ring patterns use what a ring leaves.
  auto widened = [](double total, int devs) { return devs > 1 ? total * devs / (devs - 1) : total; };
  if (comm_.nodes == 1) {
    const auto& sp = speeds(k, comm_.arch, false);
    ring_ = search_ring(k, comm_.arch, sp, B, B, [&](double s) { return floor_count(B, s); });
    // The tree keeps the ring's channel count at the fastest bandwidth that fits.
    std::size_t i = 0;
    while (i + 1 < sp.size() && (sp[i] > B + kTiny || sp[i] * ring_.channels > widened(B, r) + kTiny)) ++i;
    while (i + 1 < sp.size() && ring_.channels * sp[i] > B + kTiny) ++i;
    tree_ = {ring_.channels, sp[i], sp[i]};
    // NVLS: one channel per GPU, each GPU carrying every channel plus its own head's again.
    if (comm_.nvls && comm_.nvlink && compute_capability(comm_.arch) >= 90 && r >= 2) {
      const int n = std::min(k.max_nvls_channels, r);
      std::size_t j = 0;
      while (j + 1 < sp.size() && (sp[j] > B + kTiny || sp[j] * n > widened(B, r) + kTiny)) ++j;
      while (j + 1 < sp.size() && (n + 1) * sp[j] > B + kTiny) ++j;
      if ((n + 1) * sp[j] <= B + kTiny) {
        nvls_ = {n, sp[j], sp[j]};
        while (j > 0 && nvls_.inter_GBps < 2 * nvls_.intra_GBps) nvls_.inter_GBps = sp[--j];
      }
    }
    return;
  }
  // Several nodes: channels enter and leave each node through its NICs.
  const auto& sp = speeds(k, comm_.arch, true);
  const double net = std::min(comm_.nic_GBps, comm_.gpu_nic_GBps);
  // Channels of bandwidth s the NICs carry, and the GPUs' own links inside the node: over NVLink a
  // ring enters at one GPU, so each GPU forwards (ppn-1)/ppn of the channels.
  auto nic_channels = [&](double s) { return comm_.rails * floor_count(net, s); };
  auto intra_channels = [&](double s) {
    if (ppn <= 1) return std::numeric_limits<int>::max();
    return comm_.nvlink ? floor_count(B, s * (ppn - 1) / ppn) : floor_count(B, s);
  };
  const double total = ppn <= 1 ? net : B;
  ring_ = search_ring(k, comm_.arch, sp, net, total,
                      [&](double s) { return std::min(nic_channels(s), intra_channels(s)); });
  {
    std::size_t i = 0;
    while (i + 1 < sp.size() && (sp[i] > net + kTiny || sp[i] * ring_.channels > widened(total, ppn) + kTiny)) ++i;
    while (i + 1 < sp.size() && std::min(nic_channels(sp[i]), intra_channels(sp[i])) < ring_.channels) ++i;
    tree_ = {ring_.channels, sp[i], sp[i]};
    // Trees may run faster inside the node than between nodes (search.cc, pass 2).
    while (i > 0 && tree_.intra_GBps < 2 * tree_.inter_GBps && intra_channels(sp[i - 1]) >= ring_.channels) {
      tree_.intra_GBps = sp[--i];
    }
  }
  // NVLS tree: a head per GPU, each with a NIC of its own.
  if (comm_.nvls && comm_.nvlink && compute_capability(comm_.arch) >= 90 && ppn >= 2) {
    const int n = std::min({k.max_nvls_channels, ppn, comm_.rails});
    if (n >= 2) {
      std::size_t j = 0;
      while (j + 1 < sp.size() && (sp[j] > net + kTiny || sp[j] * n > widened(B, ppn) + kTiny)) ++j;
      while (j + 1 < sp.size() && (n + 1) * sp[j] > B + kTiny) ++j;
      if ((n + 1) * sp[j] <= B + kTiny) {
        nvls_ = {n, sp[j], sp[j]};
        while (j > 0 && nvls_.inter_GBps < 2 * nvls_.intra_GBps && sp[j - 1] <= net + kTiny) nvls_.inter_GBps = sp[--j];
      }
    }
  }
}

const NcclGraph& NcclModel::graph(CollectiveAlgo algo) const {
  switch (algo) {
    case CollectiveAlgo::ring: return ring_;
    case CollectiveAlgo::tree:
    case CollectiveAlgo::pat: return tree_;
    case CollectiveAlgo::nvls:
    case CollectiveAlgo::nvls_tree: return nvls_;
    default: return none_;
  }
}

namespace {

std::size_t algo_index(CollectiveAlgo algo) {
  switch (algo) {
    case CollectiveAlgo::tree: return 0;
    case CollectiveAlgo::ring: return 1;
    case CollectiveAlgo::nvls: return 2;
    case CollectiveAlgo::nvls_tree: return 3;
    case CollectiveAlgo::pat: return 4;
    default: break;
  }
  FLEETSIM_CHECK(false, "not one of NCCL's tuned algorithms");
  return 0;
}

int log2i(int n) {
  int l = 0;
  while (n > 1) {
    n >>= 1;
    ++l;
  }
  return l;
}

bool tuned(CollectiveOp op) { return op != CollectiveOp::send_recv && op != CollectiveOp::all_to_all; }

constexpr std::array kTunedAlgos{CollectiveAlgo::tree, CollectiveAlgo::ring, CollectiveAlgo::nvls, CollectiveAlgo::nvls_tree,
                                 CollectiveAlgo::pat};
constexpr std::array kProtos{CollectiveProto::ll, CollectiveProto::ll128, CollectiveProto::simple};

}  // namespace

// src/graph/tuning.cc, ncclTopoTuneModel, for one (function, algorithm, protocol).
NcclModel::Cost NcclModel::cost(CollectiveOp op, CollectiveAlgo algo, CollectiveProto proto) const {
  const NcclConstants& k = *k_;
  const int n = comm_.ranks, nodes = comm_.nodes;
  if (n <= 1 || !tuned(op) || proto == CollectiveProto::automatic) return {};
  const bool ar = op == CollectiveOp::all_reduce;
  const bool ag_rs = op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter;
  const bool nvls_family = algo == CollectiveAlgo::nvls || algo == CollectiveAlgo::nvls_tree;
  // Which functions each algorithm runs, and which protocols.
  if ((op == CollectiveOp::broadcast || op == CollectiveOp::reduce) && algo != CollectiveAlgo::ring) return {};
  if (ag_rs && algo != CollectiveAlgo::ring && algo != CollectiveAlgo::nvls && algo != CollectiveAlgo::pat) return {};
  if (ar && algo == CollectiveAlgo::pat) return {};
  if ((nvls_family || algo == CollectiveAlgo::pat) && proto != CollectiveProto::simple) return {};
  if (algo == CollectiveAlgo::pat && nodes != n) return {};        // PAT: one GPU per node
  if (algo == CollectiveAlgo::nvls_tree && nodes == 1) return {};  // NVLS tree only across nodes
  if (algo == CollectiveAlgo::nvls && nodes > 1) return {};        // NVLS across nodes needs CollNet (SHARP)
  // LL128 only where NCCL enables it by default: NVLink inside the node (or one GPU per node).
  if (proto == CollectiveProto::ll128 && !(comm_.nvlink || comm_.ppn() == 1)) return {};
  const NcclGraph& g = graph(algo);
  if (g.channels == 0 || (nvls_family && g.channels < 2)) return {};

  const std::size_t a = algo_index(algo), p = static_cast<std::size_t>(proto) - 1, ai = arch_index(comm_.arch);
  const std::size_t i2 = nodes <= 2 ? static_cast<std::size_t>(nodes - 1) : 2;
  const std::size_t cpu = static_cast<std::size_t>(comm_.cpu);
  const double ll_max = nodes == 1 ? k.ll_one_node[ai] : nodes == 2 ? k.ll_two_nodes[cpu] : k.ll_more_nodes[cpu];
  const double ppn = static_cast<double>(n) / nodes;
  const int nsteps = ar ? 2 * (n - 1) : ag_rs ? n - 1 : n;

  double bw = nodes <= 2 ? g.intra_GBps : g.inter_GBps;
  if (nvls_family) {
    double intra = g.intra_GBps * k.nvls_efficiency[ai] * (g.channels - 1) / g.channels;
    intra *= ar ? 2.0 : (ppn - 1) / ppn;
    const double inter = g.inter_GBps * (nodes <= 2 && algo == CollectiveAlgo::nvls_tree ? 2 : 1);
    bw = std::min(intra, inter);
    if (algo == CollectiveAlgo::nvls_tree) bw = std::min(bw, k.nvls_tree[ai][i2]);
  }
  double bus = g.channels * bw;
  const bool ring = algo == CollectiveAlgo::ring, tree = algo == CollectiveAlgo::tree;
  if (ring && proto == CollectiveProto::ll) bus = std::min(ll_max, bus * k.ring_ll);
  if (ring && proto == CollectiveProto::ll128) bus = std::min(bus * k.ring_ll128_factor, g.channels * k.ring_ll128[ai][i2]);
  if (tree && ar) bus = std::min(bus * k.tree_factor, g.channels * k.tree[ai][i2]);
  if (tree && proto == CollectiveProto::ll) bus = std::min(bus * k.tree_ll, ll_max);
  if (tree && proto == CollectiveProto::ll128) {
    bus = std::min(bus * (nodes == 1 ? k.tree_ll128_one_node : k.tree_ll128_factor), g.channels * k.tree_ll128[ai][i2]);
  }
  if (algo == CollectiveAlgo::pat) bus *= k.pat_factor;
  // Bus bandwidth to algorithm bandwidth (non-ring all-gather and reduce-scatter are left as they are).
  if (!(!ring && ag_rs)) bus *= (ring || nvls_family) ? static_cast<double>(n) / nsteps : 0.5;

  Cost c;
  c.bw_GBps = bus;
  c.base_us = k.base_us[a][p];
  const std::size_t intra_hw = comm_.nvlink ? kNvlink : kPcie;
  double intra_lat = k.hw_us[intra_hw][a][p];
  const double inter_lat = ppn == 1 ? k.hw_us[kNet][0][p] : k.hw_us[kNet][a][p];  // one GPU per node: the tree's
  if (ring) {
    if (op == CollectiveOp::broadcast || op == CollectiveOp::reduce) {
      c.steps_us = k.hw_us[nodes == 1 ? intra_hw : std::size_t{kNet}][a][p];
    } else {
      if (nodes > 1) intra_lat = std::max(intra_lat, k.net_overhead_us[cpu] * (proto == CollectiveProto::simple ? 3 : 1));
      const int inter_steps = nodes == 1 ? 0 : ar ? 2 * (nodes - 1) : nodes - 1;
      c.steps_us = (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
    }
  } else if (tree) {
    if (ar) c.steps_us = 2 * ((n / nodes - 1) * intra_lat + log2i(nodes) * inter_lat);
  } else if (algo == CollectiveAlgo::nvls) {
    c.base_us = 0;
    c.steps_us = intra_lat;
  } else if (algo == CollectiveAlgo::nvls_tree) {
    c.steps_us = intra_lat + 2 * log2i(nodes) * inter_lat;
  } else {  // PAT
    c.steps_us = log2i(nodes) * (inter_lat / k.pat_network_divisor) + n * k.pat_per_rank_us;
  }
  return c;
}

bool NcclModel::corrected(CollectiveAlgo algo) const {
  return comm_.nodes == 1 && (algo == CollectiveAlgo::ring || algo == CollectiveAlgo::tree);
}

double NcclModel::achieved_bw_scale(CollectiveAlgo algo, CollectiveProto proto) const {
  const NcclConstants& k = *k_;
  const NcclConstants::Achieved& a =
      comm_.arch == GpuArch::ampere ? k.ampere : comm_.arch == GpuArch::hopper ? k.hopper : k.fallback;
  double scale = 1;
  // The corrections were measured on rings and trees inside one node; NVLS, PAT and rings across
  // nodes (where the NICs set the pace) keep NCCL's figures.
  if (corrected(algo)) {
    scale = a.bandwidth_scale[static_cast<std::size_t>(proto) - 1];
    // Few GPUs in one box reach less of their links than eight do (measured at 2, 4 and 8).
    if (a.small_gang > 0) scale *= std::min(1.0, (1 - a.small_gang / comm_.ranks) / (1 - a.small_gang / 8));
  }
  if (comm_.nodes > 1) scale *= k.net_scale[comm_.net == LinkKind::roce ? 1 : comm_.net == LinkKind::ethernet ? 2 : 0];
  return scale;
}

std::optional<NcclEstimate> NcclModel::estimate(CollectiveOp op, double bytes, CollectiveAlgo algo, CollectiveProto proto) const {
  if (comm_.ranks <= 1) return NcclEstimate{};
  if (!tuned(op)) {
    if (algo != CollectiveAlgo::automatic && algo != CollectiveAlgo::direct) return std::nullopt;
    if (proto != CollectiveProto::automatic && proto != CollectiveProto::simple) return std::nullopt;
    return direct(op, bytes);
  }
  const NcclConstants& k = *k_;
  // src/graph/tuning.cc ncclTopoGetAlgoTime: NCCL's time of each entry; the cheapest wins, first on ties.
  auto nccl_time_us = [&](CollectiveAlgo a, CollectiveProto p, const Cost& c, double& bw, double& lat) {
    bw = c.bw_GBps;
    lat = c.latency_us();
    const int log_size = bytes >= 64 ? static_cast<int>(std::floor(std::log2(bytes / 64))) : -1;
    const auto& correction = k.tree_correction[static_cast<std::size_t>(p) - 1];
    const bool blackwell_x86 = compute_capability(comm_.arch) >= 100;  // NCCL checks for an x86 host too
    if (op == CollectiveOp::all_reduce && (a == CollectiveAlgo::tree || (a == CollectiveAlgo::nvls_tree && blackwell_x86)) &&
        log_size >= 0 && log_size < static_cast<int>(correction.size())) {
      bw *= correction[static_cast<std::size_t>(log_size)];
    }
    if (a == CollectiveAlgo::ring && p == CollectiveProto::simple && comm_.nodes > 1 && op == CollectiveOp::all_reduce &&
        bytes / (ring_.channels * comm_.ranks) >= 64) {
      lat *= compute_capability(comm_.arch) < 80 ? k.plateau_before_ampere : k.plateau_ampere;
    }
    return lat + bytes / (1000 * bw);
  };
  std::optional<NcclEstimate> best;
  double best_us = 0;
  for (CollectiveAlgo a : kTunedAlgos) {
    if (algo != CollectiveAlgo::automatic && algo != a) continue;
    for (CollectiveProto p : kProtos) {
      if (proto != CollectiveProto::automatic && proto != p) continue;
      const Cost c = cost(op, a, p);
      if (!(c.bw_GBps > 0)) continue;
      double bw = 0, lat = 0;
      const double t = nccl_time_us(a, p, c, bw, lat);
      if (best && !(t < best_us)) continue;
      best_us = t;
      NcclEstimate e;
      e.algo = a;
      e.proto = p;
      e.channels = graph(a).channels;
      e.nccl_s = t * 1e-6;
      // What the choice achieves: NCCL's per-step latencies and bandwidth, scaled as measured, plus
      // the steps' extra link latency.
      const NcclConstants::Achieved& ach =
          comm_.arch == GpuArch::ampere ? k.ampere : comm_.arch == GpuArch::hopper ? k.hopper : k.fallback;
      const double lat_scale = corrected(a) ? ach.latency_scale[static_cast<std::size_t>(p) - 1] : 1.0;
      const double plateau = c.latency_us() > 0 ? lat / c.latency_us() : 1.0;
      const int n = comm_.ranks, nodes = comm_.nodes;
      const int inter_steps = nodes == 1 ? 0
                              : a == CollectiveAlgo::ring ? (op == CollectiveOp::all_reduce ? 2 * (nodes - 1) : nodes - 1)
                                                          : 2 * log2i(nodes);
      const int all_steps = a == CollectiveAlgo::ring ? (op == CollectiveOp::all_reduce ? 2 * (n - 1) : n - 1)
                            : a == CollectiveAlgo::tree ? 2 * (n / nodes - 1) + inter_steps
                                                        : 1 + inter_steps;
      const double extra = (all_steps - inter_steps) * intra_extra_us() + inter_steps * net_extra_us();
      e.latency_s = ((c.base_us + c.steps_us * lat_scale) * plateau + extra) * 1e-6 * comm_.latency_scale;
      e.transfer_s = bytes / (bw * 1e9 * achieved_bw_scale(a, p) * comm_.bandwidth_scale);
      best = e;
    }
  }
  return best;
}

double NcclModel::intra_extra_us() const {
  return std::max(0.0, comm_.intra_link_us - k_->reference_latency_us[comm_.nvlink ? kNvlink : kPcie]);
}
double NcclModel::net_extra_us() const { return std::max(0.0, comm_.net_link_us - k_->reference_latency_us[kNet]); }

// Point-to-point operations, which NCCL runs as grouped sends and receives without its tuner.
NcclEstimate NcclModel::direct(CollectiveOp op, double bytes) const {
  const NcclConstants& k = *k_;
  const NcclConstants::Achieved& a =
      comm_.arch == GpuArch::ampere ? k.ampere : comm_.arch == GpuArch::hopper ? k.hopper : k.fallback;
  const std::size_t intra = comm_.nvlink ? kNvlink : kPcie;
  const double intra_Bps = comm_.intra_GBps * 1e9 * a.p2p_bandwidth_scale[intra];
  const double net_Bps = std::min(comm_.nic_GBps, comm_.gpu_nic_GBps) * 1e9 * a.p2p_bandwidth_scale[kNet] *
                         k.net_scale[comm_.net == LinkKind::roce ? 1 : comm_.net == LinkKind::ethernet ? 2 : 0];
  const double n = comm_.ranks, ppn = comm_.ppn();
  NcclEstimate e;
  e.algo = CollectiveAlgo::direct;
  e.proto = CollectiveProto::simple;
  const bool across = comm_.nodes > 1;
  e.latency_s = across ? (a.p2p_latency_us[kNet] + net_extra_us()) * 1e-6 : (a.p2p_latency_us[intra] + intra_extra_us()) * 1e-6;
  if (op == CollectiveOp::send_recv) {
    // nccl-tests' sendrecv: each rank sends to the next; across nodes one pair per boundary meets the NIC.
    e.transfer_s = bytes / (across ? net_Bps : intra_Bps);
  } else {
    // all-to-all: a GPU sends (n-1)/n of its data, the off-node part through its node's NICs.
    const double inside = (ppn - 1) / n * bytes / intra_Bps;
    const double outside = across ? ppn * (n - ppn) / n * bytes / (comm_.rails * net_Bps) : 0;
    e.transfer_s = std::max(inside, outside);
  }
  e.latency_s *= comm_.latency_scale;
  e.transfer_s /= comm_.bandwidth_scale;
  e.nccl_s = e.time_s();
  return e;
}

std::string NcclModel::describe() const {
  auto gbps = [](double v) {
    char s[32];
    std::snprintf(s, sizeof s, "%g", std::round(v * 10) / 10);
    return std::string(s);
  };
  auto graph_text = [&](const char* name, const NcclGraph& g) {
    if (g.channels == 0) return std::string();
    std::string t = std::string(", ") + name + " " + std::to_string(g.channels) + " x " + gbps(g.intra_GBps);
    if (g.inter_GBps != g.intra_GBps) t += "/" + gbps(g.inter_GBps);
    return t;
  };
  std::string s = "NCCL model (" + k_->version.substr(0, k_->version.find(' ', 5)) + "): " + std::to_string(comm_.ranks) + " ranks on " +
                  std::to_string(comm_.nodes) + (comm_.nodes == 1 ? " node" : " nodes") + ", " + std::string(gpu_arch_name(comm_.arch)) +
                  ", " + (comm_.nvlink ? "NVLink " : "PCIe ") + gbps(comm_.intra_GBps) + " GB/s per GPU" + (comm_.nvls ? ", NVLS" : "");
  if (comm_.nodes > 1) s += ", " + std::to_string(comm_.rails) + (comm_.rails == 1 ? " NIC of " : " NICs of ") + gbps(comm_.nic_GBps) + " GB/s per node";
  s += "; channels x GB/s:" + graph_text("ring", ring_).substr(1) + graph_text("tree", tree_) + graph_text("nvls", nvls_);
  return s;
}

std::vector<std::string> NcclModel::assumptions() const {
  std::vector<std::string> out;
  if (comm_.ranks <= 1) return out;
  if (comm_.arch != GpuArch::ampere && comm_.arch != GpuArch::hopper) {
    out.push_back("no NCCL measurements on " + std::string(gpu_arch_name(comm_.arch)) +
                  " GPUs were used: times are NCCL's own model, uncorrected (send/recv and all-to-all: a guessed latency at NCCL's link bandwidth)");
  }
  if (!comm_.nvlink) out.push_back("point-to-point over PCIe at 80% of NCCL's PCIe bandwidth is a guess");
  if (comm_.nodes > 1 && comm_.net == LinkKind::ethernet) {
    out.push_back("TCP over Ethernet delivering " + std::to_string(static_cast<int>(k_->net_scale[2] * 100 + 0.5)) +
                  "% of NCCL's inter-node bandwidth is a guess");
  }
  return out;
}

std::optional<NcclComm> nccl_comm(const Cluster& cluster, std::span<const GpuId> gpus) {
  NcclComm c;
  c.ranks = static_cast<int>(gpus.size());
  c.nvlink = c.nvls = true;
  c.intra_GBps = c.nic_GBps = c.gpu_nic_GBps = std::numeric_limits<double>::infinity();
  c.rails = std::numeric_limits<int>::max();
  c.nodes = 0;
  int arch_cc = std::numeric_limits<int>::max();
  std::vector<NodeId> nodes;
  std::vector<std::vector<int>> switches;  // per node: the PCIe switches (each with its NIC) of its ranks
  for (GpuId g : gpus) {
    const GpuType& type = cluster.gpu_type(g);
    if (type.arch == GpuArch::unknown) return std::nullopt;
    if (compute_capability(type.arch) < arch_cc) {
      arch_cc = compute_capability(type.arch);
      c.arch = type.arch;  // NCCL tunes for the oldest GPU of a communicator
    }
    const NodeId node = cluster.node_of(g);
    const auto it = std::find(nodes.begin(), nodes.end(), node);
    const std::size_t k = static_cast<std::size_t>(it - nodes.begin());
    if (it == nodes.end()) {
      nodes.push_back(node);
      switches.emplace_back();
    }
    const NodeGroup& grp = cluster.group(node);
    const int local = static_cast<int>(index(g) - index(cluster.first_gpu(node)));
    const int sw = local * grp.node.nics / grp.node.gpus;
    if (std::find(switches[k].begin(), switches[k].end(), sw) == switches[k].end()) switches[k].push_back(sw);
  }
  c.nodes = static_cast<int>(nodes.size());
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    const NodeGroup& grp = cluster.group(nodes[k]);
    // MIG instances have no NVLink peer-to-peer: they meet over PCIe.
    const bool nvlink = grp.gpu_link.kind == LinkKind::nvlink && grp.mig_slices == 1;
    const LinkType& intra = nvlink ? grp.gpu_link : grp.gpu_link.kind == LinkKind::nvlink ? grp.host_link : grp.gpu_link;
    c.nvlink = c.nvlink && nvlink;
    c.nvls = c.nvls && nvlink && grp.node.nvls && compute_capability(grp.gpu.arch) >= 90;  // NVLink SHARP: Hopper on
    c.intra_GBps = std::min(c.intra_GBps, intra.nccl_Bps() / 1e9);
    c.intra_link_us = std::max(c.intra_link_us, intra.latency_s * 1e6);
    c.nic_GBps = std::min(c.nic_GBps, grp.nic.nccl_Bps() / 1e9);
    c.gpu_nic_GBps = std::min(c.gpu_nic_GBps, grp.host_link.nccl_Bps() / 1e9);
    c.net_link_us = std::max(c.net_link_us, grp.nic.latency_s * 1e6);
    if (grp.node.cpu == CpuVendor::amd) c.cpu = CpuVendor::amd;  // NCCL reads a mixed system as AMD
    if (grp.nic.kind == LinkKind::roce || grp.nic.kind == LinkKind::ethernet) c.net = grp.nic.kind;
    c.rails = std::min(c.rails, static_cast<int>(switches[k].size()));
  }
  // A calibration of the link the collective crosses: the GPU link on one node, the NICs across nodes.
  c.latency_scale = 0;
  c.bandwidth_scale = std::numeric_limits<double>::infinity();
  for (NodeId node : nodes) {
    const NodeGroup& grp = cluster.group(node);
    const LinkType& link = c.nodes == 1 ? grp.gpu_link : grp.nic;
    c.latency_scale = std::max(c.latency_scale, link.collective_latency_scale);
    c.bandwidth_scale = std::min(c.bandwidth_scale, link.collective_bandwidth_scale);
  }
  return c;
}

}  // namespace fleetsim
