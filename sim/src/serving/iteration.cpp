// One replica's memory at start-up and the time of one engine iteration (see fleetsim/serving.hpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "fleetsim/cluster.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/error.hpp"
#include "fleetsim/kernel_model.hpp"
#include "fleetsim/serving.hpp"
#include "fleetsim/topology.hpp"
#include "serving_model.hpp"

namespace fleetsim {

ModelShape ModelShape::of(const Architecture& a, int tp) {
  ModelShape s;
  s.layers = a.number("layers", 0);
  s.hidden = a.number("hidden", 0);
  s.heads = a.number("heads", 0);
  s.kv_heads = a.number("kv_heads", s.heads);
  s.ffn = a.number("ffn", 0);
  s.vocab = a.number("vocab", 0);
  s.gated = a.number("gated", 0) != 0;
  s.experts = a.number("experts", 0);
  s.top_k = a.number("experts_per_token", 1);
  s.shared_ffn = a.number("shared_ffn", 0);
  s.head_dim = a.number("head_dim", s.hidden / s.heads);  // Qwen3's heads are wider than h / heads
  s.dense_layers = a.number("dense_layers", 0);
  s.dense_ffn = a.number("dense_ffn", 0);
  s.latent = LatentAttention::of(a);
  s.tp = tp;
  s.heads_per_gpu = s.heads / tp;
  s.kv_heads_per_gpu = std::max(1.0, s.kv_heads / tp);  // replicated where TP exceeds the KV heads
  return s;
}

double ModelShape::attention_parameters() const {
  if (latent) return latent->parameters(hidden, heads);
  return hidden * (heads + 2 * kv_heads) * head_dim + heads * head_dim * hidden;
}

double ModelShape::mlp_parameters(bool dense) const {
  const double matrices = gated ? 3 : 2;
  if (dense) return matrices * hidden * (dense_ffn > 0 ? dense_ffn : ffn);
  return matrices * hidden * (ffn * std::max(1.0, experts) + shared_ffn);
}

double ModelShape::routed_expert_parameters() const {
  return experts > 0 ? (layers - dense_layers) * experts * (gated ? 3 : 2) * hidden * ffn : 0;
}

ModelShape::Weights ModelShape::stage_weights(int first, int count, bool embedding, bool head) const {
  const double n = count, dense = std::clamp(dense_layers - first, 0.0, n), mixed = n - dense;
  Weights w;
  // The router of a mixture of experts is no linear weight here: left 16-bit, as AWQ and GPTQ leave it.
  w.linear = n * attention_parameters() + dense * mlp_parameters(true) + mixed * mlp_parameters(false);
  w.all = n * (attention_parameters() + 2 * hidden) + dense * mlp_parameters(true) + mixed * (mlp_parameters(false) + hidden * experts) +
          (embedding ? vocab * hidden : 0) + (head ? vocab * hidden + hidden : 0);  // untied embedding and LM head
  w.replicated = latent ? n * latent->replicated_parameters(hidden) : 0;
  return w;
}

ModelShape::Weights ModelShape::weights() const { return stage_weights(0, static_cast<int>(layers), true, true); }

std::vector<int> stage_layers(int layers, int pp) {
  std::vector<int> per(static_cast<std::size_t>(pp), layers / pp);
  for (int i = 2; i < layers % pp + 2; ++i) ++per[static_cast<std::size_t>(pp - i)];
  return per;
}

namespace {

// What is left of a GPU for the KV cache once `weights_bytes` of weights are loaded, into `c`: the
// engine's profiled activations and reserve, by how the engine sizes its cache.
void memory_after_weights(const ServingDeployment& d, const ModelShape& m, double weights_bytes, KvCapacity& c) {
  const GpuType& gpu = d.cluster.groups.front().gpu;
  c.weights_per_gpu_bytes = weights_bytes;
  // The engine's profiling forward pass at max_num_batched_tokens: the widest activations of a layer
  // (the gated MLP's input and output, bf16) beside the residual stream, and the fp32 logits of
  // max_num_seqs rows. An estimate of what vLLM's profile run measures (docs/serving.md).
  const double tokens = d.engine.max_num_batched_tokens;
  const double widest_mlp = std::max(m.dense_ffn, m.ffn * (m.experts > 0 ? m.top_k : 1.0) + m.shared_ffn);
  c.activation_bytes = tokens * (2 * m.hidden + 3 * widest_mlp / m.tp) * 2 +
                       static_cast<double>(d.engine.max_num_seqs) * m.vocab / m.tp * 4;
  c.reserved_bytes = d.engine.reserved_bytes;
  const double vram = gpu.vram_bytes, utilization = d.engine.gpu_memory_utilization;
  switch (d.engine.memory) {
    case EngineProfile::Memory::vllm: c.usable_bytes = vram * utilization - c.weights_per_gpu_bytes - c.activation_bytes - c.reserved_bytes; break;
    case EngineProfile::Memory::tensorrt_llm: c.usable_bytes = utilization * (vram - c.weights_per_gpu_bytes - c.activation_bytes - c.reserved_bytes); break;
    case EngineProfile::Memory::sglang: {
      // SGLang keeps a reserve for activations, CUDA graphs and NCCL outside its static pool of weights
      // and KV (server_args.py): 512 MB, 1.5 MB a token of the prefill chunk (2048 at least), 2 MB a
      // captured batch size, 1 GB per 8 TP ranks, and 10 GiB at least on GPUs above 60 GB. The captured
      // batch sizes by GPU memory and TP (below 4 / from 4): 8, 24/80, 32/160 below 20, 35, 60 GB; 256/512
      // below 160 GB; 512 above.
      const double mib = 1024.0 * 1024, gb = vram / 1e9;
      const double graphs = gb < 20 ? 8 : gb < 35 ? (d.tp < 4 ? 24 : 80) : gb < 60 ? (d.tp < 4 ? 32 : 160) : gb < 160 ? (d.tp < 4 ? 256 : 512) : 512;
      double reserve = (512 + 1.5 * std::max(tokens, 2048.0) + 2 * graphs + d.tp / 8.0 * 1024) * mib;
      if (gb > 60) reserve = std::max(reserve, 10 * 1024 * mib);
      const double fraction = d.utilization_set ? utilization : (vram - reserve) / vram;
      c.activation_bytes = 0;  // inside the reserve
      c.reserved_bytes = vram * (1 - fraction);
      c.usable_bytes = vram * fraction - c.weights_per_gpu_bytes;
      break;
    }
  }
}

}  // namespace

KvCapacity kv_capacity(const ServingDeployment& d) {
  const ModelShape m = ModelShape::of(d.model, d.dp_attention ? 1 : d.tp);
  const double linear_bytes = d.weight_storage_bytes > 0 ? d.weight_storage_bytes : dtype_bytes(d.weights);
  const auto bytes_of = [&](double all, double linear) {
    return d.weight_storage_bytes > 0 ? (all - linear) * dtype_bytes(d.weights) + linear * linear_bytes : all * dtype_bytes(d.weights);
  };
  // A GPU's share of weights: its TP rank's, and latent attention's down-projections whole on every rank;
  // with data-parallel attention every weight whole but the routed experts, 1/tp of them a GPU.
  const auto per_gpu = [&](double all, double linear, double replicated) {
    if (d.dp_attention) {
      const double spread = m.routed_expert_parameters() * (1 - 1.0 / d.tp);
      return bytes_of(all - spread, linear - spread);
    }
    return bytes_of(all, linear) / d.tp + replicated * linear_bytes * (1 - 1.0 / d.tp);
  };
  // Latent attention caches one latent a token a layer, whole on every TP rank (its heads share it: vLLM
  // keeps it so; SGLang's data-parallel attention is what avoids it).
  const auto kv_bytes_per_token = [&](double layers) {
    return m.latent ? layers * m.latent->cached() * dtype_bytes(d.kv_cache) : 2 * layers * m.kv_heads_per_gpu * m.head_dim * dtype_bytes(d.kv_cache);
  };
  const auto blocks_of = [&](KvCapacity& c) {
    const double block_bytes = c.kv_bytes_per_token * d.engine.block_size;
    c.blocks = c.usable_bytes > 0 ? static_cast<std::int64_t>(std::floor(c.usable_bytes / block_bytes)) : 0;
    c.tokens = c.blocks * d.engine.block_size;
  };
  // Each stage's GPUs hold its layers and their KV (without pipeline stages, one stage of every layer);
  // the fewest blocks bound the replica.
  KvCapacity c;
  const std::vector<int> layers = stage_layers(static_cast<int>(m.layers), d.pp);
  std::vector<double> stage_bytes;
  int first = 0;
  for (int s = 0; s < d.pp; ++s) {
    const int n = layers[static_cast<std::size_t>(s)];
    const ModelShape::Weights w = m.stage_weights(first, n, s == 0, s == d.pp - 1);
    KvCapacity stage;
    memory_after_weights(d, m, per_gpu(w.all, w.linear, w.replicated), stage);
    stage.kv_bytes_per_token = kv_bytes_per_token(n);
    stage.bound_stage = s;
    blocks_of(stage);
    if (s == 0 || stage.blocks < c.blocks) c = stage;
    stage_bytes.push_back(stage.kv_bytes_per_token);
    first += n;
  }
  c.stage_kv_bytes_per_token = std::move(stage_bytes);
  if (d.dp_attention) {  // each rank its own pool: the replica holds tp of them
    c.lane_blocks = c.blocks;
    c.blocks *= d.tp;
    c.tokens = c.blocks * d.engine.block_size;
  } else {
    c.lane_blocks = c.blocks / d.pp;
  }
  c.lane_tokens = c.lane_blocks * d.engine.block_size;
  return c;
}

struct IterationTimer::Impl {
  ModelShape m;
  KernelModel model;
  Dtype weights, kv;
  double stored;  // bytes a linear weight is read in (0: the dtype's)
  double host_s;
  int pp;
  // Data-parallel attention: the ranks (the replica's GPUs), each with its own tokens (0: attention split
  // over TP). The GPUs over which each mixture layer's routed experts are spread, each whole (0: every
  // expert split over TP).
  int ranks = 0, expert_ranks = 0;
  double imbalance = 1;  // the busiest expert GPU's tokens over the mean
  // The replica's GPUs, stage after stage (nodes filled in order), for the TP all-reduce and the stage sends.
  std::optional<Cluster> cluster;
  std::optional<Topology> topology;
  std::vector<GpuId> group;  // the first stage's TP group
  // Per token count (or, for the logits, per row count): -1 until first asked.
  std::vector<double> linear, allreduce, logits, stage_sends, alltoalls, expert_gemms;

  Impl(const ServingDeployment& d)
      : m(ModelShape::of(d.model, d.dp_attention ? 1 : d.tp)), model(d.cluster.groups.front().gpu), weights(d.weights), kv(d.kv_cache), stored(d.weight_storage_bytes),
        host_s(d.engine.iteration_host_s), pp(d.pp), ranks(d.dp_attention ? d.tp : 0), expert_ranks(d.experts_spread() ? d.tp : 0), imbalance(d.expert_imbalance) {
    if (d.tp > 1 || d.pp > 1) {
      ClusterSpec nodes = d.cluster;
      nodes.groups.resize(1);
      const int per_node = nodes.groups.front().node.gpus;
      nodes.groups.front().count = (d.tp * d.pp + per_node - 1) / per_node;
      cluster.emplace(nodes);
      topology.emplace(*cluster, nodes.fabric);
      for (int r = 0; r < d.tp; ++r) group.push_back(make_id<GpuId>(static_cast<std::uint32_t>(r)));
    }
  }

  double kernel(KernelClass cls, double rows, double n, double k, Dtype dtype) const {
    return model.estimate({.cls = cls, .m = rows, .n = n, .k = k}, dtype).time_s();
  }
  // A linear layer's GEMM: `rows` tokens through an n x k weight, read as the weights are stored; `batch`
  // such GEMMs in one grouped kernel (the experts a batch reaches, as vLLM's and SGLang's fused MoE kernels
  // run them: one launch a projection, not one an expert).
  double linear_gemm(double rows, double n, double k, double batch = 1) const {
    return model.estimate({.cls = KernelClass::gemm, .m = rows, .n = n, .k = k, .batch = batch, .weight_bytes = stored}, weights).time_s();
  }

  // Routed experts in one grouped GEMM a projection (vLLM's and SGLang's fused MoE kernels): `experts`
  // of them, each `rows` tokens through its `width`-wide slice, and the activation over `activation_rows`;
  // into `layer`.
  void add_grouped_experts(double rows, double width, double experts, double activation_rows, double& layer) const {
    const KernelClass activation = m.gated ? KernelClass::gated_activation : KernelClass::activation;
    layer += linear_gemm(rows, (m.gated ? 2 : 1) * width, m.hidden, experts) + linear_gemm(rows, m.hidden, width, experts);
    layer += kernel(activation, activation_rows, width, 0, kAct);
  }

  static double& slot(std::vector<double>& cache, std::int64_t at) {
    if (static_cast<std::size_t>(at) >= cache.size()) cache.resize(static_cast<std::size_t>(at) + 1, -1.0);
    return cache[static_cast<std::size_t>(at)];
  }

  // Every layer's linear and elementwise kernels at `t` tokens, with the embedding and the final norm.
  double linear_s(std::int64_t t) {
    double& cached = slot(linear, t);
    if (cached >= 0) return cached;
    const double T = static_cast<double>(t), h = m.hidden;
    const auto layer_s = [&](bool dense) {
      double layer = 2 * kernel(KernelClass::norm, T, h, 0, kAct) + 2 * kernel(KernelClass::add, T, h, 0, kAct);
      add_attention_linear(T, layer);
      add_mlp(T, dense, layer);
      return layer;
    };
    const double layers = m.dense_layers > 0 ? m.dense_layers * layer_s(true) + (m.layers - m.dense_layers) * layer_s(false) : m.layers * layer_s(false);
    cached = layers + kernel(KernelClass::embedding, T, h, 0, kAct) + kernel(KernelClass::norm, T, h, 0, kAct);
    return cached;
  }

  static constexpr Dtype kAct = Dtype::bf16;  // activations stay 16-bit beside fp8 weights

  // A layer's q, k, v and output projections and rotary embedding, into `layer`. Latent attention: the
  // queries' and the latent's down-projections (whole on every rank) and norms, the queries'
  // up-projection, the new tokens' keys and values from their latents (a decode step's absorbed
  // projections into and out of the latent move the same weights and FLOP), the output.
  void add_attention_linear(double T, double& layer) const {
    const double h = m.hidden, heads = m.heads_per_gpu;
    if (const std::optional<LatentAttention>& l = m.latent) {
      if (l->q_rank > 0) {
        layer += linear_gemm(T, l->q_rank, h) + kernel(KernelClass::norm, T, l->q_rank, 0, kAct);
        layer += linear_gemm(T, heads * l->qk(), l->q_rank);
      } else {
        layer += linear_gemm(T, heads * l->qk(), h);
      }
      layer += linear_gemm(T, l->cached(), h) + kernel(KernelClass::norm, T, l->kv_rank, 0, kAct);
      layer += kernel(KernelClass::rope, T, (heads + 1) * l->rope, 0, kAct);
      layer += linear_gemm(T, heads * (l->nope + l->v), l->kv_rank);
      layer += linear_gemm(T, h, heads * l->v);
      return;
    }
    const double hd = m.head_dim;
    layer += linear_gemm(T, (heads + 2 * m.kv_heads_per_gpu) * hd, h);
    layer += kernel(KernelClass::rope, T, (heads + m.kv_heads_per_gpu) * hd, 0, kAct);
    layer += linear_gemm(T, h, heads * hd);
  }

  // A layer's MLP, into `layer`: a dense one, or the router, each expert the batch reaches (its share of
  // the tokens; experts split over TP, or spread whole over the GPUs and timed apart: expert_s) and the
  // shared expert.
  void add_mlp(double T, bool dense, double& layer) const {
    const double h = m.hidden;
    const KernelClass activation = m.gated ? KernelClass::gated_activation : KernelClass::activation;
    if (m.experts > 0 && !dense) {
      layer += kernel(KernelClass::gemm, T, m.experts, h, weights);  // the router, on this rank's tokens
      if (expert_ranks == 0) {
        const double touched = experts_touched(m.experts, m.top_k, T), rows = T * m.top_k / touched;
        add_grouped_experts(rows, m.ffn / m.tp, touched, T * m.top_k, layer);
      }
      if (m.shared_ffn > 0) {  // a shared expert every token passes through, split over TP (whole on a data-parallel rank)
        const double fs = m.shared_ffn / m.tp;
        layer += linear_gemm(T, (m.gated ? 2 : 1) * fs, h) + linear_gemm(T, h, fs);
        layer += kernel(activation, T, fs, 0, kAct);
      }
      return;
    }
    const double f = (dense && m.dense_ffn > 0 ? m.dense_ffn : m.ffn) / m.tp;
    layer += linear_gemm(T, (m.gated ? 2 : 1) * f, h);
    layer += kernel(activation, T, f, 0, kAct);
    layer += linear_gemm(T, h, f);
  }

  // Two all-reduces of the layer's output a layer (after attention and after the MLP), bf16.
  double allreduce_s(std::int64_t t) {
    if (m.tp == 1) return 0;
    double& cached = slot(allreduce, t);
    if (cached >= 0) return cached;
    const double bytes = static_cast<double>(t) * m.hidden * 2;
    cached = 2 * m.layers * analytical_time_s(*topology, plan_collective(*cluster, *topology, CollectiveOp::all_reduce, CollectiveAlgo::automatic, group, bytes));
    return cached;
  }

  // A lane's batch passing from stage to stage: each stage's hidden states and residuals (bf16), which
  // vLLM splits over the TP ranks (each sends its 1/tp to the same rank of the next stage, at once over
  // their own links) and the next stage's ranks all-gather (send_tensor_dict with the TP group).
  double stage_send_s(std::int64_t t) {
    if (pp == 1) return 0;
    double& cached = slot(stage_sends, t);
    if (cached >= 0) return cached;
    const double bytes = 2 * static_cast<double>(t) * m.hidden * 2;
    const auto tp = static_cast<std::uint32_t>(m.tp);
    cached = 0;
    for (std::uint32_t s = 0; s + 1 < static_cast<std::uint32_t>(pp); ++s) {
      const std::vector<GpuId> pair{make_id<GpuId>(s * tp), make_id<GpuId>((s + 1) * tp)};
      cached += analytical_time_s(*topology, plan_collective(*cluster, *topology, CollectiveOp::send_recv, CollectiveAlgo::automatic, pair, bytes / tp));
      if (tp > 1) {
        std::vector<GpuId> next;
        for (std::uint32_t r = 0; r < tp; ++r) next.push_back(make_id<GpuId>((s + 1) * tp + r));
        cached += analytical_time_s(*topology, plan_collective(*cluster, *topology, CollectiveOp::all_gather, CollectiveAlgo::automatic, next, bytes));
      }
    }
    return cached;
  }

  // Experts spread whole over the GPUs: the routed experts of every mixture layer on this GPU (1/expert_ranks
  // of them) over the tokens that reach them, `all` (data-parallel attention: every rank's; beside TP, the
  // batch's, on every rank): the experts they reach here in one grouped GEMM a projection.
  double expert_s(std::int64_t all_tokens) {
    double& cached = slot(expert_gemms, all_tokens);
    if (cached >= 0) return cached;
    const double all = static_cast<double>(all_tokens), touched = experts_touched(m.experts, m.top_k, all);
    // This GPU's share of the experts reached, at least one: the ranks wait for the busiest GPU, whose
    // experts take `imbalance` times the mean tokens (an expert sees a token once at most).
    const double here = std::max(1.0, touched / expert_ranks), rows = std::min(all, imbalance * all * m.top_k / touched);
    double layer = 0;
    add_grouped_experts(rows, m.ffn, here, rows * here, layer);
    cached = (m.layers - m.dense_layers) * layer;
    return cached;
  }

  // Data-parallel attention: each mixture layer sends this rank's tokens, top_k copies each (bf16), to
  // the ranks holding their experts and takes their outputs back: two all-to-alls of T x top_k x hidden
  // a rank, over the replica's GPUs (DeepEP's and vLLM's all-to-all kernels); `imbalance` times that with
  // hot experts (the busiest GPU receives that much more, and the exchange waits for it).
  double alltoall_s(std::int64_t t) {
    if (ranks <= 1 || m.experts == 0) return 0;
    double& cached = slot(alltoalls, t);
    if (cached >= 0) return cached;
    const double bytes = imbalance * static_cast<double>(t) * m.top_k * m.hidden * 2;
    cached = 2 * (m.layers - m.dense_layers) * analytical_time_s(*topology, plan_collective(*cluster, *topology, CollectiveOp::all_to_all, CollectiveAlgo::automatic, group, bytes));
    return cached;
  }

  // The LM head on each sequence's last token (vocabulary split over the TP ranks).
  double logits_s(std::int64_t rows) {
    double& cached = slot(logits, rows);
    if (cached >= 0) return cached;
    cached = rows > 0 ? kernel(KernelClass::gemm, static_cast<double>(rows), m.vocab / m.tp, m.hidden, weights) : 0;
    return cached;
  }

  double attention_s(const IterationShape& s) const {
    if (m.latent) return latent_attention_s(s);
    const double groups = m.heads_per_gpu / m.kv_heads_per_gpu;
    double t = 0;
    for (const auto& [chunk, cached] : s.prefills) {
      const KernelCall call{.cls = KernelClass::attention, .m = static_cast<double>(chunk), .n = static_cast<double>(cached + chunk),
                            .k = m.head_dim, .batch = m.heads_per_gpu, .groups = groups, .causal = true};
      t += model.estimate(call, kv).time_s();
    }
    if (s.decodes > 0) {  // one query a sequence over its KV, the sequences' lengths averaged (the cost is linear in them)
      const KernelCall call{.cls = KernelClass::attention, .m = 1, .n = s.decode_context / static_cast<double>(s.decodes), .k = m.head_dim,
                            .batch = static_cast<double>(s.decodes) * m.heads_per_gpu, .groups = groups};
      t += model.estimate(call, kv).time_s();
    }
    return m.layers * t;
  }

  // Latent attention: a prompt's chunk as multi-head attention at the keys' (nope + rope) and values'
  // head dimensions, over keys and values up-projected from the latents of the tokens cached before it;
  // decodes absorbed, one multi-query attention over each sequence's cached latents, the heads of a GPU
  // sharing them (FlashMLA).
  double latent_attention_s(const IterationShape& s) const {
    const LatentAttention& l = *m.latent;
    const double heads = m.heads_per_gpu;
    double t = 0;
    for (const auto& [chunk, cached] : s.prefills) {
      if (cached > 0) t += linear_gemm(static_cast<double>(cached), heads * (l.nope + l.v), l.kv_rank);
      const KernelCall call{.cls = KernelClass::attention, .m = static_cast<double>(chunk), .n = static_cast<double>(cached + chunk), .k = l.qk(),
                            .batch = heads, .causal = true, .v = l.v};
      t += model.estimate(call, kv).time_s();
    }
    if (s.decodes > 0) {
      const KernelCall call{.cls = KernelClass::attention, .m = 1, .n = s.decode_context / static_cast<double>(s.decodes), .k = l.cached(),
                            .batch = static_cast<double>(s.decodes) * heads, .groups = heads, .v = l.kv_rank, .latent_kv = true};
      t += model.estimate(call, kv).time_s();
    }
    return m.layers * t;
  }
};

IterationTimer::IterationTimer(const ServingDeployment& d) : impl_(std::make_unique<Impl>(d)) {}
IterationTimer::~IterationTimer() = default;
IterationTimer::IterationTimer(IterationTimer&&) noexcept = default;

IterationTimer::Time IterationTimer::time(const IterationShape& shape) {
  std::int64_t tokens = shape.decodes;
  for (const auto& p : shape.prefills) tokens += p.first;
  Time t;
  if (tokens == 0) return t;
  t.linear_s = impl_->linear_s(tokens);
  if (impl_->expert_ranks > 0 && impl_->m.experts > 0) t.linear_s += impl_->expert_s(std::max(tokens, shape.replica_tokens));
  t.allreduce_s = impl_->allreduce_s(tokens);
  t.attention_s = impl_->attention_s(shape);
  t.logits_s = impl_->logits_s(shape.decodes + static_cast<std::int64_t>(shape.prefills.size()));
  t.host_s = impl_->host_s;
  t.stage_send_s = impl_->stage_send_s(tokens);
  t.expert_alltoall_s = impl_->alltoall_s(tokens);
  t.total_s = t.linear_s + t.allreduce_s + t.attention_s + t.logits_s + t.host_s + t.stage_send_s + t.expert_alltoall_s;
  return t;
}

}  // namespace fleetsim
