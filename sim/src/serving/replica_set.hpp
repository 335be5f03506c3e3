// One serving deployment's replicas and requests, run on an event queue that someone else owns: the
// `serve` command's own, or a scenario's run, where the replicas share the cluster with other work.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fleetsim/engine.hpp"
#include "fleetsim/serving.hpp"

namespace fleetsim::serving {

struct Request {
  double arrival_s = 0;
  std::int64_t prompt = 0, output = 0;
  std::int64_t to_prefill = 0;  // the prompt, and after a preemption the tokens generated before it too
  std::int64_t prefilled = 0;   // of to_prefill, with KV cached
  std::int64_t generated = 0;   // output tokens sampled
  std::int64_t kv_tokens = 0;   // tokens whose KV is cached
  std::int64_t blocks = 0;       // KV blocks of its own
  bool swapped = false;          // preempted with its KV in host memory (kv_tokens of it), waiting to resume
  // Its prompt's prefix: segments named by hashes (Requests::prefix_hashes from prefix_begin), of which
  // the first `referenced` are held in the replica's prefix cache, `shared_tokens` tokens of its KV.
  std::size_t prefix_begin = 0;
  std::uint32_t prefix_segments = 0, referenced = 0;
  std::int64_t shared_tokens = 0;
  // Disaggregated: the prefill replica its KV is moving from, the decode replica it goes to (with each
  // one's stamp when the transfer started), and when it started.
  std::uint32_t from_replica = 0, from_stamp = 0, to_replica = 0, to_stamp = 0;
  double transfer_start_s = 0;
  double first_token_s = -1, finish_s = -1;
  std::uint16_t tenant = 0;      // an index into the deployment's tenants
  bool prefilling() const { return prefilled < to_prefill; }
  // Disaggregated: for a prefill replica (its prompt not through, or to prefill again), else a decode one.
  bool wants_prefill() const { return prefilling() || generated == 0; }
};

struct Requests {
  std::vector<Request> list;                // in arrival order
  std::vector<std::uint64_t> prefix_hashes;  // each request's prefix segments
  std::int64_t segment_tokens = 0;           // tokens a prefix segment covers
};

// The deployment's requests: its trace, or Poisson arrivals (all at once without a rate) with lengths
// (and shared prefixes) drawn uniformly, from streams of their own under (seed, run).
Requests make_requests(const ServingDeployment& d, std::uint64_t seed, std::uint64_t run);

// The events a replica set puts on its queue: the next request's arrival (always `arrival_subject`,
// requests arrive in order) and a lane's iteration ending (`first_replica_subject` + the lane; the kind
// carries the lane's stamp above its low byte: iteration_kind | stamp << 8). A replica is L lanes
// (r * L to r * L + L - 1; L = ServingDeployment::lanes_a_replica(): its pipeline stages, or its
// data-parallel attention ranks); with one, a lane is its replica.
// Disaggregated deployments whose KV transfers are timed alone also schedule the end of each
// (`transfer_kind`, subject `arrival_subject`: they are taken earliest first); where the owner moves
// them (send_kv_with), `transfer_kind` is never scheduled.
struct EventNames {
  std::uint32_t arrival_kind = 0, iteration_kind = 1, transfer_kind = 2;
  std::uint32_t arrival_subject = 0, first_replica_subject = 0;
};

// One GPU's share of a KV transfer: `bytes` from the `from`-th GPU holding the prefill lane's KV to the
// `to`-th holding the decode lane's (a replica's GPUs stage after stage, TP rank after rank; with
// data-parallel attention, the lane's rank's one GPU, index 0).
struct KvShare {
  std::uint32_t from = 0, to = 0;
  double bytes = 0;
};

// Disaggregated: a request's KV cache moving from a prefill lane to the decode lane the router chose for
// it, every share at once (each stage holds its own layers' KV and sends it to the same stage).
struct KvTransfer {
  std::uint32_t request, from, to;
  std::span<const KvShare> shares;
  // Sent layer by layer (kv_by_layer): the KV could flow this long before the transfer starts (the last
  // stage's layers of the prompt's last forward pass, evenly spaced, from the end of its first to the end of
  // its last: the other stages ran theirs earlier, which is not counted), and `last_layer` of it, the last
  // layer's, is left whatever the links carried meanwhile. After the pass: 0 and 1.
  double early_s = 0, last_layer = 1;
};
// What of `bytes` is left to send when the transfer starts, where `sendable` bytes of it could have gone
// during the pass (all of it where the transfer is not layer by layer).
inline double kv_bytes_left(double bytes, double sendable, const KvTransfer& t) {
  return t.early_s > 0 ? std::max(bytes * t.last_layer, bytes - sendable) : bytes;
}

// Stage `stage`'s shares between a prefill replica of TP p and a decode replica of TP q, appended to
// `out`: decode GPU j receives `bytes` (its own KV heads of the stage's layers) from the prefill GPUs
// holding those heads, each its part, as vLLM's P/D connector reads them (PR 18833: decode TP a multiple of
// the prefill's, each decode rank reading its heads from one prefill rank; PR 27274: the prefill's larger,
// each decode rank reading from several). Where TP exceeds the `kv_heads`, ranks hold copies of a head;
// a decode GPU then reads each head from one copy, chosen by its own rank so that the reads spread. Equal
// TPs: GPU j to GPU j.
void add_kv_shares(int p, int q, double kv_heads, double bytes, std::uint32_t stage, std::vector<KvShare>& out);
// The KV heads TP splits: the model's KV heads (latent attention's one latent, whole on every rank: 1).
double kv_heads_shared(const ServingDeployment& d);

class ReplicaSet {
 public:
  ReplicaSet(const ServingDeployment& d, Requests requests, EventQueue& queue, EventNames names);
  ~ReplicaSet();
  ReplicaSet(ReplicaSet&&) noexcept;
  ReplicaSet& operator=(ReplicaSet&&) = delete;

  void start();                                // schedules the first arrival
  void arrive();                               // the next request arrives and is routed
  // Who moves the KV caches. By default the set times each alone, over the link between the replicas
  // (latency + bytes / bandwidth), and schedules its end (transfer_done). Given `send`, the owner moves
  // them (a scenario's run: over its shared network) and says when each has arrived (kv_arrived) or
  // cannot (kv_lost: no route left; the request is prefilled again). `reachable(from, to)` says whether
  // lane `from` can send to lane `to` now (links fail): the router sends a KV cache only to a decode lane
  // its prefill lane reaches, and a prompt only to a prefill lane that reaches one.
  void send_kv_with(std::function<void(const KvTransfer&)> send, std::function<bool(std::uint32_t from, std::uint32_t to)> reachable);
  // Routes changed (a link repaired): requests that found no replica to take them are routed again.
  void routes_changed();
  void transfer_done();                        // timed alone: the earliest KV transfer due has arrived
  void kv_arrived(std::uint32_t request);
  void kv_lost(std::uint32_t request);
  // A lane's iteration (or its restart) ended: the next one starts. False for one a failure cut short.
  bool iteration_done(std::uint32_t lane, std::uint32_t stamp);
  // A GPU of the replica failed: every lane of it stops, their requests back to the router, KV lost. One
  // being drained parks at once, calling `drained` (see on_drained) before this returns.
  void replica_down(std::uint32_t replica);
  // Its GPUs are back, or it was just given some (autoscaled): its lanes serve after `startup_s`.
  void replica_up(std::uint32_t replica, double startup_s);
  // Autoscaled: what a pool's replicas carry now, and its slots to grow into or drain (replicas, each of its
  // lanes). The pool is every replica, or, disaggregated, the prefill replicas (`decode` false) or the decode
  // replicas.
  struct Load {
    int serving = 0, starting = 0;  // up and taking requests; restarting or newly added
    std::uint64_t waiting = 0;      // requests waiting for one of its replicas' batches, or for any of them
    double busy_s = 0;              // iteration time so far, over every lane of the pool
    std::optional<std::uint32_t> parked, last_serving;  // a replica slot with no GPUs; the last replica serving
  };
  Load load(bool decode = false) const;
  // Stops routing to the replica's lanes; once the requests of all are done (or a GPU of it fails) it calls
  // `drained` with its first lane and parks.
  void drain(std::uint32_t replica);
  void on_drained(std::function<void(std::uint32_t first_lane)> drained);
  std::uint64_t unfinished() const;            // requests not yet completed
  // The run so far, up to `end_s` (iterations still running count as busy until then).
  ServingResult summarize(double end_s) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fleetsim::serving
