#include "fleetsim/topology.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"

namespace fleetsim {
namespace {

// Latencies as integer picoseconds, so equal-cost paths compare exactly equal, plus one per hop: of
// equal-latency paths the shortest wins, and a walk over zero-latency links still makes progress.
std::uint64_t weight_of(double latency_s) { return static_cast<std::uint64_t>(std::llround(latency_s * 1e12)) + 1; }

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a ^ (b + 0x9E3779B97F4A7C15ull + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

// Distances (picoseconds) to recently asked targets, for route walks. A target inside a node is
// reached from outside only over the node's ways in (links from outside into it), so its distances
// need one search inside the node plus the distances to the few outside ends of those ways in
// (leaf or single switch), which every target of every node shares: one full search per switch
// rather than one per target. Lookups only, so the unordered maps' order never shows in any output.
struct Topology::NodeTarget {
  struct WayIn {
    const std::vector<std::uint64_t>* to_outside_end = nullptr;  // full distances to the link's outside end
    std::uint64_t then = 0;  // the least, over the links from that end, of the link's weight + from its inside end
  };
  std::vector<std::uint64_t> inside;  // per vertex of the node (by local index), over paths staying inside
  std::vector<WayIn> ways_in;
  std::vector<std::uint64_t> every;  // every vertex's distance, where the tables fit (else empty)
};

struct Topology::DistanceCache {
  // The links into each vertex, as one array with offsets (the searches run on the reversed graph).
  std::vector<std::uint32_t> in_offsets, in_links;
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> full;  // every vertex's distance
  std::unordered_map<std::uint32_t, NodeTarget> node_target;
  std::size_t bytes = 0, tabled_bytes = 0;  // all tables; those of NodeTarget::every
  std::vector<std::pair<std::uint64_t, std::uint32_t>> heap;  // search scratch
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

std::uint32_t Topology::add_vertex(std::string name, std::uint32_t node) {
  vertex_names_.push_back(std::move(name));
  vertex_node_.push_back(node);
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
    add_vertex(cluster.gpu_name(make_id<GpuId>(g)), kNone);  // its node is set with the node's other vertices
    is_gpu_.back() = 1;
  }
  // Inside each node.
  std::vector<std::vector<std::uint32_t>> node_nics(cluster.node_count());
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    const NodeId node = make_id<NodeId>(n);
    const NodeGroup& grp = cluster.group(node);
    const std::string prefix = "n" + std::to_string(n) + ".";
    host_vertex_.push_back(add_vertex(prefix + "host", n));
    nvswitch_vertex_.push_back(kNone);
    storage_vertex_.push_back(kNone);
    if (const auto& storage = cluster.spec().storage) {
      storage_vertex_.back() = add_vertex(prefix + "storage", n);
      add_link_pair(storage_vertex_.back(), host_vertex_.back(), storage->bandwidth_Bps, storage->latency_s,
                    LinkClass::storage, LinkKind::pcie);
    }
    // MIG instances have no peer-to-peer over NVLink: their traffic goes through PCIe.
    if (grp.gpu_link.kind == LinkKind::nvlink && grp.mig_slices == 1) {
      nvswitch_vertex_.back() = add_vertex(prefix + "nvswitch", n);
    }
    const int nics = grp.node.nics;
    const int gpus = grp.node.gpus;
    std::vector<std::uint32_t> pcie(static_cast<std::size_t>(nics));
    for (int j = 0; j < nics; ++j) {
      pcie[j] = add_vertex(prefix + "pcie" + std::to_string(j), n);
      add_link_pair(pcie[j], host_vertex_.back(), grp.host_link.bandwidth_Bps, grp.host_link.latency_s,
                    LinkClass::host_link, grp.host_link.kind);
      const std::uint32_t nic = add_vertex(prefix + "nic" + std::to_string(j), n);
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
      vertex_node_[gpu] = n;
      if (slices > 1) {
        if (i % slices == 0) {
          const std::string name = prefix + "g" + std::to_string(i / slices);
          up = add_vertex(name + ".up", n);
          down = add_vertex(name + ".down", n);
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
      leaves.push_back(Leaf{add_vertex(std::move(name), kNone)});
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
    for (std::uint32_t s = 0; s < spines; ++s) spine[s] = add_vertex("spine" + std::to_string(s), kNone);
    for (const Leaf& leaf : leaves) {
      const double uplink = leaf.down_Bps / fabric.oversubscription / spines;
      for (std::uint32_t s : spine) add_link_pair(leaf.vertex, s, uplink, up.latency_s, LinkClass::fabric, up.kind);
    }
  }

  link_weight_.reserve(links_.size());
  for (const TopoLink& l : links_) link_weight_.push_back(weight_of(l.latency_s));
  link_down_.assign(links_.size(), 0);
  // Each node's vertices, numbered from 0 for the searches inside it.
  node_offsets_.assign(cluster.node_count() + 1, 0);
  for (std::uint32_t n : vertex_node_) {
    if (n != kNone) ++node_offsets_[n + 1];
  }
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) node_offsets_[n + 1] += node_offsets_[n];
  node_members_.resize(node_offsets_.back());
  local_index_.assign(vertex_count(), kNone);
  std::vector<std::uint32_t> fill(node_offsets_.begin(), node_offsets_.end() - 1);
  for (std::uint32_t v = 0; v < vertex_count(); ++v) {
    const std::uint32_t n = vertex_node_[v];
    if (n == kNone) continue;
    local_index_[v] = fill[n] - node_offsets_[n];
    node_members_[fill[n]++] = v;
  }
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
  forget_distances();
}

void Topology::forget_distances() const {
  cache_->full.clear();
  cache_->node_target.clear();
  cache_->bytes = cache_->tabled_bytes = 0;
}

// Shortest distances to `target` on the reversed graph, from every vertex (node == kNone) or from the
// vertices of `node` over the links inside it (dist by local index). GPUs forward nothing: a path
// enters a GPU only at the target. Down links are left out.
void Topology::search_to(std::uint32_t target, std::uint32_t node, std::vector<std::uint64_t>& dist) const {
  DistanceCache& c = *cache_;
  if (c.in_offsets.empty()) {  // the links into each vertex, built at the first search
    c.in_offsets.assign(vertex_count() + 1, 0);
    for (const TopoLink& l : links_) ++c.in_offsets[l.to + 1];
    for (std::uint32_t v = 0; v < vertex_count(); ++v) c.in_offsets[v + 1] += c.in_offsets[v];
    c.in_links.resize(links_.size());
    std::vector<std::uint32_t> fill(c.in_offsets.begin(), c.in_offsets.end() - 1);
    for (std::uint32_t l = 0; l < links_.size(); ++l) c.in_links[fill[links_[l].to]++] = l;
  }
  const auto slot = [&](std::uint32_t v) { return node == kNone ? v : local_index_[v]; };
  dist.assign(node == kNone ? vertex_count() : node_offsets_[node + 1] - node_offsets_[node], kUnreachable);
  auto& heap = c.heap;
  heap.clear();
  const auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
  dist[slot(target)] = 0;
  heap.emplace_back(0, target);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const auto [d, v] = heap.back();
    heap.pop_back();
    if (d != dist[slot(v)] || (is_gpu_[v] != 0 && v != target)) continue;  // stale, or a GPU that forwards nothing
    for (std::uint32_t i = c.in_offsets[v]; i < c.in_offsets[v + 1]; ++i) {
      const std::uint32_t l = c.in_links[i];
      const std::uint32_t u = links_[l].from;
      if (link_down_[l] != 0 || (node != kNone && vertex_node_[u] != node)) continue;
      const std::uint64_t through = d + link_weight_[l];
      if (through < dist[slot(u)]) {
        dist[slot(u)] = through;
        heap.emplace_back(through, u);
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
}

const std::vector<std::uint64_t>& Topology::full_distances_to(std::uint32_t target) const {
  DistanceCache& c = *cache_;
  if (const auto it = c.full.find(target); it != c.full.end()) return it->second;
  std::vector<std::uint64_t>& dist = c.full[target];
  search_to(target, kNone, dist);
  c.bytes += dist.size() * sizeof(std::uint64_t);
  return dist;
}

Topology::Distances Topology::distances_to(std::uint32_t target) const {
  DistanceCache& c = *cache_;
  // Bounded memory on large clusters: past 1 GiB of tables, start again (tables are rebuilt when asked).
  if (c.bytes > (std::size_t{1} << 30)) forget_distances();
  const std::uint32_t node = vertex_node_[target];
  if (node == kNone) return Distances{this, target, &full_distances_to(target), nullptr};
  auto [it, added] = c.node_target.try_emplace(target);
  NodeTarget& t = it->second;
  if (added) {
    search_to(target, node, t.inside);
    // The ways in: links from outside the node to one of its vertices that reaches the target inside.
    for (std::uint32_t i = node_offsets_[node]; i < node_offsets_[node + 1]; ++i) {
      const std::uint32_t v = node_members_[i];
      if (t.inside[local_index_[v]] == kUnreachable) continue;
        for (std::uint32_t k = c.in_offsets[v]; k < c.in_offsets[v + 1]; ++k) {
        const std::uint32_t l = c.in_links[k];
        if (link_down_[l] != 0 || vertex_node_[links_[l].from] == node) continue;
        const std::vector<std::uint64_t>* outside_end = &full_distances_to(links_[l].from);
        const std::uint64_t then = link_weight_[l] + t.inside[local_index_[v]];
        // Ways in from one switch (a node's NICs on one leaf) count once, at their best.
        const auto same = std::find_if(t.ways_in.begin(), t.ways_in.end(), [&](const auto& w) { return w.to_outside_end == outside_end; });
        if (same == t.ways_in.end()) {
          t.ways_in.push_back({outside_end, then});
        } else {
          same->then = std::min(same->then, then);
        }
      }
    }
    c.bytes += t.inside.size() * sizeof(std::uint64_t) + t.ways_in.size() * sizeof(NodeTarget::WayIn);
    // A route walk asks for many vertices' distances (a switch has a link to every NIC), so
    // every vertex's is worked out once where a table per target fits: on all but the largest clusters.
    const std::size_t table = vertex_count() * sizeof(std::uint64_t);
    if (c.tabled_bytes + table <= (std::size_t{256} << 20)) {
      const Distances parts{this, target, nullptr, &t};
      t.every.resize(vertex_count());
      for (std::uint32_t v = 0; v < vertex_count(); ++v) t.every[v] = parts.from(v);
      c.tabled_bytes += table;
      c.bytes += table;
    }
  }
  return t.every.empty() ? Distances{this, target, nullptr, &t} : Distances{this, target, &t.every, nullptr};
}

// From inside the target's node: the best of staying inside and going out and back in; from
// outside: the best way in.
std::uint64_t Topology::Distances::from(std::uint32_t v) const {
  if (full != nullptr) return (*full)[v];
  std::uint64_t best = topology->vertex_node_[v] == topology->vertex_node_[target] ? node->inside[topology->local_index_[v]]
                                                                                    : kUnreachable;
  for (const NodeTarget::WayIn& w : node->ways_in) {
    const std::uint64_t out = (*w.to_outside_end)[v];
    if (out != kUnreachable) best = std::min(best, out + w.then);
  }
  return best;
}

void Topology::route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out) const {
  FLEETSIM_CHECK(try_route(from, to, key, out), "no route from " + vertex_names_[from] + " to " + vertex_names_[to]);
}

bool Topology::reachable(std::uint32_t from, std::uint32_t to) const {
  return from == to || distances_to(to).from(from) != kUnreachable;
}

bool Topology::try_route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out) const {
  if (from == to) return true;
  const Distances dist = distances_to(to);
  std::uint64_t here = dist.from(from);
  if (here == kUnreachable) return false;
  std::uint32_t at = from;
  std::uint32_t candidates[64];
  std::uint64_t remaining[64];
  while (at != to) {
    std::uint32_t n = 0;
    for (std::uint32_t l : out_links_[at]) {
      const TopoLink& link = links_[l];
      if ((is_gpu_[link.to] != 0 && link.to != to) || link_down_[l] != 0 || link_weight_[l] > here) continue;
      const std::uint64_t next = dist.from(link.to);
      if (next != kUnreachable && next + link_weight_[l] == here && n < 64) {
        remaining[n] = next;
        candidates[n++] = l;
      }
    }
    FLEETSIM_CHECK(n > 0, "route walk found no next hop");
    const std::uint32_t pick = n == 1 ? 0 : static_cast<std::uint32_t>(mix(key, at) % n);
    out.push_back(candidates[pick]);
    at = links_[candidates[pick]].to;
    here = remaining[pick];
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
