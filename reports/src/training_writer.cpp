#include <algorithm>
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "fleetsim/report.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {
namespace {

std::string bytes(double v) { return format_quantity(v, Dimension::bytes); }
std::string seconds(double v) { return format_quantity(v, Dimension::time); }

std::string count(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 1e9 ? "%.3g B" : "%.3g M", v >= 1e9 ? v / 1e9 : v / 1e6);
  return buf;
}

std::string schedule_text(const TrainingJob& j) {
  if (j.schedule == PipelineSchedule::dualpipe) return "dualpipe (a stage of each direction a GPU, forward and backward chunks overlapped in pairs)";
  return j.vp > 1 ? "interleaved 1f1b (" + std::to_string(j.vp) + " virtual stages a GPU)" : schedule_name(j.schedule);
}
// Selective recomputation's modules, as the job names them.
std::vector<std::string> recompute_modules(const TrainingJob& j) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < recompute_module_names().size(); ++i) {
    if ((j.recompute_modules >> i) & 1u) names.push_back(recompute_module_names()[i]);
  }
  return names;
}
// "full", or "selective (layernorm, mla_up_proj)" where the modules are not the default core_attn.
std::string recompute_text(const TrainingJob& j) {
  std::string text = recompute_name(j.recompute);
  if (j.recompute_layers > 0) return text + " (the first " + std::to_string(j.recompute_layers) + " layers of each model chunk; the others keep their activations)";
  if (j.recompute != Recompute::selective || j.recompute_modules == kRecomputeCoreAttention) return text;
  std::string list;
  for (const std::string& name : recompute_modules(j)) list += (list.empty() ? "" : ", ") + name;
  return text + " (" + list + ")";
}
const char* attention_name(AttentionKernel a) { return a == AttentionKernel::flash ? "FlashAttention" : "unfused"; }
// How the layer's small operations run, as the job file names it.
std::string training_runtime_name(const TrainingJob& job) {
  if (job.runtime == TrainingJob::Runtime::megatron) return "megatron";
  return job.fused_rms_norm ? "torchtitan, fused_rmsnorm" : "torchtitan, rmsnorm";
}

// How a mixture of experts' layers regroup the GPUs: EP, and expert TP where it is not TP.
std::string expert_shape(const TrainingJob& j) {
  return "EP " + std::to_string(j.ep) + (j.expert_tp() != j.tp ? ", expert TP " + std::to_string(j.expert_tp()) : std::string());
}

// " (3 + 14 x 4 + 2 layers)" where the end stages hold their own counts; "" where every stage holds as many.
std::string uneven_stages(const TrainingJob& j) {
  if (!j.virtual_stage_layers.empty()) {  // " (virtual stages of 1, 30 x 2, 0 layers)": runs of equal counts
    std::string text;
    const std::vector<int>& n = j.virtual_stage_layers;
    for (std::size_t k = 0; k < n.size();) {
      std::size_t run = 1;
      while (k + run < n.size() && n[k + run] == n[k]) ++run;
      text += (text.empty() ? "" : ", ") + (run > 1 ? std::to_string(run) + " x " : std::string()) + std::to_string(n[k]);
      k += run;
    }
    return " (virtual stages of " + text + " layers)";
  }
  if (j.first_stage_layers == 0 && j.last_stage_layers == 0) return {};
  const std::vector<int> layers = j.stage_layers();
  std::string text = " (" + std::to_string(layers.front());
  if (layers.size() > 2) text += " + " + std::to_string(layers.size() - 2) + " x " + std::to_string(layers[1]);
  return text + " + " + std::to_string(layers.back()) + " layers)";
}

// The most memory any stage needs on one GPU.
double largest_need(const TrainingCounts& c) {
  double peak = 0;
  for (const StageMemory& mem : c.stage_memory) peak = std::max(peak, mem.total());
  return peak;
}

}  // namespace

void write_training_text(std::ostream& out, const TrainingJob& job, const TrainingStep& step) {
  const TrainingCounts& c = step.counts;
  const TransformerModel& m = job.model;
  char line[512];
  // A head's width where it is not hidden / heads (Qwen3's 128 at 32 heads of a 2,048 hidden), and the KV heads under GQA.
  const std::string head = m.head_dim > 0 && m.head_dim * m.heads != m.hidden ? " of " + std::to_string(m.head_dim) : std::string();
  std::string kv = head + (m.kv() != m.heads ? " (" + std::to_string(m.kv()) + " KV)" : std::string());
  if (m.latent) {  // latent attention: its latents' ranks and the heads' widths
    const LatentAttention& la = *m.latent;
    kv = " of latent attention (q latent " + std::to_string(static_cast<int>(la.q_rank)) + ", kv latent " + std::to_string(static_cast<int>(la.kv_rank)) + ", heads of " + std::to_string(static_cast<int>(la.qk())) +
         " for scores and " + std::to_string(static_cast<int>(la.v)) + " for values)";
  }
  std::string mlp = m.gated ? ", SwiGLU MLP of " + std::to_string(m.ffn()) : std::string();
  if (m.moe()) {
    mlp = ", " + std::to_string(m.experts) + " experts of " + std::to_string(m.ffn()) + (m.gated ? " (SwiGLU)" : "") + ", top " + std::to_string(m.top_k) +
          (m.shared_ffn > 0 ? ", a shared expert of " + std::to_string(m.shared_ffn) : std::string()) +
          (m.dense_layers > 0 ? ", the first " + std::to_string(m.dense_layers) + " layers dense (MLP of " + std::to_string(m.dense_ffn) + ")" : std::string());
  }
  if (m.mtp_layers > 0) {
    std::snprintf(line, sizeof line, ", multi-token prediction: %d module%s of %.3g B on the last stage", m.mtp_layers, m.mtp_layers == 1 ? "" : "s", m.mtp_parameters() / m.mtp_layers / 1e9);
    mlp += line;
  }
  const std::string from = m.architecture.empty() ? std::string() : m.architecture + ": ";
  std::string active;
  if (m.moe()) {
    std::snprintf(line, sizeof line, " (%.3g B active a token)", c.active_parameters / 1e9);
    active = line;
  }
  std::snprintf(line, sizeof line, "%s: %.3g B parameters%s (%s%d layers, hidden %d, %d heads%s%s, vocab %d, sequence %d)\n", job.name.c_str(),
                c.parameters / 1e9, active.c_str(), from.c_str(), m.layers, m.hidden, m.heads, kv.c_str(), mlp.c_str(), m.vocab, m.seq_len);
  out << line;
  const char* sharding[] = {"", ", ZeRO-1 (optimizer sharded)", ", ZeRO-2 (optimizer and gradients sharded)", ", ZeRO-3 / FSDP (weights too)"};
  const std::string cp = job.cp > 1 ? " x CP " + std::to_string(job.cp) : "";
  const std::string ep = m.moe() ? " (" + expert_shape(job) + ")" : "";
  // Streamed, not formatted into `line`: a layout of virtual stages has no bound on its length.
  out << "  TP " << job.tp << cp << " x PP " << job.pp << uneven_stages(job) << " x DP " << job.dp << ep << " = " << job.gpus() << " GPUs; batch " << job.global_batch
      << " = " << job.micro_batches() << " micro-batches of " << job.micro_batch << " per replica; " << schedule_text(job) << ", recompute " << recompute_text(job)
      << (job.sequence_parallel ? ", sequence parallel" : "") << (job.dp_overlap ? ", DP overlapped" : "")
      << (job.ep_overlap ? ", expert all-to-alls overlapped (combined 1F1B)" : "") << sharding[job.zero_stage()]
      << (job.optimizer_moments != Dtype::fp32 ? ", Adam's moments in " + std::string(dtype_name(job.optimizer_moments)) : std::string())
      << (job.reduce_dtype != Dtype::bf16 ? ", gradients reduced in " + std::string(dtype_name(job.reduce_dtype)) : std::string())
      << (job.activation_fp8_input_store ? ", SwiGLU inputs kept in fp8" : "") << "\n";
  const GpuType gpu = Cluster(job.cluster).gpu_type(make_id<GpuId>(0));  // a copy: the Cluster is a temporary
  const std::string guess = KernelModel(gpu).guess();
  if (job.compute_efficiency) {
    std::snprintf(line, sizeof line, "  compute: FLOP at %.3g of the datasheet peak (compute_efficiency); the kernel model would give %s\n\n",
                  *job.compute_efficiency, seconds(step.kernel_model_iteration_s).c_str());
  } else {
    std::snprintf(line, sizeof line, "  compute: the kernel model (%s attention, %s%s)%s\n", attention_name(job.attention),
                  job.runtime == TrainingJob::Runtime::megatron ? "" : ("torchtitan's eager layer" + std::string(job.fused_rms_norm ? " with its fused RMSNorm" : "") + ", ").c_str(),
                  guess.empty() ? "constants measured for this GPU's architecture" : "constants a guess for this GPU, why below",
                  job.dtype != Dtype::fp8                                    ? ""
                  : job.fp8_recipe == TrainingJob::Fp8Recipe::blockwise ? "; fp8 layer GEMMs scaled by blocks (1x128 tiles, 128x128 weight blocks), their operands cast; attention, norms and logits in bf16"
                                                                            : "; fp8 layer GEMMs with per-tensor scaling, their operands cast; attention, norms and logits in bf16");
  }
  out << line;
  if (!job.compute_efficiency) out << (guess.empty() ? "" : "  borrowed: " + gpu.id + " (" + std::string(gpu_arch_name(gpu.arch)) + "): " + guess + "\n") << "\n";
  out << "iteration      " << seconds(step.iteration_s) << "\n";
  std::snprintf(line, sizeof line, "throughput     %.0f tokens/s\nMFU            %.1f%%\npipeline idle  %.1f%% (bubble, averaged over stages)\n",
                step.tokens_per_s, 100 * step.mfu, 100 * step.bubble);
  out << line;
  out << "FLOP           " << format_quantity(c.model_flop, Dimension::flop) << " model, " << format_quantity(c.hardware_flop, Dimension::flop)
      << " with recomputation\n";
  out << "micro-batch    forward " << seconds(step.forward_s) << ", backward " << seconds(step.backward_s) << " (slowest stage; TP all-reduces "
      << seconds(step.tp_comm_s) << (job.cp > 1 ? ", CP ring sends beyond the attention they overlap " + seconds(step.cp_comm_s) : std::string()) << ")\n";
  if (job.cp > 1) {
    out << "context        CP " << job.cp << ": " << format_number(job.local_tokens()) << " tokens a GPU; each layer passes keys and values around the ring in "
        << job.cp - 1 << " steps of " << seconds(step.cp_send_s) << " (" << bytes(c.cp_send_bytes) << "), twice as much back in the backward\n";
  }
  if (m.moe()) {
    const double load = job.expert_load();
    std::string balance = "balanced routing";
    if (load > 1) {
      char text[96];
      std::snprintf(text, sizeof text, "the busiest GPU receiving %.3gx the mean tokens%s", load, job.capacity_factor > 0 && job.moe_imbalance > load ? " (capped by the capacity factor)" : "");
      balance = text;
    }
    out << "experts        " << m.experts / job.ep << " a GPU (" << expert_shape(job) << "), " << balance << "; ";
    if (job.dispatcher == TrainingJob::Dispatcher::deepep && job.ep > 1) {
      out << "each layer's DeepEP dispatch " << seconds(step.ep_alltoall_s) << (job.dispatch_dtype == Dtype::fp8 ? " (fp8)" : "") << " and combine "
          << seconds(step.ep_combine_s) << (job.max_nodes > 0 ? ", a token's experts on at most " + std::to_string(job.max_nodes) + " nodes" : std::string()) << ", "
          << seconds(step.ep_comm_s) << " a micro-batch forward and backward"
          << (job.ep_overlap || job.schedule == PipelineSchedule::dualpipe ? ", its kernels on " + std::to_string(job.dispatcher_sms) + " SMs beside the overlapped compute" : std::string())
          << "\n";
    } else if (job.ep > 1) {
      out << "each layer's dispatch and combine all-to-alls " << seconds(step.ep_alltoall_s) << " each (" << bytes(c.ep_alltoall_bytes)
          << " a GPU), " << seconds(step.ep_comm_s) << " a micro-batch forward and backward\n";
    } else {
      out << "no all-to-all (every GPU holds every expert)\n";
    }
  }
  if (!job.compute_efficiency) {
    const PassTime& f = step.forward_kernels;
    const PassTime& b = step.backward_kernels;
    out << "kernels        GEMMs " << seconds(f.gemm_s + b.gemm_s) << ", attention " << seconds(f.attention_s + b.attention_s) << ", memory-bound "
        << seconds(f.memory_s + b.memory_s) << " (forward and backward); optimizer step " << seconds(step.optimizer_s) << "\n";
  }
  if (job.optimizer_offload > 0) {
    const KernelConstants& k = *builtin_kernel_constants();
    const bool torch = job.cpu_adam == TrainingJob::CpuAdam::torch;
    double host = 0;
    for (const StageMemory& mem : c.stage_memory) host = std::max(host, mem.host);
    std::snprintf(line, sizeof line, "offload        %.3g%% of each GPU's optimizer shard on the CPU (%s, %.2g G parameters a second a node, as measured on another host: a guess): ",
                  100 * job.optimizer_offload, torch ? "PyTorch's fused AdamW, as Megatron-Core" : "DeepSpeed's CPU-Adam",
                  cpu_adam_params_per_s(job.cpu_adam, k) / 1e9);
    out << line << "gradients down " << seconds(step.offload_down_s) << ", CPU step " << seconds(step.offload_cpu_s)
        << (torch ? ", weights up " + seconds(step.offload_up_s) : std::string(" with the weights' copy up")) << (job.offload_overlap ? " (pipelined)" : " (one after another)")
        << "; host memory " << bytes(host) << " a GPU\n";
  }
  if (job.zero_stage() >= 3) {
    const std::string copied = job.offload_parameters ? seconds(step.zero_fetch_s) + " (" + bytes(c.zero_gather_bytes_per_layer / job.dp) + " a GPU, every GPU of a node at once)" : "";
    if (job.dp == 1) {
      out << "transfers      ZeRO-3 on one replica: nothing gathered"
          << (job.offload_parameters ? "; each layer copied up from host memory before its forward and backward, the next one's beside its compute, " + copied : "") << "\n\n";
    } else {
      out << "transfers      FSDP / ZeRO-3: one layer's all-gather " << seconds(step.zero_gather_s) << " (" << bytes(c.zero_gather_bytes_per_layer) << ")"
          << (job.offload_parameters ? " after its shard is copied up from host memory, " + copied : "")
          << ", before each layer's forward and backward, the next one's beside its compute; the gradients' reduce-scatters add "
          << seconds(step.dp_allreduce_s) << " after the last backward\n\n";
    }
  } else {
    out << "transfers      stage boundary " << seconds(step.pp_send_s) << " (" << bytes(c.pp_send_bytes) << "), DP all-reduce "
        << seconds(step.dp_allreduce_s) << (job.dp_overlap ? " (beside the last backward)" : "") << "\n\n";
  }
  out << "stage  layers  params/GPU   weights    grads      optimizer  activations  total/GPU   last backward\n";
  const std::vector<int> layers = job.stage_layers();
  for (std::size_t s = 0; s < c.stage_memory.size(); ++s) {
    const StageMemory& mem = c.stage_memory[s];
    // The last stage's multi-token prediction layers after a +; under DualPipe a GPU's two stages, "4|4".
    const auto stage_text = [&](std::size_t stage) {
      return std::to_string(layers[stage]) + (stage + 1 == layers.size() && job.model.mtp_layers > 0 ? "+" + std::to_string(job.model.mtp_layers) : "");
    };
    const std::string held = stage_text(s) + (job.schedule == PipelineSchedule::dualpipe ? "|" + stage_text(layers.size() - 1 - s) : "");
    std::snprintf(line, sizeof line, "%5zu  %6s  %10s  %-10s %-10s %-10s %-12s %-11s %s\n", s, held.c_str(),
                  count(c.stage_parameters[s]).c_str(), bytes(mem.weights).c_str(), bytes(mem.gradients).c_str(),
                  bytes(mem.optimizer).c_str(), bytes(mem.activations).c_str(), bytes(mem.total()).c_str(), seconds(step.stage_end_s[s]).c_str());
    out << line;
  }
  const Cluster cluster(job.cluster);
  const double vram = cluster.gpu_type(make_id<GpuId>(0)).vram_bytes;
  const double peak = largest_need(c);
  out << "\nlargest per-GPU need " << bytes(peak) << " of " << bytes(vram) << (peak > vram ? "  DOES NOT FIT" : "") << "\n";
  if (const std::optional<OutOfMemory> oom = out_of_memory(job, c); oom && oom->host) {
    out << "host memory a node " << bytes(oom->needed_bytes) << " of " << bytes(oom->vram_bytes) << "  DOES NOT FIT\n";
  }
}

std::string training_json(const TrainingJob& job, const TrainingStep& step) {
  using nlohmann::ordered_json;
  const TrainingCounts& c = step.counts;
  ordered_json stages = ordered_json::array();
  const std::vector<int> layers = job.stage_layers();
  for (std::size_t s = 0; s < c.stage_memory.size(); ++s) {
    const StageMemory& mem = c.stage_memory[s];
    stages.push_back({{"layers", layers[s]}, {"parameters_per_gpu", c.stage_parameters[s]}, {"weights_bytes", mem.weights}, {"gradients_bytes", mem.gradients},
                      {"optimizer_bytes", mem.optimizer}, {"activation_bytes", mem.activations}, {"total_bytes", mem.total()}, {"host_bytes", mem.host},
                      {"dp_allreduce_bytes", c.dp_allreduce_bytes[s]}, {"expert_allreduce_bytes", c.expert_allreduce_bytes[s]},
                      {"last_backward_s", step.stage_end_s[s]}});
  }
  const std::optional<OutOfMemory> oom = out_of_memory(job, c);
  const TransformerModel& m = job.model;
  ordered_json doc{{"name", job.name},
                   {"architecture", job.model.architecture},
                   {"kv_heads", job.model.kv()},
                   {"gated_mlp", job.model.gated},
                   {"experts", m.experts},
                   {"experts_per_token", m.top_k},
                   {"dense_layers", m.moe() ? m.dense_layers : 0},
                   {"latent_attention", m.latent.has_value()},
                   {"mtp_layers", m.mtp_layers},
                   {"dispatcher", job.dispatcher == TrainingJob::Dispatcher::deepep ? "deepep" : "alltoall"},
                   {"max_nodes", job.max_nodes},
                   {"dispatch_dtype", dtype_name(job.dispatch_dtype)},
                   {"dispatcher_sms", job.dispatcher == TrainingJob::Dispatcher::deepep ? job.dispatcher_sms : 0},
                   {"gpus", job.gpus()},
                   {"tp", job.tp},
                   {"pp", job.pp},
                   {"cp", job.cp},
                   {"ep", job.ep},
                   {"etp", job.expert_tp()},
                   {"vp", job.vp},
                   {"virtual_stage_layers", job.virtual_stage_layers},
                   {"dp", job.dp},
                   {"micro_batches", job.micro_batches()},
                   {"schedule", schedule_name(job.schedule)},
                   {"recompute", recompute_name(job.recompute)},
                   {"recompute_layers", job.recompute_layers},
                   {"recompute_modules", job.recompute == Recompute::selective ? ordered_json(recompute_modules(job)) : ordered_json::array()},
                   {"attention", attention_name(job.attention)},
                   {"runtime", training_runtime_name(job)},
                   {"optimizer_moments", dtype_name(job.optimizer_moments)},
                   {"reduce_dtype", dtype_name(job.reduce_dtype)},
                   {"fp8_recipe", job.dtype != Dtype::fp8 ? "" : job.fp8_recipe == TrainingJob::Fp8Recipe::blockwise ? "blockwise" : "tensorwise"},
                   {"activation_func_fp8_input_store", job.activation_fp8_input_store},
                   {"dp_overlap", job.dp_overlap},
                   {"ep_overlap", job.ep_overlap},
                   {"zero", job.zero_stage()},
                   {"zero_gather_s", step.zero_gather_s},
                   {"compute", job.compute_efficiency ? ordered_json{{"efficiency", *job.compute_efficiency}, {"kernel_model_iteration_s", step.kernel_model_iteration_s}}
                                                      : ordered_json{{"kernel_model", true}}},
                   {"parameters", c.parameters},
                   {"active_parameters", c.active_parameters},
                   {"iteration_s", step.iteration_s},
                   {"tokens_per_s", step.tokens_per_s},
                   {"mfu", step.mfu},
                   {"bubble", step.bubble},
                   {"model_flop", c.model_flop},
                   {"hardware_flop", c.hardware_flop},
                   {"forward_s", step.forward_s},
                   {"backward_s", step.backward_s},
                   {"tp_comm_s", step.tp_comm_s},
                   {"cp_send_s", step.cp_send_s},
                   {"cp_comm_s", step.cp_comm_s},
                   {"ep_alltoall_bytes", c.ep_alltoall_bytes},
                   {"ep_alltoall_s", step.ep_alltoall_s},
                   {"ep_combine_s", step.ep_combine_s},
                   {"ep_comm_s", step.ep_comm_s},
                   {"expert_load", job.expert_load()},
                   {"pp_send_s", step.pp_send_s},
                   {"dp_allreduce_s", step.dp_allreduce_s},
                   {"optimizer_s", step.optimizer_s},
                   {"optimizer_offload", job.optimizer_offload > 0 ? ordered_json{{"share", job.optimizer_offload},
                                                                                  {"cpu_adam", cpu_adam_name(job.cpu_adam)},
                                                                                  {"overlap", job.offload_overlap},
                                                                                  {"down_s", step.offload_down_s},
                                                                                  {"cpu_s", step.offload_cpu_s},
                                                                                  {"up_s", step.offload_up_s}}
                                                                    : ordered_json()},
                   {"kernels_s", {{"gemm", step.forward_kernels.gemm_s + step.backward_kernels.gemm_s},
                                  {"attention", step.forward_kernels.attention_s + step.backward_kernels.attention_s},
                                  {"memory", step.forward_kernels.memory_s + step.backward_kernels.memory_s}}},
                   {"activation_bytes_per_layer", c.activation_bytes_per_layer},
                   {"dense_layer_activation_bytes", c.dense_layer_activation_bytes},
                   {"kept_layer_activation_bytes", c.kept_layer_activation_bytes},
                   {"out_of_memory", !oom        ? ordered_json()
                                     : oom->host ? ordered_json{{"stage", oom->stage}, {"host_needed_bytes", oom->needed_bytes}, {"host_memory_bytes", oom->vram_bytes},
                                                                {"short_bytes", oom->needed_bytes - oom->vram_bytes}}
                                                 : ordered_json{{"stage", oom->stage}, {"needed_bytes", oom->needed_bytes}, {"vram_bytes", oom->vram_bytes},
                                                                {"short_bytes", oom->needed_bytes - oom->vram_bytes}}},
                   {"stages", stages}};
  if (job.offload_parameters) {  // present only where the weights live in host memory
    doc["parameter_offload"] = {{"layer_bytes_per_gpu", c.zero_gather_bytes_per_layer / job.dp}, {"layer_fetch_s", step.zero_fetch_s}};
  }
  return doc.dump(1) + "\n";
}

void write_training_sweep_text(std::ostream& out, const std::string& key, const std::vector<TrainingJob>& jobs,
                               const std::vector<TrainingStep>& steps) {
  out << key << "    GPUs  micro-batches  iteration    tokens/s      speed-up  efficiency  bubble   MFU    memory/GPU\n";
  char line[256];
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const TrainingJob& j = jobs[i];
    const TrainingStep& s = steps[i];
    // Speed-up in tokens per second over the first row, efficiency per GPU.
    const double speedup = s.tokens_per_s / steps[0].tokens_per_s;
    const double efficiency = speedup / (static_cast<double>(j.gpus()) / jobs[0].gpus());
    const double peak = largest_need(s.counts);
    const SweepSetting* setting = sweep_setting(key);
    const int value = setting != nullptr ? j.*setting->field : j.global_batch;
    const int width = std::max(6, static_cast<int>(key.size()));
    std::snprintf(line, sizeof line, "%-*d %5d  %13d  %-11s %-13.0f %7.2fx  %9.1f%%  %5.1f%%  %4.1f%%  %s%s\n", width, value, j.gpus(), j.micro_batches(),
                  seconds(s.iteration_s).c_str(), s.tokens_per_s, speedup, 100 * efficiency, 100 * s.bubble, 100 * s.mfu, bytes(peak).c_str(),
                  out_of_memory(j, s.counts) ? "  DOES NOT FIT" : "");
    out << line;
  }
}

namespace {

// What a candidate offloads, as the configuration column says it: the share, where not the whole, and the Adam.
std::string offload_text(const TrainingJob& j) {
  if (!(j.optimizer_offload > 0)) return "";
  const std::string adam = j.cpu_adam == TrainingJob::CpuAdam::deepspeed ? "DeepSpeed CPU-Adam" : "PyTorch AdamW";
  char share[32] = "";
  if (j.optimizer_offload < 1) std::snprintf(share, sizeof share, " %.3g%%", 100 * j.optimizer_offload);
  return std::string(j.offload_parameters ? ", weights and optimizer" : ", optimizer") + share + " on the CPU (" + adam + (j.offload_overlap ? ", pipelined" : "") + ")";
}

std::string configuration(const TrainingJob& j) {
  const std::string vp = (j.vp > 1 ? " (VP " + std::to_string(j.vp) + ")" : std::string()) + uneven_stages(j);
  const std::string cp = j.cp > 1 ? " x CP " + std::to_string(j.cp) : "";
  const std::string ep = j.model.moe() ? " (" + expert_shape(j) + (j.ep_overlap ? ", overlapped" : "") + ")" : "";
  return "TP " + std::to_string(j.tp) + cp + " x PP " + std::to_string(j.pp) + vp + " x DP " + std::to_string(j.dp) + ep + ", micro " + std::to_string(j.micro_batch) +
         (j.schedule == PipelineSchedule::dualpipe ? ", dualpipe" : "") + ", recompute " + recompute_text(j) + (j.zero_stage() >= 3 ? ", FSDP" : ", ZeRO-1") +
         offload_text(j);
}

}  // namespace

void write_training_search_text(std::ostream& out, const TrainingJob& base, const TrainingSearch& search, std::size_t top, double wall_s) {
  const std::size_t refused = search.searched - search.out_of_memory - search.ranked_total;
  char line[512];  // a mixture's configuration with its offload runs past 200 characters
  std::snprintf(line, sizeof line, "%s on %d GPUs, global batch %d: %zu configurations in %.1f s (%.0f a minute); %zu do not fit, %zu refused, %zu ranked",
                base.name.c_str(), base.cluster.gpu_count(), base.global_batch, search.searched, wall_s, wall_s > 0 ? 60 * static_cast<double>(search.searched) / wall_s : 0.0,
                search.out_of_memory, refused, search.ranked_total);
  out << line;
  if (search.offloaded > 0) out << " (" << search.offloaded << " of them only by offloading to the CPU, as the framework running each would)";
  out << "\n\n";
  if (search.ranked.empty()) {
    out << "no configuration fits: more GPUs, a shorter sequence or a smaller batch\n";
    return;
  }
  // The configuration column as wide as its longest entry shown.
  const std::size_t shown = std::min(top, search.ranked.size());
  int width = 13;
  for (std::size_t k = 0; k < shown; ++k) width = std::max(width, static_cast<int>(configuration(search.ranked[k].job).size()));
  std::snprintf(line, sizeof line, "rank  %-*s iteration    tokens/s      MFU    bubble  memory/GPU\n", width, "configuration");
  out << line;
  for (std::size_t k = 0; k < shown; ++k) {
    const TrainingCandidate& c = search.ranked[k];
    std::snprintf(line, sizeof line, "%4zu  %-*s %-11s  %-12.0f %5.1f%%  %5.1f%%  %s\n", k + 1, width, configuration(c.job).c_str(), seconds(c.step.iteration_s).c_str(),
                  c.step.tokens_per_s, 100 * c.step.mfu, 100 * c.step.bubble, bytes(largest_need(c.step.counts)).c_str());
    out << line;
  }
}

std::string training_search_json(const TrainingJob& base, const TrainingSearch& search, std::size_t top) {
  using nlohmann::ordered_json;
  ordered_json ranked = ordered_json::array();
  for (std::size_t k = 0; k < search.ranked.size() && k < top; ++k) {
    const TrainingCandidate& c = search.ranked[k];
    ranked.push_back({{"tp", c.job.tp}, {"cp", c.job.cp}, {"pp", c.job.pp}, {"vp", c.job.vp}, {"dp", c.job.dp}, {"ep", c.job.ep}, {"etp", c.job.expert_tp()}, {"ep_overlap", c.job.ep_overlap},
                      {"first_stage_layers", c.job.first_stage_layers}, {"last_stage_layers", c.job.last_stage_layers}, {"virtual_stage_layers", c.job.virtual_stage_layers}, {"micro", c.job.micro_batch}, {"schedule", schedule_name(c.job.schedule)}, {"recompute", recompute_name(c.job.recompute)},
                      {"recompute_layers", c.job.recompute_layers}, {"zero", c.job.zero_stage()}, {"optimizer_offload", c.job.optimizer_offload}, {"cpu_adam", c.job.optimizer_offload > 0 ? cpu_adam_name(c.job.cpu_adam) : ""},
                      {"offload_overlap", c.job.offload_overlap}, {"offload_parameters", c.job.offload_parameters}, {"iteration_s", c.step.iteration_s}, {"tokens_per_s", c.step.tokens_per_s}, {"mfu", c.step.mfu},
                      {"bubble", c.step.bubble}, {"memory_per_gpu_bytes", largest_need(c.step.counts)}});
  }
  const ordered_json doc{{"name", base.name}, {"gpus", base.cluster.gpu_count()}, {"global_batch", base.global_batch}, {"searched", search.searched},
                         {"out_of_memory", search.out_of_memory}, {"ranked", search.ranked_total}, {"offloaded", search.offloaded}, {"top", ranked}};
  return doc.dump(1) + "\n";
}

}  // namespace fleetsim
