// The cluster's network as a graph of vertices (GPUs, NVSwitches, PCIe switches, hosts, NICs,
// leaf and spine switches) joined by directed links, built from the node types and the fabric
// spec alone, so mixed node types and multi-tier fabrics need no code. Inside a node:
//   GPU <-> NVSwitch over the node's gpu_link (NVLink nodes only; PCIe nodes go through PCIe),
//   GPU <-> PCIe switch <-> host and NIC over the host_link (GPU i on switch i*nics/gpus),
//   NIC <-> leaf (or the single switch) over the NIC's link type; leaf <-> spine over the fabric link.
// Routes are lowest-latency paths (never through a GPU other than the ends); among equal ones,
// one is picked by a stable hash of a flow key (ECMP), so the same flow always takes the same path.
// A link marked down (a failed cable) is left out of every route until it is marked up again.
// While every link is up, distances come from the fabric's structure (a node's type, its leaf group
// and rail, the spines); with one down, from searches of the graph. Both give the same routes.
// A node type with a host_memory_bandwidth has a host memory bus: one more link, from its host to
// itself, that no route walks through; a route that begins or ends in host memory (at the host or at
// its local storage) draws on it once, in either direction, so reads and writes share it. MIG
// instances have no peer-to-peer: what they send or receive through their node's host is staged
// there, written and read back, and draws on the bus twice.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/ids.hpp"

namespace fleetsim {

class Cluster;
struct FabricSpec;

enum class LinkClass : std::uint8_t { gpu_link, host_link, nic, fabric, storage, host_memory };
std::string_view link_class_name(LinkClass cls);

struct TopoLink {
  std::uint32_t from = 0, to = 0;  // vertices
  double capacity_Bps = 0;
  double latency_s = 0;
  LinkClass cls = LinkClass::gpu_link;
  LinkKind kind = LinkKind::pcie;
};

class Topology {
 public:
  Topology(const Cluster& cluster, const FabricSpec& fabric);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;

  std::uint32_t vertex_count() const { return static_cast<std::uint32_t>(vertex_names_.size()); }
  std::uint32_t gpu_vertex(GpuId gpu) const { return index(gpu); }  // GPUs come first
  std::uint32_t host_vertex(NodeId node) const { return host_vertex_[index(node)]; }
  // The node's NVSwitch, or no value for a node without NVLink.
  std::optional<std::uint32_t> nvswitch_vertex(NodeId node) const;
  // The node's local storage (linked to its host), or no value when the cluster has none.
  std::optional<std::uint32_t> storage_vertex(NodeId node) const;

  const std::vector<TopoLink>& links() const { return links_; }
  std::vector<double> capacities() const;
  const std::string& vertex_name(std::uint32_t v) const { return vertex_names_[v]; }
  std::string link_name(std::uint32_t link) const;  // "n0.g1>n0.nvswitch"
  std::optional<std::uint32_t> find_link(std::string_view name) const;  // by link_name
  // The link the other way between the same two vertices (every link but a MIG port's has one).
  std::optional<std::uint32_t> reverse_link(std::uint32_t link) const;
  // A cable of the fabric: NIC <-> leaf (or switch), leaf <-> spine. Only cables fail on their own;
  // links inside a node fail with their GPU or node.
  bool is_cable(std::uint32_t link) const { return links_[link].cls == LinkClass::nic || links_[link].cls == LinkClass::fabric; }

  // Down links carry no route. Changing one forgets the cached distances and routes.
  void set_link_down(std::uint32_t link, bool down);
  bool link_down(std::uint32_t link) const { return link_down_[link] != 0; }
  bool any_link_down() const { return links_down_ > 0; }

  // The node's host memory bus (a link from its host to itself), or no value when it has none.
  std::optional<std::uint32_t> memory_bus(NodeId node) const;

  // Whether a route walked is kept for the next ask of the same (from, to, key): kept, unless the caller keeps
  // it itself and will not ask again (a plan of a million pairs, each asked once, would only fill the memo).
  enum class RouteMemo : std::uint8_t { keep, skip };
  // Appends the links of the route from `from` to `to` (vertices) to `out`, with the host memory bus
  // where the route begins or ends in host memory, and twice where it goes to or from a MIG instance
  // through its node's host; empty when from == to.
  void route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out, RouteMemo memo = RouteMemo::keep) const;
  // As route, but false (and nothing appended) when down links leave no path.
  bool try_route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out, RouteMemo memo = RouteMemo::keep) const;
  // Routes the memo holds now, and routes written from another pair's of the same class rather than walked (for tests
  // and benchmarks).
  std::size_t routes_remembered() const;
  std::size_t routes_from_class() const;
  bool reachable(std::uint32_t from, std::uint32_t to) const;
  // Distances from searches of the graph even while every link is up, to check the structure's against.
  void always_search_graph(bool on) { always_search_graph_ = on; }
  double latency_s(std::span<const std::uint32_t> route) const;
  // The least any link of the route offers; a link crossed twice (a bus a flow is staged in) offers half.
  double bottleneck_Bps(std::span<const std::uint32_t> route) const;

 private:
  std::uint32_t add_vertex(std::string name, std::uint32_t node);  // node: its node's index, or kNone
  void add_link(std::uint32_t from, std::uint32_t to, double capacity_Bps, double latency_s, LinkClass cls, LinkKind kind);
  void add_link_pair(std::uint32_t a, std::uint32_t b, double capacity_Bps, double latency_s, LinkClass cls, LinkKind kind);
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  static constexpr std::uint64_t kUnreachable = ~std::uint64_t{0};
  struct DistanceCache;
  struct NodeTarget;
  struct NodeShape;
  // Distances (picoseconds, plus one per hop) to one target, from any vertex: from a search's tables
  // (target or every), or from the structure (ways_in: the switches that lead into the target's node,
  // each with the least distance on from there).
  struct Distances {
    const Topology* topology;
    const NodeTarget* target = nullptr;
    const std::vector<std::uint64_t>* every = nullptr;  // every vertex's, where worked out in advance
    std::array<std::pair<std::uint32_t, std::uint64_t>, 64> ways_in = {};  // (switch index, distance on): a node has 64 NICs at most
    std::uint32_t ways = 0;
    std::uint32_t node = kNone;                  // the target's node (structure), or kNone for a switch
    const std::uint64_t* inside = nullptr;       // structure: per vertex of that node, by local index
    // Structure, to a node: every spine is as far as every other, so is every leaf of another group;
    // the leaves of the node's group by rail (a node has 64 NICs, so 64 rails, at most).
    std::uint64_t from_spine = 0, from_far_leaf = 0;
    std::array<std::uint64_t, 64> from_group_leaf = {};
    std::uint64_t from(std::uint32_t v) const;
    std::uint64_t from_switch(std::uint32_t s) const;  // structure: by switch index
    std::uint64_t through_ways_in(std::uint32_t s) const;
  };
  Distances distances_to(std::uint32_t target) const;
  bool by_structure() const { return links_down_ == 0 && !always_search_graph_; }
  Distances structure_distances_to(std::uint32_t target) const;
  const NodeShape& shape_of(std::uint32_t node) const;
  void prepare_structure() const;
  void prepare_in_links() const;
  std::uint64_t switch_distance(std::uint32_t a, std::uint32_t b) const;  // by switch index, all links up
  // The links worth looking at from `at` towards a vertex of `target_node`, by the structure: from a
  // spine, the links to the leaves of that node's group; from a leaf of another group, those to the
  // spines; from the one leaf of a node's group (not on rails), those into the node; else every link.
  std::span<const std::uint32_t> hop_links(std::uint32_t at, std::uint32_t target_node, std::vector<std::uint32_t>& scratch) const;
  void prepare_distances() const;
  // The switches `node`'s links lead to over links up, in the order its vertices' links are met, and for
  // each, its ways out there as search seeds (the node's vertex, the link's weight).
  void ways_out(std::uint32_t node, std::vector<std::uint32_t>& switches,
                std::vector<std::vector<std::pair<std::uint32_t, std::uint64_t>>>& seeds) const;
  void search_inside(std::uint32_t node, const std::vector<std::pair<std::uint32_t, std::uint64_t>>& seeds,
                     std::vector<std::uint64_t>& dist) const;
  void tabulate(NodeTarget& target) const;
  void forget_distances() const;
  void forget_targets() const;
  void forget_routes() const;
  // `chose`: set when some hop had equal ways to pick from by the key (else the route is the same for every key).
  bool walk_route(std::uint32_t from, std::uint32_t to, std::uint64_t key, std::vector<std::uint32_t>& out, bool& chose) const;
  // Routes by class (all links up). Two pairs of vertices are of one class when their nodes are of the same types, in
  // the same relation (one node, or two under one leaf group; the same group where the cluster has several node types)
  // and the vertices at the same places inside them: some renumbering of that group's nodes of each type takes one pair
  // to the other and leaves the graph as it was, so it takes the one pair's lowest-latency paths to the other's. A
  // route with no choice to make, and every link of it its two nodes' own, is then the other pair's too, link for link
  // at the same places among their nodes' links. So a class is walked once (a DAG's transfers between 64 GPUs on one
  // switch walked each of ~4,000 pairs, a tenth of a run; they are 120 classes), and written out for every other pair.
  struct RouteClass;
  std::optional<RouteClass> route_class(std::uint32_t from, std::uint32_t to) const;
  bool route_from_class(const RouteClass& cls, std::vector<std::uint32_t>& out) const;
  void remember_class(const RouteClass& cls, std::span<const std::uint32_t> route) const;

  std::vector<std::string> vertex_names_;
  std::vector<std::uint8_t> is_gpu_;
  std::vector<std::uint32_t> host_vertex_, nvswitch_vertex_, storage_vertex_, memory_bus_;  // per node
  std::vector<std::uint8_t> staged_in_host_;  // per node: MIG, its GPUs' traffic through the host is staged in host memory
  bool in_host_memory(std::uint32_t v) const;  // a host or local storage vertex
  std::vector<std::uint32_t> vertex_node_;    // per vertex: its node, or kNone for the fabric's switches
  std::vector<std::uint32_t> local_index_;    // per vertex: its place among its node's vertices
  std::vector<std::uint32_t> node_offsets_, node_members_;  // each node's vertices
  std::vector<std::uint32_t> switches_, switch_index_;      // the fabric's switches; per vertex, its place there or kNone
  // The structure. Leaves are the first switches, rail by rail within each group of nodes_per_leaf
  // nodes (leaf index = group * rails + rail), spines after them; every leaf has one link to every
  // spine and back, of one latency (fabric_weight_), from uplinks_ on (leaf i to spine s at
  // uplinks_ + 2 (i spines + s), back at one more). Nodes of one node group (type) are alike inside.
  std::uint32_t leaves_ = 0, spines_ = 0, rails_ = 1, nodes_per_leaf_ = 1, uplinks_ = 0;
  std::uint64_t fabric_weight_ = 0;
  std::vector<std::uint32_t> node_type_;                   // per node: the first node of its group
  std::vector<std::uint32_t> exit_offsets_, exit_switch_;  // per node: the switches its ways out lead to
  std::vector<std::uint32_t> entry_offsets_, entry_links_; // per node: the links into it from switches
  // Per node, where its links begin among the links inside nodes, and among those between a node and a switch (each
  // node's in a row, in the same order for nodes of one type); per link, its node, or kNone between two switches.
  std::vector<std::uint32_t> inside_links_at_, switch_links_at_, link_node_;
  std::uint32_t first_switch_link_ = 0;  // the links inside nodes come first, those between nodes and switches from here
  bool one_node_type_ = true;
  bool always_search_graph_ = false;
  std::vector<TopoLink> links_;
  std::vector<std::vector<std::uint32_t>> out_links_;  // per vertex, in creation order
  std::vector<std::uint8_t> link_down_;                 // per link
  std::vector<std::uint64_t> link_weight_;              // per link: its latency as the route search's integer weight
  std::uint32_t links_down_ = 0;
  std::unique_ptr<DistanceCache> cache_;
};

}  // namespace fleetsim
