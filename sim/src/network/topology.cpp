#include "fleetsim/topology.hpp"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/reverse_graph.hpp>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"

namespace fleetsim {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// Latencies as integer picoseconds, so equal-cost paths compare exactly equal, plus one per hop: of
// equal-latency paths the shortest wins, and a walk over zero-latency links still makes progress.
std::uint64_t weight_of(double latency_s) { return static_cast<std::uint64_t>(std::llround(latency_s * 1e12)) + 1; }

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Each edge carries its weight and its link's index, so routes can leave out links that are down.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property,
                                    boost::property<boost::edge_weight_t, std::uint64_t,
                                                    boost::property<boost::edge_index_t, std::uint32_t>>>;

}  // namespace

// Distances (picoseconds) from every vertex to recently asked targets. Lookups only, so the
// unordered map's order never shows in any output.
struct Topology::DistanceCache {
  Graph graph;
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> to_target;
};

std::string_view link_class_name(LinkClass cls) {
  switch (cls) {
    case LinkClass::gpu_link: return "gpu_link";
    case LinkClass::host_link: return "host_link";
    case LinkClass::nic: return "nic";
    case LinkClass::fabric: return "fabric";
    case LinkClass::storage: return "storage";
  }
  return "?";
}

Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

std::uint32_t Topology::add_vertex(std::string name) {
  vertex_names_.push_back(std::move(name));
  is_gpu_.push_back(0);
  out_links_.emplace_back();
  return static_cast<std::uint32_t>(vertex_names_.size() - 1);
}

void Topology::add_link(std::uint32_t from, std::uint32_t to, double capacity_Bps, double latency_s, LinkClass cls, LinkKind kind) {
  out_links_[from].push_back(static_cast<std::uint32_t>(links_.size()));
  links_.push_back(TopoLink{from, to, capacity_Bps, latency_s, cls, kind});
}

void Topology::add_link_pair(std::uint32_t a, std::uint32_t b, double capacity_Bps, double latency_s, LinkClass cls,
                             LinkKind kind) {
  add_link(a, b, capacity_Bps, latency_s, cls, kind);
  add_link(b, a, capacity_Bps, latency_s, cls, kind);
}

Topology::Topology(const Cluster& cluster, const FabricSpec& fabric) : cache_(std::make_unique<DistanceCache>()) {
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) {
    add_vertex(cluster.gpu_name(make_id<GpuId>(g)));
    is_gpu_.back() = 1;
  }
  // Inside each node.
  std::vector<std::vector<std::uint32_t>> node_nics(cluster.node_count());
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    const NodeId node = make_id<NodeId>(n);
    const NodeGroup& grp = cluster.group(node);
    const std::string prefix = "n" + std::to_string(n) + ".";
    host_vertex_.push_back(add_vertex(prefix + "host"));
    nvswitch_vertex_.push_back(kNone);
    storage_vertex_.push_back(kNone);
    if (const auto& storage = cluster.spec().storage) {
      storage_vertex_.back() = add_vertex(prefix + "storage");
      add_link_pair(storage_vertex_.back(), host_vertex_.back(), storage->bandwidth_Bps, storage->latency_s,
                    LinkClass::storage, LinkKind::pcie);
    }
    // MIG instances have no peer-to-peer over NVLink: their traffic goes through PCIe.
    if (grp.gpu_link.kind == LinkKind::nvlink && grp.mig_slices == 1) {
      nvswitch_vertex_.back() = add_vertex(prefix + "nvswitch");
    }
    const int nics = grp.node.nics;
    const int gpus = grp.node.gpus;
    std::vector<std::uint32_t> pcie(static_cast<std::size_t>(nics));
    for (int j = 0; j < nics; ++j) {
      pcie[j] = add_vertex(prefix + "pcie" + std::to_string(j));
      add_link_pair(pcie[j], host_vertex_.back(), grp.host_link.bandwidth_Bps, grp.host_link.latency_s,
                    LinkClass::host_link, grp.host_link.kind);
      const std::uint32_t nic = add_vertex(prefix + "nic" + std::to_string(j));
      add_link_pair(nic, pcie[j], grp.host_link.bandwidth_Bps, grp.host_link.latency_s, LinkClass::host_link,
                    grp.host_link.kind);
      node_nics[n].push_back(nic);
    }
    // MIG instances have no peer-to-peer, not even within their GPU: everything they send or receive
    // is staged in host memory. A physical GPU's instances share its PCIe link, one way up to the host
    // (two hops of latency) and one way down, through a port per direction.
    const int slices = grp.mig_slices;
    std::uint32_t up = 0, down = 0;
    for (int i = 0; i < gpus; ++i) {
      const std::uint32_t gpu = index(cluster.first_gpu(node)) + static_cast<std::uint32_t>(i);
      if (slices > 1) {
        if (i % slices == 0) {
          const std::string name = prefix + "g" + std::to_string(i / slices);
          up = add_vertex(name + ".up");
          down = add_vertex(name + ".down");
          add_link(up, host_vertex_.back(), grp.host_link.bandwidth_Bps, 2 * grp.host_link.latency_s, LinkClass::host_link, grp.host_link.kind);
          add_link(host_vertex_.back(), down, grp.host_link.bandwidth_Bps, 2 * grp.host_link.latency_s, LinkClass::host_link, grp.host_link.kind);
        }
        add_link(gpu, up, grp.host_link.bandwidth_Bps, 0, LinkClass::host_link, grp.host_link.kind);
        add_link(down, gpu, grp.host_link.bandwidth_Bps, 0, LinkClass::host_link, grp.host_link.kind);
        continue;
      }
      add_link_pair(gpu, pcie[static_cast<std::size_t>(i * nics / gpus)], grp.host_link.bandwidth_Bps,
                    grp.host_link.latency_s, LinkClass::host_link, grp.host_link.kind);
      if (nvswitch_vertex_.back() != kNone) {
        add_link_pair(gpu, nvswitch_vertex_.back(), grp.gpu_link.bandwidth_Bps, grp.gpu_link.latency_s,
                      LinkClass::gpu_link, grp.gpu_link.kind);
      }
    }
  }

  // The fabric: leaves (one per group of nodes, per rail when rail-optimized), then spines.
  const std::uint32_t nodes = cluster.node_count();
  const bool rails = fabric.kind == FabricKind::rail_optimized;
  const std::uint32_t per_leaf =
      fabric.kind == FabricKind::single_switch || fabric.nodes_per_leaf == 0 ? std::max(nodes, 1u)
                                                                             : static_cast<std::uint32_t>(fabric.nodes_per_leaf);
  const std::uint32_t groups = (nodes + per_leaf - 1) / per_leaf;
  std::uint32_t max_nics = 0;
  for (const auto& nics : node_nics) max_nics = std::max(max_nics, static_cast<std::uint32_t>(nics.size()));
  const std::uint32_t rail_count = rails ? max_nics : 1;

  struct Leaf {
    std::uint32_t vertex;
    double down_Bps = 0;
    std::uint32_t ports = 0;
  };
  std::vector<Leaf> leaves;
  for (std::uint32_t g = 0; g < groups; ++g) {
    for (std::uint32_t r = 0; r < rail_count; ++r) {
      std::string name = fabric.kind == FabricKind::single_switch ? "switch"
                         : rails ? "leaf" + std::to_string(g) + ".rail" + std::to_string(r)
                                 : "leaf" + std::to_string(g);
      leaves.push_back(Leaf{add_vertex(std::move(name))});
    }
  }
  for (std::uint32_t n = 0; n < nodes; ++n) {
    const NodeGroup& grp = cluster.group(make_id<NodeId>(n));
    for (std::uint32_t j = 0; j < node_nics[n].size(); ++j) {
      Leaf& leaf = leaves[(n / per_leaf) * rail_count + (rails ? j : 0)];
      add_link_pair(node_nics[n][j], leaf.vertex, grp.nic.bandwidth_Bps, grp.nic.latency_s, LinkClass::nic, grp.nic.kind);
      leaf.down_Bps += grp.nic.bandwidth_Bps;
      ++leaf.ports;
    }
  }
  if (leaves.size() > 1) {
    const LinkType up = fabric.link.value_or(cluster.group(make_id<NodeId>(0)).nic);
    // By default one spine per uplink port of the fabric link's speed.
    std::uint32_t spines = static_cast<std::uint32_t>(fabric.spines);
    if (spines == 0) {
      for (const Leaf& leaf : leaves) {
        const double ports = leaf.down_Bps / fabric.oversubscription / up.bandwidth_Bps;
        spines = std::max(spines, static_cast<std::uint32_t>(std::ceil(ports * (1 - 1e-12))));
      }
    }
    std::vector<std::uint32_t> spine(spines);
    for (std::uint32_t s = 0; s < spines; ++s) spine[s] = add_vertex("spine" + std::to_string(s));
    for (const Leaf& leaf : leaves) {
      const double uplink = leaf.down_Bps / fabric.oversubscription / spines;
      for (std::uint32_t s : spine) add_link_pair(leaf.vertex, s, uplink, up.latency_s, LinkClass::fabric, up.kind);
    }
  }

  Graph& g = cache_->graph;
  g = Graph(vertex_count());
  for (std::uint32_t l = 0; l < links_.size(); ++l) {
    link_weight_.push_back(weight_of(links_[l].latency_s));
    boost::add_edge(links_[l].from, links_[l].to, Graph::edge_property_type(link_weight_[l], l), g);
  }
  link_down_.assign(links_.size(), 0);
}

std::optional<std::uint32_t> Topology::storage_vertex(NodeId node) const {
  const std::uint32_t v = storage_vertex_[index(node)];
  if (v == kNone) return std::nullopt;
  return v;
}

std::optional<std::uint32_t> Topology::nvswitch_vertex(NodeId node) const {
  const std::uint32_t v = nvswitch_vertex_[index(node)];
  if (v == kNone) return std::nullopt;
  return v;
}

std::vector<double> Topology::capacities() const {
  std::vector<double> c;
  c.reserve(links_.size());
  for (const TopoLink& l : links_) c.push_back(l.capacity_Bps);
  return c;
}

std::string Topology::link_name(std::uint32_t link) const {
  return vertex_names_[links_[link].from] + ">" + vertex_names_[links_[link].to];
}

std::optional<std::uint32_t> Topology::find_link(std::string_view name) const {
  const std::size_t sep = name.find('>');
  if (sep == std::string_view::npos) return std::nullopt;
  for (std::uint32_t v = 0; v < vertex_count(); ++v) {
    if (vertex_names_[v] != name.substr(0, sep)) continue;
    for (std::uint32_t l : out_links_[v]) {
      if (vertex_names_[links_[l].to] == name.substr(sep + 1)) return l;
    }
  }
  return std::nullopt;
}

std::optional<std::uint32_t> Topology::reverse_link(std::uint32_t link) const {
  for (std::uint32_t l : out_links_[links_[link].to]) {
    if (links_[l].to == links_[link].from) return l;
  }
  return std::nullopt;
}

void Topology::set_link_down(std::uint32_t link, bool down) {
  if (link_down_[link] == static_cast<std::uint8_t>(down)) return;
  link_down_[link] = down ? 1 : 0;
  links_down_ = down ? links_down_ + 1 : links_down_ - 1;
  cache_->to_target.clear();
}

const std::vector<std::uint64_t>& Topology::distances_to(std::uint32_t target) const {
  auto& cache = cache_->to_target;
  if (const auto it = cache.find(target); it != cache.end()) return it->second;
  // Bounded memory on large clusters: at most 1 GiB of distance tables (about 4,000 targets on 10k GPUs).
  const std::size_t most = std::max<std::size_t>(64, (std::size_t{1} << 30) / (sizeof(std::uint64_t) * vertex_count()));
  if (cache.size() >= most) cache.clear();

  // Distances to `target` are distances from it on the reversed graph. GPUs forward nothing: an
  // edge into a GPU other than the target is removed, so no path passes through one. Down links are
  // removed too.
  const auto reversed = boost::make_reverse_graph(cache_->graph);
  using Reversed = decltype(reversed);
  struct NoTransitGpu {
    const std::vector<std::uint8_t>* is_gpu = nullptr;
    const std::vector<std::uint8_t>* down = nullptr;
    bool any_down = false;  // most of the time none is: skip the edge's index lookup
    std::uint32_t target = 0;
    const Reversed* graph = nullptr;
    bool operator()(const typename boost::graph_traits<Reversed>::edge_descriptor& e) const {
      if (any_down && (*down)[boost::get(boost::edge_index, *graph, e)] != 0) return false;
      // A reversed edge leaving GPU u stands for an original edge entering u: allowed only into the target.
      const auto u = static_cast<std::uint32_t>(boost::source(e, *graph));
      return (*is_gpu)[u] == 0 || u == target;
    }
  };
  const boost::filtered_graph<Reversed, NoTransitGpu> allowed(reversed, NoTransitGpu{&is_gpu_, &link_down_, links_down_ > 0, target, &reversed});
  std::vector<std::uint64_t> dist(vertex_count());
  boost::dijkstra_shortest_paths(
      allowed, target,
      boost::distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, allowed)))
          .distance_inf(std::numeric_limits<std::uint64_t>::max()));
  return cache.emplace(target, std::move(dist)).first->second;
}

void Topology::route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out) const {
  FLEETSIM_CHECK(try_route(from, to, key, out), "no route from " + vertex_names_[from] + " to " + vertex_names_[to]);
}

bool Topology::reachable(std::uint32_t from, std::uint32_t to) const {
  return from == to || distances_to(to)[from] != std::numeric_limits<std::uint64_t>::max();
}

bool Topology::try_route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out) const {
  if (from == to) return true;
  const std::vector<std::uint64_t>& dist = distances_to(to);
  if (dist[from] == std::numeric_limits<std::uint64_t>::max()) return false;
  std::uint32_t at = from;
  std::uint32_t candidates[64];
  while (at != to) {
    std::uint32_t n = 0;
    for (std::uint32_t l : out_links_[at]) {
      const TopoLink& link = links_[l];
      if ((is_gpu_[link.to] != 0 && link.to != to) || link_down_[l] != 0) continue;
      if (dist[link.to] != std::numeric_limits<std::uint64_t>::max() &&
          dist[link.to] + link_weight_[l] == dist[at] && n < 64) {
        candidates[n++] = l;
      }
    }
    FLEETSIM_CHECK(n > 0, "route walk found no next hop");
    const std::uint32_t chosen = candidates[n == 1 ? 0 : mix(key, at) % n];
    out.push_back(chosen);
    at = links_[chosen].to;
  }
  return true;
}

double Topology::latency_s(std::span<const std::uint32_t> route) const {
  double total = 0;
  for (std::uint32_t l : route) total += links_[l].latency_s;
  return total;
}

double Topology::bottleneck_Bps(std::span<const std::uint32_t> route) const {
  double b = std::numeric_limits<double>::infinity();
  for (std::uint32_t l : route) b = std::min(b, links_[l].capacity_Bps);
  return b;
}

}  // namespace fleetsim
