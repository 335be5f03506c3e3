#include "fleetsim/training.hpp"

#include <algorithm>
#include <filesystem>

#include "fleetsim/cluster.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/topology.hpp"
#include "loaders.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

constexpr double kActivationBytes = 2;  // 16-bit activations, as the memory formulas assume
constexpr double kBytesPerParameter = 16;  // mixed-precision Adam: 2 weights, 2 gradients, 12 fp32 states
constexpr double kOptimizerBytes = 12;

// FLOP per token: a layer's forward (GEMMs 2(4h^2 + 2hf), attention scores and values 4sh), what
// recomputation adds to a layer's backward, and the logits' forward 2hV.
struct TokenFlop {
  double layer, recompute, logits;
};
TokenFlop token_flop(const TrainingJob& job) {
  const TransformerModel& m = job.model;
  const double h = m.hidden, f = m.ffn(), s = m.seq_len;
  const double layer = 2 * (4 * h * h + 2 * h * f) + 4 * s * h;
  const double recompute = job.recompute == Recompute::full ? layer : job.recompute == Recompute::selective ? 4 * s * h : 0;
  return {layer, recompute, 2 * h * m.vocab};
}

}  // namespace

double TransformerModel::layer_parameters() const {
  const double h = hidden, f = ffn();
  return 4 * h * h + 4 * h + 2 * h * f + f + h + 4 * h;
}

double TransformerModel::parameters() const {
  const double h = hidden;
  return layers * layer_parameters() + static_cast<double>(vocab) * h + static_cast<double>(seq_len) * h + 2 * h;
}

void check_training_job(const TrainingJob& job) {
  std::vector<Problem> problems;
  auto need = [&](bool ok, const std::string& pointer, const std::string& message) {
    if (!ok) problems.push_back(Problem{job.file, pointer, message});
  };
  const TransformerModel& m = job.model;
  need(m.layers % job.pp == 0, "/parallel/pp", "expected a divisor of the " + std::to_string(m.layers) + " layers, found " + std::to_string(job.pp));
  need(m.heads % job.tp == 0, "/parallel/tp", "expected a divisor of the " + std::to_string(m.heads) + " heads, found " + std::to_string(job.tp));
  need(m.hidden % m.heads == 0, "/model/heads", "expected a divisor of the hidden size " + std::to_string(m.hidden));
  need(job.global_batch % (job.dp * job.micro_batch) == 0, "/batch/global",
       "expected a multiple of dp x micro (" + std::to_string(job.dp * job.micro_batch) + "), found " + std::to_string(job.global_batch));
  const int gpus = job.cluster.gpu_count();
  need(job.gpus() <= gpus, "/parallel", "tp x pp x dp = " + std::to_string(job.gpus()) + " GPUs, more than the cluster's " + std::to_string(gpus));
  if (!problems.empty()) throw InputError(std::move(problems));
}

TrainingJob parse_training_job(std::string_view json_text, const std::string& file_name) {
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  TrainingJob job;
  job.file = file_name;
  if (top.ok()) {
    job.name = top.string_or("name", std::filesystem::path(file_name).stem().string());
    if (const Json* cluster = top.field("cluster", Need::required)) detail::read_cluster(*cluster, "/cluster", problems, Catalog::builtin(), job.cluster);
    if (const Json* model = top.field("model", Need::required)) {
      ObjectReader r(*model, "/model", problems);
      TransformerModel& m = job.model;
      m.layers = static_cast<int>(r.integer("layers", Need::required, 1, 100000).value_or(1));
      m.hidden = static_cast<int>(r.integer("hidden", Need::required, 1, 1 << 20).value_or(1));
      m.heads = static_cast<int>(r.integer("heads", Need::required, 1, 1 << 16).value_or(1));
      m.ffn_hidden = static_cast<int>(r.integer_or("ffn_hidden", 0, 0, 1 << 22));
      m.vocab = static_cast<int>(r.integer("vocab", Need::required, 1, 1 << 24).value_or(1));
      m.seq_len = static_cast<int>(r.integer("seq_len", Need::required, 1, 1 << 24).value_or(1));
      r.finish();
    }
    if (const Json* parallel = top.field("parallel", Need::required)) {
      ObjectReader r(*parallel, "/parallel", problems);
      job.tp = static_cast<int>(r.integer_or("tp", 1, 1, 1 << 16));
      job.pp = static_cast<int>(r.integer_or("pp", 1, 1, 1 << 16));
      job.dp = static_cast<int>(r.integer_or("dp", 1, 1, 1 << 20));
      job.sequence_parallel = r.boolean_or("sequence_parallel", false);
      job.distributed_optimizer = r.boolean_or("distributed_optimizer", false);
      r.finish();
    }
    if (const Json* batch = top.field("batch", Need::required)) {
      ObjectReader r(*batch, "/batch", problems);
      job.global_batch = static_cast<int>(r.integer("global", Need::required, 1, 1 << 24).value_or(1));
      job.micro_batch = static_cast<int>(r.integer_or("micro", 1, 1, 1 << 16));
      r.finish();
    }
    job.schedule = top.choice("schedule", {"gpipe", "1f1b"}, 1) == 0 ? PipelineSchedule::gpipe : PipelineSchedule::one_f_one_b;
    job.recompute = static_cast<Recompute>(top.choice("recompute", {"none", "selective", "full"}, 0));
    const std::string dtype = top.string_or("dtype", "bf16");
    if (auto d = parse_dtype(dtype)) job.dtype = *d;
    else top.problem("dtype", "expected a dtype such as bf16, found \"" + dtype + "\"");
    job.compute_efficiency = top.number("compute_efficiency", Need::optional, 0.0, 1.0).value_or(1.0);
    if (!(job.compute_efficiency > 0)) top.problem("compute_efficiency", "expected a fraction above 0, at most 1");
    top.finish();
  }
  problems.throw_if_any();
  check_training_job(job);
  return job;
}

TrainingJob load_training_job(const std::string& path) { return parse_training_job(read_text_file(path), path); }

TrainingCounts count_training(const TrainingJob& job) {
  const TransformerModel& m = job.model;
  const double h = m.hidden, s = m.seq_len, a = m.heads, V = m.vocab, t = job.tp;
  const double b = job.micro_batch, B = job.global_batch, L = m.layers;
  TrainingCounts c;
  c.parameters = m.parameters();

  const TokenFlop flop = token_flop(job);
  const double tokens = B * s;
  c.model_flop = 3 * tokens * (L * flop.layer + flop.logits);
  c.hardware_flop = c.model_flop + tokens * L * flop.recompute;

  // Activations of one layer for one micro-batch on one GPU (Korthikanti et al., table 2).
  const double sbh = s * b * h;
  const double attention = 5 * a * s / h;  // softmax input and output, dropout mask, per sbh
  if (job.recompute == Recompute::full) {
    c.activation_bytes_per_layer = 2 * sbh / (job.sequence_parallel ? t : 1);
  } else if (job.recompute == Recompute::selective) {
    c.activation_bytes_per_layer = job.sequence_parallel ? 34 * sbh / t : sbh * (10 + 24 / t);
  } else {
    c.activation_bytes_per_layer = job.sequence_parallel ? sbh * (34 + attention) / t : sbh * (10 + 24 / t + attention / t);
  }

  const int p = job.pp, layers_per_stage = m.layers / p, mb = job.micro_batches();
  for (int stage = 0; stage < p; ++stage) {
    // The word embedding sits on the first stage, and a copy for the logits on the last.
    double params = layers_per_stage * m.layer_parameters() / t;
    if (stage == 0) params += (V * h + s * h) / t;
    if (stage == p - 1) params += (p > 1 ? V * h / t : 0) + 2 * h;
    c.stage_parameters.push_back(params);
    StageMemory mem;
    mem.weights = 2 * params;
    mem.gradients = 2 * params;
    mem.optimizer = kOptimizerBytes * params / (job.distributed_optimizer ? job.dp : 1);
    const int in_flight = job.schedule == PipelineSchedule::gpipe ? mb : std::min(p - stage, mb);
    mem.activations = in_flight * layers_per_stage * c.activation_bytes_per_layer;
    c.stage_memory.push_back(mem);
    c.dp_allreduce_bytes.push_back(2 * params);  // 16-bit gradients
  }
  static_assert(kBytesPerParameter == 2 + 2 + kOptimizerBytes);
  c.tp_allreduce_bytes = kActivationBytes * sbh;
  c.tp_allreduces_per_layer = job.tp > 1 ? (job.recompute == Recompute::full ? 6 : 4) : 0;
  c.pp_send_bytes = kActivationBytes * sbh;
  return c;
}

namespace {

// GPU of (tp rank, dp rank, stage): TP fastest, then DP, then PP.
GpuId gpu_at(const TrainingJob& job, int tp_rank, int dp_rank, int stage) {
  return make_id<GpuId>(static_cast<std::uint32_t>(tp_rank + job.tp * (dp_rank + job.dp * stage)));
}

}  // namespace

TrainingStep simulate_training_step(const TrainingJob& job) {
  check_training_job(job);
  const Cluster cluster(job.cluster);
  const Topology topology(cluster, job.cluster.fabric);
  TrainingStep step;
  step.counts = count_training(job);
  const TrainingCounts& c = step.counts;
  const TransformerModel& m = job.model;
  const int p = job.pp, mb = job.micro_batches(), layers_per_stage = m.layers / p;
  const double s = m.seq_len, b = job.micro_batch, t = job.tp;

  // Communication, from the topology: one TP all-reduce on stage 0's first group; the stage
  // boundary with every TP rank of every DP replica sending its share at once; the gradient
  // all-reduces of every stage and TP rank at once.
  double tp_allreduce_s = 0;
  if (job.tp > 1) {
    std::vector<GpuId> group;
    for (int r = 0; r < job.tp; ++r) group.push_back(gpu_at(job, r, 0, 0));
    tp_allreduce_s = analytical_time_s(topology, plan_collective(cluster, topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, group,
                                                                 c.tp_allreduce_bytes));
  }
  double send_s = 0;
  if (p > 1) {
    std::vector<CollectivePlan> sends;
    for (int d = 0; d < job.dp; ++d) {
      for (int r = 0; r < job.tp; ++r) {
        const std::vector<GpuId> pair{gpu_at(job, r, d, 0), gpu_at(job, r, d, 1)};
        sends.push_back(plan_collective(cluster, topology, CollectiveOp::send_recv, CollectiveAlgo::automatic, pair, c.pp_send_bytes / t));
      }
    }
    const auto times = simulated_times_s(topology, sends);
    send_s = *std::max_element(times.begin(), times.end());
  }
  std::vector<double> dp_s(static_cast<std::size_t>(p), 0.0);
  if (job.dp > 1) {
    std::vector<CollectivePlan> plans;
    for (int stage = 0; stage < p; ++stage) {
      for (int r = 0; r < job.tp; ++r) {
        std::vector<GpuId> replicas;
        for (int d = 0; d < job.dp; ++d) replicas.push_back(gpu_at(job, r, d, stage));
        plans.push_back(plan_collective(cluster, topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, replicas,
                                        c.dp_allreduce_bytes[static_cast<std::size_t>(stage)]));
      }
    }
    const auto times = simulated_times_s(topology, plans);
    for (std::size_t i = 0; i < times.size(); ++i) dp_s[i / static_cast<std::size_t>(job.tp)] = std::max(dp_s[i / static_cast<std::size_t>(job.tp)], times[i]);
  }

  // Compute per micro-batch and stage, at the achieved GEMM rate; TP all-reduces are blocking.
  const GpuType& gpu = cluster.gpu_type(gpu_at(job, 0, 0, 0));
  const double rate = gpu.peak_for(job.dtype) * job.compute_efficiency;
  const double tokens = b * s;
  const TokenFlop flop = token_flop(job);
  const double layer_forward = tokens * flop.layer / t, recompute = tokens * flop.recompute / t, logits = tokens * flop.logits / t;
  const int tp_forward = job.tp > 1 ? 2 : 0, tp_backward = c.tp_allreduces_per_layer - tp_forward;
  std::vector<double> fwd(static_cast<std::size_t>(p)), bwd(static_cast<std::size_t>(p));
  for (int stage = 0; stage < p; ++stage) {
    const double extra = stage == p - 1 ? logits : 0;
    fwd[stage] = (layers_per_stage * layer_forward + extra) / rate + layers_per_stage * tp_forward * tp_allreduce_s;
    bwd[stage] = (layers_per_stage * (2 * layer_forward + recompute) + 2 * extra) / rate + layers_per_stage * tp_backward * tp_allreduce_s;
  }
  step.forward_s = *std::max_element(fwd.begin(), fwd.end());
  step.backward_s = *std::max_element(bwd.begin(), bwd.end());
  step.tp_comm_s = layers_per_stage * (tp_forward + tp_backward) * tp_allreduce_s;
  step.pp_send_s = send_s;

  // Each stage's passes in schedule order.
  std::vector<std::vector<std::pair<int, bool>>> order(static_cast<std::size_t>(p));  // (micro-batch, backward)
  for (int stage = 0; stage < p; ++stage) {
    auto& o = order[stage];
    if (job.schedule == PipelineSchedule::gpipe) {
      for (int i = 0; i < mb; ++i) o.emplace_back(i, false);
      for (int i = 0; i < mb; ++i) o.emplace_back(i, true);
    } else {
      const int warmup = std::min(p - stage - 1, mb);
      for (int i = 0; i < warmup; ++i) o.emplace_back(i, false);
      for (int i = 0; i < mb - warmup; ++i) {
        o.emplace_back(warmup + i, false);
        o.emplace_back(i, true);
      }
      for (int i = mb - warmup; i < mb; ++i) o.emplace_back(i, true);
    }
  }
  // Play it out: repeatedly start the pass that can start earliest among those whose input has arrived.
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> fwd_end(static_cast<std::size_t>(p), std::vector<double>(static_cast<std::size_t>(mb), kNotYet));
  auto bwd_end = fwd_end;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0), busy(static_cast<std::size_t>(p), 0.0);
  for (std::size_t done = 0, total = static_cast<std::size_t>(2 * p * mb); done < total; ++done) {
    int best = -1;
    double best_start = 0;
    for (int stage = 0; stage < p; ++stage) {
      if (next[stage] == order[stage].size()) continue;
      const auto [i, backward] = order[stage][next[stage]];
      double ready = 0;
      if (!backward && stage > 0) ready = fwd_end[stage - 1][i] == kNotYet ? kNotYet : fwd_end[stage - 1][i] + send_s;
      if (backward) {
        ready = stage == p - 1 ? fwd_end[stage][i] : (bwd_end[stage + 1][i] == kNotYet ? kNotYet : bwd_end[stage + 1][i] + send_s);
      }
      if (ready == kNotYet) continue;
      const double start = std::max(ready, free_at[stage]);
      if (best < 0 || start < best_start) {
        best = stage;
        best_start = start;
      }
    }
    FLEETSIM_CHECK(best >= 0, "a pipeline schedule waits on itself");
    const auto [i, backward] = order[best][next[best]++];
    const double duration = backward ? bwd[best] : fwd[best];
    (backward ? bwd_end : fwd_end)[best][i] = best_start + duration;
    free_at[best] = best_start + duration;
    busy[best] += duration;
    step.ops.push_back({best, i, backward, best_start, best_start + duration});
  }
  const double pipeline_s = *std::max_element(free_at.begin(), free_at.end());
  double idle = 0;
  for (int stage = 0; stage < p; ++stage) {
    step.stage_end_s.push_back(free_at[stage]);
    step.iteration_s = std::max(step.iteration_s, free_at[stage] + dp_s[stage]);
    idle += 1 - busy[stage] / pipeline_s;
  }
  step.bubble = idle / p;
  step.dp_allreduce_s = *std::max_element(dp_s.begin(), dp_s.end());
  step.tokens_per_s = job.global_batch * s / step.iteration_s;
  step.mfu = c.model_flop / (step.iteration_s * job.gpus() * gpu.peak_for(job.dtype));
  return step;
}

}  // namespace fleetsim
