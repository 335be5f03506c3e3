// The shape most list schedulers share: consider ready tasks in some order, and give each the
// cheapest GPUs that are free and can hold it, a gang inside one node when one node has room.
// A policy says the order, the cost of a GPU for a task, and whether a task that cannot be
// placed stops the round (head-of-line blocking) or lets later tasks go first.
#pragma once

#include <array>
#include <optional>
#include <set>
#include <vector>

#include "fleetsim/policy.hpp"

namespace fleetsim::policies {

class Greedy : public Policy {
 public:
  // Compared lexicographically: the first element decides unless equal, then the next.
  using Cost = std::array<double, 3>;

  void schedule(const ClusterView& view, std::span<const ReadyTask> ready, Decisions& out) final;
  bool may_preempt() const final { return preempts() || makes_room(); }
  bool idle_when_full() const override { return !may_preempt(); }

 protected:
  // Fills `order` (empty on entry) with indices into `ready`, in the order to consider them, and returns
  // true; the default leaves it and returns false: the order tasks became ready, drawn as the round goes,
  // so that a round that fills the free GPUs at the head of a long queue costs what it places.
  virtual bool order(const ClusterView& /*view*/, std::span<const ReadyTask> /*ready*/,
                     std::vector<std::uint32_t>& /*order*/) {
    return false;
  }
  // A policy whose order is one number per task (lower first, equal numbers in the order tasks
  // became ready) gives that number here instead of overriding order(): the round then draws tasks
  // from a heap as it goes, so a round that fills the free GPUs early costs what it places, not a
  // sort of the whole queue. Such a policy overrides neither order() nor narrow().
  virtual bool orders_by_key() const { return false; }
  virtual double order_key(const ClusterView& /*view*/, const ReadyTask& /*task*/) const { return 0; }
  // Whether a task's key stays what it was when it joined the queue (its job's size, its priority, its
  // rank): the order is then kept from round to round, each round merging in the tasks that joined and
  // dropping those that left, instead of building a heap of the whole queue again.
  virtual bool keys_fixed() const { return false; }
  // Whether a task's key depends on its tenant alone (a share that changes from round to round; nothing
  // checks it, and it wins over keys_fixed): the order is then kept per tenant, by when tasks joined, and a
  // round merges the tenants by their keys at its start (the order a heap of every task would give), so it
  // costs its tenants and what it draws, beside an insert for each task that joined.
  virtual bool keys_per_tenant() const { return false; }
  // Lower is better. The default, the GPU's number, packs work onto the first GPUs. A policy that
  // overrides it must say so in cost_is_gpu_number(), which lets the loop stop at the first fit.
  virtual Cost cost(const ClusterView& /*view*/, const ReadyTask& /*task*/, GpuId gpu) const {
    return {static_cast<double>(index(gpu)), 0, 0};
  }
  virtual bool cost_is_gpu_number() const { return true; }
  virtual bool blocks() const { return false; }
  // Whether a task that cannot be placed may preempt running tasks of a lower rank (tenant priority,
  // then interactive over batch) to make room in one node; it is placed in the next round.
  virtual bool makes_room() const { return false; }
  // Whether begin_round may preempt running tasks.
  virtual bool preempts() const { return false; }
  // Hooks: called at the start of each round, after order() (it may preempt, and ask for a wake-up);
  // before placing each task, in order, which may be held back; after placing one; and when one
  // allowed cannot be placed (and the round goes on). Once a round has taken every free GPU it ends:
  // what these hooks note about the tasks left must not outlive the round.
  virtual void begin_round(const ClusterView& /*view*/, std::span<const ReadyTask> /*ready*/, Decisions& /*out*/) {}
  // After begin_round: may replace the order (`order`, as order() left it) with the tasks it will allow,
  // returning true, so that a long queue of held-back tasks costs the round nothing.
  virtual bool narrow(std::vector<std::uint32_t>& /*order*/) { return false; }
  virtual bool allowed(const ClusterView& /*view*/, const ReadyTask& /*task*/) { return true; }
  virtual void placed(const ClusterView& /*view*/, const ReadyTask& /*task*/, Decisions& /*out*/) {}
  virtual void blocked(const ClusterView& /*view*/, const ReadyTask& /*task*/) {}
  // Whether allowed() or blocked() notes the tasks a round reaches that cannot start: the round then tries each in
  // order, even one whose gang cannot fit (else such a task is passed over unseen).
  virtual bool notes_unplaced() const { return false; }
  // The place in `ready` of the task that joined as `joined` (ReadyTask::joined), or none where it has left; every
  // task before ready[from] joined before it. From a place, searched out from it doubling the step: a task near
  // `from` costs a step or two (a tenant's next task, after its last); from 0, a binary search.
  static std::optional<std::uint32_t> place_of(std::span<const ReadyTask> ready, std::uint64_t joined, std::uint32_t from = 0);
  // Where the tasks that joined after `last_joined` begin in `ready`: they are at its end (ReadyTask::joined grows).
  static std::size_t joined_after(std::span<const ReadyTask> ready, std::uint64_t last_joined) {
    std::size_t first = ready.size();
    while (first > 0 && ready[first - 1].joined > last_joined) --first;
    return first;
  }

 private:
  // With idle_only, only GPUs that run nothing; else time-sliced GPUs with a task slot left too.
  bool place(const ClusterView& view, const ReadyTask& task, std::size_t ready_index, bool idle_only, Decisions& out);
  bool make_room(const ClusterView& view, const ReadyTask& task, Decisions& out);

  struct Candidate {
    Cost cost;
    GpuId gpu;
    bool operator<(const Candidate& o) const { return cost < o.cost || (cost == o.cost && index(gpu) < index(o.gpu)); }
  };
  std::vector<std::uint32_t> order_;
  std::vector<std::pair<double, std::uint32_t>> by_key_;  // a min-heap of (key, index into ready)
  std::vector<std::vector<std::pair<double, std::uint32_t>>> gang_heaps_;  // per gang size: a min-heap as by_key_
  std::vector<std::uint32_t> gangs_;  // the gang sizes queued this round, smallest first

  // The kept order (keys_fixed): the queued tasks by (key, when they joined the queue); keys_per_tenant: by
  // (the tenant's stream, tenant_stream, when they joined). Tasks join at the queue's end (ReadyTask::joined grows
  // along it), so a round adds those past the last it saw and finds a task's place by binary search; one that left
  // is dropped when a round reaches it, or in a sweep once the order holds twice the queue. A round costs what
  // joined and what it draws, not the queue's length.
  struct Keyed {
    double key;
    std::uint64_t joined;
    bool operator<(const Keyed& o) const { return key < o.key || (key == o.key && joined < o.joined); }
  };
  void keep_order(const ClusterView& view, std::span<const ReadyTask> ready);
  // keys_per_tenant: kept_ holds (stream, joined); each stream's first task still queued, under its tenant's key.
  struct TenantHead {
    double key;
    std::uint64_t joined;
    std::set<Keyed>::iterator at;
    std::uint32_t place;  // in the round's ready queue
    bool operator>(const TenantHead& o) const { return key > o.key || (key == o.key && joined > o.joined); }
  };
  // The first task of `stream` from `at` on still in the queue, erasing those that left, with its key and place
  // in the queue; none where the stream has none left.
  std::optional<TenantHead> first_queued(std::span<const ReadyTask> ready, std::set<Keyed>::iterator at, double stream, double key, std::uint32_t from);
  std::vector<TenantHead> tenant_heads_;  // a min-heap
  static constexpr std::uint32_t kGangSlots = 1u << 16;
  static std::uint32_t gang_slot(const ReadyTask& t);  // 0 for an elastic task, else its gang (capped)
  static double tenant_stream(const ReadyTask& t);  // keys_per_tenant: a task's stream in kept_
  std::set<Keyed> kept_;  // keys_per_tenant
  std::vector<std::set<Keyed>> kept_by_gang_;  // keys_fixed: per gang slot
  std::vector<std::uint32_t> kept_gangs_;      // the slots that have held tasks, ascending
  std::vector<std::set<Keyed>::iterator> gang_cursors_;  // a round's place in each, as kept_gangs_
  std::uint64_t last_joined_ = 0;  // the last task added to kept_
  bool taken(GpuId g) const { return taken_[index(g)] == round_; }
  void take(GpuId g, TenantId tenant);
  void take_free(GpuId g, NodeId node, TenantId tenant);  // a GPU free at the round's start, counted against its node
  // The node's free GPUs (as the round's view has them) less those this round has taken.
  std::uint32_t untaken_free(const ClusterView& view, NodeId node) const;

  std::vector<std::uint32_t> taken_;       // GPUs placed on earlier in this round: == round_
  std::vector<std::int32_t> taken_by_;     // and the tenant placed there (-1: none)
  std::vector<GpuId> taken_list_;          // to clear taken_by_ after the round
  std::vector<std::uint32_t> node_round_;  // per node: the round node_taken_ counts for
  std::vector<std::uint32_t> node_taken_;  // per node: its GPUs taken in that round
  std::uint32_t round_ = 0;
  std::vector<Candidate> candidates_;
  std::vector<GpuId> chosen_;

  // What decides whether a task can be placed: its tenant, gang and memory needs. GPUs are only ever
  // taken during a round, never given back, so a shape that found no room finds none later in the
  // same round: a long queue of tasks that cannot start costs a lookup each, not a scan of the cluster.
  // The shapes are kept in an open-addressed table stamped with the round (nothing to clear); past
  // half full it takes no more (a miss only costs the scan).
  struct Shape {
    std::uint32_t tenant, gpus, model;
    double weights_per_gpu_bytes, working_set_bytes;
    bool operator==(const Shape&) const = default;
  };
  struct NoRoom {
    std::uint32_t round = 0;
    Shape shape{};
  };
  static std::size_t slot_of(const Shape& shape, std::size_t slots);  // slots: a power of two
  bool known_no_room(const Shape& shape) const;
  void note_no_room(const Shape& shape);
  std::vector<NoRoom> no_room_ = std::vector<NoRoom>(1024);
  std::size_t no_room_count_ = 0;
};

}  // namespace fleetsim::policies
