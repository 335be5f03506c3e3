// LLM serving as engines run it: replicas of an engine (vLLM, SGLang, TensorRT-LLM) on TP GPUs each,
// requests routed to them, and each replica run iteration by iteration.
//
// An iteration batches prefill chunks and decode tokens under the engine's token budget
// (max_num_batched_tokens) and sequence cap (max_num_seqs); its time comes from the kernel-time model
// (fleetsim/kernel_model.hpp) at that iteration's shapes: the linear layers' GEMMs at the batch's token
// count split over the TP ranks, prefill attention over each chunk's prompt, decode attention reading
// each sequence's KV cache, two TP all-reduces a layer timed on the replica's links (NVLink in a node;
// the NICs and the fabric where a TP group takes whole nodes, as vLLM runs TP across nodes), the logits of each
// sequence's last token, and the engine's host time per iteration. The KV cache is paged: blocks of
// block_size tokens, as many as VRAM holds after the weights, the profiled activations and the engine's
// reserve (vLLM's start-up arithmetic); a request that cannot get a block preempts the most recently
// admitted one, whose KV is dropped and recomputed later (vLLM's recompute preemption).
//
// Scheduling variants only choose the next batch: `chunked-prefill` (vLLM V1, Sarathi-Serve: running
// requests first, decodes and the rest of their prompts, then waiting ones FCFS, prompts cut to the
// budget), `prefill-first` (vLLM's original scheduler: whole waiting prompts in an iteration of their
// own whenever one fits, decodes otherwise) and `orca` (iteration-level batching of whole prompts and
// decodes together, no chunking).
//
// A scenario's "serving" deployments run the same replicas on the scenario's run (run/serving.hpp).
//
// Pipeline parallelism as vLLM runs it (`pp` stages of TP GPUs a replica, its layers split over them):
// a replica holds pp virtual engines ("lanes"), each with its own scheduler and 1/pp of the KV blocks, so
// pp batches are in flight at once, one in each stage. A lane's iteration passes every stage in turn: the
// whole model's kernels at its batch plus the stage-to-stage sends of the hidden states and residuals.
// Lanes are taken as perfectly staggered (a stage serves one lane at a time; the bubbles of unequal
// batches are not modelled). In a scenario a replica's GPUs are placed as that timing lays them out.
//
// Data-parallel attention (`dp_attention`) spreads a mixture of experts' routed experts over the
// replica's GPUs, each GPU a rank with its own scheduler and KV pool (a lane).
//
// Expert parallelism beside TP attention (`expert_parallel`, vLLM's --enable-expert-parallel) puts 1/tp of
// the routed experts whole on each GPU instead of 1/tp of every expert.
// A disaggregated deployment's KV transfers are timed alone by `serve`, and on the shared network in a
// scenario.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/compute.hpp"
#include "fleetsim/cost.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim {

// What an engine adds to the model's kernels, from models/engines.json (each figure with its source).
struct EngineProfile {
  enum class Memory : std::uint8_t {
    vllm,          // KV = VRAM x utilization - weights - profiled activations - reserved
    sglang,        // KV = VRAM x mem_fraction_static - weights, the fraction leaving SGLang's reserve
    tensorrt_llm,  // KV = utilization x (VRAM - weights - activations - reserved)
  };
  std::string id, name;
  Memory memory = Memory::vllm;
  double iteration_host_s = 0;  // host time per iteration the GPU waits for: scheduling, input preparation, sampling
  double startup_s = 0;         // from a replica's GPUs being back to it serving: process, weights, CUDA graphs
  double reserved_bytes = 0;    // VRAM kept outside weights, activations and KV (NCCL, cuBLAS, runtime buffers)
  int block_size = 16;          // tokens per KV block
  double gpu_memory_utilization = 0.9;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int small_gpu_max_num_seqs = 0, small_gpu_max_num_batched_tokens = 0;  // below 70 GiB, and on A100s (0: the same)
  std::string scheduler = "chunked-prefill";
  bool reserve_whole_request = false;  // admit a request only with KV free for its whole prompt and output
  // Data-parallel attention: the token budget is the replica's, split among its ranks (SGLang divides
  // chunked_prefill_size by dp_size); otherwise each rank has the whole budget (vLLM's DP engines).
  bool dp_attention_splits_budget = false;
  int lane_token_budget(bool dp_attention, int ranks) const {
    return dp_attention && dp_attention_splits_budget ? std::max(1, max_num_batched_tokens / ranks) : max_num_batched_tokens;
  }
  // Automatic prefix caching: a prompt's leading full blocks found in the KV cache (from an earlier
  // request with the same prefix) are not prefilled again; cached blocks no request holds are evicted,
  // least recently used first, only when blocks run out.
  bool prefix_caching = true;
  // Preemption: the preempted request's KV is dropped and recomputed (vLLM V1, SGLang), or, with
  // `swap`, copied to host memory over the GPU's host link and back when it resumes (vLLM V0's
  // --preemption-mode swap), while `swap_space_bytes` a GPU hold it; beyond that it is recomputed.
  bool swap = false;
  double swap_space_bytes = 0;
  std::vector<std::string> assumed;    // figures that are guesses
  std::string source;
};
const std::vector<EngineProfile>& engine_profiles();  // models/engines.json
const EngineProfile* find_engine(std::string_view id);
// The knobs an engine picks for a GPU when nobody sets them (vLLM's and SGLang's tables by GPU memory).
EngineProfile engine_for_gpu(EngineProfile engine, const GpuType& gpu);

enum class BatchPolicy : std::uint8_t { chunked_prefill, prefill_first, orca };
enum class Router : std::uint8_t { round_robin, least_requests, least_tokens, prefix_aware };

// A request's lengths: fixed, or uniform between two bounds (inclusive).
struct TokenCount {
  std::int64_t low = 1, high = 1;
};

struct ServingDeployment {
  std::string name, description, file;
  ClusterSpec cluster;
  Architecture model;
  Dtype weights = Dtype::bf16, kv_cache = Dtype::bf16;  // weights: the dtype their GEMMs compute in
  // Weight-only int4 (AWQ and GPTQ checkpoints, run by Marlin-class kernels): the linear layers' weights
  // are stored in 4 bits with a 16-bit scale a group of 128, widened in registers, so their GEMMs
  // compute in `weights` (bf16) but read this many bytes a weight; embeddings, the LM head and norms stay
  // 16-bit. 0: every weight is stored as `weights`.
  double weight_storage_bytes = 0;
  std::string weights_name() const { return weight_storage_bytes > 0 ? "int4" : std::string(dtype_name(weights)); }
  EngineProfile engine;     // with the knobs the deployment sets
  bool utilization_set = false;  // the deployment set gpu_memory_utilization (SGLang: its mem_fraction_static)
  int tp = 1;  // over more than a node's GPUs: a multiple of them, whole nodes a stage
  int pp = 1;  // pipeline stages a replica, each of tp GPUs (the stages may span nodes)
  // Data-parallel attention with the experts spread over the replica's tp GPUs (SGLang's
  // --enable-dp-attention with expert parallelism; vLLM's data parallelism with --enable-expert-parallel):
  // each GPU is a rank of its own, its scheduler and KV pool holding its requests, attention and the dense
  // layers whole on it; each mixture-of-experts layer's experts are split over the tp GPUs, every rank's
  // tokens dispatched to them and combined back by all-to-alls. A replica is tp lanes, one a rank.
  bool dp_attention = false;
  int lanes_a_replica() const { return dp_attention ? tp : pp; }
  // Expert parallelism beside TP attention (vLLM's --enable-expert-parallel without data parallelism:
  // FusedMoEParallelConfig takes the TP group as the EP group): each GPU holds 1/tp of the routed experts,
  // each whole, and runs them over the tokens routed to them, which TP leaves on every rank; the TP
  // all-reduce after the mixture layer combines them, as it would the TP slices (no all-to-all).
  bool expert_parallel = false;
  bool experts_spread() const { return dp_attention || expert_parallel; }
  // Hot experts (`moe.imbalance`, as `train` reads it): with the experts spread, the busiest GPU's experts
  // receive this many times the mean tokens a step (each expert at most every token), and the dispatch and
  // combine all-to-alls carry this many times the mean bytes to it. 1: a router that loads them evenly.
  double expert_imbalance = 1;
  int replicas = 1;
  // Prefill/decode disaggregation (DistServe, Splitwise, vLLM's and Dynamo's P/D): the first
  // `prefill_replicas` of the replicas only prefill; each request's KV cache then moves to one of the
  // others, which only decode (0: every replica does both).
  int prefill_replicas = 0;
  // Disaggregated: the decode replicas' TP where it differs from the prefill replicas' `tp` (vLLM's P/D
  // with heterogeneous TP, PRs 18833 and 27274); 0: the same. Their PP is the same (`pp`).
  int decode_tp = 0;
  // Disaggregated: each stage sends its layers' KV layer by layer, each layer's as the prompt's last forward
  // pass ends that layer (Mooncake's Transfer Engine, FAST'25 section 3.1; vLLM's P2P NCCL connector; SGLang's
  // open pull requests 23515 and 28529), rather than all of it once the pass is over (vLLM's NIXL and Mooncake
  // connectors, SGLang's release): only the last layer's share is left when the prompt is through.
  bool kv_by_layer = false;
  bool decodes_only(std::size_t replica) const { return prefill_replicas > 0 && replica >= static_cast<std::size_t>(prefill_replicas); }
  int tp_of(std::size_t replica) const { return decode_tp > 0 && decodes_only(replica) ? decode_tp : tp; }
  // The decode replicas' shape where it differs: a copy at their TP, for their memory and iteration times
  // (a whole copy, once a run, so that whatever a replica's timing reads comes along).
  ServingDeployment decode_shape() const {
    ServingDeployment out = *this;
    out.tp = decode_tp;
    out.decode_tp = 0;
    return out;
  }
  // In a scenario: replicas added and removed with the load, between `min` and `max` (then `replicas`
  // is max, the slots, of which `min` start placed). Every `interval`: one more when the requests
  // waiting per replica reach `queue` and GPUs are free; one fewer (drained, then its GPUs freed) when
  // none waits and the others would be less than `target_busy` busy with its share. Disaggregated, the
  // prefill and decode replicas are two pools scaled apart, each by its own waiting and busy share
  // (Dynamo's planner scales its prefill and decode workers apart too): `min` and `max` bound the prefill
  // replicas, `decode_min` and `decode_max` the decode replicas (`prefill_replicas` is max, the decode
  // replicas' slots follow).
  struct Autoscale {
    int min = 0, max = 0;
    int decode_min = 0, decode_max = 0;  // disaggregated: the decode pool's bounds
    bool given = false;                  // the deployment has an `autoscale` (read, whether or not it was well formed)
    double interval_s = 30, target_busy = 0.6;
    int queue = 8;
    bool on() const { return max > 0; }
  } autoscale;
  BatchPolicy policy = BatchPolicy::chunked_prefill;
  Router router = Router::round_robin;
  // Requests: Poisson arrivals at `rate_per_s` (0: all at once), or replayed from `trace` rows.
  double rate_per_s = 0;
  std::int64_t count = 0;
  TokenCount prompt_tokens, output_tokens;
  struct Request {
    double arrival_s;
    std::int64_t prompt, output;
    std::size_t prefix_begin = 0;     // its prompt's prefix hashes, in prefix_hashes
    std::uint32_t prefix_count = 0;
  };
  std::vector<Request> trace;  // from a CSV of arrival_s,prompt_tokens,output_tokens
  // Prompts that share prefixes. A trace's (Mooncake's hash_ids): each hash names the content of the
  // prompt up to the end of its segment of prefix_segment_tokens. Generated requests: one of `groups`
  // shared prefixes of `tokens` tokens is put in front of each prompt, drawn uniformly.
  std::vector<std::uint64_t> prefix_hashes;
  std::int64_t prefix_segment_tokens = 0;
  struct SharedPrefix {
    std::int64_t tokens = 0, groups = 0;
  } shared_prefix;
  // Tenants sharing the deployment: each request is one's, drawn by their shares (summing to 1), and
  // each gets its own percentiles, goodput and SLOs.
  struct Tenant {
    std::string name;
    double share = 0;
  };
  std::vector<Tenant> tenants;
  // Service-level objectives: a percentile's target (0: none); TTFT and TPOT targets also define goodput.
  struct Slo {
    std::string metric;  // ttft, tpot or e2e
    double percentile = 95;
    double target_s = 0;
    std::string tenant;  // the requests of this tenant only; "" for every request
  };
  std::vector<Slo> slos;
  std::uint64_t seed = 1;
  std::vector<std::string> assumptions;  // what the deployment left out and fleetsim assumed
  // In a scenario (and alone, where disaggregated: a KV transfer's links depend on it): where each replica
  // runs, as pieces: its tp x pp GPUs, stage after stage, cut where they fill a node (one piece a replica
  // unless it needs more than a node), each piece its node (an index into the scenario's cluster), its
  // first GPU there (an index within the node) and how many. In a scenario `cluster` then holds the one
  // node group it runs on.
  struct Placement {
    std::uint32_t node = 0;
    int first_gpu = 0;
    int gpus = 0;
  };
  std::vector<Placement> placement;  // pieces_a_replica(r) for replica r, replica after replica
  // A replica's GPUs cut into nodes' worth, stage after stage: the pieces' sizes.
  std::vector<int> piece_gpus(std::size_t replica) const {
    const int per_node = cluster.groups.front().node.gpus;
    std::vector<int> out;
    for (int left = tp_of(replica) * pp; left > 0; left -= per_node) out.push_back(std::min(left, per_node));
    return out;
  }
  std::size_t pieces_a_replica(std::size_t replica) const {
    const int per_node = cluster.groups.front().node.gpus;
    return static_cast<std::size_t>((tp_of(replica) * pp + per_node - 1) / per_node);
  }
  // Autoscaled in a scenario: replica slot r is one of those placed at the start (the first `min` of its
  // pool); the others are placed when the autoscaler adds them. Otherwise every replica is placed.
  bool starts_placed(std::size_t replica) const {
    if (!autoscale.on()) return true;
    if (!decodes_only(replica)) return replica < static_cast<std::size_t>(autoscale.min);
    return replica - static_cast<std::size_t>(prefill_replicas) < static_cast<std::size_t>(autoscale.decode_min);
  }
  // Placed replica r's first piece in `placement`: the placed prefill replicas' pieces come first.
  std::size_t first_piece(std::size_t replica) const {
    if (!decodes_only(replica)) return replica * pieces_a_replica(0);
    const auto prefill = static_cast<std::size_t>(prefill_replicas);
    const auto prefill_placed = static_cast<std::size_t>(autoscale.on() ? autoscale.min : prefill_replicas);
    return prefill_placed * pieces_a_replica(0) + (replica - prefill) * pieces_a_replica(replica);
  }
  // GPUs of every replica.
  int gpus() const {
    const int decode = prefill_replicas > 0 ? replicas - prefill_replicas : 0;
    return ((replicas - decode) * tp + decode * (decode_tp > 0 ? decode_tp : tp)) * pp;
  }
  std::uint32_t first_node = 0, nodes = 0;  // in a scenario: its node group's nodes in the cluster
};

// Strict: unknown fields, a model that does not fit its TP group, a block size of 0, negative lengths
// are errors naming `file` and the field.
// `edits` change the file before it is read, as a scenario's --set does.
ServingDeployment parse_serving(std::string_view json_text, const std::string& file, std::span<const ScenarioEdit> edits = {});
ServingDeployment load_serving(const std::string& path, std::span<const ScenarioEdit> edits = {});

// One replica's memory, as the engine computes it at start-up. With pipeline stages each GPU holds its
// stage's layers (the first the embedding, the last the LM head) and their KV cache; the replica's blocks
// are the fewest any stage's GPUs hold (vLLM takes the minimum over its workers), and the figures here are
// that stage's. Its lanes share the blocks: `lane_blocks` each.
struct KvCapacity {
  double weights_per_gpu_bytes = 0, activation_bytes = 0, reserved_bytes = 0, usable_bytes = 0;
  double kv_bytes_per_token = 0;  // on each GPU of the TP group
  // Each stage's, on each of its GPUs (its own layers'); one entry without pipeline stages.
  std::vector<double> stage_kv_bytes_per_token;
  std::int64_t blocks = 0, tokens = 0;
  std::int64_t lane_blocks = 0, lane_tokens = 0;  // blocks / pp (vLLM: num_gpu_blocks //= pipeline_parallel_size)
  int bound_stage = 0;  // the stage whose GPUs hold the fewest blocks
};
KvCapacity kv_capacity(const ServingDeployment& d);
// vLLM's split of the layers over pipeline stages (get_pp_indices): as even as may be, the layers left
// over one each to the stages before the last, from the last but one back.
std::vector<int> stage_layers(int layers, int pp);

// One iteration's work: prefill chunks (tokens, KV tokens before them) and decodes (their KV lengths summed).
struct IterationShape {
  std::vector<std::pair<std::int64_t, std::int64_t>> prefills;  // (chunk tokens, tokens already cached)
  std::int64_t decodes = 0;
  double decode_context = 0;  // sum over decodes of the KV tokens each reads
  // Data-parallel attention: the tokens every rank of the replica has in flight, this one's included,
  // which each mixture layer's experts take (0: this rank's alone).
  std::int64_t replica_tokens = 0;
};
// Times iterations on one replica, caching what depends on the token count alone.
class IterationTimer {
 public:
  explicit IterationTimer(const ServingDeployment& d);
  ~IterationTimer();
  IterationTimer(IterationTimer&&) noexcept;
  IterationTimer& operator=(IterationTimer&&) = delete;
  struct Time {
    double total_s = 0, linear_s = 0, attention_s = 0, allreduce_s = 0, logits_s = 0, host_s = 0;
    double swap_s = 0;  // KV copied to and from host memory (swap preemption), before the forward pass
    double stage_send_s = 0;  // pipeline stages: each stage's hidden states and residuals sent to the next
    double expert_alltoall_s = 0;  // data-parallel attention: the experts' dispatch and combine all-to-alls
    double lockstep_s = 0;  // data-parallel attention: waiting for the step's slowest rank
    Time& operator+=(const Time& t) {
      total_s += t.total_s;
      expert_alltoall_s += t.expert_alltoall_s;
      lockstep_s += t.lockstep_s;
      swap_s += t.swap_s;
      stage_send_s += t.stage_send_s;
      linear_s += t.linear_s;
      attention_s += t.attention_s;
      allreduce_s += t.allreduce_s;
      logits_s += t.logits_s;
      host_s += t.host_s;
      return *this;
    }
  };
  Time time(const IterationShape& shape);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct Percentiles {
  double p50 = 0, p90 = 0, p95 = 0, p99 = 0, mean = 0, max = 0;
};
struct ServingResult {
  std::uint64_t requests = 0, completed = 0, preemptions = 0, iterations = 0;
  // Swap preemption: preemptions whose KV went to host memory, the bytes copied out and back in (over
  // every GPU of the TP groups), and preemptions recomputed because the swap space was full.
  std::uint64_t swapped_out = 0, swap_space_full = 0;
  double swap_bytes = 0;
  // Prompt tokens admitted to a prefill (a recomputed request's again), and of them those found in the
  // prefix cache; cached blocks evicted to make room.
  std::uint64_t prompt_tokens = 0, prefix_hit_tokens = 0, prefix_evictions = 0;
  // In a scenario with faults: replicas taken down by a GPU failure (or a spot preemption), and the
  // requests they held sent back to the router.
  std::uint64_t replica_failures = 0, requests_rerouted = 0;
  // Disaggregated: KV caches moved from a prefill replica to a decode replica, their bytes and time
  // (those that arrived, or were lost), and whether they shared the network with other flows (in a
  // scenario) or were timed alone (`serve`).
  std::uint64_t kv_transfers = 0;
  double kv_transfer_bytes = 0, kv_transfer_s = 0;
  bool kv_on_shared_network = false;
  // Autoscaled: replicas added and removed, additions wanted that found no free GPUs (disaggregated:
  // `scaled` the prefill replicas', `decode_scaled` the decode replicas'), replica-seconds up (restarts and
  // draining included, every replica's).
  struct Scaling {
    std::uint64_t ups = 0, downs = 0, ups_without_gpus = 0;
  };
  Scaling scaled, decode_scaled;
  double replica_s = 0;
  double makespan_s = 0;    // from the first arrival to the last completion
  double last_finish_s = 0;  // the last completion, on the run's clock
  Percentiles ttft_s, tpot_s, e2e_s;
  // Per tenant, where the deployment has tenants (in their order).
  struct TenantResult {
    std::string name;
    std::uint64_t completed = 0;
    Percentiles ttft_s, tpot_s, e2e_s;
    double goodput_per_s = 0;  // its requests meeting every TTFT and TPOT target that applies to them
  };
  std::vector<TenantResult> tenants;
  double input_tokens_per_s = 0, output_tokens_per_s = 0, requests_per_s = 0;
  double goodput_per_s = 0;       // requests meeting every TTFT and TPOT target that applies to them
  double mean_batch = 0;          // sequences per iteration
  double peak_kv_use = 0;         // fraction of a replica's KV blocks, the highest any reached
  IterationTimer::Time busy;      // iterations' time summed over every replica, by part
  double gpu_busy_s = 0;          // GPU-seconds the replicas' GPUs computed (iterations x TP), up to the run's end
  std::vector<double> ttft_samples_s, tpot_samples_s;  // each completed request's, in request order
  // Over time, across every replica: sequences in the iterations running and KV blocks in use (as a
  // fraction of all replicas' blocks), at most a few thousand samples, thinned evenly over the run.
  struct Sample {
    double time_s;
    double sequences, kv_use;
  };
  std::vector<Sample> timeline;
  KvCapacity capacity;  // a replica's (where prefill and decode replicas differ in TP, a prefill replica's)
  std::optional<KvCapacity> decode_capacity;  // a decode replica's, where their TP differs
  struct Verdict {
    ServingDeployment::Slo slo;
    double achieved_s = 0;
    bool met = false;
  };
  std::vector<Verdict> verdicts;
  std::vector<std::string> notes;  // assumptions and what is not modelled
  std::shared_ptr<const ServingDeployment> deployment;  // in a scenario's summary: whose results these are
};
ServingResult simulate_serving(const ServingDeployment& d);

// The cheapest serving deployment that meets the base deployment's SLOs at each request rate: over
// node types, TP sizes and engines, the fewest replicas found by bisection (more replicas never serve
// worse), each point run on several seeds. A point meets an SLO when the upper end of its percentile's
// 95% confidence interval over the seeds is within the target, misses it when the lower end is past it,
// and is not sure otherwise; only points that meet every SLO are recommended.
struct ServingPlan {
  std::string file, base_file, base_text;
  std::vector<std::string> node_types, engines;
  std::vector<int> tps;
  std::vector<int> pps;  // pipeline stages a replica (the deployment's own where the search gives none)
  // Attention split over TP (false) or data-parallel with the experts spread (true), for a mixture of experts.
  std::vector<bool> dp_attentions{false};
  // Prefill/decode splits: the share of a point's replicas that only prefill (0: every replica does both).
  std::vector<double> prefill_shares{0.0};
  // The decode replicas' TP sizes to try beside each split's (0: the prefill replicas' tp).
  std::vector<int> decode_tps{0};
  // The KV transfers to try beside each split: once the prompt is through (false), or layer by layer (true).
  std::vector<bool> kv_by_layer{false};
  // Engine knob settings to try: each the deployment's "knobs" object with some knobs set (JSON text),
  // and what it sets ("" for the deployment's own).
  struct Knobs {
    std::string json, label;
  };
  std::vector<Knobs> knob_settings{Knobs{}};
  int min_replicas = 1, max_replicas = 64;
  std::vector<double> rates_per_s;
  int seeds = 3;
  OwnershipCost cost;  // "cost": rent by default, or a month owned (docs/plan.md#cost)
};
// The nodes of `node_gpus` GPUs that `replicas` replicas of tp x pp GPUs take (of which, where
// `prefill_replicas` > 0 and `decode_tp` > 0, the decode replicas of decode_tp x pp), placed as a scenario
// places them: each replica's pieces (a node's worth of its GPUs, stage after stage, the last maybe less)
// first fit.
int replica_nodes(int tp, int pp, int node_gpus, int replicas, int prefill_replicas, int decode_tp);
ServingPlan parse_serving_plan(std::string_view json_text, const std::string& file);
ServingPlan load_serving_plan(const std::string& path);
bool is_serving_plan(std::string_view json_text);  // a plan file naming a serving deployment

struct ServingPoint {
  double rate_per_s = 0;
  std::string node_type, engine;
  int tp = 1, pp = 1, replicas = 0, gpus = 0, nodes = 0;
  bool dp_attention = false;  // the replicas' attention data-parallel over their tp GPUs
  double prefill_share = 0;  // of the plan's prefill_shares
  int prefill_replicas = 0;  // of the replicas (0: not disaggregated)
  int decode_tp = 0;         // the decode replicas' TP where it differs (0: tp)
  bool kv_by_layer = false;  // a split's KV sent layer by layer (false: after the prompt's pass)
  std::string knobs;         // the knob setting's label ("" for the deployment's own)
  double usd_per_month = 0;  // what the plan ranks by: rent, or owning where the plan says so
  MonthlyCost cost;          // both ways, owning's energy at the replicas' GPU utilization
  enum class Verdict : std::uint8_t { met, missed, not_sure, does_not_fit } verdict = Verdict::does_not_fit;
  std::string why;  // the first SLO missed or unsure, or why the deployment cannot run
  struct Slo {
    ServingDeployment::Slo slo;
    double mean_s = 0, ci95_s = 0;
  };
  std::vector<Slo> slos;
};
struct ServingPlanResult {
  std::vector<ServingPoint> points;  // every point simulated, in search order
  std::vector<ServingPoint> lines;   // the fewest replicas meeting the SLOs on each line, or the line's largest count where none did
  std::vector<std::optional<ServingPoint>> recommended;  // per rate
  KernelGuesses kernel_guesses;  // of the node types some point of which ran
};
ServingPlanResult plan_serving(const ServingPlan& plan, unsigned threads);

}  // namespace fleetsim
