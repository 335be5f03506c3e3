#include "fleetsim/training.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>

#include "fleetsim/cluster.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/topology.hpp"
#include "fleetsim/units.hpp"
#include "loaders.hpp"
#include "parallel.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

constexpr double kActivationBytes = 2;  // 16-bit activations, as the memory formulas assume
// DeepSpeed's default reduce_bucket_size, in elements (deepspeed/runtime/zero/config.py, 5e8).
constexpr double kDeepSpeedReduceBucket = 5e8;
// The optimizer's state a parameter: the fp32 master weight and the two moments at the job's precision (12 bytes
// with fp32 moments: with the 16-bit weight and gradient, mixed-precision Adam's 16 a parameter).
double optimizer_bytes(const TrainingJob& job) { return 4 + 2 * dtype_bytes(job.optimizer_moments); }

// The weight matrices of one layer's MLP: dense, two (or, gated, three) h x f; a mixture of experts, the
// router (h x E), the shared expert and either every expert or (`active`) the top_k a token reaches.
double mlp_matrices(const TransformerModel& m, bool mixture, bool active) {
  const double h = m.hidden, per_mlp = (m.gated ? 3 : 2) * h;
  if (!mixture) return per_mlp * m.dense_mlp_width();
  return h * m.experts + per_mlp * m.shared_ffn + (active ? m.top_k : m.experts) * per_mlp * m.ffn();
}

// The weight matrices of one layer's attention: QKV (h to a d + 2 kv d) and output (a d to h); latent
// attention's down- and up-projections and output.
double attention_matrices(const TransformerModel& m) {
  const double h = m.hidden;
  return m.latent ? m.latent->parameters(h, m.heads) : h * m.qkv_width() + h * m.attention_width();
}

// The output projection's input: the heads' values.
double attention_output_width(const TransformerModel& m) { return m.latent ? m.heads * m.latent->v : m.attention_width(); }

// Latent attention's up-projections (the query's, from its latent or, without one, from the hidden state; the
// keys' and values' from theirs): what mla_up_proj recomputation re-runs.
double latent_up_parameters(const TransformerModel& m) {
  const LatentAttention& la = *m.latent;
  return (la.q_rank > 0 ? la.q_rank : m.hidden) * m.heads * la.qk() + la.kv_rank * m.heads * (la.nope + la.v);
}

// Latent attention's normed latents a token, the up-projections' inputs: the query's (where it has one) and the
// keys' and values'.
double normed_latents(const TransformerModel& m) { return (m.latent->q_rank > 0 ? m.latent->q_rank : 0) + m.latent->kv_rank; }

// FLOP per token: a layer's forward (GEMMs 2(4h^2 + 2hf), attention scores and values 4sh), what
// recomputation adds to a layer's backward, the logits' forward 2hV, and a multi-token prediction module's
// projection from 2h to h; a dense layer's and a mixture's.
struct TokenFlop {
  double dense_layer, moe_layer, dense_recompute, moe_recompute, logits, mtp_projection;
  double layer(bool mixture) const { return mixture ? moe_layer : dense_layer; }
  double recompute(bool mixture) const { return mixture ? moe_recompute : dense_recompute; }
};
TokenFlop token_flop(const TrainingJob& job) {
  const TransformerModel& m = job.model;
  const double h = m.hidden, s = m.seq_len;
  // The projections, what the MLP a token passes through holds, attention's scores and values.
  const double scores = 2 * s * m.score_width();
  const auto layer = [&](bool mixture) { return 2 * (attention_matrices(m) + mlp_matrices(m, mixture, true)) + scores; };
  const auto recompute = [&](bool mixture) {
    // torchtitan's checkpoint stops its re-run once the last tensor the backward reads is back (PyTorch's
    // non-reentrant checkpoint stops early): w2's input, so w2 does not run again.
    if (job.recompute == Recompute::full) return layer(mixture) - (job.runtime == TrainingJob::Runtime::torchtitan ? 2 * h * m.ffn() : 0);
    // By op: the key projection, the output projection and the MLP's up projection (one of the gated pair's two).
    if (job.recompute == Recompute::selective_op) return 2 * h * (m.kv() * m.head_size() + m.attention_width() + m.ffn());
    // Selective: each module's forward FLOP again (the norms and the activation are memory-bound: none).
    double flop = job.recomputes(kRecomputeCoreAttention) ? scores : 0;
    if (job.recomputes(kRecomputeLatentUpProjection)) flop += 2 * latent_up_parameters(m);
    if (mixture && job.recomputes(kRecomputeMoe)) flop += 2 * mlp_matrices(m, true, true);
    else if (mixture && job.recomputes(kRecomputeSharedExperts)) flop += 2 * (m.gated ? 3 : 2) * h * m.shared_ffn;
    if (!mixture && job.recomputes(kRecomputeMlp)) flop += 2 * mlp_matrices(m, false, true);
    return flop;
  };
  return {layer(false), layer(true), recompute(false), recompute(true), 2 * h * m.vocab, 2 * 2 * h * h};
}

// A model chunk's layers by kind: dense MLPs (every layer of a dense model) and mixtures of experts.
struct LayerMix {
  int dense = 0, mixture = 0;
  int total() const { return dense + mixture; }
};
// Where each virtual stage runs. Virtual stage k is chunk k / pp on GPU k % pp; under DualPipe the 2 pp virtual
// stages are the model's pp stages twice, one pipeline a direction: k < pp fed from GPU 0 (its stage k on GPU
// k), k >= pp fed from GPU pp - 1 (its stage k - pp on GPU 2 pp - 1 - k).
struct VirtualStages {
  int pp, count;
  bool dual;
  explicit VirtualStages(const TrainingJob& job)
      : pp(job.pp), count(job.schedule == PipelineSchedule::dualpipe ? 2 * job.pp : job.pp * job.vp), dual(job.schedule == PipelineSchedule::dualpipe) {}
  int gpu(int k) const { return dual && k >= pp ? 2 * pp - 1 - k : k % pp; }
  int held(int gpu, int direction) const { return direction == 0 ? gpu : 2 * pp - 1 - gpu; }  // DualPipe: a GPU's stage of a direction
  bool first(int k) const { return dual ? k % pp == 0 : k == 0; }             // the embedding's, fed by no stage
  bool last(int k) const { return dual ? k % pp == pp - 1 : k == count - 1; }  // the head's, its backward its own
};

// Each virtual stage's layers, whole, in model order (under DualPipe, each direction's), and the multi-token
// prediction modules' on the last.
std::vector<LayerMix> chunk_layers(const TrainingJob& job) {
  const VirtualStages stages(job);
  std::vector<int> counts = !job.virtual_stage_layers.empty() ? job.virtual_stage_layers
                            : job.vp == 1                     ? job.stage_layers()
                                                              : std::vector<int>(static_cast<std::size_t>(stages.count), job.model.layers / stages.count);
  const std::size_t model = counts.size();
  if (stages.dual) counts.insert(counts.end(), counts.begin(), counts.end());  // the same stages, the other way
  std::vector<LayerMix> mixes(counts.size());
  for (std::size_t k = 0, layer = 0; k < counts.size(); ++k) {
    if (k == model) layer = 0;
    for (int n = 0; n < counts[k]; ++n, ++layer) ++(job.model.moe_layer(static_cast<int>(layer)) ? mixes[k].mixture : mixes[k].dense);
  }
  // The multi-token prediction modules' layers run on the last stage, after its own.
  for (std::size_t k = 0; k < mixes.size(); ++k) {
    if (stages.last(static_cast<int>(k))) (job.model.moe() ? mixes[k].mixture : mixes[k].dense) += job.model.mtp_layers;
  }
  return mixes;
}
// Interleaved 1F1B's order of chunk passes on every stage (Megatron-Core's schedule table): the micro-batches
// in groups of `group`, each group through chunk 0, then chunk 1, ...; the last group takes what is left. The
// k-th forward runs (micro-batch, chunk) = table[k]; the k-th backward the same micro-batch, chunks reversed.
struct ChunkPass {
  int micro_batch, chunk;
};
std::vector<ChunkPass> interleaved_order(int micro_batches, int chunks_a_gpu, int group) {
  std::vector<ChunkPass> table;
  table.reserve(static_cast<std::size_t>(micro_batches) * chunks_a_gpu);
  for (int first = 0; first < micro_batches; first += group) {
    const int end = first + group >= micro_batches ? micro_batches : first + group;
    for (int chunk = 0; chunk < chunks_a_gpu; ++chunk) {
      for (int i = first; i < end; ++i) table.push_back({i, chunk});
    }
    if (end == micro_batches) break;
  }
  return table;
}

// A GPU stage's layers: its chunks'.
LayerMix stage_mix(const std::vector<LayerMix>& chunks, const VirtualStages& stages, int stage) {
  LayerMix mix;
  for (int k = 0; k < stages.count; ++k) {
    if (stages.gpu(k) != stage) continue;
    mix.dense += chunks[static_cast<std::size_t>(k)].dense;
    mix.mixture += chunks[static_cast<std::size_t>(k)].mixture;
  }
  return mix;
}

// A chunk's layers that run as the job says (all of them unless it recomputes only the first recompute_layers
// of each chunk), and the others, which recompute nothing (Megatron-Core's block method: the first layers of
// the chunk, a mixture of experts' dense first layers before its mixtures; never the multi-token prediction
// modules' layers on the last chunk, which it skips).
struct RecomputeSplit {
  LayerMix as_job, kept;
};
RecomputeSplit split_recompute(const TrainingJob& job, const LayerMix& chunk, bool last) {
  if (job.recompute != Recompute::full || job.recompute_layers == 0) return {chunk, {}};
  LayerMix own = chunk;
  if (last) (job.model.moe() ? own.mixture : own.dense) -= job.model.mtp_layers;
  const int dense = std::min(job.recompute_layers, own.dense), mixture = std::min(job.recompute_layers - dense, own.mixture);
  return {{dense, mixture}, {chunk.dense - dense, chunk.mixture - mixture}};
}
// The same over a GPU stage's chunks.
RecomputeSplit stage_split(const TrainingJob& job, const std::vector<LayerMix>& chunks, const VirtualStages& stages, int stage) {
  RecomputeSplit sum;
  for (int k = 0; k < stages.count; ++k) {
    if (stages.gpu(k) != stage) continue;
    const RecomputeSplit part = split_recompute(job, chunks[static_cast<std::size_t>(k)], stages.last(k));
    sum.as_job.dense += part.as_job.dense;
    sum.as_job.mixture += part.as_job.mixture;
    sum.kept.dense += part.kept.dense;
    sum.kept.mixture += part.kept.mixture;
  }
  return sum;
}
// The job as its kept layers run: recomputing nothing.
TrainingJob without_recompute(TrainingJob job) {
  job.recompute = Recompute::none;
  job.recompute_layers = 0;
  return job;
}

// One pass of a micro-batch through a virtual stage, in a GPU's schedule order.
struct Pass {
  int micro_batch, virtual_stage;
  bool backward;
  bool with_next = false;  // ep_overlap, DualPipe's pairs: run together with the pass after it
  // A backward whole, its input gradient only (DualPipe's zero-bubble passes), or the weight gradients of the
  // GPU's oldest input-only backward (its micro-batch and stage are that backward's, known when it is played).
  enum class Part : std::uint8_t { whole, input, weight } part = Part::whole;
};

// One GPU's passes under DualPipe, in its order, as deepseek-ai/DualPipe's `DualPipe.step` runs them (its steps 1
// to 8). `near` is the direction whose first stage is nearer the GPU (GPU r < pp / 2: the one fed from GPU 0),
// `far` the other; half_rank = min(r, pp - 1 - r). Each direction's micro-batches in order.
std::vector<Pass> dualpipe_order(const VirtualStages& stages, int micro_batches, int gpu) {
  const int pp = stages.pp, half_gpus = pp / 2, half_rank = std::min(gpu, pp - 1 - gpu), half = micro_batches / 2;
  const int near = gpu < half_gpus ? 0 : 1, far = 1 - near;
  const bool middle = gpu == half_gpus - 1 || gpu == half_gpus;
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  std::vector<Pass> order;
  const auto forward = [&](int direction, bool with_next = false) {
    order.push_back({forwards[direction]++, stages.held(gpu, direction), false, with_next});
  };
  const auto backward = [&](int direction, Pass::Part part = Pass::Part::whole) {
    order.push_back({backwards[direction]++, stages.held(gpu, direction), true, false, part});
  };
  const auto weight = [&] { order.push_back({0, 0, true, false, Pass::Part::weight}); };
  for (int i = 0; i < 2 * (half_gpus - half_rank - 1); ++i) forward(near);  // 1: nF0
  for (int i = 0; i < half_rank + 1; ++i) {                                  // 2: nF0F1
    forward(near);
    forward(far);
  }
  for (int i = 0; i < half_gpus - half_rank - 1; ++i) {  // 3: nB1W1F1
    backward(far, Pass::Part::input);
    weight();
    forward(far);
  }
  for (int i = 0; i < half - pp + half_rank + 1; ++i) {  // 4, the main step: nF0B1F1B0 (the middle GPUs' first pair not overlapped)
    forward(near, !(i == 0 && middle));
    backward(far);
    forward(far, true);
    backward(near);
  }
  for (int i = 0; i < half_gpus - half_rank - 1; ++i) {  // 5: nB1F1B0
    backward(far);
    forward(far, true);
    backward(near);
  }
  Pass::Part part = Pass::Part::whole;  // 6: nB1B0, the second half's weight gradients deferred
  for (int i = 0; i < half_rank + 1; ++i) {
    if (i == (half_rank + 1) / 2 && half_rank % 2 == 1) part = Pass::Part::input;
    backward(far, part);
    if (i == (half_rank + 1) / 2 && half_rank % 2 == 0) part = Pass::Part::input;
    backward(near, part);
  }
  for (int i = 0; i < half_gpus - half_rank - 1; ++i) {  // 7: nWB0
    weight();
    backward(near, Pass::Part::input);
  }
  for (int i = 0; i < half_rank + 1; ++i) weight();  // 8: nW
  return order;
}

// A GPU stage's passes in its schedule's order: GPipe's, 1F1B's (Megatron-LM's, interleaved where vp > 1, in the
// groups of `table`), DualPipe's.
std::vector<Pass> pipeline_order(const TrainingJob& job, const VirtualStages& stages, const std::vector<ChunkPass>& table, int stage) {
  const int p = job.pp, v = job.vp, mb = job.micro_batches();
  std::vector<Pass> o;
  if (job.schedule == PipelineSchedule::gpipe) {
    for (int i = 0; i < mb; ++i) o.push_back({i, stage, false});
    for (int i = 0; i < mb; ++i) o.push_back({i, stage, true});
    return o;
  }
  if (stages.dual) return dualpipe_order(stages, mb, stage);
  // 1F1B: the k-th forward of a stage runs table[k] (interleaved) or micro-batch k, the k-th backward the
  // chunks in reverse; warm-up forwards first, then one forward and one backward in turn, then the remaining
  // backwards.
  const int total = mb * v;
  const int warmup = v == 1 ? std::min(p - stage - 1, mb) : (mb == p ? total : std::min(2 * (p - stage - 1) + (v - 1) * job.group(), total));
  const auto pass = [&](int k, bool backward) {
    if (v == 1) return Pass{k, stage, backward};
    const ChunkPass at = table[static_cast<std::size_t>(k)];
    return Pass{at.micro_batch, (backward ? v - 1 - at.chunk : at.chunk) * p + stage, backward};
  };
  for (int k = 0; k < warmup; ++k) o.push_back(pass(k, false));
  for (int k = 0; k < total - warmup; ++k) {
    o.push_back(pass(warmup + k, false));
    o.push_back(pass(k, true));
  }
  for (int k = total - warmup; k < total; ++k) o.push_back(pass(k, true));
  // Combined 1F1B: each backward followed by a forward runs with it. The forward is one the plain order runs
  // after that backward, so the backward never waits on it, and forwards never wait on backwards.
  for (std::size_t i = 0; job.ep_overlap && i + 1 < o.size(); ++i) {
    if (o[i].backward && !o[i + 1].backward) o[i++].with_next = true;
  }
  return o;
}

// A mixture-of-experts layer on one GPU: its own tokens (1/tp of them under sequence parallelism), the top-k
// copies its expert TP group received from the dispatch (expert_load() times the mean on the busiest GPU),
// its E / ep experts and 1/etp of each one's hidden size.
struct MoeShape {
  double own_rows, routed, local_experts, width;
};
MoeShape moe_shape(const TrainingJob& job) {
  const TransformerModel& m = job.model;
  const double tokens = job.local_tokens(), etp = job.expert_tp();
  const double own = job.sequence_parallel ? tokens / job.tp : tokens;
  return {own, own * m.top_k * etp * job.expert_load(), static_cast<double>(m.experts) / job.ep, m.ffn() / etp};
}

}  // namespace

double TransformerModel::qkv_width() const { return (heads + 2.0 * kv()) * head_size(); }

double TransformerModel::score_width() const { return latent ? heads * (latent->qk() + latent->v) : 2 * attention_width(); }

double TransformerModel::attention_parameters() const {
  // GPT's layout adds the QKV and output projections' biases.
  return llama_layout ? attention_matrices(*this) : attention_matrices(*this) + qkv_width() + hidden;
}

double TransformerModel::expert_parameters() const { return moe() ? experts * (gated ? 3.0 : 2.0) * hidden * ffn() : 0; }

double TransformerModel::layer_parameters(bool mixture) const {
  const double h = hidden, f = mixture ? ffn() : dense_mlp_width();
  const double matrices = attention_matrices(*this) + mlp_matrices(*this, mixture, false);
  if (llama_layout) return matrices + 2 * h;  // two RMSNorm weights
  // Biases (an MLP's for each expert and the shared one), two LayerNorms.
  const double mlps = mixture ? experts + (shared_ffn > 0 ? 1 : 0) : 1, mlp_bias = mixture ? experts * f + shared_ffn : f;
  return matrices + qkv_width() + h + (gated ? 2 : 1) * mlp_bias + mlps * h + 4 * h;
}

double TransformerModel::parameters() const {
  const double h = hidden, V = vocab;
  const double dense = moe() ? dense_layers : layers, mixtures = layers - dense;
  const double stack = mixtures * layer_parameters(true) + dense * layer_parameters(false);
  if (llama_layout) return stack + 2 * V * h + h;  // embedding, untied head, final norm
  return stack + V * h + static_cast<double>(seq_len) * h + 2 * h;
}

double TransformerModel::mtp_parameters() const {
  const double h = hidden;
  return mtp_layers * (layer_parameters(moe()) + 2 * h * h + 3 * h);
}

double TransformerModel::active_parameters() const {
  if (!moe()) return parameters();
  return parameters() - (layers - dense_layers) * (mlp_matrices(*this, true, false) - mlp_matrices(*this, true, true));
}

std::vector<int> TrainingJob::stage_layers() const {
  std::vector<int> counts(static_cast<std::size_t>(pp), 0);
  if (!virtual_stage_layers.empty()) {  // each GPU stage's chunks
    for (std::size_t k = 0; k < virtual_stage_layers.size(); ++k) counts[k % counts.size()] += virtual_stage_layers[k];
    return counts;
  }
  // The stages given their own count, then the rest split evenly over the others (check_training_job: whole).
  if (first_stage_layers > 0) counts.front() = first_stage_layers;
  if (last_stage_layers > 0 && pp > 1) counts.back() = last_stage_layers;
  const int given = counts.front() + (pp > 1 ? counts.back() : 0);
  const auto open = static_cast<int>(std::count(counts.begin(), counts.end(), 0));
  for (int& n : counts) {
    if (n == 0) n = (model.layers - given) / open;
  }
  return counts;
}

std::string schedule_name(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::gpipe ? "gpipe" : schedule == PipelineSchedule::one_f_one_b ? "1f1b" : "dualpipe";
}

std::string recompute_name(Recompute recompute) {
  switch (recompute) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
    case Recompute::selective_op: return "selective_op";
  }
  return "none";
}

std::string cpu_adam_name(TrainingJob::CpuAdam adam) { return adam == TrainingJob::CpuAdam::torch ? "torch" : "deepspeed"; }

double cpu_adam_params_per_s(TrainingJob::CpuAdam adam, const KernelConstants& k) {
  return adam == TrainingJob::CpuAdam::torch ? k.cpu_adam_torch_params_per_s : k.cpu_adam_deepspeed_params_per_s;
}

const std::vector<SweepSetting>& sweep_settings() {
  static const std::vector<SweepSetting> settings{{"dp", &TrainingJob::dp},       {"tp", &TrainingJob::tp},
                                                  {"pp", &TrainingJob::pp},       {"vp", &TrainingJob::vp},
                                                  {"ep", &TrainingJob::ep},       {"micro", &TrainingJob::micro_batch},
                                                  {"global", &TrainingJob::global_batch}, {"recompute_layers", &TrainingJob::recompute_layers}};
  return settings;
}

const SweepSetting* sweep_setting(std::string_view key) {
  const std::vector<SweepSetting>& settings = sweep_settings();
  const auto found = std::find_if(settings.begin(), settings.end(), [&](const SweepSetting& s) { return s.key == key; });
  return found == settings.end() ? nullptr : &*found;
}

const std::vector<std::string>& recompute_module_names() {
  static const std::vector<std::string> names{"core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp", "moe", "shared_experts"};
  return names;
}

namespace {
constexpr int kMaxTrainingDp = 8192;
constexpr int kMaxPipelineCells = 1 << 20;

// Why fp8 cannot run on `cluster`: its first GPU type without fp8 tensor cores; none where every one has them.
std::optional<std::string> fp8_missing(const ClusterSpec& cluster) {
  for (const NodeGroup& g : cluster.groups) {
    if (g.gpu.peak_flop_per_s[static_cast<std::size_t>(Dtype::fp8)] <= 0) {
      return "expected a dtype the GPU runs: " + g.gpu.id + " has no fp8 tensor cores (Ada, Hopper and later do), found fp8";
    }
  }
  return std::nullopt;
}
}  // namespace

void check_training_job(const TrainingJob& job) {
  std::vector<Problem> problems;
  auto need = [&](bool ok, const std::string& pointer, const std::string& message) {
    if (!ok) problems.push_back(Problem{job.file, job.pointer + pointer, message});
  };
  const TransformerModel& m = job.model;
  const bool layout = !job.virtual_stage_layers.empty();
  if (layout) {
    // Megatron-Core's layout: every virtual stage listed, every layer placed once.
    const std::int64_t chunks = std::int64_t{job.pp} * job.vp;
    std::int64_t placed = 0;
    for (int n : job.virtual_stage_layers) placed += n;
    need(static_cast<std::int64_t>(job.virtual_stage_layers.size()) == chunks, "/parallel/virtual_stage_layers",
         "expected pp x vp (" + std::to_string(chunks) + ") entries, one a virtual stage, found " + std::to_string(job.virtual_stage_layers.size()));
    need(placed == m.layers, "/parallel/virtual_stage_layers", "expected the " + std::to_string(m.layers) + " layers in all, found " + std::to_string(placed));
    need(job.first_stage_layers == 0 && job.last_stage_layers == 0, "/parallel/virtual_stage_layers",
         "expected virtual_stage_layers or first_stage_layers and last_stage_layers, not both");
  } else if (job.first_stage_layers > 0 || job.last_stage_layers > 0) {
    // Megatron-Core's uneven pipeline: the first and last stages' own counts, the rest split evenly, each
    // stage at least one layer.
    need(job.pp > 1, "/parallel/pp", "expected pipeline stages (pp above 1) with first_stage_layers or last_stage_layers, found pp 1");
    need(job.vp == 1, "/parallel/vp", "expected no virtual stages (vp 1) with first_stage_layers or last_stage_layers, found vp " + std::to_string(job.vp));
    const int given = job.first_stage_layers + job.last_stage_layers;
    const int open = job.pp - (job.first_stage_layers > 0 ? 1 : 0) - (job.last_stage_layers > 0 ? 1 : 0);
    const int rest = m.layers - given;
    const bool whole = open == 0 ? rest == 0 : rest >= open && rest % open == 0;
    need(job.pp <= 1 || whole, "/parallel",
         "expected the " + std::to_string(m.layers) + " layers less the first and last stages' " + std::to_string(given) + " to split evenly over the other " +
             std::to_string(open) + " stages, at least one layer each, found " + std::to_string(rest) + " left");
  } else {
    need(m.layers % job.pp == 0, "/parallel/pp",
         "expected a divisor of the " + std::to_string(m.layers) + " layers, found " + std::to_string(job.pp) +
             " (first_stage_layers and last_stage_layers give the end stages their own counts)");
  }
  if (job.cp > 1) {
    // Megatron-Core's load-balanced ring: 2 cp chunks of every sequence, FlashAttention-class kernels.
    need(m.seq_len % (2 * job.cp) == 0, "/parallel/cp",
         "expected 2 x cp (" + std::to_string(2 * job.cp) + ") to divide the sequence of " + std::to_string(m.seq_len) + " tokens");
    need(job.attention == AttentionKernel::flash, "/attention", "expected flash attention with context parallelism (ring attention runs FlashAttention blocks)");
    need(job.zero_stage() < 3, "/parallel/zero", "expected ZeRO 0 to 2 with context parallelism: FSDP over DP x CP is not modelled yet");
  }
  if (job.vp > 1) {
    // Megatron-LM's interleaved schedule: chunks of whole layers, micro-batches in groups of pp.
    need(job.pp > 1, "/parallel/vp", "expected virtual stages only with pipeline stages (pp above 1), found vp " + std::to_string(job.vp) + " with pp 1");
    const std::int64_t chunks = std::int64_t{job.pp} * job.vp;  // as read, past what an int holds
    need(layout || m.layers % chunks == 0, "/parallel/vp",
         "expected pp x vp (" + std::to_string(chunks) + ") to divide the " + std::to_string(m.layers) + " layers (virtual_stage_layers places them unevenly)");
    need(job.schedule == PipelineSchedule::one_f_one_b, "/schedule", "expected 1f1b with virtual stages (interleaved 1F1B), found " + schedule_name(job.schedule));
    if (job.global_batch % (job.dp * job.micro_batch) == 0) {
      // Megatron-Core's rule: groups of pp to all micro-batches, the last group whole or at least pp.
      const int mb = job.micro_batches(), n = job.group(), last = mb % n;
      if (job.microbatch_group == 0) {
        need(last == 0, "/batch/global",
             "expected micro-batches a multiple of pp (" + std::to_string(job.pp) + ") with virtual stages, found " + std::to_string(mb) +
                 " (parallel.microbatch_group sets groups of another size)");
      } else {
        need(n >= job.pp && n <= mb, "/parallel/microbatch_group",
             "expected pp (" + std::to_string(job.pp) + ") to the " + std::to_string(mb) + " micro-batches, found " + std::to_string(n));
        need(n < job.pp || n > mb || last == 0 || last >= job.pp, "/parallel/microbatch_group",
             "expected the last group (" + std::to_string(mb) + " mod " + std::to_string(n) + " = " + std::to_string(last) + " micro-batches) empty or at least pp (" +
                 std::to_string(job.pp) + "), as Megatron-Core requires");
      }
    }
  } else {
    need(job.microbatch_group == 0, "/parallel/microbatch_group", "expected microbatch_group only with virtual stages (vp above 1)");
  }
  if (job.schedule == PipelineSchedule::dualpipe) {
    // deepseek-ai/DualPipe's own asserts: an even pp, an even number of micro-batches, at least 2 pp.
    need(job.pp >= 2 && job.pp % 2 == 0, "/parallel/pp", "expected an even number of pipeline stages with dualpipe, found " + std::to_string(job.pp));
    need(job.vp == 1, "/parallel/vp", "expected no virtual stages with dualpipe (each GPU holds a stage of each direction), found vp " + std::to_string(job.vp));
    if (job.global_batch % (job.dp * job.micro_batch) == 0) {
      const int mb = job.micro_batches();
      need(mb % 2 == 0 && mb >= 2 * job.pp, "/batch/global",
           "expected an even number of micro-batches, at least 2 x pp (" + std::to_string(2 * job.pp) + "), with dualpipe, found " + std::to_string(mb));
    }
  }
  if (m.moe()) {
    need(m.top_k >= 1 && m.top_k <= m.experts, "/model/experts_per_token",
         "expected 1 to the " + std::to_string(m.experts) + " experts, found " + std::to_string(m.top_k));
    need(m.experts % job.ep == 0, "/parallel/ep", "expected a divisor of the model's " + std::to_string(m.experts) + " experts, found " + std::to_string(job.ep));
    // Megatron-Core folds the expert TP x EP groups into a stage's TP x CP x DP GPUs; its MoE layer takes each
    // GPU's share of the tokens under sequence parallelism (it warns without it).
    const std::int64_t stage_gpus = std::int64_t{job.tp} * job.cp * job.dp, expert_group = std::int64_t{job.expert_tp()} * job.ep;
    need(stage_gpus % expert_group == 0, "/parallel/ep",
         "expected etp x ep (" + std::to_string(expert_group) + ") to divide a stage's tp x cp x dp GPUs (" + std::to_string(stage_gpus) + ")");
    need(m.ffn() % job.expert_tp() == 0, "/parallel/etp", "expected a divisor of the experts' " + std::to_string(m.ffn()) + " hidden size, found " + std::to_string(job.expert_tp()));
    need(job.tp == 1 || job.sequence_parallel, "/parallel/sequence_parallel", "expected sequence parallelism with experts and TP above 1, as Megatron-Core expects");
    need(job.zero_stage() < 3, "/parallel/zero", "expected ZeRO 0 to 2 with experts: FSDP of a mixture of experts is not modelled yet");
    const bool deepep = job.dispatcher == TrainingJob::Dispatcher::deepep;
    for (const NodeGroup& g : job.cluster.groups) {
      need(!deepep || g.gpu.sms == 0 || job.dispatcher_sms < g.gpu.sms, "/moe/dispatcher_sms",
           "expected fewer SMs than " + g.gpu.id + "'s " + std::to_string(g.gpu.sms) + ", found " + std::to_string(job.dispatcher_sms));
    }
    need(deepep || job.max_nodes == 0, "/moe/max_nodes",
         "expected \"dispatcher\": \"deepep\" with max_nodes: a flat all-to-all sends a copy an expert, however few nodes hold them");
    need(deepep || job.dispatch_dtype == Dtype::bf16, "/moe/dispatch_dtype", "expected \"dispatcher\": \"deepep\" with an fp8 dispatch (NCCL's all-to-all moves 16-bit tokens)");
    if (job.dispatch_dtype == Dtype::fp8) {
      if (const auto missing = fp8_missing(job.cluster)) need(false, "/moe/dispatch_dtype", *missing);
    }
    need(!job.ep_overlap || job.ep > 1, "/parallel/ep_overlap", "expected ep_overlap only with expert parallelism (ep above 1): without it there is no all-to-all to hide");
    need(!job.ep_overlap || job.schedule == PipelineSchedule::one_f_one_b, "/parallel/ep_overlap",
         "expected ep_overlap with the 1f1b schedule, whose backwards it pairs with forwards, found " + schedule_name(job.schedule) +
             (job.schedule == PipelineSchedule::dualpipe ? " (which pairs its own)" : ""));
    // As Megatron-Core requires: with pipeline stages, only the interleaved schedule leaves the paired passes
    // enough slack (plain 1F1B would wait on each pair's forward from one stage to the next).
    need(!job.ep_overlap || job.pp == 1 || job.vp > 1, "/parallel/ep_overlap",
         "expected virtual stages (vp above 1) with ep_overlap and pipeline stages, as Megatron-Core's combined 1F1B requires, found vp 1 with pp " + std::to_string(job.pp));
  } else {
    need(!job.ep_overlap, "/parallel/ep_overlap", "expected ep_overlap only for a mixture of experts (a model with experts)");
    need(job.ep == 1, "/parallel/ep", "expected ep 1 for a dense model (no experts), found " + std::to_string(job.ep));
    need(job.etp == 0, "/parallel/etp", "expected no etp for a dense model (no experts)");
  }
  // Selective recomputation's modules where the model has what they re-run (Megatron-Core requires MLA for
  // mla_up_proj and grouped-GEMM experts for moe_act; the others would recompute nothing).
  const int dense_layers = m.moe() ? m.dense_layers : m.layers;
  need(!job.recomputes(kRecomputeLatentUpProjection) || m.latent.has_value(), "/recompute_modules", "expected mla_up_proj only for a model with latent attention (MLA)");
  need(!job.recomputes(kRecomputeExpertActivation) || m.moe(), "/recompute_modules", "expected moe_act only for a mixture of experts (a model with experts)");
  need(!job.recomputes(kRecomputeMoe) || m.moe(), "/recompute_modules", "expected moe only for a mixture of experts (a model with experts)");
  need(!job.recomputes(kRecomputeSharedExperts) || (m.moe() && m.shared_ffn > 0), "/recompute_modules", "expected shared_experts only for a mixture with a shared expert");
  need(!job.recomputes(kRecomputeMlp) || dense_layers > 0, "/recompute_modules", "expected mlp only for a model with dense MLP layers (moe recomputes a mixture's)");
  need(!job.recomputes(kRecomputeLayerNorm) || m.latent || m.moe(), "/recompute_modules",
       "expected layernorm only for latent attention or a mixture of experts: Transformer Engine fuses the other norms into the linear after them, which keeps their output");
  // As Megatron-Core refuses: a layer re-run whole cannot also hide its all-to-alls behind another micro-batch.
  need(!job.recomputes(kRecomputeMoe) || !job.ep_overlap, "/recompute_modules", "expected no moe recomputation with ep_overlap, as Megatron-Core requires");
  need(job.recompute_layers == 0 || job.recompute == Recompute::full, "/recompute_layers",
       "expected recompute_layers only with \"recompute\": \"full\", found \"" + recompute_name(job.recompute) + "\"");
  need(job.recompute_layers <= m.layers, "/recompute_layers", "expected at most the model's " + std::to_string(m.layers) + " layers, found " + std::to_string(job.recompute_layers));
  need(job.recompute_layers == 0 || job.schedule != PipelineSchedule::dualpipe, "/recompute_layers",
       "expected every layer recomputed under dualpipe (recompute_layers is not modelled for its two stages a GPU)");
  // As Megatron-Core refuses (overlap_moe_expert_parallel_comm): a layer re-run whole cannot hide its all-to-alls
  // behind another micro-batch.
  need(!job.ep_overlap || job.recompute != Recompute::full, "/recompute", "expected no full recomputation with ep_overlap, as Megatron-Core requires");
  // torchtitan's policy counts bias-free matrix products (aten.mm) through a Llama layer of SDPA attention; other
  // layers run other ops (addmm with biases, grouped experts, latent projections, float8's _scaled_mm) that it
  // would keep or re-run otherwise.
  if (job.recompute == Recompute::selective_op) {
    need(m.llama_layout && !m.qkv_bias && !m.moe() && !m.latent, "/recompute",
         "expected selective_op only for a dense Llama-layout model (torchtitan's: no biases, no experts, no latent attention)");
    need(job.attention == AttentionKernel::flash, "/attention", "expected flash attention with selective_op, whose policy keeps SDPA's output");
    need(job.dtype != Dtype::fp8, "/dtype", "expected bf16 or fp16 with selective_op: float8 linears run as _scaled_mm, which its policy re-runs (not modelled)");
    need(!job.activation_fp8_input_store, "/activation_func_fp8_input_store", "expected no activation_func_fp8_input_store with selective_op (a Megatron-Core option)");
  }
  // torchtitan's eager layer is read for a dense Llama layer with SDPA flash attention in bf16 (models/runtimes.json
  // "training"); what else it ran then (float8, pipelining experiments) is not.
  if (job.runtime == TrainingJob::Runtime::torchtitan) {
    need(m.llama_layout && m.gated && !m.qkv_bias && !m.moe() && !m.latent, "/runtime",
         "expected runtime torchtitan only for a dense Llama-layout model (its op list is read for that layer: no biases, no experts, no latent attention)");
    need(job.attention == AttentionKernel::flash, "/attention", "expected flash attention with runtime torchtitan (its layer calls SDPA)");
    need(job.dtype != Dtype::fp8, "/dtype", "expected bf16 or fp16 with runtime torchtitan (its float8 linears are not read)");
    need(job.cp == 1, "/parallel/cp", "expected cp 1 with runtime torchtitan (its layer of that commit had no context parallelism)");
    need(job.recompute != Recompute::selective, "/recompute",
         "expected none, full or selective_op with runtime torchtitan (selective names Megatron-Core's modules)");
    need(job.schedule != PipelineSchedule::dualpipe, "/schedule", "expected no dualpipe with runtime torchtitan");
    need(!job.activation_fp8_input_store, "/activation_func_fp8_input_store", "expected no activation_func_fp8_input_store with runtime torchtitan (a Megatron-Core option)");
    need(!job.compute_efficiency, "/compute_efficiency", "expected no compute_efficiency with runtime torchtitan: an efficiency replaces the kernels the runtime launches");
  }
  need(!job.fused_rms_norm || job.tp == 1, "/norm", "expected norm rmsnorm under TP: torchtitan's fused_rmsnorm does not run under TP");
  need(!job.activation_fp8_input_store || m.gated, "/activation_func_fp8_input_store", "expected activation_func_fp8_input_store only for a gated MLP (SwiGLU), as Megatron-Core stores it");
  need(m.heads % job.tp == 0, "/parallel/tp", "expected a divisor of the " + std::to_string(m.heads) + " heads, found " + std::to_string(job.tp));
  need(m.hidden % m.heads == 0, "/model/heads", "expected a divisor of the hidden size " + std::to_string(m.hidden));
  need(m.heads % m.kv() == 0, "/model/kv_heads", "expected a divisor of the " + std::to_string(m.heads) + " heads, found " + std::to_string(m.kv()));
  // Megatron-Core splits the KV heads over the TP ranks too (num_query_groups divisible by TP).
  need(m.kv() % job.tp == 0, "/parallel/tp", "expected a divisor of the model's " + std::to_string(m.kv()) + " KV heads, found " + std::to_string(job.tp));
  need(job.global_batch % (job.dp * job.micro_batch) == 0, "/batch/global",
       "expected a multiple of dp x micro (" + std::to_string(job.dp * job.micro_batch) + "), found " + std::to_string(job.global_batch));
  // What one step plays grows with these; past them a step takes minutes and gigabytes (measured: DP 8,192
  // in 4 s, DP 32,768 past 2 minutes; 2^22 micro-batches over 4 stages in 1.5 GB), so they are refused first.
  need(job.zero_stage() < 3 || job.pp == 1, "/parallel/zero", "expected ZeRO-3 / FSDP without pipeline stages (pp 1), as FSDP runs, found pp " + std::to_string(job.pp));
  need(job.dp <= kMaxTrainingDp, "/parallel/dp", "expected at most " + std::to_string(kMaxTrainingDp) + " data-parallel replicas, found " + std::to_string(job.dp));
  if (job.global_batch % (job.dp * job.micro_batch) == 0) {
    const double cells = static_cast<double>(job.micro_batches()) * job.pp * job.vp * (job.schedule == PipelineSchedule::dualpipe ? 2 : 1);  // DualPipe's two directions
    need(cells <= kMaxPipelineCells, "/batch/global",
         "expected at most " + std::to_string(kMaxPipelineCells) + " micro-batches x pipeline stages x virtual stages a step, found " + format_number(cells));
  }
  if (job.optimizer_offload > 0) {
    // Both offload a sharded optimizer: Megatron-Core's needs its distributed optimizer, DeepSpeed's a ZeRO stage.
    need(job.zero_stage() >= 1, "/optimizer/offload", "expected a sharded optimizer beside it (distributed_optimizer, or zero 1 to 3), as Megatron-Core and DeepSpeed offload only theirs");
    need(job.zero_stage() < 3 || job.cpu_adam == TrainingJob::CpuAdam::deepspeed, "/optimizer/cpu_adam",
         "expected \"deepspeed\" with ZeRO-3: ZeRO-3 Offload is DeepSpeed's (Megatron-Core offloads its distributed optimizer, ZeRO 1)");
  }
  if (job.offload_parameters) {
    need(job.zero_stage() >= 3, "/parallel/offload_parameters", "expected \"zero\": 3 with it, as DeepSpeed offloads parameters only at stage 3");
    need(job.optimizer_offload >= 1 && job.cpu_adam == TrainingJob::CpuAdam::deepspeed, "/parallel/offload_parameters",
         "expected the optimizer offloaded too (\"optimizer\": {\"offload\": 1, \"cpu_adam\": \"deepspeed\"}), as ZeRO-Infinity runs: a GPU "
         "stepping a shard that lives in host memory is not modelled");
  }
  if (job.dtype == Dtype::fp8) {
    need(job.zero_stage() < 3, "/parallel/zero", "expected ZeRO 0 to 2 with fp8: FSDP's fp8 weight gathers are not modelled yet");
    if (const auto missing = fp8_missing(job.cluster)) need(false, "/dtype", *missing);
  }
  const int gpus = job.cluster.gpu_count();
  // In doubles: tp x pp x dp as read may pass what an int holds.
  const double gang = static_cast<double>(job.tp) * job.cp * job.pp * job.dp;
  need(job.cluster.groups.empty() || gang <= gpus, "/parallel", "tp x cp x pp x dp = " + format_number(gang) + " GPUs, more than the cluster's " + std::to_string(gpus));
  if (!problems.empty()) throw InputError(std::move(problems));
}

void detail::read_training_job(const Json& value, const std::string& pointer, Problems& problems, bool in_scenario, TrainingJob& job) {
  ObjectReader top(value, pointer, problems);
  job.file = problems.file();
  job.pointer = pointer;
  if (!top.ok()) return;
  job.name = top.string_or("name", std::filesystem::path(job.file).stem().string());
  // A job file for `train` names its cluster; inside a scenario the scenario's cluster is used instead.
  if (const Json* cluster = top.field("cluster", in_scenario ? Need::optional : Need::required); cluster != nullptr && !in_scenario) {
    detail::read_cluster(*cluster, top.pointer("cluster"), problems, Catalog::builtin(), job.cluster);
  }
  if (const Json* model = top.field("model", Need::required)) {
    ObjectReader r(*model, top.pointer("model"), problems);
    TransformerModel& m = job.model;
    if (const auto id = r.string("architecture", Need::optional)) {
      // A catalog LLM: its dimensions, GQA and gated MLP from models/architectures.json, Llama's layout.
      const Architecture* a = Catalog::builtin().architecture(*id);
      if (a == nullptr || !is_llm(*a)) {
        r.problem("architecture", "expected an LLM of the catalog (" + Catalog::builtin().llm_names() + "), found \"" + *id + "\"");
      } else {
        m.architecture = *id;
        m.layers = static_cast<int>(a->number("layers", 0));
        m.hidden = static_cast<int>(a->number("hidden", 0));
        m.heads = static_cast<int>(a->number("heads", 0));
        m.kv_heads = static_cast<int>(a->number("kv_heads", m.heads));
        m.head_dim = static_cast<int>(a->number("head_dim", 0));
        m.ffn_hidden = static_cast<int>(a->number("ffn", 0));
        m.gated = a->number("gated", 0) != 0;
        m.vocab = static_cast<int>(a->number("vocab", 0));
        m.experts = static_cast<int>(a->number("experts", 0));
        m.top_k = m.experts > 0 ? static_cast<int>(a->number("experts_per_token", 1)) : 0;
        m.shared_ffn = static_cast<int>(a->number("shared_ffn", 0));
        m.dense_layers = static_cast<int>(a->number("dense_layers", 0));
        m.dense_ffn = static_cast<int>(a->number("dense_ffn", 0));
        m.latent = LatentAttention::of(*a);
        m.llama_layout = true;
        m.qkv_bias = a->number("qkv_bias", 0) != 0;
      }
      for (const char* key : {"layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "gated", "vocab", "experts", "experts_per_token", "shared_ffn",
                              "dense_layers", "dense_ffn"}) {
        if (r.field(key) != nullptr) r.problem(key, "comes from the architecture; expected no \"" + std::string(key) + "\" beside \"architecture\"");
      }
      m.seq_len = static_cast<int>(r.integer("seq_len", Need::required, 1, 1 << 24).value_or(1));
      m.mtp_layers = static_cast<int>(r.integer_or("mtp_layers", 0, 0, 16));
    } else {
      m.layers = static_cast<int>(r.integer("layers", Need::required, 1, 100000).value_or(1));
      m.hidden = static_cast<int>(r.integer("hidden", Need::required, 1, 1 << 20).value_or(1));
      m.heads = static_cast<int>(r.integer("heads", Need::required, 1, 1 << 16).value_or(1));
      m.kv_heads = static_cast<int>(r.integer_or("kv_heads", 0, 0, 1 << 16));
      m.head_dim = static_cast<int>(r.integer_or("head_dim", 0, 0, 1 << 16));
      m.ffn_hidden = static_cast<int>(r.integer_or("ffn_hidden", 0, 0, 1 << 22));
      m.gated = r.boolean_or("gated", false);
      m.vocab = static_cast<int>(r.integer("vocab", Need::required, 1, 1 << 24).value_or(1));
      m.seq_len = static_cast<int>(r.integer("seq_len", Need::required, 1, 1 << 24).value_or(1));
      m.mtp_layers = static_cast<int>(r.integer_or("mtp_layers", 0, 0, 16));
      m.experts = static_cast<int>(r.integer_or("experts", 0, 0, 1 << 16));
      if (m.experts > 0) {
        m.top_k = static_cast<int>(r.integer("experts_per_token", Need::required, 1, 1 << 16).value_or(1));
        m.shared_ffn = static_cast<int>(r.integer_or("shared_ffn", 0, 0, 1 << 22));
        // DeepSeek-style dense first layers: as many as asked (fewer than the layers), each MLP dense_ffn wide.
        m.dense_layers = static_cast<int>(r.integer_or("dense_layers", 0, 0, m.layers - 1));
        if (m.dense_layers > 0) {
          m.dense_ffn = static_cast<int>(r.integer("dense_ffn", Need::required, 1, 1 << 22).value_or(1));
        } else if (r.field("dense_ffn") != nullptr) {
          r.problem("dense_ffn", "expected \"dense_ffn\" only beside \"dense_layers\" (dense first layers)");
        }
      } else {
        for (const char* key : {"experts_per_token", "shared_ffn", "dense_layers", "dense_ffn"}) {
          if (r.field(key) != nullptr) r.problem(key, "expected \"" + std::string(key) + "\" only beside \"experts\" (a mixture of experts)");
        }
      }
    }
    r.finish();
  }
  if (const Json* parallel = top.field("parallel", Need::required)) {
    ObjectReader r(*parallel, top.pointer("parallel"), problems);
    job.tp = static_cast<int>(r.integer_or("tp", 1, 1, 1 << 16));
    job.pp = static_cast<int>(r.integer_or("pp", 1, 1, 1 << 16));
    job.dp = static_cast<int>(r.integer_or("dp", 1, 1, 1 << 20));
    job.vp = static_cast<int>(r.integer_or("vp", 1, 1, 1 << 16));
    job.microbatch_group = static_cast<int>(r.integer_or("microbatch_group", 0, 1, 1 << 20));
    job.cp = static_cast<int>(r.integer_or("cp", 1, 1, 1 << 16));
    job.first_stage_layers = static_cast<int>(r.integer_or("first_stage_layers", 0, 1, job.model.layers));
    job.last_stage_layers = static_cast<int>(r.integer_or("last_stage_layers", 0, 1, job.model.layers));
    if (const Json* layout = r.field("virtual_stage_layers")) {
      const std::string at = r.pointer("virtual_stage_layers");
      if (!layout->is_array() || layout->empty() || layout->size() > (1u << 16)) {
        r.problem("virtual_stage_layers", "expected an array of layer counts, one a virtual stage (pp x vp), found " + detail::describe(*layout));
      } else {
        for (std::size_t k = 0; k < layout->size(); ++k) {
          const Json& n = (*layout)[k];
          if (!n.is_number_integer() || n.get<std::int64_t>() < 0 || n.get<std::int64_t>() > job.model.layers) {
            problems.add(detail::child_pointer(at, k), "expected a count of layers, 0 to " + std::to_string(job.model.layers) + ", found " + detail::describe(n));
            job.virtual_stage_layers.clear();
            break;
          }
          job.virtual_stage_layers.push_back(static_cast<int>(n.get<std::int64_t>()));
        }
      }
    }
    job.ep = static_cast<int>(r.integer_or("ep", 1, 1, 1 << 16));
    job.etp = static_cast<int>(r.integer_or("etp", 0, 1, 1 << 16));
    job.sequence_parallel = r.boolean_or("sequence_parallel", false);
    job.distributed_optimizer = r.boolean_or("distributed_optimizer", false);
    job.zero = static_cast<int>(r.integer_or("zero", 0, 0, 3));
    job.offload_parameters = r.boolean_or("offload_parameters", false);
    const std::string reduce = r.string_or("reduce_dtype", "bf16");
    if (reduce == "bf16" || reduce == "fp32") job.reduce_dtype = *parse_dtype(reduce);
    else r.problem("reduce_dtype", "expected bf16 or fp32 (the dtype gradients are reduced in), found \"" + reduce + "\"");
    if (in_scenario && job.offload_parameters) {
      r.problem("offload_parameters", "expected no parameter offload for a job inside a scenario: its copies up from host memory are not yet placed on the "
                                      "shared network (train runs it alone)");
    }
    job.dp_overlap = r.boolean_or("dp_overlap", false);
    job.ep_overlap = r.boolean_or("ep_overlap", false);
    r.finish();
  }
  if (const Json* batch = top.field("batch", Need::required)) {
    ObjectReader r(*batch, top.pointer("batch"), problems);
    job.global_batch = static_cast<int>(r.integer("global", Need::required, 1, 1 << 24).value_or(1));
    job.micro_batch = static_cast<int>(r.integer_or("micro", 1, 1, 1 << 16));
    r.finish();
  }
  if (const Json* moe = top.field("moe", Need::optional)) {
    ObjectReader r(*moe, top.pointer("moe"), problems);
    job.moe_imbalance = r.number("imbalance", Need::optional, 1.0, 1e3).value_or(1.0);
    job.capacity_factor = r.number("capacity_factor", Need::optional, 0.0, 1e3).value_or(0.0);
    job.dispatcher = r.choice("dispatcher", {"alltoall", "deepep"}, 0) == 0 ? TrainingJob::Dispatcher::alltoall : TrainingJob::Dispatcher::deepep;
    job.max_nodes = static_cast<int>(r.integer_or("max_nodes", 0, 1, 100'000));
    job.dispatcher_sms = static_cast<int>(r.integer_or("dispatcher_sms", 20, 1, 1'000));
    const bool sms_given = r.field("dispatcher_sms") != nullptr;
    const std::string wire = r.string_or("dispatch_dtype", "bf16");
    if (wire == "fp8") job.dispatch_dtype = Dtype::fp8;
    else if (wire != "bf16") r.problem("dispatch_dtype", "expected bf16 or fp8, found \"" + wire + "\"");
    r.finish();
    if (sms_given && job.dispatcher != TrainingJob::Dispatcher::deepep) r.problem("dispatcher_sms", "expected \"dispatcher\": \"deepep\" with dispatcher_sms (NCCL's all-to-all's SMs are not modelled)");
    if (job.model.experts == 0) top.problem("moe", "expected \"moe\" only for a mixture of experts (a model with experts)");
  }
  job.schedule = static_cast<PipelineSchedule>(top.choice("schedule", {"gpipe", "1f1b", "dualpipe"}, 1));
  job.recompute = static_cast<Recompute>(top.choice("recompute", {"none", "selective", "full", "selective_op"}, 0));
  // Checked against the recomputation with the other rules (check_training_job).
  if (top.field("recompute_layers") != nullptr) job.recompute_layers = static_cast<int>(top.integer_or("recompute_layers", 0, 1, 1 << 20));
  if (const Json* modules = top.field("recompute_modules")) {
    // Megatron-Core's --recompute-modules: which parts selective recomputation re-runs.
    const std::vector<std::string>& names = recompute_module_names();
    std::string known;
    for (const std::string& name : names) known += (known.empty() ? "" : ", ") + name;
    if (job.recompute != Recompute::selective) {
      top.problem("recompute_modules", "expected recompute_modules only with \"recompute\": \"selective\" (none recomputes nothing, full every layer whole)");
    } else if (!modules->is_array() || modules->empty()) {
      top.problem("recompute_modules", "expected a non-empty array of module names (" + known + "), found " + detail::describe(*modules));
    } else {
      job.recompute_modules = 0;
      for (std::size_t i = 0; i < modules->size(); ++i) {
        const Json& item = (*modules)[i];
        const auto found = item.is_string() ? std::find(names.begin(), names.end(), item.get<std::string>()) : names.end();
        const std::string at = detail::child_pointer(top.pointer("recompute_modules"), i);
        if (found == names.end()) {
          problems.add(at, "expected a module name (" + known + "), found " + detail::describe(item));
          continue;
        }
        const unsigned bit = 1u << static_cast<unsigned>(found - names.begin());
        if ((job.recompute_modules & bit) != 0) problems.add(at, "expected each module once, found \"" + *found + "\" again");
        job.recompute_modules |= bit;
      }
    }
  }
  job.attention = static_cast<AttentionKernel>(top.choice("attention", {"flash", "unfused"}, 0));
  job.runtime = static_cast<TrainingJob::Runtime>(top.choice("runtime", {"megatron", "torchtitan"}, 0));
  job.fused_rms_norm = top.choice("norm", {"rmsnorm", "fused_rmsnorm"}, 0) == 1;
  if (top.field("norm") != nullptr && job.runtime != TrainingJob::Runtime::torchtitan) {
    top.problem("norm", "expected norm only with \"runtime\": \"torchtitan\" (Megatron-Core's norms are fused)");
  }
  const std::string dtype = top.string_or("dtype", "bf16");
  if (auto d = parse_dtype(dtype)) job.dtype = *d;
  else top.problem("dtype", "expected a dtype such as bf16, found \"" + dtype + "\"");
  if (const Json* optimizer = top.field("optimizer")) {
    ObjectReader r(*optimizer, top.pointer("optimizer"), problems);
    const std::string moments = r.string_or("moments", "fp32");
    if (moments == "bf16" || moments == "fp16" || moments == "fp32") job.optimizer_moments = *parse_dtype(moments);
    else r.problem("moments", "expected fp32, bf16 or fp16 (Adam's moments), found \"" + moments + "\"");
    job.optimizer_offload = r.number("offload", Need::optional, 0.0, 1.0).value_or(0);
    job.cpu_adam = static_cast<TrainingJob::CpuAdam>(r.choice("cpu_adam", {"torch", "deepspeed"}, 0));  // in CpuAdam's order
    job.offload_overlap = r.boolean_or("offload_overlap", false);
    if (!(job.optimizer_offload > 0)) {
      for (const char* key : {"cpu_adam", "offload_overlap"}) {
        if (r.field(key) != nullptr) r.problem(key, "expected \"" + std::string(key) + "\" only beside \"offload\" above 0 (CPU offload of the optimizer)");
      }
    } else if (job.cpu_adam == TrainingJob::CpuAdam::deepspeed) {
      if (job.offload_overlap) r.problem("offload_overlap", "expected it only with cpu_adam \"torch\": it is Megatron-Core's --overlap-cpu-optimizer-d2h-h2d");
      if (job.optimizer_offload < 1) r.problem("offload", "expected 1 with cpu_adam \"deepspeed\": ZeRO-Offload moves the whole optimizer (its ratio is for ZeRO-3)");
    }
    r.finish();
  }
  job.activation_fp8_input_store = top.boolean_or("activation_func_fp8_input_store", false);
  job.fp8_recipe = top.choice("fp8_recipe", {"tensorwise", "blockwise"}, 0) == 0 ? TrainingJob::Fp8Recipe::tensorwise : TrainingJob::Fp8Recipe::blockwise;
  job.compute_efficiency = top.number("compute_efficiency", Need::optional, 0.0, 1.0);
  if (job.compute_efficiency && !(*job.compute_efficiency > 0)) top.problem("compute_efficiency", "expected a fraction above 0, at most 1");
  top.finish();
}

TrainingJob parse_training_job(std::string_view json_text, const std::string& file_name) {
  detail::Problems problems(file_name);
  const Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  TrainingJob job;
  detail::read_training_job(doc, "", problems, false, job);
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
  const double dense_layers = m.moe() ? m.dense_layers : L, mixtures = L - dense_layers;
  // Each multi-token prediction module: a layer, the projection from 2h and the logits again.
  const double mtp = m.mtp_layers;
  c.model_flop = 3 * tokens * (mixtures * flop.layer(true) + dense_layers * flop.layer(false) + flop.logits + mtp * (flop.layer(m.moe()) + flop.mtp_projection + flop.logits));
  c.hardware_flop = c.model_flop + tokens * (mixtures + (m.moe() ? mtp : 0)) * flop.recompute(true) + tokens * (dense_layers + (m.moe() ? 0 : mtp)) * flop.recompute(false);

  // Activations of one layer for one micro-batch on one GPU (Korthikanti et al., table 2), per sbh: 10
  // that TP does not split (the two norms' inputs 4, the QKV and MLP inputs 2 each, two dropout masks);
  // `split` that it does (Q, K and V 2 + 4 kv/a, the output projection's input 2, the MLP's f-wide
  // tensors 4f/h: GeLU's input and fc2's; gated, the gate's and up's outputs and the down projection's
  // input 6f/h), 24 for GPT's f = 4h; and the attention scores 5as/h.
  const double sbh = s / job.cp * b * h;  // a GPU's share of the sequence under CP
  // A mixture of experts holds the MLP's tensors for each of the top_k copies of a token (on the busiest
  // GPU, expert_load() times the mean), the expert TP group's gathered inputs among them, and the shared
  // expert's once.
  const auto mlp = [&](bool mixture) {
    const double mlp_tensors = (m.gated ? 6 : 4) * static_cast<double>(mixture ? m.ffn() : m.dense_mlp_width()) / h;
    return mixture ? job.expert_load() * m.top_k * (2.0 * job.expert_tp() + mlp_tensors) + (m.gated ? 6 : 4) * static_cast<double>(m.shared_ffn) / h
                   : mlp_tensors;
  };
  // Q and the output projection's input 2 a d / h each (4 where a d = h), K and V 4 kv d / h (4 kv / a). Latent
  // attention: every head's query and key (qk wide) and value and output (v wide), and the latents every TP
  // rank computes whole: the query's and the keys and values' (each before and after its norm) and the rotary key.
  const double attention_split = m.latent ? 4.0 * m.heads * (m.latent->qk() + m.latent->v) / h : 4.0 * m.attention_width() / h + 4.0 * m.kv() * m.head_size() / h;
  const double whole = m.latent ? 2.0 * (2 * m.latent->q_rank + 2 * m.latent->kv_rank + m.latent->rope) / h : 0;
  // Unfused attention keeps the softmax's input and output and the dropout mask (5as/h per sbh); FlashAttention
  // never writes the scores, keeping only its fp32 log-sum-exp per head and token (4a/h).
  const double attention = job.attention == AttentionKernel::flash ? 4 * a / h : 5 * a * s / h;
  // Under fp8, Transformer Engine keeps each fp8 GEMM's input for the weight gradient as fp8 (a byte an
  // element: the data, or on Hopper its transpose) rather than in 16 bits, where nothing else keeps the 16-bit
  // tensor; where something does (FlashAttention its output, which the output projection reads; the router
  // the pre-MLP norm's output, which the shared expert reads; latent attention's two down-projections the
  // same norm output), each fp8 reader's copy is kept beside it. What a module's recomputation frees is not
  // counted again. The change to the three parts of the sum below, per sbh.
  struct SavedChange {
    double kept = 0, split = 0, whole = 0;
  };
  const auto fp8_saved_inputs = [&](bool mixture) {
    SavedChange d;
    if (!m.latent) d.kept -= 1;  // the QKV projection's input (one fp8 reader; MLA's two keep a copy each: 2 bytes still)
    const double f = mixture ? m.ffn() : m.dense_mlp_width();
    if (!mixture) {
      d.kept -= 1;                                                 // fc1's input
      if (!job.recomputes(kRecomputeMlp)) d.split -= f / h;        // fc2's
    } else if (!job.recomputes(kRecomputeMoe)) {
      if (m.shared_ffn > 0 && !job.recomputes(kRecomputeLayerNorm) && !job.recomputes(kRecomputeSharedExperts)) d.kept += 1;  // the shared expert's copy
      if (m.shared_ffn > 0 && !job.recomputes(kRecomputeSharedExperts)) d.split -= m.shared_ffn / h;  // its fc2's input
      // Each routed copy: the experts' fc1 input (gathered over expert TP) and, unless moe_act frees it, fc2's.
      d.split -= job.expert_load() * m.top_k * (job.expert_tp() + (job.recomputes(kRecomputeExpertActivation) ? 0 : f / h));
    }
    // The output projection's input: FlashAttention keeps its output in 16 bits unless core_attn recomputes it
    // (unfused attention's backward reads the probabilities and values, not its output).
    const bool projection_alone = job.recomputes(kRecomputeCoreAttention) || job.attention == AttentionKernel::unfused;
    d.split += (projection_alone ? -1 : 1) * attention_output_width(m) / h;
    if (m.latent && !job.recomputes(kRecomputeLatentUpProjection)) d.whole -= normed_latents(m) / h;
    return d;
  };
  const auto activations = [&](bool mixture) {
    if (job.recompute == Recompute::full) return 2 * sbh / (job.sequence_parallel ? t : 1);
    if (job.recompute == Recompute::selective_op) {
      // The layer's input 2, the saved products: the queries and values (2 a d / h + 2 kv d / h), attention's
      // output (2 a d / h) with its log-sum-exp, the gate projection 2f/h, split over TP; the down projection's
      // output 2, whole on every TP rank (its partial sums, before they are reduced); under sequence parallelism
      // the two reduce-scatters' outputs 2 each, which the policy keeps too.
      const double kept_op = 2 + (job.sequence_parallel && t > 1 ? 4 : 0);
      const double split_op = 4.0 * m.attention_width() / h + 2.0 * m.kv() * m.head_size() / h + 2.0 * m.ffn() / h;
      return job.sequence_parallel ? sbh * (kept_op + split_op + attention) / t + 2 * sbh : sbh * (kept_op + 2 + (split_op + attention) / t);
    }
    // Selective recomputation frees what its modules re-run; each keeps its input.
    double kept = 10, split = attention_split + mlp(mixture), kept_whole = whole;
    const double kept_attention = job.recomputes(kRecomputeCoreAttention) ? 0 : attention;
    if (job.recomputes(kRecomputeLayerNorm)) kept -= 2 * ((m.latent ? 1 : 0) + (mixture ? 1 : 0));  // the norms' outputs
    if (job.recomputes(kRecomputeLatentUpProjection)) {
      split -= 2 * m.heads * (2 * m.latent->qk() + m.latent->v) / h;                  // the queries, keys and values
      kept_whole -= 2 * normed_latents(m) / h;
    }
    if (mixture && job.recomputes(kRecomputeMoe)) {
      split -= mlp(true);
    } else if (mixture) {
      if (job.recomputes(kRecomputeExpertActivation)) split -= job.expert_load() * m.top_k * 2.0 * m.ffn() / h;  // fc2's input
      if (job.recomputes(kRecomputeSharedExperts)) split -= (m.gated ? 6 : 4) * static_cast<double>(m.shared_ffn) / h;
    }
    if (!mixture && job.recomputes(kRecomputeMlp)) split -= (m.gated ? 6 : 4) * static_cast<double>(m.dense_mlp_width()) / h;
    if (job.activation_fp8_input_store) {  // the SwiGLUs' inputs (gate and up, 2f wide) as fp8, where still kept
      if (!mixture && !job.recomputes(kRecomputeMlp)) split -= 2.0 * m.dense_mlp_width() / h;
      if (mixture && !job.recomputes(kRecomputeMoe)) {
        split -= job.expert_load() * m.top_k * 2.0 * m.ffn() / h;
        if (!job.recomputes(kRecomputeSharedExperts)) split -= 2.0 * m.shared_ffn / h;
      }
    }
    if (job.dtype == Dtype::fp8) {
      const auto [d_kept, d_split, d_whole] = fp8_saved_inputs(mixture);
      kept += d_kept;
      split += d_split;
      kept_whole += d_whole;
    }
    return job.sequence_parallel ? sbh * (kept + split + kept_attention) / t + kept_whole * sbh : sbh * (kept + kept_whole + split / t + kept_attention / t);
  };
  c.activation_bytes_per_layer = activations(m.moe());
  if (m.moe() && m.dense_layers > 0) c.dense_layer_activation_bytes = activations(false);
  // Where full recomputation re-runs only some layers, the others keep what they would without it.
  double kept_bytes = 0, kept_dense_bytes = 0;
  if (job.recompute_layers > 0) {
    const TrainingCounts kept = count_training(without_recompute(job));
    kept_bytes = kept.activation_bytes_per_layer;
    c.kept_layer_activation_bytes = kept_bytes;
    kept_dense_bytes = m.moe() ? kept.dense_layer_activation_bytes : kept.activation_bytes_per_layer;
  }

  const int p = job.pp, mb = job.micro_batches();
  c.active_parameters = m.active_parameters();
  const double replicated = m.latent ? m.latent->replicated_parameters(h) : 0;
  const std::vector<LayerMix> chunks = chunk_layers(job);
  const VirtualStages stages(job);
  const std::vector<ChunkPass> table = job.vp > 1 ? interleaved_order(mb, job.vp, job.group()) : std::vector<ChunkPass>{};
  if (job.recompute_layers > 0) {  // only the layers recomputed re-run their forward (never the multi-token prediction modules')
    double mixture = 0, dense = 0;
    for (int k = 0; k < stages.count; ++k) {
      const LayerMix again = split_recompute(job, chunks[static_cast<std::size_t>(k)], stages.last(k)).as_job;
      mixture += again.mixture;
      dense += again.dense;
    }
    c.hardware_flop = c.model_flop + tokens * mixture * flop.recompute(true) + tokens * dense * flop.recompute(false);
  }
  for (int stage = 0; stage < p; ++stage) {
    // Experts split over expert TP and EP; latent attention's down-projections whole on every TP rank;
    // everything else over TP.
    const LayerMix layers = stage_mix(chunks, stages, stage);
    // The stages holding the embedding and the head (DualPipe: both end GPUs hold both, one a direction).
    const bool embedding = stage == 0 || (stages.dual && stage == p - 1), head = stage == p - 1 || (stages.dual && stage == 0);
    const double expert_params = layers.mixture * m.expert_parameters() / (static_cast<double>(job.expert_tp()) * job.ep);
    const double split_weights = layers.mixture * (m.layer_parameters(true) - m.expert_parameters() - replicated) + layers.dense * (m.layer_parameters(false) - replicated);
    const double layer_weights = split_weights / t + layers.total() * replicated + expert_params;
    // The word embedding sits on the first stage, and a copy for the logits on the last.
    double params = layer_weights;
    if (m.llama_layout) {  // the embedding first, the untied head and the final norm last
      if (embedding) params += V * h / t;
      if (head) params += V * h / t + h;
    } else {
      if (embedding) params += (V * h + s * h) / t;
      if (head) params += (p > 1 ? V * h / t : 0) + 2 * h;
    }
    // Multi-token prediction: each module's projection (split over TP) and norms; its layer is in `layers`. The
    // output head is the last stage's; an untied model's embedding, on the first, is copied here (Megatron-
    // Core's MTP; a tied one's last stage holds it already, as its head).
    if (head && m.mtp_layers > 0) params += m.mtp_layers * (2 * h * h / t + 3 * h) + (p > 1 && m.llama_layout ? V * h / t : 0);
    c.stage_parameters.push_back(params);
    c.stage_expert_parameters.push_back(expert_params);
    // FP8: the layers' weights also held as fp8 and its transpose (the embedding and head stay bf16).
    c.stage_fp8_weights.push_back(job.dtype == Dtype::fp8 ? layer_weights : 0);
    StageMemory mem;
    const int zero = job.zero_stage();
    const double layer_share = (m.layer_parameters() - replicated) / t + replicated;
    // ZeRO-3 keeps the layer computing and the one prefetched whole, beside its shard of everything (in host
    // memory when the parameters are offloaded).
    const double weight_shard = zero >= 3 ? 2 * params / job.dp : 0;
    mem.weights = (zero >= 3 ? 2 * 2 * layer_share + (job.offload_parameters ? 0 : weight_shard) : 2 * params) + 2 * c.stage_fp8_weights.back();
    if (job.offload_parameters) mem.host += weight_shard;
    // Sharded over the gradients' reduction group (Megatron's distributed optimizer shards over it): DP x CP,
    // and for the experts their expert DP group.
    const double dense = params - expert_params, shards = static_cast<double>(job.dp) * job.cp, expert_shards = job.expert_dp();
    const double grad_bytes = dtype_bytes(job.reduce_dtype);  // a gradient as reduced and kept
    mem.gradients = zero >= 2 ? grad_bytes * (dense / shards + expert_params / expert_shards) : grad_bytes * params;
    const double shard = zero >= 1 ? dense / shards + expert_params / expert_shards : params;
    mem.optimizer = optimizer_bytes(job) * shard;
    if (job.optimizer_offload > 0) {
      // In host memory: the offloaded state and the fp32 gradients copied down to step it.
      const double offloaded = job.optimizer_offload * shard;
      mem.optimizer -= optimizer_bytes(job) * offloaded;
      mem.host += offloaded * (optimizer_bytes(job) + 4);
      // DeepSpeed moves each reduce bucket's gradients to the host as it fills: the GPU holds one bucket.
      if (job.cpu_adam == TrainingJob::CpuAdam::deepspeed) mem.gradients = std::min(mem.gradients, grad_bytes * kDeepSpeedReduceBucket);
    }
    c.stage_offloaded_parameters.push_back(job.optimizer_offload * shard);
    // Micro-batches whose activations a stage holds at once: all under GPipe; under 1F1B those its warm-up
    // forwards start before the first backward, plus one; interleaved, chunk passes of 1/vp of the stage
    // (Megatron's warm-up of 2 (pp - stage - 1) + (vp - 1) x the micro-batch group, pp by default), so with
    // groups of pp the first stage holds pp + (pp - 1) / vp.
    const int v = job.vp;
    double in_flight = job.schedule == PipelineSchedule::gpipe ? mb
                             : v == 1                                ? std::min(p - stage, mb)
                                                                     : std::min(2.0 * (p - stage - 1) + (v - 1) * job.group() + 1, static_cast<double>(mb) * v) / v;
    // Overlapped all-to-alls: a forward starts beside the backward before it, one chunk pass more in flight.
    if (job.ep_overlap) in_flight = std::min(in_flight + 1.0 / v, static_cast<double>(mb));
    const double dense_bytes = m.moe() ? c.dense_layer_activation_bytes : c.activation_bytes_per_layer;
    // A chunk's layers' bytes: those run as the job says, and those kept whole under partial recomputation.
    const auto chunk_bytes = [&](const RecomputeSplit& part) {
      return part.as_job.mixture * c.activation_bytes_per_layer + part.as_job.dense * dense_bytes + part.kept.mixture * kept_bytes + part.kept.dense * kept_dense_bytes;
    };
    const RecomputeSplit stage_part = stage_split(job, chunks, stages, stage);
    mem.activations = in_flight * stage_part.as_job.mixture * c.activation_bytes_per_layer + in_flight * stage_part.as_job.dense * dense_bytes +
                      in_flight * (stage_part.kept.mixture * kept_bytes + stage_part.kept.dense * kept_dense_bytes);
    if ((!job.virtual_stage_layers.empty() && job.schedule == PipelineSchedule::one_f_one_b) || stages.dual) {
      // Uneven chunks, or DualPipe's two stages a GPU: the most the GPU's own order holds at once, each pass its
      // own chunk's layers (a forward adds them, a backward's input gradient frees them; in a pair the forward
      // starts first). DualPipe: pp + 1 stages' worth where the stages are alike (its README's table).
      const std::vector<Pass> passes = pipeline_order(job, stages, table, stage);
      double held = 0;
      mem.activations = 0;
      const auto hold = [&](const Pass& pass) {
        if (pass.part == Pass::Part::weight) return;
        held += (pass.backward ? -1.0 : 1.0) * chunk_bytes(split_recompute(job, chunks[static_cast<std::size_t>(pass.virtual_stage)], stages.last(pass.virtual_stage)));
        mem.activations = std::max(mem.activations, held);
      };
      for (std::size_t i = 0; i < passes.size(); ++i) {
        if (passes[i].with_next && i + 1 < passes.size()) {
          const Pass &first = passes[i], &second = passes[++i];  // a pair: its forward starts first
          hold(first.backward ? second : first);
          hold(first.backward ? first : second);
        } else {
          hold(passes[i]);
        }
      }
    }
    c.stage_memory.push_back(mem);
    c.dp_allreduce_bytes.push_back(grad_bytes * (params - expert_params));  // in the reduce dtype
    c.expert_allreduce_bytes.push_back(grad_bytes * expert_params);
  }
  if (job.zero_stage() >= 3) c.zero_gather_bytes_per_layer = 2 * ((m.layer_parameters() - replicated) / t + replicated);
  c.tp_allreduce_bytes = kActivationBytes * sbh;
  c.tp_allreduces_per_layer = job.tp > 1 ? (job.recompute == Recompute::full ? 6 : job.recomputes(kRecomputeMlp) || job.recompute == Recompute::selective_op ? 5 : 4) : 0;
  c.pp_send_bytes = kActivationBytes * sbh;
  if (m.moe()) c.ep_alltoall_bytes = kActivationBytes * moe_shape(job).own_rows * m.top_k * h;
  if (job.cp > 1) {  // K and V (latent attention's up-projected per head)
    c.cp_send_bytes = m.latent ? kActivationBytes * b * (s / job.cp) * (static_cast<double>(m.heads) / t) * (m.latent->qk() + m.latent->v)
                               : 2 * kActivationBytes * b * (s / job.cp) * (static_cast<double>(m.kv()) / t) * m.head_size();
  }
  return c;
}

namespace {

// The kernels of one micro-batch's forward and backward pass on one GPU of a stage, as Megatron-LM
// runs a GPT layer (fused QKV projection, bias-GeLU and bias-dropout-add fusions, column- then
// row-parallel GEMMs split over the TP ranks; with sequence parallelism the norms and dropouts on a
// 1/tp share of the tokens).
struct PassKernels {
  std::vector<KernelCall> forward, backward;
};

void gemm(std::vector<KernelCall>& out, const std::string& name, double m, double n, double k, double batch = 1) {
  out.push_back({.cls = KernelClass::gemm, .m = m, .n = n, .k = k, .batch = batch, .name = name});
}
void memory_op(std::vector<KernelCall>& out, KernelClass cls, const std::string& name, double rows, double width) {
  out.push_back({.cls = cls, .m = rows, .n = width, .name = name});
}
// A linear layer's backward: the data gradient, then the weight gradient (reduced over the tokens).
void gemm_backward(std::vector<KernelCall>& out, const std::string& name, double tokens, double n, double k, double batch = 1) {
  gemm(out, name, tokens, k, n, batch);
  gemm(out, name, k, n, tokens, batch);
  out.back().weight_gradient = true;
}

// Core attention of one layer: FlashAttention (its backward recomputes the scores), or Megatron's
// unfused path of batched GEMMs, a fused scale-mask-softmax and a dropout.
// Latent attention's heads score over qk-wide queries and keys and sum v-wide values.
void core_attention(const TrainingJob& job, std::vector<KernelCall>& out, bool backward) {
  const TransformerModel& m = job.model;
  const double heads = static_cast<double>(m.heads) / job.tp, d = m.latent ? m.latent->qk() : m.head_size(), s = m.seq_len;
  const double v = m.latent ? m.latent->v : 0;  // the values' width where it is not d
  const double batch = job.micro_batch * heads;
  if (job.cp > 1) {
    // Ring attention, load-balanced: the GPU's own keys first (a causal block of s / cp), then cp - 1 blocks
    // of half as many keys each (the causal mask leaves half of each other chunk pair), as each arrives.
    const double local = s / job.cp;
    out.push_back({.cls = KernelClass::attention, .m = local, .n = local, .k = d, .batch = batch, .causal = true, .backward = backward, .v = v, .name = "attention"});
    out.push_back({.cls = KernelClass::attention, .m = local, .n = local / 2, .k = d, .batch = batch, .backward = backward, .v = v, .count = job.cp - 1.0,
                   .name = "attention.ring"});
  } else if (job.attention == AttentionKernel::flash) {
    out.push_back({.cls = KernelClass::attention, .m = s, .n = s, .k = d, .batch = batch, .causal = true, .backward = backward, .v = v, .name = "attention"});
  } else {
    const double dv = v > 0 ? v : d;
    if (!backward) {
      gemm(out, "attention.scores", s, s, d, batch);
      memory_op(out, KernelClass::softmax, "attention.softmax", batch * s, s);
      memory_op(out, KernelClass::activation, "attention.dropout", batch * s, s);
      gemm(out, "attention.values", s, dv, s, batch);
    } else {
      gemm(out, "attention.values", s, s, dv, batch);  // gradient of the probabilities
      gemm(out, "attention.values", s, dv, s, batch);  // of the values
      memory_op(out, KernelClass::activation, "attention.dropout", batch * s, s);
      memory_op(out, KernelClass::add, "attention.softmax", batch * s, s);  // reads y and dy
      gemm(out, "attention.scores", s, d, s, batch);  // of the queries
      gemm(out, "attention.scores", s, d, s, batch);  // of the keys
    }
  }
}

// One MLP over `tokens` rows (`batch` of them, one per expert, grouped): up (gate and up in one GEMM,
// SwiGLU reading both and writing one), the activation, down; `width` is the MLP's share on this GPU.
void mlp_forward(std::vector<KernelCall>& out, bool gated, const std::string& name, double tokens, double width, double h, double batch = 1) {
  const auto kernel = [&](const char* part) { return name + part; };
  gemm(out, kernel(".fc1"), tokens, (gated ? 2 : 1) * width, h, batch);
  if (gated) memory_op(out, KernelClass::add, kernel(".swiglu"), batch * tokens, width);
  else memory_op(out, KernelClass::activation, kernel(".bias-gelu"), batch * tokens, width);
  gemm(out, kernel(".fc2"), tokens, h, width, batch);
}
void mlp_backward(std::vector<KernelCall>& out, bool gated, const std::string& name, double tokens, double width, double h, double batch = 1) {
  const auto kernel = [&](const char* part) { return name + part; };
  gemm_backward(out, kernel(".fc2"), tokens, h, width, batch);
  if (gated) {  // reads gate, up and dy; writes both gradients
    memory_op(out, KernelClass::add, kernel(".swiglu"), batch * tokens, width);
    memory_op(out, KernelClass::add, kernel(".swiglu"), batch * tokens, width);
  } else {
    memory_op(out, KernelClass::add, kernel(".bias-gelu"), batch * tokens, width);  // reads x and dy
  }
  gemm_backward(out, kernel(".fc1"), tokens, (gated ? 2 : 1) * width, h, batch);
}

// A mixture-of-experts layer's MLP as Megatron-Core runs it with grouped GEMMs: the router on this GPU's
// tokens, the top-k copies permuted into expert order, then, past the dispatch all-to-all and the expert TP
// group's gather (timed as communication), this GPU's experts over the copies its expert TP group received,
// and back past the combine; the shared expert on every token, split over TP.
void moe_forward(const TrainingJob& job, std::vector<KernelCall>& out) {
  const TransformerModel& m = job.model;
  const double h = m.hidden;
  const MoeShape x = moe_shape(job);
  gemm(out, "moe.router", x.own_rows, m.experts, h);
  memory_op(out, KernelClass::softmax, "moe.router-topk", x.own_rows, m.experts);
  memory_op(out, KernelClass::activation, "moe.permute", x.own_rows * m.top_k, h);
  mlp_forward(out, m.gated, "moe.experts", x.routed / x.local_experts, x.width, h, x.local_experts);
  memory_op(out, KernelClass::add, "moe.unpermute", x.own_rows * m.top_k, h);
  if (m.shared_ffn > 0) mlp_forward(out, m.gated, "moe.shared", job.local_tokens(), m.shared_ffn / static_cast<double>(job.tp), h);
}
void moe_backward(const TrainingJob& job, std::vector<KernelCall>& out) {
  const TransformerModel& m = job.model;
  const double h = m.hidden;
  const MoeShape x = moe_shape(job);
  if (m.shared_ffn > 0) mlp_backward(out, m.gated, "moe.shared", job.local_tokens(), m.shared_ffn / static_cast<double>(job.tp), h);
  memory_op(out, KernelClass::add, "moe.unpermute", x.own_rows * m.top_k, h);
  mlp_backward(out, m.gated, "moe.experts", x.routed / x.local_experts, x.width, h, x.local_experts);
  memory_op(out, KernelClass::activation, "moe.permute", x.own_rows * m.top_k, h);
  memory_op(out, KernelClass::add, "moe.router-topk", x.own_rows, m.experts);
  gemm_backward(out, "moe.router", x.own_rows, m.experts, h);
}

// Latent attention's projections as Megatron-Core's MLA runs them: the down-projections whole on every TP
// rank (the query's to q_rank, the keys and values' to kv_rank and the rotary key), each latent normed, the
// up-projections split over the TP ranks by heads (queries to qk, keys and values to nope + v a head).
void latent_projections(const TrainingJob& job, std::vector<KernelCall>& out) {
  const TransformerModel& m = job.model;
  const LatentAttention& la = *m.latent;
  const double heads = static_cast<double>(m.heads) / job.tp, h = m.hidden, tokens = job.local_tokens();
  if (la.q_rank > 0) {
    gemm(out, "attention.q-down", tokens, la.q_rank, h);
    memory_op(out, KernelClass::norm, "attention.q-norm", tokens, la.q_rank);
    gemm(out, "attention.q-up", tokens, heads * la.qk(), la.q_rank);
  } else {
    gemm(out, "attention.q", tokens, heads * la.qk(), h);
  }
  gemm(out, "attention.kv-down", tokens, la.cached(), h);
  memory_op(out, KernelClass::norm, "attention.kv-norm", tokens, la.kv_rank);
  gemm(out, "attention.kv-up", tokens, heads * (la.nope + la.v), la.kv_rank);
}
void latent_projections_backward(const TrainingJob& job, std::vector<KernelCall>& out) {
  const TransformerModel& m = job.model;
  const LatentAttention& la = *m.latent;
  const double heads = static_cast<double>(m.heads) / job.tp, h = m.hidden, tokens = job.local_tokens();
  gemm_backward(out, "attention.kv-up", tokens, heads * (la.nope + la.v), la.kv_rank);
  memory_op(out, KernelClass::add, "attention.kv-norm", tokens, la.kv_rank);
  gemm_backward(out, "attention.kv-down", tokens, la.cached(), h);
  if (la.q_rank > 0) {
    gemm_backward(out, "attention.q-up", tokens, heads * la.qk(), la.q_rank);
    memory_op(out, KernelClass::add, "attention.q-norm", tokens, la.q_rank);
    gemm_backward(out, "attention.q-down", tokens, la.q_rank, h);
  } else {
    gemm_backward(out, "attention.q", tokens, heads * la.qk(), h);
  }
}

// torchtitan's eager layer (models/runtimes.json "training"): one GEMM a projection, and each small operation's
// kernels as its code launches them, over rows x width of the operation's tensor.
void eager(std::vector<KernelCall>& out, const TrainingJob& job, std::string_view operation, double rows, double width, double count = 1) {
  for (KernelCall& c : operation_kernels(torchtitan_profile(), operation, rows, width, job.dtype)) {
    c.count *= count;
    c.name = "torchtitan." + std::string(operation);
    out.push_back(std::move(c));
  }
}
// The widths of an eager layer's tensors on one GPU, and its rows (a 1/tp share of the tokens where the norms and
// residual adds run sequence-parallel).
struct EagerShape {
  double tokens, rows, h, q, kv, f;
  bool repeats;  // K and V repeated to the queries' heads (grouped-query attention)
  const char *norm, *norm_backward;
};
EagerShape eager_shape(const TrainingJob& job) {
  const TransformerModel& m = job.model;
  const double t = job.tp, tokens = job.local_tokens();
  return {tokens,
          job.sequence_parallel ? tokens / t : tokens,
          static_cast<double>(m.hidden),
          m.heads * m.head_size() / t,
          m.kv() * m.head_size() / t,
          m.ffn() / t,
          m.kv() < m.heads,
          job.fused_rms_norm ? "fused_rms_norm" : "rms_norm",
          job.fused_rms_norm ? "fused_rms_norm_backward" : "rms_norm_backward"};
}
// `until_last_saved`: as a checkpointed layer's re-run, which PyTorch's non-reentrant checkpoint stops once the
// last tensor its backward reads is back (w2's input): without w2 and the residual add after it.
void eager_layer_forward(const TrainingJob& job, std::vector<KernelCall>& out, bool until_last_saved = false) {
  const EagerShape x = eager_shape(job);
  eager(out, job, x.norm, x.rows, x.h);
  gemm(out, "attention.q", x.tokens, x.q, x.h);
  gemm(out, "attention.k", x.tokens, x.kv, x.h);
  gemm(out, "attention.v", x.tokens, x.kv, x.h);
  eager(out, job, "rope", x.tokens, x.q);
  eager(out, job, "rope", x.tokens, x.kv);
  if (x.repeats) eager(out, job, "repeat_kv", x.tokens, x.q, 2);  // keys and values
  core_attention(job, out, false);
  gemm(out, "attention.out", x.tokens, x.h, x.q);
  eager(out, job, "residual_add", x.rows, x.h);
  eager(out, job, x.norm, x.rows, x.h);
  gemm(out, "mlp.gate", x.tokens, x.f, x.h);
  gemm(out, "mlp.up", x.tokens, x.f, x.h);
  eager(out, job, "swiglu", x.tokens, x.f);
  if (until_last_saved) return;
  gemm(out, "mlp.down", x.tokens, x.h, x.f);
  eager(out, job, "residual_add", x.rows, x.h);
}
// torchtitan's selective recomputation by op: what its policy does not keep, up to the SwiGLU (wq's, wv's, w1's
// and w2's outputs and SDPA's are kept; the norms, wk, the rotary embeddings, the repeats, wo, the residual add,
// w3 and the SwiGLU run again).
void eager_layer_recompute_by_op(const TrainingJob& job, std::vector<KernelCall>& out) {
  const EagerShape x = eager_shape(job);
  eager(out, job, x.norm, x.rows, x.h);
  gemm(out, "attention.k", x.tokens, x.kv, x.h);
  eager(out, job, "rope", x.tokens, x.q);
  eager(out, job, "rope", x.tokens, x.kv);
  if (x.repeats) eager(out, job, "repeat_kv", x.tokens, x.q, 2);
  gemm(out, "attention.out", x.tokens, x.h, x.q);
  eager(out, job, "residual_add", x.rows, x.h);
  eager(out, job, x.norm, x.rows, x.h);
  gemm(out, "mlp.up", x.tokens, x.f, x.h);
  eager(out, job, "swiglu", x.tokens, x.f);
}
// Autograd's order, last operation first; the gradients of a tensor read twice or more added.
void eager_layer_backward(const TrainingJob& job, std::vector<KernelCall>& out) {
  const EagerShape x = eager_shape(job);
  gemm_backward(out, "mlp.down", x.tokens, x.h, x.f);
  eager(out, job, "swiglu_backward", x.tokens, x.f);
  gemm_backward(out, "mlp.up", x.tokens, x.f, x.h);
  gemm_backward(out, "mlp.gate", x.tokens, x.f, x.h);
  eager(out, job, "gradient_add", x.tokens, x.h);  // w1's and w3's input gradients
  eager(out, job, x.norm_backward, x.rows, x.h);
  eager(out, job, "gradient_add", x.rows, x.h);  // the residual stream's
  gemm_backward(out, "attention.out", x.tokens, x.h, x.q);
  core_attention(job, out, true);
  if (x.repeats) eager(out, job, "repeat_kv_backward", x.tokens, x.q, 2);
  eager(out, job, "rope_backward", x.tokens, x.q);
  eager(out, job, "rope_backward", x.tokens, x.kv);
  gemm_backward(out, "attention.q", x.tokens, x.q, x.h);
  gemm_backward(out, "attention.k", x.tokens, x.kv, x.h);
  gemm_backward(out, "attention.v", x.tokens, x.kv, x.h);
  eager(out, job, "gradient_add", x.tokens, x.h, 2);  // wq's, wk's and wv's input gradients
  eager(out, job, x.norm_backward, x.rows, x.h);
  eager(out, job, "gradient_add", x.rows, x.h);
}

// One layer: a mixture of experts' (`mixture`) or a dense MLP's.
void layer_forward(const TrainingJob& job, bool mixture, std::vector<KernelCall>& out) {
  if (job.runtime == TrainingJob::Runtime::torchtitan) {
    eager_layer_forward(job, out);
    return;
  }
  const TransformerModel& m = job.model;
  const double t = job.tp, h = m.hidden, f = m.dense_mlp_width(), tokens = job.local_tokens();
  const double rows = job.sequence_parallel ? tokens / t : tokens;
  memory_op(out, KernelClass::norm, "attention.norm", rows, h);
  if (m.latent) latent_projections(job, out);
  else gemm(out, "attention.qkv", tokens, m.qkv_width() / t, h);
  core_attention(job, out, false);
  gemm(out, "attention.out", tokens, h, attention_output_width(m) / t);
  memory_op(out, KernelClass::add, "attention.bias-dropout-add", rows, h);
  memory_op(out, KernelClass::norm, "mlp.norm", rows, h);
  if (mixture) {
    moe_forward(job, out);
  } else {
    mlp_forward(out, m.gated, "mlp", tokens, f / t, h);
  }
  memory_op(out, KernelClass::add, "mlp.bias-dropout-add", rows, h);
}

// What a layer's backward runs of its forward again first: the whole forward under full recomputation, the
// chosen modules' kernels under selective.
void layer_recompute(const TrainingJob& job, bool mixture, std::vector<KernelCall>& out) {
  const TransformerModel& m = job.model;
  if (job.recompute == Recompute::full) {
    if (job.runtime == TrainingJob::Runtime::torchtitan) eager_layer_forward(job, out, /*until_last_saved=*/true);
    else layer_forward(job, mixture, out);
    return;
  }
  const double t = job.tp, h = m.hidden, tokens = job.local_tokens();
  const double rows = job.sequence_parallel ? tokens / t : tokens;
  if (job.recompute == Recompute::selective_op && job.runtime == TrainingJob::Runtime::torchtitan) {
    eager_layer_recompute_by_op(job, out);
    return;
  }
  if (job.recompute == Recompute::selective_op) {  // up to the SwiGLU, whose output the down projection's backward reads
    memory_op(out, KernelClass::norm, "attention.norm", rows, h);
    gemm(out, "attention.k", tokens, m.kv() * m.head_size() / t, h);
    gemm(out, "attention.out", tokens, h, attention_output_width(m) / t);
    memory_op(out, KernelClass::add, "attention.bias-dropout-add", rows, h);
    memory_op(out, KernelClass::norm, "mlp.norm", rows, h);
    gemm(out, "mlp.up", tokens, m.ffn() / t, h);
    memory_op(out, KernelClass::add, "mlp.swiglu", tokens, m.ffn() / t);
    return;
  }
  if (job.recomputes(kRecomputeLayerNorm)) {
    if (m.latent) memory_op(out, KernelClass::norm, "attention.norm", rows, h);
    if (mixture) memory_op(out, KernelClass::norm, "mlp.norm", rows, h);
  }
  if (job.recomputes(kRecomputeLatentUpProjection)) {
    const LatentAttention& la = *m.latent;
    const double heads = static_cast<double>(m.heads) / job.tp;
    if (la.q_rank > 0) {
      memory_op(out, KernelClass::norm, "attention.q-norm", tokens, la.q_rank);
      gemm(out, "attention.q-up", tokens, heads * la.qk(), la.q_rank);
    } else {
      gemm(out, "attention.q", tokens, heads * la.qk(), h);
    }
    memory_op(out, KernelClass::norm, "attention.kv-norm", tokens, la.kv_rank);
    gemm(out, "attention.kv-up", tokens, heads * (la.nope + la.v), la.kv_rank);
  }
  if (job.recomputes(kRecomputeCoreAttention) && job.attention == AttentionKernel::unfused) {
    std::vector<KernelCall> core;
    core_attention(job, core, false);
    out.insert(out.end(), core.begin(), core.end() - 1);  // the scores, softmax and dropout again (FlashAttention's backward recomputes them anyway)
  }
  if (mixture && job.recomputes(kRecomputeMoe)) {
    moe_forward(job, out);
  } else if (mixture) {
    const MoeShape x = moe_shape(job);
    if (job.recomputes(kRecomputeExpertActivation)) {
      memory_op(out, m.gated ? KernelClass::add : KernelClass::activation, m.gated ? "moe.experts.swiglu" : "moe.experts.bias-gelu", x.routed, x.width);
    }
    if (job.recomputes(kRecomputeSharedExperts)) mlp_forward(out, m.gated, "moe.shared", tokens, m.shared_ffn / t, h);
  }
  if (!mixture && job.recomputes(kRecomputeMlp)) mlp_forward(out, m.gated, "mlp", tokens, m.dense_mlp_width() / t, h);
}

void layer_backward(const TrainingJob& job, bool mixture, std::vector<KernelCall>& out) {
  const TransformerModel& m = job.model;
  const double t = job.tp, h = m.hidden, f = m.dense_mlp_width(), tokens = job.local_tokens();
  const double rows = job.sequence_parallel ? tokens / t : tokens;
  layer_recompute(job, mixture, out);
  if (job.runtime == TrainingJob::Runtime::torchtitan) {
    eager_layer_backward(job, out);
    return;
  }
  memory_op(out, KernelClass::activation, "mlp.bias-dropout-add", rows, h);
  if (mixture) {
    moe_backward(job, out);
  } else {
    mlp_backward(out, m.gated, "mlp", tokens, f / t, h);
  }
  memory_op(out, KernelClass::add, "mlp.norm", rows, h);
  memory_op(out, KernelClass::activation, "attention.bias-dropout-add", rows, h);
  gemm_backward(out, "attention.out", tokens, h, attention_output_width(m) / t);
  core_attention(job, out, true);
  if (m.latent) latent_projections_backward(job, out);
  else gemm_backward(out, "attention.qkv", tokens, m.qkv_width() / t, h);
  memory_op(out, KernelClass::add, "attention.norm", rows, h);
}

// FP8 training as Transformer Engine runs it under Megatron-Core: the transformer layers' linear GEMMs in fp8,
// everything else (attention, norms, activations, the router, the logits) in bf16.
bool runs_in_fp8(const KernelCall& c) {
  return c.cls == KernelClass::gemm && c.name != "logits" && c.name != "moe.router" && !c.name.starts_with("attention.scores") && !c.name.starts_with("attention.values");
}
Dtype call_dtype(const KernelCall& c, Dtype job_dtype) {
  if (job_dtype != Dtype::fp8) return job_dtype;
  return runs_in_fp8(c) ? Dtype::fp8 : Dtype::bf16;
}
// Each fp8 GEMM's operands quantized: its activation input in the forward and its output gradient in the
// backward, each read in bf16 and written as fp8 and its fp8 transpose (what the other GEMM of the backward
// reads): 4 bytes an element, and under the blockwise recipe an fp32 scale a 128 elements of each copy. Where a
// layer's GEMMs are recomputed, their forward casts run again in the backward.
void add_fp8_casts(const TrainingJob& job, bool mixture, std::vector<KernelCall>& forward, std::vector<KernelCall>& backward) {
  const double cast_bytes = job.fp8_recipe == TrainingJob::Fp8Recipe::blockwise ? 4 + 2 * 4.0 / 128 : 4;
  const auto forward_cast = [&](const KernelCall& c) {
    return KernelCall{.cls = KernelClass::memory, .m = c.batch * c.m, .n = c.k, .count = c.count, .element_bytes = cast_bytes, .name = "fp8.cast " + c.name};
  };
  std::vector<KernelCall> casts_forward, casts_backward, casts_again;
  for (const KernelCall& c : forward) {
    if (!runs_in_fp8(c)) continue;
    casts_forward.push_back(forward_cast(c));
    casts_backward.push_back({.cls = KernelClass::memory, .m = c.batch * c.m, .n = c.n, .count = c.count, .element_bytes = cast_bytes, .name = "fp8.cast " + c.name});
  }
  std::vector<KernelCall> again;
  layer_recompute(job, mixture, again);
  for (const KernelCall& c : again) {
    if (runs_in_fp8(c)) casts_again.push_back(forward_cast(c));
  }
  forward.insert(forward.end(), casts_forward.begin(), casts_forward.end());
  backward.insert(backward.end(), casts_backward.begin(), casts_backward.end());
  backward.insert(backward.end(), casts_again.begin(), casts_again.end());
}

// One model chunk: its layers, with the embedding where it is the first and the head where it is the last.
PassKernels chunk_kernels(const TrainingJob& job, const LayerMix& layers, bool first, bool last) {
  const TransformerModel& m = job.model;
  const double t = job.tp, h = m.hidden, tokens = job.local_tokens();
  const double rows = job.sequence_parallel ? tokens / t : tokens;
  PassKernels k;
  std::vector<KernelCall> forward, backward;
  for (const auto& [mixture, count] : {std::pair{false, layers.dense}, std::pair{true, layers.mixture}}) {
    if (count == 0) continue;
    std::vector<KernelCall> f, b;
    layer_forward(job, mixture, f);
    layer_backward(job, mixture, b);
    if (job.runtime == TrainingJob::Runtime::torchtitan && ((job.zero_stage() >= 3 && job.dp > 1) || job.fsdp_gathers_elsewhere)) {
      // FSDP2's copy-out of each gather, before the forward and again before the backward: the layer's
      // parameters on this GPU, as rows of the hidden size.
      const double params = m.layer_parameters(mixture) / t;
      eager(f, job, "fsdp_copy_out", params / h, h);
      eager(b, job, "fsdp_copy_out", params / h, h);
    }
    if (job.dtype == Dtype::fp8) add_fp8_casts(job, mixture, f, b);
    if (job.activation_fp8_input_store) {
      // Each SwiGLU's input (gate and up) cast to fp8 as it is kept, and back before its backward: 3 bytes an element.
      for (std::size_t i = 0, calls = f.size(); i < calls; ++i) {
        if (!f[i].name.ends_with(".swiglu")) continue;
        const KernelCall c = f[i];  // a copy: the pushes below may move f's storage
        f.push_back({.cls = KernelClass::memory, .m = c.m, .n = 2 * c.n, .count = c.count, .element_bytes = 3, .name = "fp8.store " + c.name});
        b.push_back({.cls = KernelClass::memory, .m = c.m, .n = 2 * c.n, .count = c.count, .element_bytes = 3, .name = "fp8.load " + c.name});
      }
    }
    for (KernelCall& c : f) c.count *= count;
    for (KernelCall& c : b) c.count *= count;
    forward.insert(forward.end(), f.begin(), f.end());
    backward.insert(backward.end(), b.begin(), b.end());
  }
  if (first) {
    memory_op(k.forward, KernelClass::embedding, "embedding", tokens, h);
    memory_op(backward, KernelClass::activation, "embedding", tokens, h);  // gradients added into the table
  }
  k.forward.insert(k.forward.end(), forward.begin(), forward.end());
  k.backward = std::move(backward);
  if (last) {
    // The output head, and each multi-token prediction module's head again with its inputs: the embedding of
    // the token further ahead and the hidden states, each normed, projected from 2h (its layer is in `layers`).
    const double vocab = m.vocab / t;
    std::vector<KernelCall> head;
    for (int d = 0; d <= m.mtp_layers; ++d) {
      memory_op(k.forward, KernelClass::norm, "final.norm", rows, h);
      gemm(k.forward, "logits", tokens, vocab, h);
      memory_op(k.forward, KernelClass::softmax, "cross-entropy", tokens, vocab);
      memory_op(head, KernelClass::activation, "cross-entropy", tokens, vocab);
      gemm_backward(head, "logits", tokens, vocab, h);
      memory_op(head, KernelClass::add, "final.norm", rows, h);
      if (d == 0) continue;
      memory_op(k.forward, KernelClass::embedding, "mtp.embedding", tokens, h);
      memory_op(k.forward, KernelClass::norm, "mtp.norms", rows, 2 * h);
      gemm(k.forward, "mtp.projection", tokens, h / t, 2 * h);
      gemm_backward(head, "mtp.projection", tokens, h / t, 2 * h);
      memory_op(head, KernelClass::add, "mtp.norms", rows, 2 * h);
      memory_op(head, KernelClass::activation, "mtp.embedding", tokens, h);
    }
    k.backward.insert(k.backward.begin(), head.begin(), head.end());
  }
  // Every fp8 GEMM of the chunk (the layers', the multi-token prediction projection's) scaled as the recipe says.
  if (job.dtype == Dtype::fp8 && job.fp8_recipe == TrainingJob::Fp8Recipe::blockwise) {
    for (std::vector<KernelCall>* pass : {&k.forward, &k.backward}) {
      for (KernelCall& c : *pass) c.block_scaled = runs_in_fp8(c);
    }
  }
  return k;
}

PassTime pass_time(const KernelModel& model, const std::vector<KernelCall>& calls, Dtype dtype) {
  PassTime p;
  for (const KernelCall& c : calls) {
    const double time = c.count * model.estimate(c, call_dtype(c, dtype)).time_s();
    (c.cls == KernelClass::gemm ? p.gemm_s : c.cls == KernelClass::attention ? p.attention_s : p.memory_s) += time;
    if (c.weight_gradient) p.weight_gradient_s += time;
  }
  return p;
}

// Bytes per parameter of the optimizer step: Adam reading the fp32 weight, gradient and two moments
// and writing three of them back plus the 16-bit weight (30), after a pass over the gradients for
// their norm (4).
constexpr double kOptimizerStepBytes = 34;

// CPU offload of the optimizer, per stage: the slowest node holding its GPUs. Each GPU copies its offloaded
// parameters' fp32 gradients down its host link and their 16-bit weights back up; the node's CPUs step all its
// GPUs' offloaded parameters at the implementation's rate, and no faster than host memory moves Adam's bytes
// (the copies share host memory too).
struct OffloadTimes {
  double down_s = 0, cpu_s = 0, up_s = 0;
  double total(bool overlap) const { return overlap ? std::max({down_s, cpu_s, up_s}) : down_s + cpu_s + up_s; }
};

// Calls `visit(node, first, end)` for each node holding the job's ranks [first, end): ranks in order fill the
// nodes in order (gpu_at), TP fastest, so rank r is on stage r / (tp cp dp).
template <class Visit>
void for_each_node(const TrainingJob& job, const Cluster& cluster, Visit visit) {
  for (int first = 0; first < job.gpus();) {
    const NodeId node = cluster.node_of(make_id<GpuId>(static_cast<std::uint32_t>(first)));
    const int end = std::min(job.gpus(), static_cast<int>(index(cluster.first_gpu(node)) + cluster.gpus_in(node)));
    visit(node, first, end);
    first = end;
  }
}

// Copies between a node's GPUs and its host memory, all at once: no faster than a GPU's host link moves its own
// (`largest_bytes`, the most any GPU moves), nor than host memory moves them all (`sum_bytes`).
double host_copy_s(const NodeGroup& group, double largest_bytes, double sum_bytes) {
  const double memory = group.node.host_memory_bandwidth_Bps;
  return std::max(largest_bytes / group.host_link.bandwidth_Bps, memory > 0 ? sum_bytes / memory : 0.0);
}

std::vector<OffloadTimes> offload_times(const TrainingJob& job, const Cluster& cluster, const std::vector<double>& offloaded, const KernelConstants& k) {
  const int stage_gpus = job.tp * job.cp * job.dp;
  // Adam reads the fp32 weight and gradient and both moments, writes the weight, the moments and the 16-bit copy.
  const double adam_bytes = 4 + 4 + 2 * dtype_bytes(job.optimizer_moments) + 4 + 2 * dtype_bytes(job.optimizer_moments) + 2;
  const double rate = cpu_adam_params_per_s(job.cpu_adam, k);
  std::vector<OffloadTimes> out(static_cast<std::size_t>(job.pp));
  // A node's load is the sum of its GPUs' offloaded parameters.
  for_each_node(job, cluster, [&](NodeId node, int first, int end) {
    const NodeGroup& group = cluster.group(node);
    double sum = 0, largest = 0;
    for (int r = first; r < end; ++r) {
      const double q = offloaded[static_cast<std::size_t>(r / stage_gpus)];
      sum += q;
      largest = std::max(largest, q);
    }
    const double memory = group.node.host_memory_bandwidth_Bps;
    const auto copy_s = [&](double bytes_each) { return host_copy_s(group, largest * bytes_each, sum * bytes_each); };
    // DeepSpeed's rate is its logged optimizer_step, which copies the weights back up within it.
    const double up_s = job.cpu_adam == TrainingJob::CpuAdam::deepspeed ? 0.0 : copy_s(2);
    const OffloadTimes node_times{copy_s(4), std::max(sum / rate, memory > 0 ? sum * adam_bytes / memory : 0.0), up_s};
    for (int stage = first / stage_gpus; stage <= (end - 1) / stage_gpus; ++stage) {
      OffloadTimes& t = out[static_cast<std::size_t>(stage)];
      if (node_times.total(job.offload_overlap) > t.total(job.offload_overlap)) t = node_times;
    }
  });
  return out;
}

// GPU of (tp rank, dp rank, stage): TP fastest, then DP, then PP.
GpuId gpu_at(const TrainingJob& job, int tp_rank, int dp_rank, int stage, int cp_rank = 0) {
  return make_id<GpuId>(static_cast<std::uint32_t>(tp_rank + job.tp * (cp_rank + job.cp * (dp_rank + job.dp * stage))));
}

// The cluster a job runs on and its network: built once for a search's candidates (one per thread, since a
// topology keeps the distances its route walks have asked for), whose clusters are all the base job's.
struct JobNetwork {
  Cluster cluster;
  Topology topology;
  explicit JobNetwork(const ClusterSpec& spec) : cluster(spec), topology(cluster, spec.fabric) {}
};

TrainingStep step_on(const TrainingJob& job, const JobNetwork& network);

// How often a mixture layer's backward runs its dispatch and combine again, beside its own two combines:
// once where it recomputes the whole layer (full) or the mixture (the `moe` module).
double exchanges_recomputed(const TrainingJob& job) { return (job.recompute == Recompute::full ? 1 : 0) + (job.recomputes(kRecomputeMoe) ? 1 : 0); }

// Expected distinct bins a token's top-k experts reach, the experts spread evenly over `bins` bins of
// `per_bin` each and chosen uniformly without repetition: bins x (1 - C(E - per_bin, k) / C(E, k)).
double bins_reached(double bins, double per_bin, int top_k) {
  const double experts = bins * per_bin;
  double none = 1;  // C(E - per_bin, k) / C(E, k), factor by factor; 0 once fewer experts are left than picks
  for (int i = 0; i < top_k && none > 0; ++i) none *= std::max(0.0, experts - per_bin - i) / (experts - i);
  return bins * (1 - none);
}

// A mixture's all-reduce over its expert TP group: the copies of the routed tokens its GPUs received.
double expert_tp_all_reduce_bytes(const TrainingJob& job) { return kActivationBytes * moe_shape(job).routed * job.model.hidden; }

// The all-reduces one layer runs a micro-batch, by its kind and pass: over its TP group, each as large as
// attention's (attention's own, a dense MLP's, a mixture's shared expert's), and over a mixture's expert TP
// group. Forward; backward with what the job's recomputation runs again. A layer that partial recomputation
// leaves alone runs its forward's count backward.
struct LayerAllReduces {
  struct Count {
    double tp = 0, etp = 0;
  };
  Count dense_forward, dense_backward, mixture_forward, mixture_backward;
};
LayerAllReduces layer_all_reduces(const TrainingJob& job) {
  const TransformerModel& m = job.model;
  // A mixture's MLP: its shared expert's (a dense model's MLP all-reduces as much as its attention), and its
  // expert TP group's.
  const double shared = !m.moe() || m.shared_ffn > 0 ? 1 : 0, expert = m.moe() && job.expert_tp() > 1 ? 1 : 0;
  const double passes_backward = job.recompute == Recompute::full ? 2 : 1;
  LayerAllReduces n;
  n.dense_forward = {.tp = 2};
  n.mixture_forward = {.tp = 1 + shared, .etp = expert};
  n.dense_backward = {.tp = passes_backward * 2};
  n.mixture_backward = {.tp = passes_backward * (1 + shared), .etp = passes_backward * expert};
  if (job.recomputes(kRecomputeMoe)) {
    n.mixture_backward.tp += shared;
    n.mixture_backward.etp += expert;
  } else if (job.recomputes(kRecomputeSharedExperts)) {
    n.mixture_backward.tp += 1;  // the shared expert's all-reduce (as large as attention's)
  }
  if (job.recomputes(kRecomputeMlp)) n.dense_backward.tp += 1;
  // By op, the recomputation re-runs the all-gathers of the two norms' outputs (the key and up projections
  // read them; sequence parallelism) or the output projection's all-reduce: about one all-reduce.
  if (job.recompute == Recompute::selective_op) n.dense_backward.tp += 1;
  return n;
}

// Where one token of an EP group of `gpus` GPUs over `spanned` nodes goes under DeepEP: the GPUs holding its
// experts (the NVLink leg's copies) and the nodes they are on (the network leg's, its own node's among them).
struct DeepEpReach {
  double gpus = 0, nodes = 0;
};
DeepEpReach deepep_reach(const TrainingJob& job, double spanned, double gpus) {
  const TransformerModel& m = job.model;
  // The nodes a token may use: max_nodes, or as many as hold its top-k experts where they hold fewer (a
  // group-limited router needs that many groups).
  const double per_gpu = m.experts / gpus, per_node = per_gpu * gpus / spanned;
  const double reach = job.max_nodes > 0 ? std::min(spanned, std::max<double>(job.max_nodes, std::ceil(m.top_k / per_node))) : spanned;
  // Nodes a token reaches: one network copy each. Limited, the router picks the nodes holding its best
  // experts, so it uses all it may (fewer where even unlimited its top-k reach fewer).
  return {.gpus = bins_reached(reach * gpus / spanned, per_gpu, m.top_k), .nodes = std::min(reach, bins_reached(spanned, per_node, m.top_k))};
}

// A dispatched element's bytes on the wire: fp8 with a 4-byte scale a 128 (DeepEP's fp8 dispatch), or 16-bit.
double dispatch_wire_bytes(const TrainingJob& job) { return job.dispatch_dtype == Dtype::fp8 ? 1 + 4.0 / 128 : kActivationBytes; }

// A token's bytes in one dispatch (or combine) at `wire` bytes an element, on the busiest GPU.
double deepep_token_bytes(const TrainingJob& job, double wire) { return moe_shape(job).own_rows * job.model.hidden * wire * job.expert_load(); }

// One dispatch (or combine) under DeepEP for every EP group of `groups` at once, at `wire` bytes an element
// (docs/training.md#deepep-dispatch). A token goes once to each GPU holding one of its experts (a copy a
// GPU, not an expert), and, where the group spans nodes, over the network once to each node it reaches,
// to the GPU of its own local rank there, which forwards it over NVLink. Each leg as an all-to-all of
// every group at once, at the busiest GPU's load; pipelined, the slower leg sets the time.
double deepep_s(const TrainingJob& job, const Cluster& cluster, const Topology& topology, const std::vector<std::vector<GpuId>>& groups, double wire) {
  const double token_bytes = deepep_token_bytes(job, wire);
  std::vector<CollectivePlan> network_leg, nvlink_leg;
  for (const std::vector<GpuId>& group : groups) {
    const std::vector<std::vector<GpuId>> by_node = gpus_by_node(cluster, group);  // the nodes it spans, its GPUs on each
    const DeepEpReach reached = deepep_reach(job, static_cast<double>(by_node.size()), static_cast<double>(group.size()));
    if (by_node.size() == 1) {
      nvlink_leg.push_back(plan_collective(cluster, topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, group, token_bytes * reached.gpus));
      continue;
    }
    // As an all-to-all among the GPUs of one local rank, a copy a node reached (its own node's share stays on
    // the node); then each node's GPUs forward every copy to the GPUs of its experts there.
    std::size_t ranks = 0;
    for (const auto& on_node : by_node) ranks = std::max(ranks, on_node.size());
    for (std::size_t r = 0; r < ranks; ++r) {
      std::vector<GpuId> rail;
      for (const auto& on_node : by_node) {
        if (r < on_node.size()) rail.push_back(on_node[r]);
      }
      if (rail.size() > 1) network_leg.push_back(plan_collective(cluster, topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, rail, token_bytes * reached.nodes));
    }
    for (const auto& on_node : by_node) {
      if (on_node.size() > 1) nvlink_leg.push_back(plan_collective(cluster, topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, on_node, token_bytes * reached.gpus));
    }
  }
  const auto slowest = [&](const std::vector<CollectivePlan>& plans) {
    if (plans.empty()) return 0.0;
    const auto times = simulated_times_s(topology, plans);
    return *std::max_element(times.begin(), times.end());
  };
  return std::max(slowest(network_leg), slowest(nvlink_leg));
}

}  // namespace

TrainingStep simulate_training_step(const TrainingJob& job) {
  check_training_job(job);
  return step_on(job, JobNetwork(job.cluster));
}

namespace {

TrainingStep step_on(const TrainingJob& job, const JobNetwork& network) {
  const Cluster& cluster = network.cluster;
  const Topology& topology = network.topology;
  TrainingStep step;
  step.counts = count_training(job);
  const TrainingCounts& c = step.counts;
  const TransformerModel& m = job.model;
  const int p = job.pp, mb = job.micro_batches();
  const double s = m.seq_len, b = job.micro_batch, t = job.tp;
  const VirtualStages stages(job);

  // Communication, from the topology: one TP all-reduce on stage 0's first group; the stage
  // boundary with every TP rank of every DP replica sending its share at once; the gradient
  // all-reduces of every stage and TP rank at once.
  // A layer's TP communication (sequence parallel or not, an all-reduce's worth for its attention and one
  // for its MLP). A mixture of experts has its shared expert's in place of the MLP's, and its expert TP
  // group gathers and scatters the top_k copies its GPUs received (on the busiest, expert_load() times as
  // many); then the dispatch and the combine of every EP group of the stage's first expert DP block at once,
  // timed at the busiest GPU's load: NCCL's all-to-alls (alike) or DeepEP's two legs each (an fp8 dispatch
  // moves fewer bytes than its combine).
  // A GPU by its place q among its stage's TP x CP x DP ranks (TP fastest), as the expert groups count them.
  const auto stage_gpu = [&](int q, int stage) { return make_id<GpuId>(static_cast<std::uint32_t>(q + job.tp * job.cp * job.dp * stage)); };
  const auto all_reduce_s = [&](const std::vector<GpuId>& group, double bytes) {
    return analytical_time_s(topology, plan_collective(cluster, topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, group, bytes));
  };
  // etp_s: a mixture's all-reduce over its expert TP group.
  double tp_attention_s = 0, etp_s = 0, alltoall_s = 0, combine_s = 0;
  if (job.tp > 1) {
    std::vector<GpuId> group;
    for (int r = 0; r < job.tp; ++r) group.push_back(gpu_at(job, r, 0, 0));
    tp_attention_s = all_reduce_s(group, c.tp_allreduce_bytes);
  }
  if (m.moe()) {
    const int etp = job.expert_tp();
    if (etp > 1) {
      std::vector<GpuId> group;
      for (int e = 0; e < etp; ++e) group.push_back(stage_gpu(e, 0));
      etp_s = all_reduce_s(group, expert_tp_all_reduce_bytes(job));
    }
    if (job.ep > 1) {
      std::vector<std::vector<GpuId>> groups;
      for (int e = 0; e < etp; ++e) {
        std::vector<GpuId> group;
        for (int j = 0; j < job.ep; ++j) group.push_back(stage_gpu(e + etp * j, 0));
        groups.push_back(std::move(group));
      }
      if (job.dispatcher == TrainingJob::Dispatcher::deepep) {
        const double wire = dispatch_wire_bytes(job);
        combine_s = deepep_s(job, cluster, topology, groups, kActivationBytes);
        alltoall_s = wire == kActivationBytes ? combine_s : deepep_s(job, cluster, topology, groups, wire);
      } else {
        std::vector<CollectivePlan> plans;
        for (const auto& group : groups) {
          plans.push_back(plan_collective(cluster, topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, group, c.ep_alltoall_bytes * job.expert_load()));
        }
        const auto times = simulated_times_s(topology, plans);
        alltoall_s = combine_s = *std::max_element(times.begin(), times.end());
      }
    }
  }
  double send_s = 0;
  if (p > 1) {
    std::vector<CollectivePlan> sends;
    for (int d = 0; d < job.dp; ++d) {
      for (int k = 0; k < job.cp; ++k) {
        for (int r = 0; r < job.tp; ++r) {
          const std::vector<GpuId> pair{gpu_at(job, r, d, 0, k), gpu_at(job, r, d, 1, k)};
          sends.push_back(plan_collective(cluster, topology, CollectiveOp::send_recv, CollectiveAlgo::automatic, pair, c.pp_send_bytes / t));
        }
      }
    }
    const auto times = simulated_times_s(topology, sends);
    send_s = *std::max_element(times.begin(), times.end());
  }
  std::vector<double> dp_s(static_cast<std::size_t>(p), 0.0);
  const bool fsdp = job.zero_stage() >= 3 && job.dp > 1;
  double gather_s = 0, scatter_s = 0;  // one layer's, on the first DP group
  if (fsdp) {
    std::vector<GpuId> replicas;
    for (int d = 0; d < job.dp; ++d) replicas.push_back(gpu_at(job, 0, d, 0));
    gather_s = analytical_time_s(topology, plan_collective(cluster, topology, CollectiveOp::all_gather, CollectiveAlgo::automatic, replicas, c.zero_gather_bytes_per_layer));
    // The 16-bit weights gathered; the gradients reduce-scattered in the reduce dtype.
    const double scatter_bytes = c.zero_gather_bytes_per_layer * dtype_bytes(job.reduce_dtype) / 2;
    scatter_s = analytical_time_s(topology, plan_collective(cluster, topology, CollectiveOp::reduce_scatter, CollectiveAlgo::automatic, replicas, scatter_bytes));
  }
  double fetch_s = 0;  // offloaded parameters: one layer's shard copied up on every GPU at once, the slowest node's
  if (job.offload_parameters) {
    const double bytes = c.zero_gather_bytes_per_layer / job.dp;
    for_each_node(job, cluster, [&](NodeId node, int first, int end) { fetch_s = std::max(fetch_s, host_copy_s(cluster.group(node), bytes, (end - first) * bytes)); });
  }
  // DualPipe: GPUs r and pp - 1 - r hold the same two stages, one a direction, and sum their gradients too.
  const bool dual = stages.dual;
  if ((job.dp * job.cp > 1 || (m.moe() && job.expert_dp() > 1) || dual) && !fsdp) {
    // Every stage's reductions at once: over DP x CP for each TP rank, and a mixture of experts' expert
    // gradients over the GPUs holding the same share of the same experts (every etp x ep-th of the stage's).
    std::vector<CollectivePlan> plans;
    std::vector<int> plan_stage;
    const int edp = job.expert_dp();
    for (int stage = 0; stage < (dual ? p / 2 : p); ++stage) {
      std::vector<int> holding{stage};
      if (dual) holding.push_back(p - 1 - stage);
      for (int r = 0; (job.dp * job.cp > 1 || dual) && r < job.tp; ++r) {
        std::vector<GpuId> replicas;
        for (int held : holding) {
          for (int d = 0; d < job.dp; ++d) {
            for (int k = 0; k < job.cp; ++k) replicas.push_back(gpu_at(job, r, d, held, k));
          }
        }
        plans.push_back(plan_collective(cluster, topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, replicas,
                                        c.dp_allreduce_bytes[static_cast<std::size_t>(stage)]));
        plan_stage.push_back(stage);
      }
      // Expert gradients: each (expert TP rank, EP rank) over its expert DP group.
      const int etp = job.expert_tp(), block = etp * job.ep;
      for (int e = 0; m.moe() && (edp > 1 || dual) && e < block; ++e) {
        std::vector<GpuId> holders;
        for (int held : holding) {
          for (int g = 0; g < edp; ++g) holders.push_back(stage_gpu(e + block * g, held));
        }
        plans.push_back(plan_collective(cluster, topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, holders,
                                        c.expert_allreduce_bytes[static_cast<std::size_t>(stage)]));
        plan_stage.push_back(stage);
      }
    }
    const auto times = simulated_times_s(topology, plans);
    for (std::size_t i = 0; i < times.size(); ++i) dp_s[plan_stage[i]] = std::max(dp_s[plan_stage[i]], times[i]);
    for (int stage = 0; dual && stage < p / 2; ++stage) dp_s[p - 1 - stage] = dp_s[stage];
  }

  // Compute per micro-batch and model chunk (a stage's layers, or 1/vp of them interleaved): the kernel
  // model, or FLOP at a given share of peak. TP all-reduces are blocking.
  const GpuType& gpu = cluster.gpu_type(gpu_at(job, 0, 0, 0));
  const KernelModel kernels(gpu);
  const double tokens = job.local_tokens();
  const TokenFlop flop = token_flop(job);
  const auto layer_forward = [&](bool mixture) { return tokens * flop.layer(mixture) / t; };
  const auto recompute = [&](bool mixture) { return tokens * flop.recompute(mixture) / t; };
  const double logits = tokens * flop.logits / t;
  // Per layer: TP's all-reduces and, in a mixture of experts, the dispatch and combine all-to-alls, once
  // forward, once backward, and once more in the backward where it recomputes the whole layer. The
  // backward's exchanges carry 16-bit gradients: both move as a combine does (an fp8 dispatch only forward).
  // Selective recomputation of a whole MLP (dense or a mixture's, or its shared expert) runs that MLP's
  // exchanges again.
  const LayerAllReduces tp = layer_all_reduces(job);
  const auto tp_s = [&](const LayerAllReduces::Count& n) { return n.tp * tp_attention_s + n.etp * etp_s; };
  const double tp_forward_s = tp_s(tp.mixture_forward), tp_dense_forward_s = tp_s(tp.dense_forward);
  const double tp_backward_s = tp_s(tp.mixture_backward), tp_dense_backward_s = tp_s(tp.dense_backward);
  const double ep_forward_s = alltoall_s + combine_s;
  const double ep_backward_s = exchanges_recomputed(job) * ep_forward_s + 2 * combine_s;
  // CP: every GPU of a stage passes its keys and values to the next CP rank at once; a ring step costs what
  // its send takes beyond the block of attention it overlaps (the backward sends the key and value
  // gradients back as well, and under full recomputation runs the forward's ring again first).
  double cp_forward_s = 0, cp_backward_s = 0, cp_kept_backward_s = 0;  // the last: a layer not recomputed
  if (job.cp > 1) {
    std::vector<CollectivePlan> ring;
    for (int d = 0; d < job.dp; ++d) {
      for (int r = 0; r < job.tp; ++r) {
        for (int k = 0; k < job.cp; ++k) {
          const std::vector<GpuId> pair{gpu_at(job, r, d, 0, k), gpu_at(job, r, d, 0, (k + 1) % job.cp)};
          ring.push_back(plan_collective(cluster, topology, CollectiveOp::send_recv, CollectiveAlgo::automatic, pair, c.cp_send_bytes));
        }
      }
    }
    const auto times = simulated_times_s(topology, ring);
    step.cp_send_s = *std::max_element(times.begin(), times.end());
    const double local = s / job.cp, heads = static_cast<double>(m.heads) / job.tp;
    const double d = m.latent ? m.latent->qk() : m.head_size(), v = m.latent ? m.latent->v : 0;
    const KernelCall block{.cls = KernelClass::attention, .m = local, .n = local / 2, .k = d, .batch = b * heads, .v = v};
    KernelCall block_backward = block;
    block_backward.backward = true;
    const double width = m.latent ? (m.latent->qk() + m.latent->v) / 2 : d;  // the scores' and the values' mean
    const double block_flop = 4 * local * (local / 2) * width * b * heads;
    const double forward_block_s = job.compute_efficiency ? block_flop / (gpu.peak_for(job.dtype) * *job.compute_efficiency) : kernels.estimate(block, job.dtype).time_s();
    const double backward_block_s = job.compute_efficiency ? 2 * block_flop / (gpu.peak_for(job.dtype) * *job.compute_efficiency) : kernels.estimate(block_backward, job.dtype).time_s();
    cp_forward_s = (job.cp - 1) * std::max(0.0, step.cp_send_s - forward_block_s);
    cp_kept_backward_s = (job.cp - 1) * std::max(0.0, 2 * step.cp_send_s - backward_block_s);
    cp_backward_s = cp_kept_backward_s + (job.recompute == Recompute::full ? cp_forward_s : 0.0);
  }
  // A layer that partial recomputation leaves alone exchanges in its backward what it would without recomputation.
  const double tp_kept_backward_s = tp_forward_s, tp_dense_kept_backward_s = tp_dense_forward_s, ep_kept_backward_s = 2 * combine_s;
  const int v = job.vp;
  const int chunks = stages.count;
  std::vector<double> fwd(static_cast<std::size_t>(chunks)), bwd(static_cast<std::size_t>(chunks));
  std::vector<double> weight_s(fwd.size());  // of each backward, its weight gradients' (what DualPipe defers)
  // Of each pass, its compute and its expert all-to-alls: what ep_overlap hides behind each other.
  std::vector<double> fwd_compute_s(fwd.size()), bwd_compute_s(fwd.size()), fwd_alltoall_s(fwd.size()), bwd_alltoall_s(fwd.size());
  std::vector<double> stage_fwd(static_cast<std::size_t>(p), 0.0), stage_bwd(static_cast<std::size_t>(p), 0.0), optimizer(static_cast<std::size_t>(p));
  std::vector<PassTime> stage_fwd_kernels(static_cast<std::size_t>(p)), stage_bwd_kernels(static_cast<std::size_t>(p));
  const std::vector<LayerMix> chunk_mixes = chunk_layers(job);
  // A GPU's passes of one micro-batch: under DualPipe each micro-batch passes one of its two stages, so a
  // micro-batch's share is their mean.
  const double share = stages.dual ? 0.5 : 1.0;
  for (int k = 0; k < chunks; ++k) {
    const int stage = stages.gpu(k);
    const LayerMix layers = chunk_mixes[static_cast<std::size_t>(k)];
    const RecomputeSplit part = split_recompute(job, layers, stages.last(k));
    const double mixtures = layers.mixture, dense = layers.dense;
    double fwd_compute = 0, bwd_compute = 0, kept_bwd_compute = 0;  // the last: of the layers partial recomputation leaves alone
    if (job.compute_efficiency) {
      const double rate = gpu.peak_for(job.dtype) * *job.compute_efficiency;
      const double extra = stages.last(k) ? (1 + m.mtp_layers) * logits + m.mtp_layers * tokens * flop.mtp_projection / t : 0;
      fwd_compute = (mixtures * layer_forward(true) + dense * layer_forward(false) + extra) / rate;
      kept_bwd_compute = (part.kept.mixture * 2 * layer_forward(true) + part.kept.dense * 2 * layer_forward(false)) / rate;
      bwd_compute = (part.as_job.mixture * (2 * layer_forward(true) + recompute(true)) + part.as_job.dense * (2 * layer_forward(false) + recompute(false)) + 2 * extra) / rate +
                    kept_bwd_compute;
      weight_s[k] = fwd_compute;  // the weight gradients' FLOP: the forward's
    } else {
      PassKernels pass = chunk_kernels(job, part.as_job, stages.first(k), stages.last(k));
      PassTime kept_b;
      if (part.kept.total() > 0) {
        const PassKernels kept = chunk_kernels(without_recompute(job), part.kept, false, false);
        pass.forward.insert(pass.forward.end(), kept.forward.begin(), kept.forward.end());
        kept_b = pass_time(kernels, kept.backward, job.dtype);
      }
      const PassTime f = pass_time(kernels, pass.forward, job.dtype);
      PassTime bk = pass_time(kernels, pass.backward, job.dtype);
      bk.gemm_s += kept_b.gemm_s;
      bk.attention_s += kept_b.attention_s;
      bk.memory_s += kept_b.memory_s;
      bk.weight_gradient_s += kept_b.weight_gradient_s;
      fwd_compute = f.total();
      bwd_compute = bk.total();
      kept_bwd_compute = kept_b.total();
      weight_s[k] = bk.weight_gradient_s;
      for (auto [sum, pass_part] : {std::pair{&stage_fwd_kernels[stage], &f}, std::pair{&stage_bwd_kernels[stage], &std::as_const(bk)}}) {
        sum->gemm_s += share * pass_part->gemm_s;
        sum->attention_s += share * pass_part->attention_s;
        sum->memory_s += share * pass_part->memory_s;
        sum->weight_gradient_s += share * pass_part->weight_gradient_s;
      }
    }
    fwd[k] = fwd_compute + mixtures * (tp_forward_s + ep_forward_s + cp_forward_s) + dense * (tp_dense_forward_s + cp_forward_s);
    const double kept_bwd = kept_bwd_compute + part.kept.mixture * (tp_kept_backward_s + ep_kept_backward_s + cp_kept_backward_s) +
                            part.kept.dense * (tp_dense_kept_backward_s + cp_kept_backward_s);
    bwd[k] = bwd_compute + part.as_job.mixture * (tp_backward_s + ep_backward_s + cp_backward_s) + part.as_job.dense * (tp_dense_backward_s + cp_backward_s) +
             part.kept.mixture * (tp_kept_backward_s + ep_kept_backward_s + cp_kept_backward_s) + part.kept.dense * (tp_dense_kept_backward_s + cp_kept_backward_s);
    fwd_compute_s[k] = fwd_compute;
    bwd_compute_s[k] = bwd_compute;
    fwd_alltoall_s[k] = mixtures * ep_forward_s;
    bwd_alltoall_s[k] = part.as_job.mixture * ep_backward_s + part.kept.mixture * ep_kept_backward_s;
    if (fsdp || job.offload_parameters) {  // pp 1, so one chunk: the stage; its layers alike (check_training_job)
      // Each layer's weights are gathered before it runs (its shard first copied up from host memory where the
      // parameters are offloaded, then gathered), the next layer's while it computes (FSDP's prefetch: one layer
      // ahead, as the memory holds it): a layer takes the longer of its compute and the next one's copy and
      // gather, and the first layer's are not hidden. The gradients' reduce-scatters run beside the last
      // micro-batch's backward, sharing the links with its gathers: what they add beyond it is paid after it,
      // as the DP reduction.
      // Under partial recomputation the layers it re-runs and the others each take their own backward.
      const double n = layers.total(), fetched = gather_s + fetch_s, again = part.as_job.total(), kept = part.kept.total();
      const double per_layer_f = fwd[k] / n, per_layer_b = (bwd[k] - kept_bwd) / again, kept_layer_b = kept > 0 ? kept_bwd / kept : 0;
      const double backward_layers = again * std::max(per_layer_b, fetched) + kept * std::max(kept_layer_b, fetched);
      fwd[k] = n * std::max(per_layer_f, fetched) + fetched;
      bwd[k] = backward_layers + fetched;
      dp_s[static_cast<std::size_t>(stage)] = std::max(0.0, n * (gather_s + scatter_s) - backward_layers);
    }
    stage_fwd[stage] += share * fwd[k];
    stage_bwd[stage] += share * bwd[k];
  }
  for (int stage = 0; stage < p; ++stage) {
    if (!job.compute_efficiency) {
      // Each GPU steps its shard: the dense weights' over DP x CP, the experts' over expert DP.
      const std::size_t st = static_cast<std::size_t>(stage);
      const double experts = c.stage_expert_parameters[st], dense = c.stage_parameters[st] - experts;
      const double shard = job.zero_stage() >= 1 ? dense / (static_cast<double>(job.dp) * job.cp) + experts / job.expert_dp() : c.stage_parameters[st];
      // Narrower moments move fewer bytes: each read and written once. What the CPU steps is not the GPU's.
      const double step_bytes = kOptimizerStepBytes - 2 * 2 * (4 - dtype_bytes(job.optimizer_moments));
      const double params = shard - c.stage_offloaded_parameters[st];
      const KernelCall adam{.cls = KernelClass::memory, .m = params, .n = step_bytes / dtype_bytes(job.dtype), .name = "optimizer"};
      if (params > 0) optimizer[stage] = kernels.estimate(adam, job.dtype).time_s();
      if (job.dtype == Dtype::fp8) {
        // The fp8 copies of the layers' weights (and their transposes) cast once an iteration, cached over its
        // micro-batches as Megatron-Core's first-micro-batch flag lets Transformer Engine do.
        const KernelCall cast{.cls = KernelClass::memory, .m = c.stage_fp8_weights[st], .n = 1, .element_bytes = 4, .name = "fp8.weight-cast"};
        optimizer[stage] += kernels.estimate(cast, Dtype::bf16).time_s();
      }
      if (stage_fwd_kernels[stage].total() + stage_bwd_kernels[stage].total() > step.forward_kernels.total() + step.backward_kernels.total()) {
        step.forward_kernels = stage_fwd_kernels[stage];
        step.backward_kernels = stage_bwd_kernels[stage];
      }
    }
  }
  if (job.optimizer_offload > 0) {
    // The CPU's share runs beside the GPU's (Megatron-Core steps both at once); the optimizer waits for both.
    const std::vector<OffloadTimes> offload = offload_times(job, cluster, c.stage_offloaded_parameters, kernels.constants());
    double longest = -1;
    for (std::size_t stage = 0; stage < offload.size(); ++stage) {
      const double total = offload[stage].total(job.offload_overlap);
      optimizer[stage] = std::max(optimizer[stage], total);
      if (total > longest) {
        longest = total;
        step.offload_down_s = offload[stage].down_s;
        step.offload_cpu_s = offload[stage].cpu_s;
        step.offload_up_s = offload[stage].up_s;
      }
    }
  }
  step.zero_gather_s = gather_s;
  step.zero_fetch_s = fetch_s;
  step.forward_s = *std::max_element(stage_fwd.begin(), stage_fwd.end());
  step.backward_s = *std::max_element(stage_bwd.begin(), stage_bwd.end());
  step.optimizer_s = *std::max_element(optimizer.begin(), optimizer.end());
  step.stage_optimizer_s = optimizer;
  for (int stage = 0; stage < p; ++stage) {  // the slowest stage's: the one with the most
    const RecomputeSplit part = stage_split(job, chunk_mixes, stages, stage);
    const double mixtures = share * part.as_job.mixture, dense = share * part.as_job.dense, kept_mixtures = share * part.kept.mixture, kept_dense = share * part.kept.dense;
    step.tp_comm_s = std::max(step.tp_comm_s, mixtures * (tp_forward_s + tp_backward_s) + dense * (tp_dense_forward_s + tp_dense_backward_s) +
                                                  kept_mixtures * (tp_forward_s + tp_kept_backward_s) + kept_dense * (tp_dense_forward_s + tp_dense_kept_backward_s));
    step.ep_comm_s = std::max(step.ep_comm_s, mixtures * (ep_forward_s + ep_backward_s) + kept_mixtures * (ep_forward_s + ep_kept_backward_s));
    step.cp_comm_s = std::max(step.cp_comm_s, share * part.as_job.total() * (cp_forward_s + cp_backward_s) + share * part.kept.total() * (cp_forward_s + cp_kept_backward_s));
  }
  step.ep_alltoall_s = alltoall_s;
  step.ep_combine_s = combine_s;
  step.pp_send_s = send_s;

  // Each stage's passes in schedule order.
  std::vector<std::vector<Pass>> order(static_cast<std::size_t>(p));
  const std::vector<ChunkPass> table = v > 1 ? interleaved_order(mb, v, job.group()) : std::vector<ChunkPass>{};
  for (int stage = 0; stage < p; ++stage) order[stage] = pipeline_order(job, stages, table, stage);
  // Play it out: repeatedly start the pass that can start earliest among those whose input has arrived.
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> fwd_end(static_cast<std::size_t>(chunks), std::vector<double>(static_cast<std::size_t>(mb), kNotYet));
  auto bwd_end = fwd_end;
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0.0), busy(static_cast<std::size_t>(p), 0.0);
  std::vector<double> last_backward_start(static_cast<std::size_t>(p), 0.0);
  std::vector<std::deque<Pass>> deferred(static_cast<std::size_t>(p));  // DualPipe: input-only backwards whose weight gradients wait
  // When a pass's input has arrived (kNotYet until its producer has been played); a weight pass's backward ran
  // before it on its GPU.
  const auto arrived = [&](const Pass& op) {
    const int k = op.virtual_stage, i = op.micro_batch;
    if (op.part == Pass::Part::weight) return 0.0;
    if (!op.backward) return stages.first(k) ? 0.0 : fwd_end[k - 1][i] == kNotYet ? kNotYet : fwd_end[k - 1][i] + send_s;
    return stages.last(k) ? fwd_end[k][i] : (bwd_end[k + 1][i] == kNotYet ? kNotYet : bwd_end[k + 1][i] + send_s);
  };
  const auto alone_s = [&](const Pass& op) {
    const auto k = static_cast<std::size_t>(op.virtual_stage);
    if (!op.backward) return fwd[k];
    return op.part == Pass::Part::whole ? bwd[k] : op.part == Pass::Part::input ? bwd[k] - weight_s[k] : weight_s[k];
  };
  std::size_t total = 0;
  for (const auto& o : order) total += o.size();
  // The share of the GPU's SMs DeepEP's kernels take from the compute they overlap (0: NCCL's, not modelled).
  const double stolen_sms = m.moe() && job.dispatcher == TrainingJob::Dispatcher::deepep && gpu.sms > 0 ? static_cast<double>(job.dispatcher_sms) / gpu.sms : 0;
  for (std::size_t done = 0; done < total;) {
    int best = -1;
    double best_start = 0;
    for (int stage = 0; stage < p; ++stage) {
      if (next[stage] == order[stage].size()) continue;
      const Pass& op = order[stage][next[stage]];
      double ready = arrived(op);
      if (op.with_next && ready != kNotYet) {
        const double partner = arrived(order[stage][next[stage] + 1]);
        ready = partner == kNotYet ? kNotYet : std::max(ready, partner);
      }
      if (ready == kNotYet) continue;
      const double start = std::max(ready, free_at[stage]);
      if (best < 0 || start < best_start) {
        best = stage;
        best_start = start;
      }
    }
    FLEETSIM_CHECK(best >= 0, "a pipeline schedule waits on itself");
    Pass op = order[best][next[best]++];
    if (op.part == Pass::Part::weight) {  // the oldest waiting weight gradients (DualPipe's queue is first in, first out)
      FLEETSIM_CHECK(!deferred[best].empty(), "a weight pass with no input-only backward before it");
      const Pass owner = deferred[best].front();
      deferred[best].pop_front();
      op.micro_batch = owner.micro_batch;
      op.virtual_stage = owner.virtual_stage;
    } else if (op.part == Pass::Part::input) {
      deferred[best].push_back(op);
    }
    std::array<Pass, 2> played{op, op};
    std::size_t count = 1;
    double duration = alone_s(op);
    if (op.with_next) {
      // The pair: both passes, less the shorter of their compute and their all-to-alls, each hidden behind the other.
      played[count++] = order[best][next[best]++];
      FLEETSIM_CHECK(played[0].part == Pass::Part::whole && played[1].part == Pass::Part::whole && played[0].backward != played[1].backward,
                     "a pair is a whole forward and a whole backward");
      const Pass& back = played[0].backward ? played[0] : played[1];
      const Pass& forth = played[0].backward ? played[1] : played[0];
      const auto kb = static_cast<std::size_t>(back.virtual_stage), kf = static_cast<std::size_t>(forth.virtual_stage);
      const double compute = bwd_compute_s[kb] + fwd_compute_s[kf], exchanges = bwd_alltoall_s[kb] + fwd_alltoall_s[kf];
      duration = bwd[kb] + fwd[kf] - std::min(compute, exchanges);
      // DeepEP's kernels hold a share f of the SMs while they run: the compute beside them runs at 1 - f, so the
      // pair's core takes max(exchanges, compute + f x exchanges) rather than the longer of the two.
      if (stolen_sms > 0) duration += std::max(exchanges, compute + stolen_sms * exchanges) - std::max(exchanges, compute);
    }
    for (std::size_t j = 0; j < count; ++j) {
      const Pass& pass = played[j];
      if (pass.part != Pass::Part::weight) (pass.backward ? bwd_end : fwd_end)[pass.virtual_stage][pass.micro_batch] = best_start + duration;
      step.ops.push_back({best, pass.micro_batch, pass.virtual_stage / p, pass.backward, pass.part == Pass::Part::weight, best_start, best_start + duration});
      if (pass.backward) last_backward_start[best] = best_start;
    }
    done += count;
    free_at[best] = best_start + duration;
    busy[best] += duration;
  }
  const double pipeline_s = *std::max_element(free_at.begin(), free_at.end());
  double idle = 0;
  for (int stage = 0; stage < p; ++stage) {
    step.stage_end_s.push_back(free_at[stage]);
    // The gradients' reduction after the last backward, or beside it (dp_overlap); then the optimizer. Under
    // DualPipe it waits for both GPUs of the pair holding the stage.
    const auto partner = static_cast<std::size_t>(stages.dual ? p - 1 - stage : stage);
    const double done = std::max(free_at[stage], free_at[partner]), last_start = std::max(last_backward_start[stage], last_backward_start[partner]);
    const double reduced = job.dp_overlap ? std::max(done, last_start + dp_s[stage]) : done + dp_s[stage];
    step.iteration_s = std::max(step.iteration_s, reduced + optimizer[stage]);
    idle += 1 - busy[stage] / pipeline_s;
  }
  step.bubble = idle / p;
  step.dp_allreduce_s = *std::max_element(dp_s.begin(), dp_s.end());
  step.tokens_per_s = job.global_batch * s / step.iteration_s;
  step.mfu = c.model_flop / (step.iteration_s * job.gpus() * gpu.peak_for(job.dtype));
  if (job.compute_efficiency) {
    TrainingJob modelled = job;
    modelled.compute_efficiency.reset();
    step.kernel_model_iteration_s = step_on(modelled, network).iteration_s;
  }
  return step;
}

}  // namespace

namespace {

// A candidate that does not fit on its GPUs, tried again offloading what the job offloads, as the framework
// that runs such a candidate would: an FSDP one DeepSpeed's way (ZeRO-3 Offload: the whole optimizer, its
// CPU-Adam; then, where the job offloads its weights, those too), a ZeRO-1 one Megatron-Core's way (its
// distributed optimizer offloaded, PyTorch's AdamW on the CPU: the job's share where it runs that, else the
// whole), since Megatron-Core runs every ZeRO-1 shape the search makes (TP, PP, virtual stages, CP). Whether it
// fits then, on the GPU and in host memory, and passes the checks. A job that offloads nothing keeps every
// candidate on the GPU.
bool offload_to_fit(TrainingJob& j, const TrainingJob& base) {
  if (!(base.optimizer_offload > 0)) return false;
  const bool fsdp = j.zero_stage() >= 3;
  j.cpu_adam = fsdp ? TrainingJob::CpuAdam::deepspeed : TrainingJob::CpuAdam::torch;
  j.optimizer_offload = !fsdp && base.cpu_adam == TrainingJob::CpuAdam::torch ? base.optimizer_offload : 1;
  j.offload_overlap = !fsdp && base.cpu_adam == TrainingJob::CpuAdam::torch && base.offload_overlap;
  const auto fits = [&] {
    try {
      check_training_job(j);
    } catch (const InputError&) {
      return false;
    }
    return !out_of_memory(j, count_training(j));
  };
  if (fits()) return true;
  if (!base.offload_parameters || !fsdp) return false;
  j.offload_parameters = true;
  return fits();
}

}  // namespace

TrainingSearch search_training(const TrainingJob& base, unsigned threads, const std::function<void(std::size_t done, std::size_t total)>& progress,
                               const SearchRanks& ranks) {
  const ClusterSpec& cs = base.cluster;
  const int gpus = cs.gpu_count(), per_node = cs.groups.front().node.gpus;
  const TransformerModel& m = base.model;
  // The gang's shapes: TP inside a node, CP 1, 2 or 4 where the sequence splits into 2 cp chunks (and the
  // attention is FlashAttention's), PP dividing the layers, DP the rest.
  struct Shape {
    int tp, cp, pp, dp;
    int first_stage_layers = 0, last_stage_layers = 0;
  };
  std::vector<Shape> shapes;
  for (int tp = 1; tp <= per_node; ++tp) {
    if (per_node % tp != 0 || m.heads % tp != 0 || m.kv() % tp != 0 || gpus % tp != 0) continue;
    for (int cp : {1, 2, 4}) {
      if (cp > 1 && (m.seq_len % (2 * cp) != 0 || base.attention != AttentionKernel::flash)) continue;
      for (int pp = 1; pp <= m.layers && tp * cp * pp <= gpus; ++pp) {
        if (gpus % (tp * cp * pp) != 0) continue;
        if (m.layers % pp == 0) {
          shapes.push_back({tp, cp, pp, gpus / (tp * cp * pp)});
          continue;
        }
        // Where pp does not divide the layers: the middle stages a layer more than an even share, the end
        // stages what is left (the first the larger half; the last also runs the head), each at least one.
        const int middle = m.layers / pp + 1, rest = m.layers - (pp - 2) * middle;
        if (pp > 2 && rest >= 2) shapes.push_back({tp, cp, pp, gpus / (tp * cp * pp), (rest + 1) / 2, rest / 2});
      }
    }
  }
  // A mixture of experts' EP: powers of two dividing its experts and the DP x CP ranks they come from.
  std::vector<int> eps{1};
  for (int ep = 2; m.moe() && ep <= m.experts; ep *= 2) {
    if (m.experts % ep == 0) eps.push_back(ep);
  }
  // Virtual stages: 1, 2 and 4, and the job's own (Megatron-MoE-ModelZoo's Mixtral 8x22B runs 7: a layer a chunk).
  std::vector<int> vps{1, 2, 4};
  if (std::find(vps.begin(), vps.end(), base.vp) == vps.end()) vps.push_back(base.vp);
  std::vector<TrainingJob> candidates;
  const auto add = [&](const Shape& shape, int ep, int etp) {
    const auto& [tp, cp, pp, dp, first_layers, last_layers] = shape;
    for (int micro : {1, 2, 4, 8}) {
      if (base.global_batch % (dp * micro) != 0) continue;
      for (int vp : vps) {
        // The job's own layout of virtual stages where the shape is its own; elsewhere interleaved 1F1B where
        // chunks of whole layers and groups of pp micro-batches allow it.
        const bool own_layout = !base.virtual_stage_layers.empty() && pp == base.pp && vp == base.vp;
        if (vp > 1 && (pp == 1 || (!own_layout && (first_layers > 0 || m.layers % (pp * vp) != 0 || (base.global_batch / (dp * micro)) % pp != 0)))) continue;
        // Selective as the job runs it: Megatron-Core's modules, or torchtitan's by op (its only kind in its runtime).
        const bool by_op = base.recompute == Recompute::selective_op || base.runtime == TrainingJob::Runtime::torchtitan;
        const Recompute selective = by_op ? Recompute::selective_op : Recompute::selective;
        for (Recompute recompute : {Recompute::none, selective, Recompute::full}) {
          for (int zero : {1, 3}) {
            if (zero == 3 && (pp > 1 || dp == 1 || cp > 1 || m.moe())) continue;
            // torchtitan's runtime as it ran then: FSDP2 over the data-parallel ranks, with or without TP.
            if (base.runtime == TrainingJob::Runtime::torchtitan && (zero != 3 || pp > 1)) continue;
            TrainingJob j = base;
            j.optimizer_offload = 0;  // on the GPU unless it does not fit there (offload_to_fit)
            j.offload_overlap = false;
            j.offload_parameters = false;
            j.ep_overlap = false;
            j.tp = tp;
            j.cp = cp;
            j.ep = ep;
            j.etp = etp;
            j.pp = pp;
            j.vp = vp;
            j.virtual_stage_layers = own_layout ? base.virtual_stage_layers : std::vector<int>{};
            // The job's micro-batch groups where they obey Megatron-Core's rule for this candidate's micro-batches.
            const int count = base.global_batch / (dp * micro), group = base.microbatch_group, rest = group > 0 ? count % group : 0;
            j.microbatch_group = own_layout && group >= pp && group <= count && (rest == 0 || rest >= pp) ? group : 0;
            j.first_stage_layers = own_layout ? 0 : first_layers;
            j.last_stage_layers = own_layout ? 0 : last_layers;
            j.dp = dp;
            j.micro_batch = micro;
            j.recompute = recompute;
            j.recompute_layers = recompute == Recompute::full ? base.recompute_layers : 0;
            j.zero = zero;
            j.distributed_optimizer = true;
            j.sequence_parallel = tp > 1;
            j.fused_rms_norm = base.fused_rms_norm && tp == 1;  // torchtitan's Triton norm does not run under TP: its composite one does
            j.schedule = PipelineSchedule::one_f_one_b;
            candidates.push_back(j);
            // Combined 1F1B too, where there are all-to-alls to hide and the schedule allows it (not where
            // recomputation re-runs the whole mixture or layer, as Megatron-Core refuses).
            if (ep > 1 && (pp == 1 || vp > 1) && !j.recomputes(kRecomputeMoe) && recompute != Recompute::full) {
              j.ep_overlap = true;
              candidates.push_back(j);
            }
            // DualPipe, where its pairs have all-to-alls to hide and the stages pair up (its own rules checked).
            if (ep > 1 && vp == 1 && pp >= 2 && pp % 2 == 0) {
              j.ep_overlap = false;
              j.schedule = PipelineSchedule::dualpipe;
              j.recompute_layers = 0;  // DualPipe recomputes every layer or none
              candidates.push_back(std::move(j));
            }
          }
        }
      }
    }
  };
  for (const Shape& shape : shapes) {
    if (!m.moe()) {
      add(shape, 1, 0);
      continue;
    }
    // Expert TP as TP (Megatron-Core's default) or 1 (each expert whole on a GPU, an EP group on fewer nodes).
    for (int ep : eps) {
      for (int etp : shape.tp == 1 ? std::vector<int>{1} : std::vector<int>{shape.tp, 1}) {
        if ((shape.tp * shape.cp * shape.dp) % (etp * ep) != 0) continue;
        add(shape, ep, etp);
      }
    }
  }
  // Each candidate on its own: refused by the checks (a step too large to play), out of memory, or timed.
  enum class Outcome : std::uint8_t { refused, does_not_fit, timed };
  std::vector<Outcome> outcomes(candidates.size(), Outcome::refused);
  std::vector<TrainingStep> steps(candidates.size());
  const unsigned rank_count = std::max(1u, ranks.ranks);
  std::vector<std::size_t> mine;  // this rank's share of the candidates
  for (std::size_t i = ranks.rank; i < candidates.size(); i += rank_count) mine.push_back(i);
  // Networks lent to the threads: a candidate takes one (or builds one) and gives it back.
  std::mutex lent;
  std::vector<std::unique_ptr<JobNetwork>> idle;
  detail::parallel_for(mine.size(), threads, [&](std::size_t k) {
    const std::size_t i = mine[k];
    try {
      check_training_job(candidates[i]);
    } catch (const InputError&) {
      return;
    }
    if (out_of_memory(candidates[i], count_training(candidates[i])) && !offload_to_fit(candidates[i], base)) {
      outcomes[i] = Outcome::does_not_fit;
      return;
    }
    std::unique_ptr<JobNetwork> network;
    {
      const std::lock_guard lock(lent);
      if (!idle.empty()) {
        network = std::move(idle.back());
        idle.pop_back();
      }
    }
    if (!network) network = std::make_unique<JobNetwork>(cs);
    steps[i] = step_on(candidates[i], *network);
    outcomes[i] = Outcome::timed;
    const std::lock_guard lock(lent);
    idle.push_back(std::move(network));
  }, progress);
  std::vector<double> iteration_s(candidates.size(), 0.0);
  for (std::size_t i : mine) iteration_s[i] = steps[i].iteration_s;
  if (rank_count > 1) {
    // Each rank's outcomes, their times as exact doubles, and the offload a candidate took to fit.
    FLEETSIM_CHECK(static_cast<bool>(ranks.exchange), "a search over several ranks needs an exchange");
    Json local = Json::array();
    for (std::size_t i : mine) {
      const TrainingJob& j = candidates[i];
      local.push_back({i, static_cast<int>(outcomes[i]), iteration_s[i], j.optimizer_offload, j.cpu_adam == TrainingJob::CpuAdam::deepspeed, j.offload_overlap,
                       j.offload_parameters});
    }
    for (const std::string& text : ranks.exchange(local.dump())) {
      for (const Json& e : Json::parse(text)) {
        const auto i = e.at(0).get<std::size_t>();
        outcomes.at(i) = static_cast<Outcome>(e.at(1).get<int>());
        iteration_s[i] = e.at(2).get<double>();
        TrainingJob& j = candidates[i];
        j.optimizer_offload = e.at(3).get<double>();
        j.cpu_adam = e.at(4).get<bool>() ? TrainingJob::CpuAdam::deepspeed : TrainingJob::CpuAdam::torch;
        j.offload_overlap = e.at(5).get<bool>();
        j.offload_parameters = e.at(6).get<bool>();
      }
    }
  }
  TrainingSearch result;
  result.searched = candidates.size();
  std::vector<std::size_t> timed;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (outcomes[i] == Outcome::does_not_fit) ++result.out_of_memory;
    if (outcomes[i] != Outcome::timed) continue;
    if (candidates[i].optimizer_offload > 0) ++result.offloaded;
    timed.push_back(i);
  }
  // Fastest first; equal times in the order searched, so that the ranking is the same on any threads and ranks.
  std::stable_sort(timed.begin(), timed.end(), [&](std::size_t a, std::size_t b) { return iteration_s[a] < iteration_s[b]; });
  result.ranked_total = timed.size();
  const std::size_t kept = rank_count > 1 ? std::min(ranks.keep, timed.size()) : timed.size();
  const auto is_mine = [&](std::size_t i) { return i % rank_count == ranks.rank; };
  std::unique_ptr<JobNetwork> network;
  for (std::size_t k = 0; k < kept; ++k) {
    const std::size_t i = timed[k];
    if (!is_mine(i)) {  // timed by another rank: again here, as that rank timed it
      if (!network) network = std::make_unique<JobNetwork>(cs);
      steps[i] = step_on(candidates[i], *network);
    }
    result.ranked.push_back({std::move(candidates[i]), std::move(steps[i])});
  }
  return result;
}

std::string memory_advice(const TrainingJob& job) {
  return std::string("expected more ") + (job.model.moe() ? "TP, PP or EP" : "TP or PP") + ", recomputation, a distributed optimizer or fewer sequences a micro-batch";
}

std::optional<OutOfMemory> out_of_memory(const TrainingJob& job, const TrainingCounts& counts) {
  const Cluster cluster(job.cluster);
  for (int stage = 0; stage < job.pp; ++stage) {
    const double vram = cluster.gpu_type(gpu_at(job, 0, 0, stage)).vram_bytes;
    const double need = counts.stage_memory[static_cast<std::size_t>(stage)].total();
    if (need > vram) return OutOfMemory{stage, need, vram};
  }
  // An offloaded optimizer in host memory: each node's GPUs' share against the node's memory.
  if (job.optimizer_offload <= 0) return std::nullopt;
  const int stage_gpus = job.tp * job.cp * job.dp;
  std::optional<OutOfMemory> short_of_host;
  for_each_node(job, cluster, [&](NodeId node, int first, int end) {
    double need = 0;
    for (int r = first; r < end; ++r) need += counts.stage_memory[static_cast<std::size_t>(r / stage_gpus)].host;
    const double has = cluster.group(node).node.host_memory_bytes;
    if (!short_of_host && has > 0 && need > has) short_of_host = OutOfMemory{first / stage_gpus, need, has, true};
  });
  return short_of_host;
}

}  // namespace fleetsim

namespace fleetsim {

const TrainingIteration::OnGpu& TrainingIteration::on_gpu(const GpuType& gpu) const {
  const auto it = std::find_if(on.begin(), on.end(), [&](const OnGpu& o) { return o.gpu == gpu.id; });
  FLEETSIM_CHECK(it != on.end(), "a training iteration was not timed on this GPU type");
  return *it;
}

namespace {

// Visits each pipeline rank's layers, split as the job recomputes them (RecomputeSplit), with the share of each
// micro-batch's passes the rank runs (half on each of its two stages under DualPipe): an iteration's calls are the
// busiest rank's.
template <class Visit>
void each_pipeline_rank(const TrainingJob& job, Visit visit) {
  const VirtualStages stages(job);
  const std::vector<LayerMix> mixes = chunk_layers(job);
  const double share = stages.dual ? 0.5 : 1.0;
  for (int gpu = 0; gpu < job.pp; ++gpu) visit(stage_split(job, mixes, stages, gpu), share);
}

}  // namespace

int deepep_rail_node(const TrainingJob& job, const ClusterSpec& cluster) {
  if (!job.model.moe() || job.ep <= 1 || job.dispatcher != TrainingJob::Dispatcher::deepep || cluster.groups.empty()) return 0;
  const int node = cluster.groups.front().node.gpus;
  if (std::any_of(cluster.groups.begin(), cluster.groups.end(), [&](const NodeGroup& g) { return g.node.gpus != node; })) return 0;
  const int block = job.ep * job.expert_tp();
  return block > node && block % node == 0 && node % job.expert_tp() == 0 ? node : 0;
}

TrainingIteration training_iteration(const TrainingJob& job, const ClusterSpec& cluster) {
  const bool fsdp = job.zero_stage() >= 3 && job.dp > 1;
  FLEETSIM_CHECK(!job.offload_parameters, "a job inside a scenario offloads no parameters (its reader refuses it)");
  if (job.dtype == Dtype::fp8) {
    if (const auto missing = fp8_missing(cluster)) throw InputError({Problem{job.file, job.pointer + "/dtype", *missing}});
  }
  // Memory as train counts it, against the largest GPU of the cluster: the stage and what it lacks.
  const TrainingCounts counts = count_training(job);
  double vram = 0;
  for (const NodeGroup& g : cluster.groups) vram = std::max(vram, g.gpu.vram_bytes);
  for (std::size_t stage = 0; stage < counts.stage_memory.size(); ++stage) {
    const double need = counts.stage_memory[stage].total();
    if (need <= vram) continue;
    throw InputError({Problem{job.file, job.pointer + "/parallel",
                              "stage " + std::to_string(stage) + " needs " + format_quantity(need, Dimension::bytes) +
                                  " a GPU (weights, gradients, optimizer state, activations), " + format_quantity(need - vram, Dimension::bytes) +
                                  " more than the cluster's largest GPU (" + format_quantity(vram, Dimension::bytes) +
                                  "): " + memory_advice(job)}});
  }
  // An offloaded optimizer: a node full of the job's GPUs holds their share in host memory.
  double host = 0;
  for (const StageMemory& mem : counts.stage_memory) host = std::max(host, mem.host);
  if (host > 0 && std::none_of(cluster.groups.begin(), cluster.groups.end(), [&](const NodeGroup& g) {
        return g.node.host_memory_bytes <= 0 || host * std::min(g.node.gpus, job.gpus()) <= g.node.host_memory_bytes;
      })) {
    throw InputError({Problem{job.file, job.pointer + "/optimizer/offload",
                              "a node of the job's GPUs needs " + format_quantity(host, Dimension::bytes) +
                                  " of host memory a GPU for the offloaded optimizer state and gradients, more than any node of the cluster has for its GPUs: expected a smaller offload share (cpu_adam torch), or more DP to shard the optimizer"}});
  }
  TrainingIteration it;
  it.job = job.name;
  it.gpus = job.gpus();
  it.tp = job.tp;
  it.pp = job.pp;
  it.cp = job.cp;
  it.dp = job.dp;
  it.ep = job.ep;
  it.etp = job.expert_tp();
  it.model_flop = counts.model_flop;
  it.tokens = static_cast<double>(job.global_batch) * job.model.seq_len;
  for (const StageMemory& m : counts.stage_memory) it.memory_per_gpu_bytes = std::max(it.memory_per_gpu_bytes, m.total());
  // DualPipe: the GPUs holding the same two stages reduce their gradients together, at DP 1 too (step_on's groups).
  const bool dual = job.schedule == PipelineSchedule::dualpipe;
  if (job.dp * job.cp > 1 || dual) {
    // The dense gradients over dp x cp; a mixture's expert gradients apart, over their own holders (as step_on
    // plans them).
    it.expert_dp = job.expert_dp();
    it.dp_stage_bytes = counts.dp_allreduce_bytes;
    if (it.expert_dp > 1 || dual) it.expert_dp_stage_bytes = counts.expert_allreduce_bytes;
  }
  if (job.model.moe() && job.ep > 1) {
    // The exchanges step_on times, counted: per mixture layer and micro-batch a dispatch and a combine
    // forward, the backward's two combines (16-bit gradients), both again where the backward recomputes the
    // layer or the mixture. On the GPU with the most mixture layers (under DualPipe a GPU runs half of each
    // micro-batch's passes on each of its two stages). Layers partial recomputation leaves alone exchange four
    // times.
    const double again = exchanges_recomputed(job);
    // The busiest GPU by bytes: an fp8 dispatch moves fewer than a combine.
    const bool deepep = job.dispatcher == TrainingJob::Dispatcher::deepep;
    const double dispatch_bytes = deepep ? dispatch_wire_bytes(job) : 1, combine_bytes = deepep ? kActivationBytes : 1;
    double dispatches = 0, combines = 0;  // the busiest GPU's, a micro-batch
    each_pipeline_rank(job, [&](const RecomputeSplit& part, double share) {
      const double d = share * (part.as_job.mixture * (1 + again) + part.kept.mixture), c = share * (part.as_job.mixture * (3 + again) + part.kept.mixture * 3);
      if (d * dispatch_bytes + c * combine_bytes > dispatches * dispatch_bytes + combines * combine_bytes) {
        dispatches = d;
        combines = c;
      }
    });
    const double mb = job.micro_batches(), calls = mb * (dispatches + combines);
    if (!deepep) {
      // NCCL's all-to-alls over each EP group, alike (an fp8 dispatch needs DeepEP: check_training_job).
      it.ep_calls = calls;
      it.ep_bytes = calls * counts.ep_alltoall_bytes * job.expert_load();
      it.ep_group_size = job.ep;
      it.ep_group_stride = it.etp;
    } else if (const int node = deepep_rail_node(job, cluster); node > 0) {
      // DeepEP's network leg: among the GPUs of one local rank on the EP group's nodes, a copy of each token to
      // each node it reaches, as step_on times it (the other leg forwards them inside each node, on links only
      // the gang's GPUs use, and stays with the compute).
      const DeepEpReach reached = deepep_reach(job, job.ep * it.etp / node, job.ep);
      it.ep_calls = calls;
      it.ep_bytes = mb * reached.nodes * (dispatches * deepep_token_bytes(job, dispatch_bytes) + combines * deepep_token_bytes(job, combine_bytes));
      it.ep_group_size = job.ep * it.etp / node;
      it.ep_group_stride = node;
    }
  }
  // Groups of `size` consecutive GPUs lie inside nodes (on whole nodes, in Megatron's order) on some node type: there
  // step_on times their all-reduces inside a node, and only a placement that splits one puts them on the network
  // (Collectives::plays; on node types too small for a group the compute times them across nodes).
  const auto inside_nodes = [&](int size) {
    return std::any_of(cluster.groups.begin(), cluster.groups.end(), [&](const NodeGroup& g) { return g.node.gpus % size == 0; });
  };
  if ((job.tp > 1 && inside_nodes(job.tp)) || (it.etp > 1 && inside_nodes(it.etp))) {
    // TP's all-reduces as step_on times them (layer_all_reduces), on the GPU with the most, every micro-batch.
    const LayerAllReduces n = layer_all_reduces(job);
    LayerAllReduces::Count most;
    each_pipeline_rank(job, [&](const RecomputeSplit& part, double share) {
      const auto calls = [&](double LayerAllReduces::Count::*of) {
        return share * (part.as_job.mixture * (n.mixture_forward.*of + n.mixture_backward.*of) + part.as_job.dense * (n.dense_forward.*of + n.dense_backward.*of) +
                        2 * (part.kept.mixture * n.mixture_forward.*of + part.kept.dense * n.dense_forward.*of));
      };
      most.tp = std::max(most.tp, calls(&LayerAllReduces::Count::tp));
      most.etp = std::max(most.etp, calls(&LayerAllReduces::Count::etp));
    });
    if (job.tp > 1 && inside_nodes(job.tp)) {
      it.tp_calls = job.micro_batches() * most.tp;
      it.tp_bytes = it.tp_calls * counts.tp_allreduce_bytes;
    }
    if (it.etp > 1 && inside_nodes(it.etp)) {
      it.etp_calls = job.micro_batches() * most.etp;
      it.etp_bytes = it.etp_calls * expert_tp_all_reduce_bytes(job);
    }
  }
  if (job.pp > 1) {
    // Each micro-batch crosses each boundary between adjacent stages once a virtual stage, forward and back: a
    // send-recv pair a crossing, each TP rank sending its share (as step_on plans them). Interleaved, the
    // crossings from the last stage back to the first (vp - 1 a micro-batch) are left out.
    it.pp_calls = static_cast<double>(job.micro_batches()) * job.vp;
    it.pp_bytes = it.pp_calls * counts.pp_send_bytes / job.tp;
  }
  if (job.cp > 1) {
    // Each layer of a GPU's chunks (the GPU with the most, multi-token prediction's included), each micro-batch:
    // a ring pass of its keys and values forward and two backward (them again, and their gradients back), one
    // more where the backward recomputes the forward, as step_on times them: each pass cp - 1 steps of every
    // rank sending its block to the next, a ring all-gather of cp blocks.
    const double passes = job.recompute == Recompute::full ? 4.0 : 3.0;
    double layer_passes = 0;
    each_pipeline_rank(job, [&](const RecomputeSplit& part, double share) {
      layer_passes = std::max(layer_passes, share * (passes * part.as_job.total() + 3.0 * part.kept.total()));
    });
    it.cp_calls = job.micro_batches() * layer_passes;
    it.cp_bytes = it.cp_calls * job.cp * counts.cp_send_bytes;
  }
  if (fsdp) {
    // FSDP / ZeRO-3 (pp 1, no experts: check_training_job): every layer's weights gathered before its
    // forward and again before its backward, its gradients reduce-scattered after: on a ring, two
    // all-gathers of the 16-bit weights and a reduce-scatter of the g-byte gradients move (n - 1) / n of
    // (4 + g) bytes a parameter a rank, where an all-reduce of the gradients moves 2 (n - 1) / n of g:
    // its bytes times (4 + g) / 2g (1.5 in bf16, 1 in fp32), in three calls a layer.
    const double g = dtype_bytes(job.reduce_dtype);
    for (double& bytes : it.dp_stage_bytes) bytes *= (4 + g) / (2 * g);
    it.dp_calls = 3 * job.model.layers;
  }
  for (double bytes : it.dp_stage_bytes) it.dp_bytes = std::max(it.dp_bytes, bytes);
  for (double bytes : it.expert_dp_stage_bytes) it.expert_dp_bytes = std::max(it.expert_dp_bytes, bytes);
  for (const NodeGroup& g : cluster.groups) {
    if (std::any_of(it.on.begin(), it.on.end(), [&](const TrainingIteration::OnGpu& o) { return o.gpu == g.gpu.id; })) continue;
    // The job alone on enough nodes of this type under one switch: its compute does not depend on where
    // the policy puts it; its DP reduction, which does, is left to the scenario's network.
    TrainingJob alone = job;
    alone.cluster = ClusterSpec{};
    NodeGroup nodes = g;
    nodes.count = (job.gpus() + g.node.gpus - 1) / g.node.gpus;
    alone.cluster.groups.push_back(nodes);
    // FSDP's compute is timed without its gathers (as ZeRO-2, whose optimizer step is as sharded): they
    // are the collective the scenario's network carries, beside the forward and backward passes.
    TrainingJob compute_only = alone;
    if (fsdp) {
      compute_only.zero = 2;
      compute_only.fsdp_gathers_elsewhere = true;
    }
    const TrainingStep step = simulate_training_step(compute_only);
    double compute_s = 0;  // the last stage to finish its passes and its optimizer step
    for (std::size_t stage = 0; stage < step.stage_end_s.size(); ++stage) compute_s = std::max(compute_s, step.stage_end_s[stage] + step.stage_optimizer_s[stage]);
    // Without DP x CP (or DualPipe's pairs) there is no reduction on the shared network, but experts split over
    // fewer GPUs than TP still reduce theirs among their holders inside the gang: timed alone, with the compute.
    if (job.dp * job.cp == 1 && !dual) compute_s += step.dp_allreduce_s;
    const double alone_s = fsdp ? simulate_training_step(alone).iteration_s : step.iteration_s;
    it.on.push_back({.gpu = g.gpu.id, .compute_s = compute_s, .alone_s = alone_s, .peak_flops = g.gpu.peak_for(job.dtype)});
    // FSDP's gathers run beside every pass; a reduction with dp_overlap beside the last backward.
    if (it.dp_overlap == 0 && (fsdp || job.dp_overlap)) it.dp_overlap = std::min(1.0, ((fsdp ? step.forward_s : 0) + step.backward_s) / compute_s);
  }
  return it;
}

void plan_checkpoint(TrainingIteration& it, const TrainingJob& job, const ClusterSpec& cluster, const TrainingCheckpoint& checkpoint) {
  if (checkpoint.every <= 0) return;
  FLEETSIM_CHECK(checkpoint.write_Bps > 0, "a checkpoint without a write rate");
  // Every parameter once: its bf16 weight (as Megatron-Core's model state holds it) and its optimizer state
  // (the fp32 main copy and Adam's two moments), spread evenly over the job's GPUs.
  const double bytes = count_training(job).parameters * (2 + optimizer_bytes(job));
  it.checkpoint_every = checkpoint.every;
  it.checkpoint_bytes_per_gpu = bytes / it.gpus;
  for (TrainingIteration::OnGpu& on : it.on) {
    const auto g = std::find_if(cluster.groups.begin(), cluster.groups.end(), [&](const NodeGroup& n) { return n.gpu.id == on.gpu; });
    FLEETSIM_CHECK(g != cluster.groups.end(), "a training iteration timed on a GPU type the cluster lacks");
    const double on_node = std::min(g->node.gpus, it.gpus);  // a node's GPUs of the job write through it together
    const double write_s = it.checkpoint_bytes_per_gpu * on_node / checkpoint.write_Bps;
    on.checkpoint_load_s = write_s;
    if (!checkpoint.async) {
      on.checkpoint_s = write_s;
      continue;
    }
    // Each GPU copies its slice over its host link, the node's GPUs at once under its host memory's bandwidth;
    // the write behind the next `every` iterations holds the next save up only where it is longer.
    double copy_s = g->host_link.bandwidth_Bps > 0 ? it.checkpoint_bytes_per_gpu / g->host_link.bandwidth_Bps : 0;
    if (g->node.host_memory_bandwidth_Bps > 0) copy_s = std::max(copy_s, it.checkpoint_bytes_per_gpu * on_node / g->node.host_memory_bandwidth_Bps);
    on.checkpoint_s = copy_s + std::max(0.0, write_s - checkpoint.every * on.alone_s);
  }
}

}  // namespace fleetsim
