#include "fleetsim/topology.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "fleetsim/cluster.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/hash.hpp"

namespace fleetsim {
namespace {

// Latencies as integer picoseconds, so equal-cost paths compare exactly equal, plus one per hop: of
// equal-latency paths the shortest wins, and a walk over zero-latency links still makes progress.
std::uint64_t weight_of(double latency_s) { return static_cast<std::uint64_t>(std::llround(latency_s * 1e12)) + 1; }

}  // namespace

// Distances (picoseconds) for route walks, in two levels. Nodes meet only at switches (leaves,
// spines, the single switch): a path between vertices of two nodes leaves the first over one of its
// ways out (node -> switch link) and enters the second over one of its ways in (switch -> node link)
// for the last time. So the distance from x in node M to t in node N is the least, over M's ways out
// and N's ways in, of: inside M from x to the way out, the switch-to-switch distance, inside N from
// the way in to t (and, where M = N, the path that stays inside). The switch-to-switch distances come
// from a graph of switches alone, in which a path through a node (in over one way, out over another,
// as between rails) is one edge. Every search is then over one node or over the switches: none over
// the whole topology.
struct Topology::NodeTarget {
  std::uint32_t node = kNone;         // the target's node, or kNone for a switch
  std::vector<std::uint64_t> inside;  // per vertex of the node (by local index), over paths staying inside
  std::vector<std::uint64_t> from_switch;  // per switch (switch index order): its distance to the target
  std::vector<std::uint64_t> every;   // every vertex's distance, once worth keeping (else empty)
  std::uint32_t walks = 0;            // route walks to the target so far
};

struct Topology::DistanceCache {
  bool ready = false;
  // The links into each vertex, as one array with offsets (the searches run on the reversed graph).
  std::vector<std::uint32_t> in_offsets, in_links;
  // Per node: the switches its ways out lead to, and for each, per vertex of the node (local index),
  // the least distance inside the node to a way out to that switch plus the way out.
  std::vector<std::vector<std::uint32_t>> exit_switch;
  std::vector<std::vector<std::uint64_t>> exit_cost;
  std::vector<std::uint64_t> between;  // switch by switch (switch index order)
  std::vector<std::unique_ptr<NodeTarget>> targets;  // per vertex, once asked for
  std::size_t bytes = 0, tabled_bytes = 0;  // of every NodeTarget; of their `every` tables
  std::vector<std::pair<std::uint64_t, std::uint32_t>> heap;  // search scratch
  // Routes already walked, by (from, to, flow key): a walk asks for the distances of the links it may
  // take at every hop, a lookup costs a hash or two (the pair's slot for any key first). Collectives key
  // a flow by its two ends, so plans made again (a search's candidates, a job's iterations, a collective's
  // latency, time and flows) walk each pair once. A walk that met no choice of equal ways (one path: inside
  // a node, under one switch or one leaf) is the pair's route under every key, so it is kept once for any
  // key: a DAG's transfers, each keyed by its own edge, then walk each pair of GPUs once. Their links are slices of one array; both are
  // dropped with the distances, and when they pass kRouteMemoBytes. The table is open-addressed (linear
  // probing over a power of two of slots, at most half full), so a lookup reads a slot or two where a
  // node-based map chases a pointer a node: with a million routes remembered that was a third of an
  // all-to-all's time.
  struct RouteSlot {
    std::uint64_t key = 0;  // not compared when any_key
    std::uint32_t from = kNone, to = 0;  // from kNone: empty
    std::uint32_t first = 0;  // the route's links in route_links
    std::uint32_t count : 31 = 0, any_key : 1 = 0;
  };
  static constexpr std::uint64_t kAnyKey = 0x9e3779b97f4a7c15ull;  // only seeds the hash of a key-free slot
  std::vector<RouteSlot> route_slots;
  std::size_t routes = 0;
  std::vector<std::uint32_t> route_links;
  // The slot of (from, to, key), or of (from, to) for any key, or the empty one it would take.
  std::size_t slot_of(std::uint32_t from, std::uint32_t to, std::uint64_t key, bool any_key) const {
    const std::size_t mask = route_slots.size() - 1;
    std::size_t i = hash_combine(any_key ? kAnyKey : key, (std::uint64_t{from} << 32) | to) & mask;
    for (;; i = (i + 1) & mask) {
      const RouteSlot& r = route_slots[i];
      if (r.from == kNone || (r.from == from && r.to == to && r.any_key == any_key && (any_key || r.key == key))) return i;
    }
  }
  const RouteSlot* find(std::uint32_t from, std::uint32_t to, std::uint64_t key) const {
    if (routes == 0) return nullptr;
    for (const bool any_key : {true, false}) {
      const RouteSlot& r = route_slots[slot_of(from, to, key, any_key)];
      if (r.from != kNone) return &r;
    }
    return nullptr;
  }
  void remember(std::uint32_t from, std::uint32_t to, std::uint64_t key, bool any_key, std::uint32_t first, std::uint32_t count) {
    if (2 * (routes + 1) > route_slots.size()) {
      std::vector<RouteSlot> old(std::max<std::size_t>(1024, 2 * route_slots.size()));
      old.swap(route_slots);
      for (const RouteSlot& r : old) {
        if (r.from != kNone) route_slots[slot_of(r.from, r.to, r.key, r.any_key != 0)] = r;
      }
    }
    RouteSlot r{.key = key, .from = from, .to = to, .first = first};
    r.count = count & 0x7FFFFFFFu;  // a route of 2^31 links is not walked
    r.any_key = any_key ? 1 : 0;
    route_slots[slot_of(from, to, key, any_key)] = r;
    ++routes;
  }
  // The structure's parts (every link up; kept while links go down and up): per node type (indexed by its
  // first node), and per group of nodes, rail by rail, the least distance between two of its leaves
  // through its nodes alone.
  bool structure_ready = false;
  std::vector<std::unique_ptr<NodeShape>> shapes;
  std::vector<std::uint64_t> crossing;  // [(group * rails + from rail) * rails + to rail]
  std::vector<std::uint32_t> hop_scratch;  // a walk's links worth looking at, hop by hop
  // Routes by class (Topology::RouteClass): each class's links, as places among its pair's nodes' links (kSecondNode:
  // the second node's; kToSwitch: among its links to and from switches, else among those inside it), once walked.
  static constexpr std::uint32_t kSecondNode = 1u << 31, kToSwitch = 1u << 30;
  struct ClassHash {
    std::size_t operator()(const std::array<std::uint64_t, 3>& k) const { return hash_combine(hash_combine(k[0], k[1]), k[2]); }
  };
  std::unordered_map<std::array<std::uint64_t, 3>, std::pair<std::uint32_t, std::uint32_t>, ClassHash> classes;  // (first, count)
  std::vector<std::uint32_t> class_links;
  std::size_t routes_from_class = 0;
};

struct Topology::RouteClass {
  std::array<std::uint64_t, 3> key;  // (from's type, its place), (to's type, its place), (the group or kNone, one node)
  std::uint32_t from_node, to_node;
};

// Distances inside a node of one type, all links up: from each of its vertices to each (by local index),
// over paths that stay inside, and to each of its ways out (as prepare_distances works them out per node).
struct Topology::NodeShape {
  std::uint32_t size = 0;
  std::vector<std::uint64_t> inside;     // [to * size + from]
  std::vector<std::uint64_t> exit_cost;  // [way out k * size + from], the way out's link included
  struct Port {
    std::uint32_t exit, member;  // a link from the switch of way out k into a member (local index)
    std::uint64_t weight;
  };
  std::vector<Port> ports;
};

std::string_view link_class_name(LinkClass cls) {
  switch (cls) {
    case LinkClass::gpu_link: return "gpu_link";
    case LinkClass::host_link: return "host_link";
    case LinkClass::nic: return "nic";
    case LinkClass::fabric: return "fabric";
    case LinkClass::storage: return "storage";
    case LinkClass::host_memory: return "host_memory";
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
    inside_links_at_.push_back(static_cast<std::uint32_t>(links_.size()));
    host_vertex_.push_back(add_vertex(prefix + "host", n));
    nvswitch_vertex_.push_back(kNone);
    storage_vertex_.push_back(kNone);
    memory_bus_.push_back(kNone);
    if (grp.node.host_memory_bandwidth_Bps > 0) {
      // Not in out_links_: no route walks it; try_route adds it.
      memory_bus_.back() = static_cast<std::uint32_t>(links_.size());
      links_.push_back(TopoLink{host_vertex_.back(), host_vertex_.back(), grp.node.host_memory_bandwidth_Bps, 0,
                                LinkClass::host_memory, LinkKind::memory});
    }
    staged_in_host_.push_back(grp.mig_slices > 1 ? 1 : 0);
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
  first_switch_link_ = static_cast<std::uint32_t>(links_.size());
  for (std::uint32_t n = 0; n < nodes; ++n) {
    const NodeGroup& grp = cluster.group(make_id<NodeId>(n));
    switch_links_at_.push_back(static_cast<std::uint32_t>(links_.size()));
    for (std::uint32_t j = 0; j < node_nics[n].size(); ++j) {
      Leaf& leaf = leaves[(n / per_leaf) * rail_count + (rails ? j : 0)];
      add_link_pair(node_nics[n][j], leaf.vertex, grp.nic.bandwidth_Bps, grp.nic.latency_s, LinkClass::nic, grp.nic.kind);
      leaf.down_Bps += grp.nic.bandwidth_Bps;
      ++leaf.ports;
    }
  }
  const auto switch_links_end = static_cast<std::uint32_t>(links_.size());
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
    spines_ = spines;
    uplinks_ = static_cast<std::uint32_t>(links_.size());
    fabric_weight_ = weight_of(up.latency_s);
    for (const Leaf& leaf : leaves) {
      const double uplink = leaf.down_Bps / fabric.oversubscription / spines;
      for (std::uint32_t s : spine) add_link_pair(leaf.vertex, s, uplink, up.latency_s, LinkClass::fabric, up.kind);
    }
  }

  link_node_.assign(links_.size(), kNone);  // the links between leaves and spines stay no node's
  for (std::uint32_t n = 0; n < nodes; ++n) {
    std::fill(link_node_.begin() + inside_links_at_[n], link_node_.begin() + (n + 1 < nodes ? inside_links_at_[n + 1] : first_switch_link_), n);
    std::fill(link_node_.begin() + switch_links_at_[n], link_node_.begin() + (n + 1 < nodes ? switch_links_at_[n + 1] : switch_links_end), n);
  }
  leaves_ = static_cast<std::uint32_t>(leaves.size());
  rails_ = rail_count;
  nodes_per_leaf_ = per_leaf;
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
  switch_index_.assign(vertex_count(), kNone);
  for (std::uint32_t v = 0; v < vertex_count(); ++v) {
    if (vertex_node_[v] != kNone) continue;
    switch_index_[v] = static_cast<std::uint32_t>(switches_.size());
    switches_.push_back(v);
  }
  // Each node's ways out (the switches its links lead to, in the order its vertices' links are met), and
  // its type: the first node of its group, alike inside.
  std::vector<std::pair<const NodeGroup*, std::uint32_t>> types;  // (group, its first node)
  std::vector<std::uint32_t> exits;
  std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>> seeds;
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    const NodeGroup* grp = &cluster.group(make_id<NodeId>(n));
    auto type = std::find_if(types.begin(), types.end(), [&](const auto& t) { return t.first == grp; });
    if (type == types.end()) type = types.insert(types.end(), {grp, n});
    node_type_.push_back(type->second);
    one_node_type_ = one_node_type_ && type->second == 0;
    exit_offsets_.push_back(static_cast<std::uint32_t>(exit_switch_.size()));
    ways_out(n, exits, seeds);
    exit_switch_.insert(exit_switch_.end(), exits.begin(), exits.end());
    FLEETSIM_CHECK(node_offsets_[n + 1] - node_offsets_[n] == node_offsets_[node_type_[n] + 1] - node_offsets_[node_type_[n]],
                   "two nodes of one group differ inside");
  }
  exit_offsets_.push_back(static_cast<std::uint32_t>(exit_switch_.size()));
  entry_offsets_.assign(cluster.node_count() + 1, 0);
  for (const TopoLink& l : links_) {
    if (switch_index_[l.from] != kNone && vertex_node_[l.to] != kNone) ++entry_offsets_[vertex_node_[l.to] + 1];
  }
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) entry_offsets_[n + 1] += entry_offsets_[n];
  entry_links_.resize(entry_offsets_.back());
  std::vector<std::uint32_t> entry_fill(entry_offsets_.begin(), entry_offsets_.end() - 1);
  for (std::uint32_t l = 0; l < links_.size(); ++l) {
    if (switch_index_[links_[l].from] != kNone && vertex_node_[links_[l].to] != kNone) entry_links_[entry_fill[vertex_node_[links_[l].to]]++] = l;
  }
  FLEETSIM_CHECK(switches_.size() == leaves_ + spines_, "a switch that is neither a leaf nor a spine");
  // The route search counts on these: every GPU is in a node, nodes are joined only through switches,
  // and no GPU is linked to a switch (it would be a way out of its node, and GPUs forward nothing).
  for (std::uint32_t g = 0; g < cluster.gpu_count(); ++g) FLEETSIM_CHECK(vertex_node_[g] != kNone, "a GPU outside every node");
  for (const TopoLink& l : links_) {
    FLEETSIM_CHECK(vertex_node_[l.from] == vertex_node_[l.to] || vertex_node_[l.from] == kNone || vertex_node_[l.to] == kNone,
                   "a link joins two nodes directly");
    FLEETSIM_CHECK(!((is_gpu_[l.from] != 0 && vertex_node_[l.to] == kNone) || (is_gpu_[l.to] != 0 && vertex_node_[l.from] == kNone)),
                   "a link joins a GPU to a switch");
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
  if (links_[link].cls == LinkClass::host_memory) return vertex_names_[links_[link].from] + ".memory";
  return vertex_names_[links_[link].from] + ">" + vertex_names_[links_[link].to];
}

std::optional<std::uint32_t> Topology::memory_bus(NodeId node) const {
  const std::uint32_t l = memory_bus_[index(node)];
  if (l == kNone) return std::nullopt;
  return l;
}

bool Topology::in_host_memory(std::uint32_t v) const {
  const std::uint32_t n = vertex_node_[v];
  return n != kNone && (host_vertex_[n] == v || storage_vertex_[n] == v);
}

std::optional<std::uint32_t> Topology::find_link(std::string_view name) const {
  for (std::uint32_t n = 0; name.ends_with(".memory") && n < memory_bus_.size(); ++n) {
    if (memory_bus_[n] != kNone && link_name(memory_bus_[n]) == name) return memory_bus_[n];
  }
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
  cache_->ready = false;
  forget_targets();
  forget_routes();
}

void Topology::forget_routes() const {
  DistanceCache& c = *cache_;
  c.route_slots = {};
  c.routes = 0;
  c.route_links = {};
}

void Topology::forget_targets() const {
  DistanceCache& c = *cache_;
  c.targets.clear();
  c.bytes = c.tabled_bytes = 0;
}

namespace {

std::uint64_t plus(std::uint64_t a, std::uint64_t b) {  // unreachable stays unreachable
  constexpr std::uint64_t never = ~std::uint64_t{0};
  return a == never || b == never ? never : a + b;
}

using Seeds = std::vector<std::pair<std::uint32_t, std::uint64_t>>;  // (vertex, starting distance)

// Dijkstra from one or more seeds, with a reusable heap; `relax(v, d, offer)` offers v's neighbours.
template <typename Dist, typename Relax>
void dijkstra(std::vector<std::pair<std::uint64_t, std::uint32_t>>& heap, const Seeds& seeds, Dist&& dist, Relax&& relax) {
  const auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
  heap.clear();
  const auto offer = [&](std::uint32_t u, std::uint64_t d) {
    if (d >= dist(u)) return;
    dist(u) = d;
    heap.emplace_back(d, u);
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (const auto& [v, d] : seeds) offer(v, d);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const auto [d, v] = heap.back();
    heap.pop_back();
    if (d == dist(v)) relax(v, d, offer);
  }
}

}  // namespace

// Distances inside `node` (by local index, over its own links) to the nearest seed, each seed counting
// from its starting distance. GPUs forward nothing: a path enters a GPU only where it ends (a seed).
// Down links are left out.
void Topology::search_inside(std::uint32_t node, const Seeds& seeds, std::vector<std::uint64_t>& dist) const {
  const DistanceCache& c = *cache_;
  dist.assign(node_offsets_[node + 1] - node_offsets_[node], kUnreachable);
  dijkstra(cache_->heap, seeds, [&](std::uint32_t v) -> std::uint64_t& { return dist[local_index_[v]]; },
           [&](std::uint32_t v, std::uint64_t d, auto&& offer) {
             if (is_gpu_[v] != 0 && std::none_of(seeds.begin(), seeds.end(), [&](const auto& s) { return s.first == v; })) return;
             for (std::uint32_t i = c.in_offsets[v]; i < c.in_offsets[v + 1]; ++i) {
               const std::uint32_t l = c.in_links[i];
               if (link_down_[l] == 0 && vertex_node_[links_[l].from] == node) offer(links_[l].from, d + link_weight_[l]);
             }
           });
}

// The links into each vertex (the searches run on the reversed graph).
void Topology::prepare_in_links() const {
  DistanceCache& c = *cache_;
  if (!c.in_offsets.empty()) return;
  c.in_offsets.assign(vertex_count() + 1, 0);
  for (const TopoLink& l : links_) ++c.in_offsets[l.to + 1];
  for (std::uint32_t v = 0; v < vertex_count(); ++v) c.in_offsets[v + 1] += c.in_offsets[v];
  c.in_links.resize(links_.size());
  std::vector<std::uint32_t> fill(c.in_offsets.begin(), c.in_offsets.end() - 1);
  for (std::uint32_t l = 0; l < links_.size(); ++l) c.in_links[fill[links_[l].to]++] = l;
}

void Topology::ways_out(std::uint32_t node, std::vector<std::uint32_t>& switches, std::vector<Seeds>& seeds) const {
  switches.clear();
  seeds.clear();
  for (std::uint32_t i = node_offsets_[node]; i < node_offsets_[node + 1]; ++i) {
    for (std::uint32_t l : out_links_[node_members_[i]]) {
      const std::uint32_t u = switch_index_[links_[l].to];
      if (link_down_[l] != 0 || u == kNone) continue;
      const auto k = static_cast<std::size_t>(std::find(switches.begin(), switches.end(), u) - switches.begin());
      if (k == switches.size()) {
        switches.push_back(u);
        seeds.emplace_back();
      }
      seeds[k].emplace_back(node_members_[i], link_weight_[l]);
    }
  }
}

// Every node's ways out, and the switch-to-switch distances.
void Topology::prepare_distances() const {
  DistanceCache& c = *cache_;
  if (c.ready) return;
  prepare_in_links();
  // Per node and switch it has ways out to: one search, seeded at the ways out to that switch.
  const std::uint32_t nodes = static_cast<std::uint32_t>(node_offsets_.size()) - 1;
  c.exit_switch.assign(nodes, {});
  c.exit_cost.assign(nodes, {});
  std::vector<Seeds> seeds;
  std::vector<std::uint64_t> inside;
  for (std::uint32_t n = 0; n < nodes; ++n) {
    ways_out(n, c.exit_switch[n], seeds);
    for (const Seeds& way_out : seeds) {
      search_inside(n, way_out, inside);
      c.exit_cost[n].insert(c.exit_cost[n].end(), inside.begin(), inside.end());
    }
  }
  // The graph of switches: their own links, and one edge per (way in, switch out) through a node.
  const std::uint32_t switches = static_cast<std::uint32_t>(switches_.size());
  std::unordered_map<std::uint64_t, std::uint64_t> edges;
  const auto edge = [&](std::uint32_t a, std::uint32_t b, std::uint64_t w) {
    if (a == b || w == kUnreachable) return;
    auto [it, added] = edges.try_emplace(std::uint64_t{a} * switches + b, w);
    if (!added) it->second = std::min(it->second, w);
  };
  for (std::uint32_t l = 0; l < links_.size(); ++l) {
    const std::uint32_t a = switch_index_[links_[l].from], b = switch_index_[links_[l].to];
    if (link_down_[l] != 0) continue;
    if (a != kNone && b != kNone) {
      edge(a, b, link_weight_[l]);
    } else if (a != kNone) {  // a way in: on through the node to each switch it leaves for
      const std::uint32_t n = vertex_node_[links_[l].to];
      const std::uint32_t size = node_offsets_[n + 1] - node_offsets_[n];
      for (std::size_t k = 0; k < c.exit_switch[n].size(); ++k) {
        edge(a, c.exit_switch[n][k], plus(link_weight_[l], c.exit_cost[n][k * size + local_index_[links_[l].to]]));
      }
    }
  }
  std::vector<std::uint32_t> offsets(switches + 1, 0), to;
  std::vector<std::uint64_t> weight;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sorted(edges.begin(), edges.end());
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [key, w] : sorted) ++offsets[key / switches + 1];
  for (std::uint32_t a = 0; a < switches; ++a) offsets[a + 1] += offsets[a];
  for (const auto& [key, w] : sorted) {
    to.push_back(static_cast<std::uint32_t>(key % switches));
    weight.push_back(w);
  }
  c.between.assign(std::size_t{switches} * switches, kUnreachable);
  for (std::uint32_t a = 0; a < switches; ++a) {
    std::uint64_t* row = c.between.data() + std::size_t{a} * switches;
    dijkstra(c.heap, Seeds{{a, 0}}, [&](std::uint32_t v) -> std::uint64_t& { return row[v]; }, [&](std::uint32_t v, std::uint64_t d, auto&& offer) {
      for (std::uint32_t i = offsets[v]; i < offsets[v + 1]; ++i) offer(to[i], d + weight[i]);
    });
  }
  c.ready = true;
}

Topology::Distances Topology::distances_to(std::uint32_t target) const {
  if (by_structure()) return structure_distances_to(target);
  prepare_distances();
  DistanceCache& c = *cache_;
  if (c.bytes > (std::size_t{512} << 20)) forget_targets();  // bounded memory: tables are rebuilt when asked for
  if (c.targets.empty()) c.targets.resize(vertex_count());
  const bool added = c.targets[target] == nullptr;
  if (added) c.targets[target] = std::make_unique<NodeTarget>();
  NodeTarget& t = *c.targets[target];
  if (!added) {
    if (t.every.empty()) tabulate(t);
    return t.every.empty() ? Distances{.topology = this, .target = &t} : Distances{.topology = this, .every = &t.every};
  }
  // The ways in: (switch, least link weight + distance inside to the target); a switch target is its own.
  std::vector<std::pair<std::uint32_t, std::uint64_t>> ways_in;
  t.node = vertex_node_[target];
  if (t.node == kNone) {
    ways_in.emplace_back(switch_index_[target], 0);
  } else {
    search_inside(t.node, Seeds{{target, 0}}, t.inside);
    for (std::uint32_t i = node_offsets_[t.node]; i < node_offsets_[t.node + 1]; ++i) {
      const std::uint32_t e = node_members_[i];
      for (std::uint32_t k = c.in_offsets[e]; k < c.in_offsets[e + 1]; ++k) {
        const std::uint32_t l = c.in_links[k];
        const std::uint32_t u = switch_index_[links_[l].from];
        const std::uint64_t then = plus(link_weight_[l], t.inside[local_index_[e]]);
        if (link_down_[l] != 0 || u == kNone || then == kUnreachable) continue;
        // Ways in from one switch (a node's NICs on one leaf) count once, at their best.
        const auto same = std::find_if(ways_in.begin(), ways_in.end(), [&](const auto& w) { return w.first == u; });
        if (same == ways_in.end()) {
          ways_in.emplace_back(u, then);
        } else {
          same->second = std::min(same->second, then);
        }
      }
    }
  }
  // Every switch's distance, over its best way in: a walk then reads one number per switch it asks about.
  const std::size_t switches = switches_.size();
  t.from_switch.assign(switches, kUnreachable);
  for (std::size_t s = 0; s < switches; ++s) {
    for (const auto& [u, then] : ways_in) t.from_switch[s] = std::min(t.from_switch[s], plus(c.between[s * switches + u], then));
  }
  c.bytes += (t.inside.size() + t.from_switch.size()) * sizeof(std::uint64_t);
  tabulate(t);
  return t.every.empty() ? Distances{.topology = this, .target = &t} : Distances{.topology = this, .every = &t.every};
}

// A route walk asks for a few thousand distances at most (a leaf has a link to each of its NICs), so
// once the walks to a target have asked for about as many as there are vertices, every vertex's
// distance is worked out and kept, while such tables take less than 256 MiB.
void Topology::tabulate(NodeTarget& t) const {
  constexpr std::uint32_t kAskedPerWalk = 2048;
  DistanceCache& c = *cache_;
  const std::size_t table = vertex_count() * sizeof(std::uint64_t);
  if (std::uint64_t{++t.walks} * kAskedPerWalk < vertex_count() || c.tabled_bytes + table > (std::size_t{256} << 20)) return;
  const Distances parts{.topology = this, .target = &t};
  t.every.resize(vertex_count());
  for (std::uint32_t v = 0; v < vertex_count(); ++v) t.every[v] = parts.from(v);
  c.tabled_bytes += table;
  c.bytes += table;
}

std::uint64_t Topology::Distances::from(std::uint32_t v) const {
  if (every != nullptr) return (*every)[v];
  const Topology& topo = *topology;
  const DistanceCache& c = *topo.cache_;
  if (target == nullptr) {  // from the structure
    if (topo.switch_index_[v] != kNone) return from_switch(topo.switch_index_[v]);
    const std::uint32_t n = topo.vertex_node_[v], x = topo.local_index_[v];
    const NodeShape& shape = topo.shape_of(n);
    std::uint64_t best = n == node ? inside[x] : kUnreachable;
    for (std::uint32_t k = topo.exit_offsets_[n]; k < topo.exit_offsets_[n + 1]; ++k) {
      best = std::min(best, plus(shape.exit_cost[(k - topo.exit_offsets_[n]) * shape.size + x], from_switch(topo.exit_switch_[k])));
    }
    return best;
  }
  if (topo.switch_index_[v] != kNone) return target->from_switch[topo.switch_index_[v]];
  const std::uint32_t n = topo.vertex_node_[v], x = topo.local_index_[v];
  const std::uint32_t size = topo.node_offsets_[n + 1] - topo.node_offsets_[n];
  std::uint64_t best = n == target->node ? target->inside[x] : kUnreachable;
  for (std::size_t k = 0; k < c.exit_switch[n].size(); ++k) {
    best = std::min(best, plus(c.exit_cost[n][k * size + x], target->from_switch[c.exit_switch[n][k]]));
  }
  return best;
}

std::uint64_t Topology::Distances::from_switch(std::uint32_t s) const {
  if (node == kNone) return through_ways_in(s);
  const Topology& topo = *topology;
  if (s >= topo.leaves_) return from_spine;
  return s / topo.rails_ == node / topo.nodes_per_leaf_ ? from_group_leaf[s % topo.rails_] : from_far_leaf;
}

std::uint64_t Topology::Distances::through_ways_in(std::uint32_t s) const {
  std::uint64_t best = kUnreachable;
  for (std::uint32_t w = 0; w < ways; ++w) best = std::min(best, plus(topology->switch_distance(s, ways_in[w].first), ways_in[w].second));
  return best;
}

// Each node type's distances inside, its ways out and in; and, on rails, each group's distances between
// its leaves through its nodes (in over one rail, out over another), chained over rails by Floyd-Warshall.
void Topology::prepare_structure() const {
  DistanceCache& c = *cache_;
  if (c.structure_ready) return;
  prepare_in_links();
  const std::uint32_t nodes = static_cast<std::uint32_t>(node_type_.size());
  c.shapes.resize(nodes);
  for (std::uint32_t n = 0; n < nodes; ++n) {
    if (node_type_[n] != n) continue;
    auto shape = std::make_unique<NodeShape>();
    const std::uint32_t size = node_offsets_[n + 1] - node_offsets_[n];
    shape->size = size;
    std::vector<std::uint64_t> dist;
    for (std::uint32_t i = 0; i < size; ++i) {
      search_inside(n, Seeds{{node_members_[node_offsets_[n] + i], 0}}, dist);
      shape->inside.insert(shape->inside.end(), dist.begin(), dist.end());
    }
    std::vector<std::uint32_t> switches;  // the node's exit_switch_ (every link up)
    std::vector<Seeds> seeds;
    ways_out(n, switches, seeds);
    for (std::uint32_t i = 0; i < size; ++i) {
      const std::uint32_t e = node_members_[node_offsets_[n] + i];
      for (std::uint32_t k = c.in_offsets[e]; k < c.in_offsets[e + 1]; ++k) {
        const std::uint32_t l = c.in_links[k];
        if (switch_index_[links_[l].from] == kNone) continue;
        const auto exit = std::find(switches.begin(), switches.end(), switch_index_[links_[l].from]);
        FLEETSIM_CHECK(exit != switches.end(), "a way into a node from a switch it has no way out to");
        shape->ports.push_back({static_cast<std::uint32_t>(exit - switches.begin()), i, link_weight_[l]});
      }
    }
    for (const Seeds& way_out : seeds) {
      search_inside(n, way_out, dist);
      shape->exit_cost.insert(shape->exit_cost.end(), dist.begin(), dist.end());
    }
    c.shapes[n] = std::move(shape);
  }
  const std::uint32_t r = rails_, groups = r > 1 ? leaves_ / r : 0;
  c.crossing.assign(std::size_t{groups} * r * r, kUnreachable);
  for (std::uint32_t n = 0; n < nodes && r > 1; ++n) {
    const NodeShape& shape = shape_of(n);
    std::uint64_t* cross = c.crossing.data() + std::size_t{n / nodes_per_leaf_} * r * r;
    for (const NodeShape::Port& in : shape.ports) {
      const std::uint32_t a = exit_switch_[exit_offsets_[n] + in.exit];
      for (std::uint32_t k = exit_offsets_[n]; k < exit_offsets_[n + 1]; ++k) {
        const std::uint32_t b = exit_switch_[k];
        if (b == a) continue;
        std::uint64_t& e = cross[(a % r) * r + b % r];
        e = std::min(e, plus(in.weight, shape.exit_cost[(k - exit_offsets_[n]) * shape.size + in.member]));
      }
    }
  }
  for (std::uint32_t g = 0; g < groups; ++g) {
    std::uint64_t* cross = c.crossing.data() + std::size_t{g} * r * r;
    for (std::uint32_t i = 0; i < r; ++i) cross[i * r + i] = 0;
    for (std::uint32_t k = 0; k < r; ++k) {
      for (std::uint32_t i = 0; i < r; ++i) {
        for (std::uint32_t j = 0; j < r; ++j) cross[i * r + j] = std::min(cross[i * r + j], plus(cross[i * r + k], cross[k * r + j]));
      }
    }
  }
  c.structure_ready = true;
}

const Topology::NodeShape& Topology::shape_of(std::uint32_t node) const { return *cache_->shapes[node_type_[node]]; }

// Two tiers, every leaf under every spine by links of one latency w: a leaf and a spine are w apart, two
// spines 2w (through any leaf), two leaves 2w (through any spine) or, in one group on rails, less where
// a path through the group's nodes is shorter. Nothing else is shorter: a path through a node of another
// group, or one that mixes spines and nodes, crosses two fabric links and more.
std::uint64_t Topology::switch_distance(std::uint32_t a, std::uint32_t b) const {
  if (a == b) return 0;
  const bool leaf_a = a < leaves_, leaf_b = b < leaves_;
  if (!leaf_a || !leaf_b) return leaf_a || leaf_b ? fabric_weight_ : 2 * fabric_weight_;
  std::uint64_t best = spines_ > 0 ? 2 * fabric_weight_ : kUnreachable;
  if (rails_ > 1 && a / rails_ == b / rails_) best = std::min(best, cache_->crossing[(std::size_t{a} * rails_) + b % rails_]);
  return best;
}

Topology::Distances Topology::structure_distances_to(std::uint32_t target) const {
  prepare_structure();
  Distances d{.topology = this};
  const std::uint32_t n = vertex_node_[target];
  if (n == kNone) {
    d.ways_in[d.ways++] = {switch_index_[target], 0};
    return d;
  }
  const NodeShape& shape = shape_of(n);
  d.node = n;
  d.inside = shape.inside.data() + std::size_t{local_index_[target]} * shape.size;
  for (const NodeShape::Port& port : shape.ports) {
    const std::uint64_t then = plus(port.weight, d.inside[port.member]);
    const std::uint32_t u = exit_switch_[exit_offsets_[n] + port.exit];
    if (then == kUnreachable) continue;
    // Ways in from one switch (a node's NICs on one leaf) count once, at their best.
    const auto end = d.ways_in.begin() + d.ways;
    const auto same = std::find_if(d.ways_in.begin(), end, [&](const auto& w) { return w.first == u; });
    if (same == end) {
      FLEETSIM_CHECK(d.ways < d.ways_in.size(), "a node with ways in from more switches than it has NICs");
      d.ways_in[d.ways++] = {u, then};
    } else {
      same->second = std::min(same->second, then);
    }
  }
  const std::uint32_t group = n / nodes_per_leaf_, groups = leaves_ / rails_;
  for (std::uint32_t r = 0; r < rails_; ++r) d.from_group_leaf[r] = d.through_ways_in(group * rails_ + r);
  d.from_spine = spines_ > 0 ? d.through_ways_in(leaves_) : kUnreachable;
  d.from_far_leaf = groups > 1 ? d.through_ways_in((group + 1) % groups * rails_) : kUnreachable;
  return d;
}

// Each list keeps the order of the switch's own links (by link, as created), so ECMP picks as it would
// among all of them; the links left out are never on a shortest path:
// - a spine: a leaf of another group is a fabric link further from the target than the spine itself;
// - a leaf of another group: its nodes lead only back to leaves of its group;
// - the leaf of the target's node (one leaf a node): going up, or into another node, comes back to it.
std::span<const std::uint32_t> Topology::hop_links(std::uint32_t at, std::uint32_t target_node, std::vector<std::uint32_t>& scratch) const {
  const std::uint32_t s = switch_index_[at];
  if (!by_structure() || target_node == kNone || s == kNone) return out_links_[at];
  const std::uint32_t group = target_node / nodes_per_leaf_;
  scratch.clear();
  if (s >= leaves_) {
    for (std::uint32_t leaf = group * rails_; leaf < (group + 1) * rails_; ++leaf) scratch.push_back(uplinks_ + 2 * (leaf * spines_ + (s - leaves_)) + 1);
  } else if (s / rails_ != group) {
    for (std::uint32_t spine = 0; spine < spines_; ++spine) scratch.push_back(uplinks_ + 2 * (s * spines_ + spine));
  } else if (rails_ == 1) {
    for (std::uint32_t i = entry_offsets_[target_node]; i < entry_offsets_[target_node + 1]; ++i) {
      if (links_[entry_links_[i]].from == at) scratch.push_back(entry_links_[i]);
    }
  } else {
    return out_links_[at];
  }
  return scratch;
}

void Topology::route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out, RouteMemo memo) const {
  FLEETSIM_CHECK(try_route(from, to, key, out, memo), "no route from " + vertex_names_[from] + " to " + vertex_names_[to]);
}

std::size_t Topology::routes_remembered() const { return cache_->routes; }
std::size_t Topology::routes_from_class() const { return cache_->routes_from_class; }

bool Topology::reachable(std::uint32_t from, std::uint32_t to) const {
  return from == to || distances_to(to).from(from) != kUnreachable;
}

bool Topology::try_route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out, RouteMemo memo) const {
  if (from == to) return true;
  DistanceCache& c = *cache_;
  if (const DistanceCache::RouteSlot* known = c.find(from, to, key)) {
    const auto first = c.route_links.begin() + known->first;
    out.insert(out.end(), first, first + known->count);
    return true;
  }
  const std::size_t start = out.size();
  bool chose = false;
  const std::optional<RouteClass> cls = route_class(from, to);
  if (!cls || !route_from_class(*cls, out)) {
    if (!walk_route(from, to, key, out, chose)) return false;
    if (cls && !chose) remember_class(*cls, std::span<const std::uint32_t>(out).subspan(start));
  }
  if (memo == RouteMemo::skip) return true;
  constexpr std::size_t kRouteMemoBytes = std::size_t{128} << 20;
  if (c.route_slots.size() * sizeof(DistanceCache::RouteSlot) + c.route_links.size() * sizeof(std::uint32_t) > kRouteMemoBytes) forget_routes();
  c.remember(from, to, key, !chose, static_cast<std::uint32_t>(c.route_links.size()), static_cast<std::uint32_t>(out.size() - start));
  c.route_links.insert(c.route_links.end(), out.begin() + static_cast<std::ptrdiff_t>(start), out.end());
  return true;
}

std::optional<Topology::RouteClass> Topology::route_class(std::uint32_t from, std::uint32_t to) const {
  if (!by_structure()) return std::nullopt;
  const std::uint32_t m = vertex_node_[from], n = vertex_node_[to];
  if (m == kNone || n == kNone || m / nodes_per_leaf_ != n / nodes_per_leaf_) return std::nullopt;
  // With one node type every group is alike where these routes go (a node and the leaves its links reach); with
  // several, groups may differ in the types they hold, so a class stays in its group.
  const std::uint64_t group = one_node_type_ ? kNone : m / nodes_per_leaf_;
  return RouteClass{.key = {(std::uint64_t{node_type_[m]} << 32) | local_index_[from], (std::uint64_t{node_type_[n]} << 32) | local_index_[to],
                            (group << 1) | (m == n ? 1u : 0u)},
                    .from_node = m,
                    .to_node = n};
}

bool Topology::route_from_class(const RouteClass& cls, std::vector<std::uint32_t>& out) const {
  DistanceCache& c = *cache_;
  const auto known = c.classes.find(cls.key);
  if (known == c.classes.end()) return false;
  const auto [first, count] = known->second;
  for (std::uint32_t i = first; i < first + count; ++i) {
    const std::uint32_t place = c.class_links[i];
    const std::uint32_t node = (place & DistanceCache::kSecondNode) != 0 ? cls.to_node : cls.from_node;
    const std::uint32_t base = (place & DistanceCache::kToSwitch) != 0 ? switch_links_at_[node] : inside_links_at_[node];
    out.push_back(base + (place & ~(DistanceCache::kSecondNode | DistanceCache::kToSwitch)));
  }
  ++c.routes_from_class;
  return true;
}

// Kept only where every link is one of the two nodes' own: a route through a third node (between rails) or over a
// spine is walked for every pair.
void Topology::remember_class(const RouteClass& cls, std::span<const std::uint32_t> route) const {
  DistanceCache& c = *cache_;
  const std::size_t first = c.class_links.size();
  for (std::uint32_t l : route) {
    const std::uint32_t node = link_node_[l];
    if (node != cls.from_node && node != cls.to_node) {
      c.class_links.resize(first);
      return;
    }
    const bool to_switch = l >= first_switch_link_;
    const std::uint32_t base = to_switch ? switch_links_at_[node] : inside_links_at_[node];
    c.class_links.push_back((l - base) | (node != cls.from_node ? DistanceCache::kSecondNode : 0u) | (to_switch ? DistanceCache::kToSwitch : 0u));
  }
  c.classes.emplace(cls.key, std::pair{static_cast<std::uint32_t>(first), static_cast<std::uint32_t>(route.size())});
}

bool Topology::walk_route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out, bool& chose) const {
  const Distances dist = distances_to(to);
  std::uint64_t here = dist.from(from);
  if (here == kUnreachable) return false;
  std::uint32_t at = from;
  std::uint32_t candidates[64];
  std::uint64_t remaining[64];
  // Host memory: a route that begins or ends in a node's (at its host or local storage) draws on that
  // node's bus once, where it passes the host; one to or from a MIG instance through its node's host is
  // staged there, written and read back: twice (traffic of other nodes passing through, between rails,
  // is not).
  const std::uint32_t begins = in_host_memory(from) ? vertex_node_[from] : kNone;
  const std::uint32_t ends = in_host_memory(to) ? vertex_node_[to] : kNone;
  const auto at_host = [&](std::uint32_t v) {
    const std::uint32_t node = vertex_node_[v];
    if (node == kNone || host_vertex_[node] != v || memory_bus_[node] == kNone) return;
    if (node == begins || node == ends) {
      out.push_back(memory_bus_[node]);
    } else if (staged_in_host_[node] != 0 && (vertex_node_[from] == node || vertex_node_[to] == node)) {
      out.push_back(memory_bus_[node]);
      out.push_back(memory_bus_[node]);
    }
  };
  std::vector<std::uint32_t>& scratch = cache_->hop_scratch;
  while (at != to) {
    at_host(at);
    std::uint32_t n = 0;
    for (std::uint32_t l : hop_links(at, vertex_node_[to], scratch)) {
      const TopoLink& link = links_[l];
      if ((is_gpu_[link.to] != 0 && link.to != to) || link_down_[l] != 0 || link_weight_[l] > here) continue;
      const std::uint64_t next = dist.from(link.to);
      if (next != kUnreachable && next + link_weight_[l] == here && n < 64) {
        remaining[n] = next;
        candidates[n++] = l;
      }
    }
    FLEETSIM_CHECK(n > 0, "route walk found no next hop");
    chose |= n > 1;
    const std::uint32_t pick = n == 1 ? 0 : static_cast<std::uint32_t>(hash_combine(key, at) % n);
    out.push_back(candidates[pick]);
    at = links_[candidates[pick]].to;
    here = remaining[pick];
  }
  at_host(to);
  return true;
}

double Topology::latency_s(std::span<const std::uint32_t> route) const {
  double total = 0;
  for (std::uint32_t l : route) total += links_[l].latency_s;
  return total;
}

double Topology::bottleneck_Bps(std::span<const std::uint32_t> route) const {
  double b = std::numeric_limits<double>::infinity();
  for (std::uint32_t l : route) {
    b = std::min(b, links_[l].capacity_Bps / static_cast<double>(std::count(route.begin(), route.end(), l)));
  }
  return b;
}

}  // namespace fleetsim
