#include "greedy.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>

#include "fleetsim/cluster.hpp"

namespace fleetsim::policies {

void Greedy::take(GpuId g, TenantId tenant) {
  taken_[index(g)] = round_;
  taken_by_[index(g)] = static_cast<std::int32_t>(index(tenant));
  taken_list_.push_back(g);
}

void Greedy::take_free(GpuId g, NodeId node, TenantId tenant) {
  take(g, tenant);
  if (node_round_[index(node)] != round_) {
    node_round_[index(node)] = round_;
    node_taken_[index(node)] = 0;
  }
  ++node_taken_[index(node)];
}

std::uint32_t Greedy::untaken_free(const ClusterView& view, NodeId node) const {
  return view.free_gpus(node) - (node_round_[index(node)] == round_ ? node_taken_[index(node)] : 0);
}

std::size_t Greedy::slot_of(const Shape& s, std::size_t slots) {
  std::uint64_t h = 0x9E3779B97F4A7C15u;
  for (std::uint64_t v : {std::uint64_t{s.tenant}, std::uint64_t{s.gpus}, std::uint64_t{s.model},
                          std::bit_cast<std::uint64_t>(s.weights_per_gpu_bytes), std::bit_cast<std::uint64_t>(s.working_set_bytes)}) {
    h = (h ^ v) * 0xBF58476D1CE4E5B9u;
    h ^= h >> 31;
  }
  return static_cast<std::size_t>(h) & (slots - 1);
}

bool Greedy::known_no_room(const Shape& s) const {
  for (std::size_t i = slot_of(s, no_room_.size());;
       i = (i + 1) & (no_room_.size() - 1)) {
    if (no_room_[i].round != round_) return false;
    if (no_room_[i].shape == s) return true;
  }
}

void Greedy::note_no_room(const Shape& s) {
  if (2 * (no_room_count_ + 1) > no_room_.size()) return;
  ++no_room_count_;
  std::size_t i = slot_of(s, no_room_.size());
  while (no_room_[i].round == round_) i = (i + 1) & (no_room_.size() - 1);
  no_room_[i] = NoRoom{round_, s};
}

std::optional<std::uint32_t> Greedy::place_of(std::span<const ReadyTask> ready, std::uint64_t joined, std::uint32_t from) {
  std::size_t lo = std::min<std::size_t>(from, ready.size()), hi = ready.size();
  if (from > 0) {  // doubling steps from a known place; from the queue's start, a binary search of it all
    hi = lo;
    for (std::size_t step = 1; hi < ready.size() && ready[hi].joined < joined; step *= 2) {  // everything up to hi joined before
      lo = hi + 1;
      hi = lo + step;
    }
    hi = std::min(hi + 1, ready.size());
  }
  const auto end = ready.begin() + static_cast<std::ptrdiff_t>(hi);
  const auto it = std::partition_point(ready.begin() + static_cast<std::ptrdiff_t>(lo), end, [&](const ReadyTask& t) { return t.joined < joined; });
  if (it == end || it->joined != joined) return std::nullopt;
  return static_cast<std::uint32_t>(it - ready.begin());
}

void Greedy::keep_order(const ClusterView& view, std::span<const ReadyTask> ready) {
  // A policy serves one run's queue (made per run), whose numbers only grow: the tasks past the last one seen
  // are those that joined since. (The newest may have left already, so the queue's end can be below it.)
  if (ready.empty()) return;
  const bool per_tenant = keys_per_tenant();
  for (std::size_t i = joined_after(ready, last_joined_); i < ready.size(); ++i) {
    if (per_tenant) {
      kept_.insert({tenant_stream(ready[i]), ready[i].joined});
      continue;
    }
    const std::uint32_t gang = gang_slot(ready[i]);
    if (gang >= kept_by_gang_.size()) kept_by_gang_.resize(gang + 1);
    if (kept_by_gang_[gang].empty() && std::find(kept_gangs_.begin(), kept_gangs_.end(), gang) == kept_gangs_.end()) {
      kept_gangs_.insert(std::upper_bound(kept_gangs_.begin(), kept_gangs_.end(), gang), gang);
    }
    kept_by_gang_[gang].insert({order_key(view, ready[i]), ready[i].joined});
  }
  last_joined_ = std::max(last_joined_, ready.back().joined);
  const auto left_queue = [&](const Keyed& k) { return !place_of(ready, k.joined); };
  if (kept_.size() > 2 * ready.size() + 1024) std::erase_if(kept_, left_queue);
  std::size_t by_gang = 0;
  for (std::uint32_t g : kept_gangs_) by_gang += kept_by_gang_[g].size();
  if (by_gang > 2 * ready.size() + 1024) {
    for (std::uint32_t g : kept_gangs_) std::erase_if(kept_by_gang_[g], left_queue);
  }
}

// The kept orders hold the queue by gang size, one part per gang of the rigid tasks and one (slot 0) for the elastic
// ones, whose gang is what is free for them at the time: every task of a rigid part needs as many GPUs as its first.
// keys_fixed: a part per gang, merged by (key, when they joined) as one order would give them. keys_per_tenant: a
// stream per tenant and gang; a tenant's tasks all take the tenant's key, so the streams' heads ordered by (key,
// when they joined) give its tasks in the order they joined, as one stream per tenant would.
std::uint32_t Greedy::gang_slot(const ReadyTask& t) { return t.spec != nullptr && t.spec->elastic ? 0 : std::min(t.gpus, kGangSlots - 1); }

double Greedy::tenant_stream(const ReadyTask& t) { return static_cast<double>(index(t.tenant)) * kGangSlots + gang_slot(t); }

std::optional<Greedy::TenantHead> Greedy::first_queued(std::span<const ReadyTask> ready, std::set<Keyed>::iterator at, double stream, double key,
                                                        std::uint32_t from) {
  while (at != kept_.end() && at->key == stream) {
    if (const std::optional<std::uint32_t> place = place_of(ready, at->joined, from)) return TenantHead{key, at->joined, at, *place};
    at = kept_.erase(at);  // it left the queue
  }
  return std::nullopt;
}

void Greedy::schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) {
  // Round stamps instead of clearing per-GPU arrays: a round costs what it places, not the cluster's size.
  if (taken_.size() != view.cluster().gpu_count()) {
    taken_.assign(view.cluster().gpu_count(), 0);
    taken_by_.assign(view.cluster().gpu_count(), -1);
  }
  if (node_round_.size() != view.cluster().node_count()) {
    node_round_.assign(view.cluster().node_count(), 0);
    node_taken_.assign(view.cluster().node_count(), 0);
  }
  for (GpuId g : taken_list_) taken_by_[index(g)] = -1;
  taken_list_.clear();
  no_room_count_ = 0;
  ++round_;
  order_.clear();
  by_key_.clear();
  const bool by_key = orders_by_key();
  const bool per_tenant = by_key && keys_per_tenant();
  const bool kept = by_key && (keys_fixed() || per_tenant);
  tenant_heads_.clear();
  if (kept) {
    keep_order(view, ready);
    // Per tenant: each of its streams' first queued task, under the tenant's key now.
    for (auto at = kept_.begin(); per_tenant && at != kept_.end();) {
      const double stream = at->key;
      const auto end = kept_.lower_bound({stream, std::numeric_limits<std::uint64_t>::max()});
      if (std::optional<TenantHead> first = first_queued(ready, at, stream, 0, 0)) {
        first->key = order_key(view, ready[first->place]);
        tenant_heads_.push_back(*first);
      }
      at = end;
    }
    std::make_heap(tenant_heads_.begin(), tenant_heads_.end(), std::greater<>());
  }
  // Once this round has taken every free GPU nothing more can start (unless running tasks can be stopped or GPUs
  // shared): the rest of a long queue costs nothing.
  const bool time_sliced = view.any_time_sliced();
  const bool ends_when_full = !time_sliced && !makes_room();
  const std::size_t free_gpus = ends_when_full ? view.free_gpu_count() : 0;
  // Keys that change from round to round: each round orders the whole queue. There, a task whose gang is larger
  // than the GPUs left cannot start, and trying it changes nothing (unless the round stops at it, or a hook notes
  // it), so the queue is kept as one heap per gang size and each step takes the least key among the gangs that fit:
  // the same tasks in the same order, without walking past the large gangs queued ahead of a freed GPU or two.
  const bool skips_large_gangs = ends_when_full && !blocks() && !notes_unplaced();
  const bool by_gang = by_key && !kept && skips_large_gangs;
  for (std::uint32_t g : gangs_) gang_heaps_[g].clear();
  gangs_.clear();
  if (by_gang) {
    for (std::uint32_t i = 0; i < ready.size(); ++i) {
      const std::uint32_t g = ready[i].gpus;
      if (g >= gang_heaps_.size()) gang_heaps_.resize(g + 1);
      if (gang_heaps_[g].empty()) gangs_.push_back(g);
      gang_heaps_[g].emplace_back(order_key(view, ready[i]), i);
    }
    std::sort(gangs_.begin(), gangs_.end());
    for (std::uint32_t g : gangs_) std::make_heap(gang_heaps_[g].begin(), gang_heaps_[g].end(), std::greater<>());
  } else if (by_key && !kept) {
    for (std::uint32_t i = 0; i < ready.size(); ++i) by_key_.emplace_back(order_key(view, ready[i]), i);
    std::make_heap(by_key_.begin(), by_key_.end(), std::greater<>());
  }
  bool ordered = !by_key && order(view, ready, order_);
  begin_round(view, ready, out);
  ordered = narrow(order_) || ordered;
  std::size_t drawn = 0;  // from order_, or from ready itself
  gang_cursors_.clear();
  if (kept && !per_tenant) {
    for (std::uint32_t g : kept_gangs_) gang_cursors_.push_back(kept_by_gang_[g].begin());
  }
  // The free GPUs this round has not taken (counted only where it ends once they are taken).
  const auto gpus_left = [&]() -> std::size_t { return free_gpus - std::min(free_gpus, taken_list_.size()); };
  const auto next = [&](std::uint32_t& i) {
    while (per_tenant) {
      if (tenant_heads_.empty()) return false;
      std::pop_heap(tenant_heads_.begin(), tenant_heads_.end(), std::greater<>());
      const TenantHead head = tenant_heads_.back();
      tenant_heads_.pop_back();
      // A rigid stream whose gang is larger than the GPUs left holds nothing this round can start: passed over whole.
      const bool rigid = gang_slot(ready[head.place]) != 0;  // slot 0 holds the elastic tasks
      if (skips_large_gangs && rigid && ready[head.place].gpus > gpus_left()) continue;
      i = head.place;
      if (const std::optional<TenantHead> after = first_queued(ready, std::next(head.at), head.at->key, head.key, head.place + 1)) {
        tenant_heads_.push_back(*after);
        std::push_heap(tenant_heads_.begin(), tenant_heads_.end(), std::greater<>());
      }
      return true;
    }
    while (kept) {
      // The least (key, joined) of the parts' next entries, of the gangs that fit the GPUs left where skipping them
      // changes nothing (the parts ascend: slot 0, the elastic tasks, first).
      const std::size_t left = skips_large_gangs ? gpus_left() : SIZE_MAX;
      std::size_t least = kept_gangs_.size();
      for (std::size_t p = 0; p < kept_gangs_.size(); ++p) {
        if (kept_gangs_[p] != 0 && kept_gangs_[p] > left) break;
        if (gang_cursors_[p] == kept_by_gang_[kept_gangs_[p]].end()) continue;
        if (least == kept_gangs_.size() || *gang_cursors_[p] < *gang_cursors_[least]) least = p;
      }
      if (least == kept_gangs_.size()) return false;
      auto& cursor = gang_cursors_[least];
      const std::optional<std::uint32_t> at = place_of(ready, cursor->joined);
      if (!at) {
        cursor = kept_by_gang_[kept_gangs_[least]].erase(cursor);  // it left the queue
        continue;
      }
      ++cursor;
      i = *at;
      return true;
    }
    if (by_gang) {
      const std::size_t left = gpus_left();
      if (left == 0) return false;
      std::vector<std::pair<double, std::uint32_t>>* least = nullptr;
      for (std::uint32_t g : gangs_) {
        if (g > left) break;
        auto& heap = gang_heaps_[g];
        if (!heap.empty() && (least == nullptr || heap.front() < least->front())) least = &heap;
      }
      if (least == nullptr) return false;
      std::pop_heap(least->begin(), least->end(), std::greater<>());
      i = least->back().second;
      least->pop_back();
      return true;
    }
    if (!by_key_.empty()) {
      std::pop_heap(by_key_.begin(), by_key_.end(), std::greater<>());
      i = by_key_.back().second;
      by_key_.pop_back();
      return true;
    }
    if (ordered) {
      if (drawn == order_.size()) return false;
      i = order_[drawn++];
      return true;
    }
    if (by_key || drawn == ready.size()) return false;
    i = static_cast<std::uint32_t>(drawn++);
    return true;
  };
  // Time-sliced GPUs take a second task only when no idle GPUs can hold this one.
  for (std::uint32_t i; next(i);) {
    if (ends_when_full && taken_list_.size() >= free_gpus) break;
    if (!allowed(view, ready[i])) continue;
    const Shape shape{index(ready[i].tenant), ready[i].gpus, ready[i].model, ready[i].weights_per_gpu_bytes, ready[i].working_set_bytes};
    // A decode whose working set depends on the GPU's size (ReadyTask::working_set_on) is not a shape: it is tried.
    const bool shaped = !ready[i].working_set_by_gpu;
    if (!shaped || !known_no_room(shape)) {
      if (place(view, ready[i], i, true, out) || (time_sliced && place(view, ready[i], i, false, out))) {
        placed(view, ready[i], out);
        continue;
      }
      if (shaped) note_no_room(shape);
    }
    if (makes_room() && make_room(view, ready[i], out)) continue;
    if (blocks()) break;
    blocked(view, ready[i]);
  }
}

bool Greedy::place(const ClusterView& view, const ReadyTask& task, std::size_t ready_index, bool idle_only, Decisions& out) {
  const Cluster& cluster = view.cluster();
  auto usable = [&](GpuId g) {
    return !taken(g) && (idle_only ? view.is_idle(g) : view.is_free(g)) && view.allowed(task.tenant, g, taken_by_) && view.fits(g, task);
  };
  // Where the cost is the GPU's number, a node's GPUs come cheapest first: its first `enough` usable ones are the ones
  // a sort would pick.
  const bool by_number = cost_is_gpu_number();
  auto gather = [&](NodeId node, std::size_t enough) {
    const std::uint32_t first = index(cluster.first_gpu(node)), end = first + cluster.gpus_in(node);
    for (std::uint32_t g = first; g < end; ++g) {
      const GpuId gpu = make_id<GpuId>(g);
      if (usable(gpu)) {
        candidates_.push_back(Candidate{cost(view, task, gpu), gpu});
        if (by_number && candidates_.size() == enough) return;
      }
    }
  };
  // The cheapest k GPUs of candidates_, and their total cost.
  auto cheapest = [&](std::size_t k) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(k), candidates_.end());
    Cost total{};
    for (std::size_t i = 0; i < k; ++i) {
      for (std::size_t j = 0; j < total.size(); ++j) total[j] += candidates_[i].cost[j];
    }
    return total;
  };

  // One node with room for the whole gang first: NVLink inside a node beats the network. When the
  // cost is the GPU's number, the first node (in number order) with room is the cheapest.
  const std::size_t k = task.gpus;
  const double inf = std::numeric_limits<double>::infinity();
  const std::uint32_t nodes = cluster.node_count();
  Cost best{inf, inf, inf};
  chosen_.clear();
  // A node's free GPUs this round has taken are no candidates: one whose others cannot hold the gang is passed over
  // without looking at its GPUs (a round placing a fork's tasks would otherwise walk every node it filled).
  for (std::uint32_t n = view.next_node_with_free(0); n < nodes; n = view.next_node_with_free(n + 1)) {
    const NodeId node = make_id<NodeId>(n);
    if (untaken_free(view, node) < k) continue;
    candidates_.clear();
    gather(node, k);
    if (candidates_.size() < k) continue;
    const Cost total = by_number ? Cost{} : cheapest(k);  // by number, the first node with room wins
    if (by_number || total < best) {
      best = total;
      chosen_.clear();
      for (std::size_t i = 0; i < k; ++i) chosen_.push_back(candidates_[i].gpu);
      if (by_number) break;
    }
  }
  if (chosen_.empty()) {
    candidates_.clear();
    for (std::uint32_t n = view.next_node_with_free(0); n < nodes; n = view.next_node_with_free(n + 1)) {
      if (untaken_free(view, make_id<NodeId>(n)) > 0) gather(make_id<NodeId>(n), SIZE_MAX);
    }
    if (candidates_.size() < k) return false;
    cheapest(k);
    for (std::size_t i = 0; i < k; ++i) chosen_.push_back(candidates_[i].gpu);
  }
  for (GpuId g : chosen_) take_free(g, cluster.node_of(g), task.tenant);
  out.place(ready_index, chosen_);
  return true;
}

bool Greedy::make_room(const ClusterView& view, const ReadyTask& task, Decisions& out) {
  const Cluster& cluster = view.cluster();
  const std::int32_t rank = ClusterView::rank_of(task.priority, task.interactive);
  // Per node: its free GPUs that fit, then GPUs running lower-ranked tasks (lowest rank first, then the
  // latest started: the least work lost), until the gang has enough. The node preempting the fewest
  // GPUs wins.
  struct Option {
    bool victim;
    std::int32_t rank;
    double started_s;
    GpuId gpu;
    bool operator<(const Option& o) const {
      return std::tuple(victim, rank, -started_s, index(gpu)) < std::tuple(o.victim, o.rank, -o.started_s, index(o.gpu));
    }
  };
  std::vector<Option> options, best;
  std::size_t best_victims = std::numeric_limits<std::size_t>::max();
  for (std::uint32_t n = 0; n < cluster.node_count(); ++n) {
    options.clear();
    const std::uint32_t first = index(cluster.first_gpu(make_id<NodeId>(n)));
    for (std::uint32_t g = first; g < first + cluster.gpus_in(make_id<NodeId>(n)); ++g) {
      const GpuId gpu = make_id<GpuId>(g);
      if (taken(gpu) || !view.allowed(task.tenant, gpu, taken_by_)) continue;
      if (view.is_free(gpu)) {
        if (view.fits(gpu, task)) options.push_back({false, 0, 0, gpu});
      } else if (view.running_rank(gpu) < rank && view.fits_when_free(gpu, task)) {
        options.push_back({true, view.running_rank(gpu), view.running_since_s(gpu), gpu});
      }
    }
    if (options.size() < task.gpus) continue;
    std::sort(options.begin(), options.end());
    options.resize(task.gpus);
    const auto victims = static_cast<std::size_t>(std::count_if(options.begin(), options.end(), [](const Option& o) { return o.victim; }));
    if (victims > 0 && victims < best_victims) {
      best_victims = victims;
      best = options;
    }
  }
  if (best.empty()) return false;
  const std::string reason = "for a task of priority " + std::to_string(task.priority) + (task.interactive ? ", interactive" : "");
  for (const Option& o : best) {
    // Kept for this task: nothing else starts there this round.
    o.victim ? take(o.gpu, task.tenant) : take_free(o.gpu, cluster.node_of(o.gpu), task.tenant);
    if (o.victim) out.preempt(o.gpu, reason);
  }
  return true;
}

}  // namespace fleetsim::policies
