// One training iteration of a GPT-style transformer under tensor (TP), pipeline (PP) and data (DP)
// parallelism, built from the model's dimensions:
//   - FLOP per layer and token from the standard count (Narayanan et al., SC21): forward
//     2 (4h^2 + 2hf) + 4sh per token, backward twice the forward, recomputation adding forward work;
//     logits 2hV per token forward;
//   - memory per GPU: 16 bytes per parameter for mixed-precision Adam (2 weights, 2 gradients, 12
//     fp32 master weights and moments; the 12 divided by DP with a distributed optimizer) and
//     activations per layer from Korthikanti et al. (MLSys 2023), times the micro-batches a stage
//     holds (all m under GPipe, p - stage under 1F1B);
//   - communication: TP all-reduces of b s h activations (2 per layer forward, 2 backward, 2 more
//     when the whole layer is recomputed), PP sends of b s h between stages (split over the TP
//     ranks), and the DP all-reduce of every GPU's gradients.
// Compute is timed kernel by kernel (fleetsim/kernel_model.hpp) from the layer as Megatron-LM runs it:
// per layer the fused QKV, attention-output and MLP GEMMs split over the TP ranks (each backward GEMM
// twice: data and weight gradients), FlashAttention's forward and backward (or, unfused, the batched
// GEMMs and softmax of Megatron's core attention), and the memory-bound LayerNorms, bias-GeLU and
// bias-dropout-add; the embedding on the first stage, the logits and cross-entropy on the last;
// recomputation re-runs its share of the forward in the backward pass; the optimizer step after the
// gradients are reduced. A given `compute_efficiency` replaces all that with FLOP / (peak x efficiency).
// The pipeline schedule (GPipe or 1F1B) is then played out event by event: each stage runs its
// forward and backward passes in schedule order, each waiting for its input from the neighbouring
// stage, so the bubble comes out of the simulation rather than from a formula. Collective and
// transfer times come from fleetsim's topology and collective model on the given cluster.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/scenario.hpp"

namespace fleetsim {

// none; Megatron-Core's selective (the modules below) or full (every layer whole); or selective_op, torchtitan's
// selective recomputation by op (activation_checkpoint mode "selective", selective_ac_option "op",
// torchtitan/parallelisms/parallelize_llama.py at 1ea476e9): each layer keeps the outputs of its matrix products
// but every second one, of attention (SDPA) and of TP's reduce-scatters, and re-runs the rest. In a Llama layer
// (wq, wk, wv, wo, w1, w3, w2 in that order) it re-runs wk, wo and w3 with the norms, the residual add and the
// SwiGLU around them.
enum class Recompute : std::uint8_t { none, selective, full, selective_op };
// "none", "selective", "full" or "selective_op", as the job file names them.
std::string recompute_name(Recompute recompute);
// What selective recomputation re-runs, as Megatron-Core's --recompute-modules names it (a set of bits).
// core_attn: the attention core (the default, Korthikanti et al.'s selective recomputation); layernorm: the
// norms whose output a separate module reads (latent attention's input norm, a mixture's pre-MLP norm; TE
// fuses the others into the next linear, which keeps its input); mla_up_proj: latent attention's query and
// key-value up-projections with their latent norms (the down-projections' outputs kept); moe_act: the
// experts' activation (SwiGLU), its input kept; mlp: a dense layer's whole MLP; moe: a mixture's whole layer,
// dispatch and combine included; shared_experts: the shared expert's MLP.
enum RecomputeModule : unsigned {
  kRecomputeCoreAttention = 1u << 0,
  kRecomputeLayerNorm = 1u << 1,
  kRecomputeLatentUpProjection = 1u << 2,
  kRecomputeExpertActivation = 1u << 3,
  kRecomputeMlp = 1u << 4,
  kRecomputeMoe = 1u << 5,
  kRecomputeSharedExperts = 1u << 6,
};
// The modules' names, in bit order, as the job file and Megatron-Core spell them.
const std::vector<std::string>& recompute_module_names();
// DualPipe: DeepSeek-V3's bidirectional schedule (deepseek-ai/DualPipe): each GPU holds two stages, one of the
// pipeline fed from the first GPU and one of the same model fed from the last, the forward of one chunk and the
// backward of another overlapped in pairs, and weight gradients deferred into the bubbles.
enum class PipelineSchedule : std::uint8_t { gpipe, one_f_one_b, dualpipe };
// "gpipe", "1f1b" or "dualpipe", as the job file names them.
std::string schedule_name(PipelineSchedule schedule);
enum class AttentionKernel : std::uint8_t { flash, unfused };

struct TransformerModel {
  int layers = 0, hidden = 0, heads = 0, ffn_hidden = 0, vocab = 0, seq_len = 0;  // ffn_hidden 0: 4 x hidden
  int kv_heads = 0;     // grouped-query attention: heads sharing each K and V head's (0: as many as heads)
  int head_dim = 0;     // an attention head's width where it is not hidden / heads (Qwen3: 128 at 32 heads of 2048); 0: hidden / heads
  bool gated = false;   // a gated MLP (SwiGLU): gate and up projections to f, down from f
  // Llama's layout (models/architectures.json): rotary positions (no position table), an LM head of its
  // own (untied), no biases, RMSNorm (a weight only). Otherwise GPT's: learned positions, the word
  // embedding reused for the logits, biases, LayerNorm.
  bool llama_layout = false;
  // Biases on the q, k and v projections (Qwen2's), in Llama's layout otherwise: left out of the counts (a vector
  // add each), but the projections run as addmm, not mm (what torchtitan's recomputation by op counts).
  bool qkv_bias = false;
  // A mixture of experts (Mixtral's, Megatron-Core's MoE layer): every layer's MLP is `experts` MLPs of
  // ffn() each (gated as `gated` says), a router sending each token to top_k of them, and, where
  // shared_ffn is above 0, a shared expert of that width every token passes through. 0 experts: dense.
  int experts = 0, top_k = 0, shared_ffn = 0;
  // A mixture of experts whose first `dense_layers` layers have a dense MLP of dense_ffn instead (DeepSeek's
  // first_k_dense_replace).
  int dense_layers = 0, dense_ffn = 0;
  // Multi-token prediction (DeepSeek-V3's D sequential modules, Megatron-Core's --mtp-num-layers): each module
  // on the last pipeline stage norms the previous depth's hidden states and the embedding of the token
  // further ahead, projects the two (2h to h), runs one transformer layer (a mixture of experts where the
  // model's layers are) and the shared output head, with a loss of its own. 0: none.
  int mtp_layers = 0;
  // Multi-head latent attention (DeepSeek-V2/V3, as Megatron-Core's MLA runs it): queries through a q_rank
  // latent, keys and values up-projected per head from one kv_rank latent (plus a shared rotary key), heads
  // of qk() for the scores and v for the values; the down-projections held whole on every TP rank. None:
  // multi-head or grouped-query attention as the fields above say.
  std::optional<LatentAttention> latent;
  std::string architecture;  // the catalog's name, when the model came from there
  int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  int kv() const { return kv_heads > 0 ? kv_heads : heads; }
  bool moe() const { return experts > 0; }
  // Whether layer `layer` (from 0) is a mixture of experts; the dense MLP's width of the others.
  bool moe_layer(int layer) const { return moe() && layer >= dense_layers; }
  int dense_mlp_width() const { return moe() ? dense_ffn : ffn(); }
  double head_size() const { return head_dim > 0 ? head_dim : static_cast<double>(hidden) / heads; }
  double attention_width() const { return heads * head_size(); }  // the queries', the output projection's input (hidden where head_dim is 0)
  double qkv_width() const;          // the QKV projection's output: heads x head_dim + 2 x kv x head_dim
  // What one query reads a key: the scores' and the values' head widths summed over the heads (2 a d; MLA a (qk + v)).
  double score_width() const;
  double attention_parameters() const;  // the projections (biases too in GPT's layout), not the norms
  double expert_parameters() const;  // one layer's routed experts (0 for a dense model)
  // GPT: attention 4h^2 + 4h, MLP 2hf + f + h, two layer norms 4h; MoE: every expert, the router. Without an
  // argument, a typical layer's: a mixture's where the model is one.
  double layer_parameters(bool mixture) const;
  double layer_parameters() const { return layer_parameters(moe()); }
  double parameters() const;         // layers, embeddings (and an untied head), final norm
  double mtp_parameters() const;     // the multi-token prediction modules' own: a layer, the projection, three norms each
  double active_parameters() const;  // what one token passes through: top_k of the experts
};

struct TrainingJob {
  std::string name;
  std::string file;
  std::string pointer;  // where in `file` the job is ("" for a job file of its own)
  ClusterSpec cluster;  // none for a job inside a scenario, which runs on the scenario's cluster
  TransformerModel model;
  int tp = 1, pp = 1, dp = 1;
  // Virtual pipeline stages per GPU (interleaved 1F1B, Megatron-LM's virtual pipeline): each stage's
  // layers split into vp chunks, GPU d holding chunks d, d + pp, d + 2 pp, ...; 1: plain 1F1B.
  int vp = 1;
  // Interleaved 1F1B runs the micro-batches in groups of this many through each chunk in turn (Megatron-Core's
  // --microbatch-group-size-per-virtual-pipeline-stage; 0: pp, its default). The last group takes what is left.
  int microbatch_group = 0;
  int group() const { return microbatch_group > 0 ? microbatch_group : pp; }
  // Layers of the first and last pipeline stages where they differ from the others' (Megatron-Core's
  // decoder_first/last_pipeline_num_layers: DeepSeek-V3's 61 layers on 16 stages); 0: as the others. The
  // stages not given split the rest evenly.
  int first_stage_layers = 0, last_stage_layers = 0;
  // The layers of each of the pp x vp virtual stages in model order (virtual stage k: chunk k / pp on GPU stage
  // k % pp), as Megatron-Core's --pipeline-model-parallel-layout places its transformer layers: uneven chunks,
  // interleaved or not; the embedding on the first, the multi-token prediction modules and the head on the last.
  // Empty: as first_stage_layers, last_stage_layers and vp say.
  std::vector<int> virtual_stage_layers;
  // The layers on each pipeline stage, first to last (pp entries; every layer once, in order). Virtual stages
  // (vp above 1) split each stage's evenly unless virtual_stage_layers places them.
  std::vector<int> stage_layers() const;
  // Context parallelism (Megatron-Core's, ring attention as Transformer Engine's p2p CP runs it): each
  // sequence split over cp GPUs in 2 cp load-balanced chunks; every layer's attention passes the keys and
  // values around the cp ranks in cp - 1 steps, each overlapping one block of attention; the gradients
  // reduced over DP x CP.
  int cp = 1;
  // Expert parallelism as Megatron-Core's parallel folding runs it: the TP x CP x DP GPUs of a stage regrouped
  // for the MoE layers as expert TP (etp, fastest) x EP x expert DP; each layer's experts split over ep GPUs
  // and each expert's matrices over etp; tokens sent to their experts' GPUs and back by all-to-alls
  // (dispatch and combine). etp 0: as tp (Megatron-Core's default).
  int ep = 1, etp = 0;
  int expert_tp() const { return etp > 0 ? etp : tp; }
  // Tokens the busiest expert GPU receives over the mean (1: a router balanced by its auxiliary loss), and
  // a capacity factor that caps it, dropping the excess (0: dropless, Megatron-Core's default).
  double moe_imbalance = 1, capacity_factor = 0;
  double expert_load() const { return capacity_factor > 0 ? std::min(moe_imbalance, capacity_factor) : moe_imbalance; }
  // How tokens reach their experts' GPUs (Megatron-Core's token dispatcher): a flat all-to-all over the EP
  // group, a copy an expert (NCCL's, the alltoall dispatcher), or DeepEP's kernels (the flex dispatcher):
  // a copy a GPU, and where the group spans nodes a copy crosses the network once a node it reaches, to
  // the GPU of the same local rank there, which forwards it over NVLink to its experts' GPUs; the two legs
  // pipelined, so the slower one sets the time.
  enum class Dispatcher { alltoall, deepep };
  Dispatcher dispatcher = Dispatcher::alltoall;
  // Node-limited routing (DeepSeek-V3's M; Megatron-Core's group-limited top-k with a group a node): a
  // token's experts on at most this many of the EP group's nodes (0, unset: any). With DeepEP it bounds the
  // network copies; a flat all-to-all sends a copy an expert wherever they are.
  int max_nodes = 0;
  // The dispatch's elements on the wire (fp8 with DeepEP: a byte each and a 4-byte scale a 128, as
  // DeepSeek-V3 dispatches); the combine stays 16-bit.
  Dtype dispatch_dtype = Dtype::bf16;
  // The SMs DeepEP's kernels hold while they move tokens, taken from the compute they overlap (Megatron-Core's
  // moe_flex_dispatcher_num_sms, DeepEP's historical default 20; DeepSeek-V3's report, section 3.2.2: 20 SMs
  // suffice). Under ep_overlap and DualPipe the paired compute runs on the rest while the exchanges last.
  int dispatcher_sms = 20;
  // Each steady-state backward of 1F1B runs together with the forward that follows it, layer by layer, each
  // one's dispatch and combine all-to-alls hidden behind the other's compute (Megatron-Core's combined 1F1B,
  // --overlap-moe-expert-parallel-comm; DeepSeek's DualPipe overlaps likewise): the pair takes its passes'
  // time less the shorter of its compute and its all-to-alls (with DeepEP, whose kernels hold dispatcher_sms,
  // max(A, C + f A) for its compute C and all-to-alls A), and a stage holds one micro-batch more.
  bool ep_overlap = false;
  bool sequence_parallel = false;
  bool distributed_optimizer = false;  // optimizer state sharded over DP (ZeRO-1)
  // Sharding over DP beyond the optimizer: 2 also the gradients (reduce-scattered, ZeRO-2); 3 also the
  // weights, gathered layer by layer as FSDP and ZeRO-3 do (0 or 1: as distributed_optimizer says).
  int zero = 0;
  int zero_stage() const { return std::max(zero, distributed_optimizer ? 1 : 0); }
  // ZeRO-3's parameter offload (DeepSpeed's offload_param to the CPU, ZeRO-Infinity): each GPU's shard of the
  // 16-bit weights lives in host memory and is copied up its host link before the layer's all-gather, for
  // each forward and backward of each micro-batch, the next layer's beside the compute; the CPU optimizer
  // writes the stepped shard there.
  bool offload_parameters = false;
  // The dtype gradients are reduced over DP in, and kept in after (bf16, the default, or fp32): FSDP2's
  // MixedPrecisionPolicy reduce_dtype (torchtitan sets fp32: its sharded gradients fp32, the reduce-scatter twice
  // the bytes), Megatron-Core's --grad-reduce-in-fp32 (its gradient buffer fp32, the all-reduce twice the bytes).
  Dtype reduce_dtype = Dtype::bf16;
  // The DP gradient reduction overlaps the last micro-batch's backward pass (Megatron-LM's
  // --overlap-grad-reduce; off by default there, as here).
  bool dp_overlap = false;
  int global_batch = 1, micro_batch = 1;  // sequences
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  Recompute recompute = Recompute::none;
  // Under full recomputation, only the first this many layers of each model chunk (a stage, or a virtual stage
  // interleaved) recompute whole; the others keep every activation (Megatron-Core's --recompute-method block
  // --recompute-num-layers; torchtitan's selective recomputation by layer, every n-th block whole, recomputes
  // as many). 0: every layer.
  int recompute_layers = 0;
  // Adam's two moments as the optimizer keeps them (Megatron-Core's precision-aware optimizer, --exp-avg-dtype
  // and --exp-avg-sq-dtype; DeepSeek-V3 keeps them in bf16): fp32 (the default), bf16 or fp16. Master weights stay fp32.
  Dtype optimizer_moments = Dtype::fp32;
  // CPU offload of the optimizer: this share of each GPU's optimizer shard (its fp32 master weights and moments)
  // lives in host memory and is stepped by the node's CPUs: its fp32 gradients copied down, Adam on the CPU, its
  // 16-bit weights copied back up; the GPU steps the rest meanwhile. As Megatron-Core runs it
  // (--optimizer-cpu-offload, --optimizer-offload-fraction; PyTorch's fused AdamW on the CPU, the gradients kept
  // on the GPU until the step) or as DeepSpeed's ZeRO-Offload does (offload_optimizer; its AVX CPU-Adam, the
  // gradients leaving the GPU bucket by bucket, so that it holds one reduce bucket of them). 0: none.
  double optimizer_offload = 0;
  enum class CpuAdam : std::uint8_t { torch, deepspeed };
  CpuAdam cpu_adam = CpuAdam::torch;
  // The copies down and up pipelined with the CPU's steps, tensor by tensor (Megatron-Core's
  // --overlap-cpu-optimizer-d2h-h2d); otherwise one after another.
  bool offload_overlap = false;
  // The SwiGLU's input kept for the backward as fp8, cast back there (Megatron-Core's
  // activation_func_fp8_input_store; DeepSeek-V3 caches it so): half its bytes, a cast each way.
  bool activation_fp8_input_store = false;
  unsigned recompute_modules = kRecomputeCoreAttention;  // under selective recomputation (RecomputeModule bits)
  // Whether selective recomputation re-runs `module` (never under none or full).
  bool recomputes(RecomputeModule module) const { return recompute == Recompute::selective && (recompute_modules & module) != 0; }
  Dtype dtype = Dtype::bf16;
  // How fp8 GEMMs are scaled (Megatron-Core's --fp8-recipe): one scale a tensor (tensorwise, the default), or
  // blockwise as DeepSeek-V3 trains (1 x 128 activation tiles, 128 x 128 weight blocks): slower GEMMs, scales
  // written with every cast.
  enum class Fp8Recipe : std::uint8_t { tensorwise, blockwise };
  Fp8Recipe fp8_recipe = Fp8Recipe::tensorwise;
  AttentionKernel attention = AttentionKernel::flash;
  // How a layer's small operations run: Megatron-Core's fused kernels (fused QKV and gate-and-up GEMMs, fused
  // SwiGLU, norm and bias-dropout-add), or torchtitan's eager PyTorch (models/runtimes.json "training": separate
  // projections, rotary embeddings in fp32, K and V repeated for grouped-query attention, FSDP2's copy-out), with
  // its composite RMSNorm or its fused Triton one (`fused_rms_norm`, its norm_type "fused_rmsnorm").
  enum class Runtime : std::uint8_t { megatron, torchtitan };
  Runtime runtime = Runtime::megatron;
  bool fused_rms_norm = false;
  // Set where a scenario times the job's compute with zero lowered to 2, its FSDP gathers carried by the
  // scenario's network: the compute-stream copies of each gather still run.
  bool fsdp_gathers_elsewhere = false;
  // Achieved / peak FLOP rate for all the compute, in place of the kernel model (none: the kernel model).
  std::optional<double> compute_efficiency;

  int gpus() const { return tp * cp * pp * dp; }
  // GPUs holding the same share of the same experts, which reduce their gradients together.
  int expert_dp() const { return tp * cp * dp / (expert_tp() * ep); }
  double local_tokens() const { return static_cast<double>(micro_batch) * model.seq_len / cp; }  // one micro-batch on one GPU
  int micro_batches() const { return global_batch / (dp * micro_batch); }
};

// "torch" or "deepspeed", as the job file names a CPU Adam; and the rate a node's CPUs step parameters at with it
// (models/kernels.json, host.cpu_adam).
std::string cpu_adam_name(TrainingJob::CpuAdam adam);
double cpu_adam_params_per_s(TrainingJob::CpuAdam adam, const KernelConstants& k);

// The settings `train --sweep` varies, as it names them, each with the job's field it sets.
struct SweepSetting {
  std::string_view key;
  int TrainingJob::*field;
};
const std::vector<SweepSetting>& sweep_settings();
// The one named `key`; nullptr for another name.
const SweepSetting* sweep_setting(std::string_view key);

TrainingJob load_training_job(const std::string& path);
TrainingJob parse_training_job(std::string_view json_text, const std::string& file_name);
// Checks a job edited in code (a sweep): the same rules the loader applies. Throws InputError. A job
// without a cluster (inside a scenario) is not checked against one.
void check_training_job(const TrainingJob& job);

struct StageMemory {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0;  // bytes per GPU
  double host = 0;  // host memory per GPU: its offloaded optimizer state, its fp32 gradients there, its offloaded weight shard
  double total() const { return weights + gradients + optimizer + activations; }
};

// The closed-form parts of one iteration.
struct TrainingCounts {
  double model_flop = 0;     // forward and backward of every sequence (what MFU counts)
  double hardware_flop = 0;  // plus recomputation
  double parameters = 0;
  double active_parameters = 0;            // what one token passes through (MoE: top_k experts; dense: all)
  std::vector<double> stage_parameters;    // per GPU of each stage (its 1/tp share)
  std::vector<double> stage_expert_parameters;  // of those, the routed experts' (1/etp of 1/ep of them)
  std::vector<double> stage_fp8_weights;        // fp8: of those, the layers' (held again as fp8, twice); 0 otherwise
  std::vector<StageMemory> stage_memory;   // per GPU of each stage
  std::vector<double> stage_offloaded_parameters;  // per GPU of each stage: those whose optimizer runs on the CPU
  double activation_bytes_per_layer = 0;   // one micro-batch, one GPU (a mixture's layer where the model is one)
  double dense_layer_activation_bytes = 0; // the same of a mixture's dense first layers (0 where it has none)
  double kept_layer_activation_bytes = 0;  // under partial full recomputation, a layer it leaves alone (0 otherwise)
  double tp_allreduce_bytes = 0;           // one TP all-reduce (b s h activations)
  int tp_allreduces_per_layer = 0;         // per micro-batch, forward and backward (a dense layer's)
  double pp_send_bytes = 0;                // one stage boundary, one micro-batch, one direction (all TP ranks)
  double cp_send_bytes = 0;                // one ring step of CP attention's forward: the keys and values one GPU passes on
  std::vector<double> dp_allreduce_bytes;  // per GPU of each stage: over DP x CP (MoE: the dense weights')
  std::vector<double> expert_allreduce_bytes;  // MoE: the experts' gradients per GPU of each stage, over its expert DP group
  // MoE: one dispatch all-to-all of one layer and micro-batch, per GPU: its tokens (1/tp of them under
  // sequence parallelism) times top_k, 16-bit, nccl-tests' size; the combine sends as much back. Past it,
  // the expert TP group gathers what its GPUs received (and scatters it back after the experts).
  double ep_alltoall_bytes = 0;
  // ZeRO-3 / FSDP: one layer's 16-bit weights gathered on every GPU of the DP group before its forward
  // and its backward, and its gradients reduce-scattered after (the whole layer, nccl-tests' size).
  double zero_gather_bytes_per_layer = 0;
};
TrainingCounts count_training(const TrainingJob& job);

// Kernel time of one micro-batch on one stage, by kind of kernel, TP communication not included.
struct PassTime {
  double gemm_s = 0, attention_s = 0, memory_s = 0;
  double weight_gradient_s = 0;  // of gemm_s, the backward's weight-gradient GEMMs (what DualPipe defers)
  double total() const { return gemm_s + attention_s + memory_s; }
};

// One pass of one micro-batch on one stage, as simulated.
struct PipelineOp {
  int stage = 0, micro_batch = 0;
  int chunk = 0;  // the model chunk on that stage's GPUs (interleaved 1F1B; DualPipe: the direction), 0 otherwise
  bool backward = false;
  bool weight = false;  // DualPipe: the deferred weight gradients of that backward (backward is true too)
  double start_s = 0, end_s = 0;
};

struct TrainingStep {
  double iteration_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;            // model FLOP / (iteration x GPUs x peak)
  double bubble = 0;         // idle fraction of the pipeline before the DP all-reduce, averaged over stages
  double forward_s = 0, backward_s = 0;  // one micro-batch on the slowest stage, TP communication included
  double tp_comm_s = 0;      // TP all-reduce time per micro-batch forward + backward, slowest stage
  double ep_alltoall_s = 0;  // MoE: one dispatch all-to-all, the busiest GPU's share
  double ep_combine_s = 0;   // MoE: one combine (the dispatch's copies back, 16-bit)
  double ep_comm_s = 0;      // MoE: the all-to-alls per micro-batch forward + backward, slowest stage
  double cp_send_s = 0;      // one CP ring step's send (every GPU passing its keys and values at once)
  double cp_comm_s = 0;      // what CP's ring sends add beyond the attention they overlap, per micro-batch forward + backward, slowest stage
  double pp_send_s = 0;      // one boundary transfer
  double dp_allreduce_s = 0; // the slowest stage's gradient all-reduce (ZeRO-3: what its reduce-scatters add)
  double zero_gather_s = 0;  // ZeRO-3: one layer's all-gather (and as long its reduce-scatter), alone
  double zero_fetch_s = 0;   // ZeRO-3 with offload_parameters: one layer's shard copied up from host memory, every GPU of a node at once
  double optimizer_s = 0;    // the optimizer step after it, slowest stage
  // CPU offload, the stage whose offloaded step takes longest: its GPUs' gradients copied down, the node's CPU
  // steps, the weights copied up (each alone; optimizer_s holds them together, beside the GPU's share).
  double offload_down_s = 0, offload_cpu_s = 0, offload_up_s = 0;
  PassTime forward_kernels, backward_kernels;  // the slowest stage's (zero under compute_efficiency)
  double kernel_model_iteration_s = 0;  // under a given compute_efficiency: the iteration without it
  std::vector<double> stage_end_s;  // each stage's last backward
  std::vector<double> stage_optimizer_s;  // each stage's optimizer step
  std::vector<PipelineOp> ops;      // in the order they ran
  TrainingCounts counts;
};

// Places the job on the first tp x cp x pp x dp GPUs of its cluster, ranks ordered TP fastest, then CP,
// then DP, then PP (Megatron's order: a TP group inside a node), and plays one iteration.
TrainingStep simulate_training_step(const TrainingJob& job);

// The first stage whose memory per GPU (weights, gradients, optimizer state, activations) exceeds its
// GPU's VRAM, with what it needs and what the GPU has; none when every stage fits.
struct OutOfMemory {
  int stage = 0;
  double needed_bytes = 0, vram_bytes = 0;
  // Host memory instead: a node holding GPUs of `stage` needs more for what its GPUs offload than the node has (needed and vram_bytes are then the node's need and its host memory).
  bool host = false;
};
std::optional<OutOfMemory> out_of_memory(const TrainingJob& job, const TrainingCounts& counts);
// What would make `job` fit, for the message that refuses it ("expected more TP or PP, ...").
std::string memory_advice(const TrainingJob& job);

// A search over the ways to run a job on all its cluster's GPUs at its global batch: TP (a divisor of a
// node's GPUs, of the heads and of the KV heads; sequence parallel when above 1), CP 1, 2 or 4 (where 2 cp
// divides the sequence), PP (a divisor of the layers) with 1, 2 or 4 virtual stages (interleaved 1F1B where the layers and micro-batches allow), DP
// (the rest), for a mixture of experts EP (powers of two dividing the experts and DP x CP), the micro-batch
// (1, 2, 4, 8 where DP x micro divides the batch), recomputation (none, selective, full) and sharding
// (ZeRO-1, and ZeRO-3 / FSDP for dense models without PP). Candidates keep the optimizer and the weights on
// the GPU; for a job that offloads, one that does not fit so is tried again offloading what the job does.
// What does not fit in memory is counted, not ranked; the rest are ranked by iteration time (the same tokens each).
struct TrainingCandidate {
  TrainingJob job;
  TrainingStep step;
};
struct TrainingSearch {
  std::vector<TrainingCandidate> ranked;  // fastest first (over several ranks, the first SearchRanks::keep of them)
  std::size_t searched = 0, out_of_memory = 0;
  std::size_t ranked_total = 0;  // configurations that fit and were timed
  std::size_t offloaded = 0;  // of those, the ones that fit only by offloading (a job that offloads searches so)
};
// Several processes (MPI ranks) share a search: this one times the configurations whose index is `rank` modulo
// `ranks`, and `exchange` hands every process's text to every process, in rank order (an all-gather). Each then
// ranks them all as one process would (the same order, the same times), and holds the steps of the first `keep`,
// timed again where another rank timed them.
struct SearchRanks {
  unsigned rank = 0, ranks = 1;
  std::function<std::vector<std::string>(const std::string& mine)> exchange = {};
  std::size_t keep = 10;
};
// `progress`, where given, hears of each configuration done (done, total), from the thread that did it, one at a time.
TrainingSearch search_training(const TrainingJob& base, unsigned threads, const std::function<void(std::size_t done, std::size_t total)>& progress = {},
                               const SearchRanks& ranks = {});

// One iteration of a job inside a scenario (docs/training.md#inside-a-scenario), split where the shared
// network takes over: what its gang computes (the pipeline with its TP all-reduces and stage sends, then
// the optimizer step), per GPU type of the scenario's cluster, and the data-parallel gradient reduction,
// which runs as the task's collective on the scenario's network beside every other flow. The compute is
// timed by simulate_training_step on that GPU type's nodes alone (one switch, Megatron's rank order).
struct TrainingIteration {
  std::string job;                 // the job's name
  int gpus = 0;                    // tp x cp x pp x dp
  int tp = 1, pp = 1, cp = 1, dp = 1;
  int ep = 1;                      // a mixture of experts' expert parallelism (inside the gang)
  int etp = 1;                     // its expert TP: an EP group's ranks are etp apart
  double model_flop = 0;           // forward and backward of every sequence (what MFU counts)
  double tokens = 0;               // trained per iteration
  double memory_per_gpu_bytes = 0; // the largest stage's
  double dp_bytes = 0;             // the gradient all-reduce of one GPU (the largest stage's), nccl-tests' size
  // A mixture's expert gradients: reduced apart, over each expert-DP group (the expert_dp GPUs holding the same
  // share of the same experts, etp x ep apart in a stage; under DualPipe twice that, both stages' holders), the
  // largest stage's; 0 where no group holds two.
  double expert_dp_bytes = 0;
  // The two reductions' bytes of one GPU of each pipeline rank (its stage's weights: the first holds the
  // embedding, the last the head; under DualPipe a rank's two stages), as step_on reduces each stage's;
  // dp_bytes and expert_dp_bytes are their largest.
  std::vector<double> dp_stage_bytes, expert_dp_stage_bytes;
  int expert_dp = 1;
  double dp_overlap = 0;           // the share of the compute the reduction may run beside (dp_overlap: the last backward; FSDP: every pass)
  double dp_calls = 1;             // FSDP: its gathers and reduce-scatters, each a call of the reduction (3 a layer)
  // A mixture of experts' dispatch and combine all-to-alls of one GPU an iteration: the GPU with the most mixture
  // layers, every micro-batch; nccl-tests' size summed over the calls; in groups of `ep_group_size` ranks
  // `ep_group_stride` apart in the gang's order: NCCL's over each EP group (ep ranks, expert TP apart), or
  // DeepEP's network leg (deepep_rail_node: the GPUs of one local rank on an EP group's nodes, a node apart).
  // 0 where the job has none on the network (no experts, EP 1, or DeepEP where deepep_rail_node is 0).
  double ep_bytes = 0, ep_calls = 0;
  int ep_group_size = 0, ep_group_stride = 1;
  // TP's all-reduces of one GPU an iteration, each as large as attention's (attention's, a dense MLP's, a shared
  // expert's), and a mixture's over its expert TP group: the GPU with the most, every micro-batch, as the
  // training model times them inside the compute; nccl-tests' size summed over the calls. On the shared network
  // only where a placement splits a group across nodes (CollectiveSpec::split_groups_only). 0 without TP (or
  // expert TP), and where a group fits no node type whole (the compute then times it across nodes).
  double tp_bytes = 0, tp_calls = 0, etp_bytes = 0, etp_calls = 0;
  // The pipeline's stage sends of one GPU an iteration (its activations forward and their gradients back, each
  // TP rank its share, every micro-batch and virtual stage), as send-recv pairs of adjacent stages; 0 without PP.
  double pp_bytes = 0, pp_calls = 0;
  // Context parallelism's ring passes of one GPU an iteration (each layer's keys and values passed round its CP
  // group forward, and round again with their gradients backward, every micro-batch), as ring all-gathers of
  // the CP group; 0 without CP.
  double cp_bytes = 0, cp_calls = 0;
  // The job's own checkpoint, where its scenario entry keeps one (TrainingCheckpoint): saved after every
  // `checkpoint_every` iterations, `checkpoint_bytes_per_gpu` from each GPU; 0 for none.
  int checkpoint_every = 0;
  double checkpoint_bytes_per_gpu = 0;
  // An elastic job's DP degrees, ascending, the last its dp (TrainingElastic); empty for a job of one degree.
  // This iteration is timed at the largest. What an iteration placed on other GPUs than the one before it pays first.
  std::vector<int> elastic_dp;
  double elastic_restart_s = 0;
  struct OnGpu {
    std::string gpu;               // GpuType::id
    double compute_s = 0;          // pipeline and optimizer step
    double alone_s = 0;            // the whole iteration alone, its reduction on one switch
    double peak_flops = 0;         // the GPU's peak at the job's dtype
    double checkpoint_s = 0;       // what saving a checkpoint holds the iteration up (0 without one)
    double checkpoint_load_s = 0;  // what reading it back costs a restarted iteration
  };
  std::vector<OnGpu> on;           // one per GPU type of the cluster
  const OnGpu& on_gpu(const GpuType& gpu) const;
};
// The GPUs a node holds where a DeepEP job's exchanges cross the network as a leg of their own: every node of
// `cluster` holds as many, the job's EP blocks (ep x expert TP GPUs in the gang's order) fill more than one
// whole node, and its expert TP divides a node (Megatron's rank order then puts an EP group's GPUs of one local
// rank a node apart). 0 otherwise (no DeepEP, EP inside a node, nodes of different sizes, blocks that split
// nodes, or an expert TP that does not divide a node): its exchanges are timed with its compute, alone.
int deepep_rail_node(const TrainingJob& job, const ClusterSpec& cluster);
// Times `job` on every GPU type of `cluster`. Throws InputError where the job cannot run as given: a stage
// larger than every GPU. FSDP / ZeRO-3's gathers and reduce-scatters are its reduction on the network.
TrainingIteration training_iteration(const TrainingJob& job, const ClusterSpec& cluster);

// A training job's own checkpoint inside a scenario (docs/training.md#checkpoints): saved after every `every`
// iterations, as Megatron-Core's distributed checkpointing saves it fully parallel (each GPU a distinct
// slice of the weights in bf16 and the optimizer state: no copy written twice), to storage that a node
// writes at `write_Bps` (its GPUs together; read back at the same rate). Synchronous, the iteration waits
// for the write; `async` (Megatron-Core's --async-save, torchtitan's async_mode), only for the copy into
// host memory, the write going on behind the next iterations (a save still writing when the next is due
// holds that one up for the rest).
struct TrainingCheckpoint {
  int every = 0;  // 0: none
  double write_Bps = 0;
  bool async = false;
};
// An elastic training job inside a scenario (docs/training.md#elastic-jobs): each iteration runs at the largest DP
// degree from `min_dp` to the job's dp that the GPUs free for it hold (and its global batch divides into), as
// torchrun's elastic agent restarts a job's workers at a new world size; an iteration placed on other GPUs than
// the one before it first pays `restart_s` (the workers' restart and their state read back).
struct TrainingElastic {
  int min_dp = 0;  // 0: not elastic
  double restart_s = 0;
};

// Fills `it`'s checkpoint figures for `job` on each GPU type of `cluster` (the first node group of the type).
void plan_checkpoint(TrainingIteration& it, const TrainingJob& job, const ClusterSpec& cluster, const TrainingCheckpoint& checkpoint);

}  // namespace fleetsim
