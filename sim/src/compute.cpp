#include "fleetsim/compute.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "fleetsim/kernel_model.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/workflow.hpp"

namespace fleetsim {

ComputeEstimate estimate_compute(const GpuType& gpu, double flop, double bytes, Dtype dtype,
                                 std::uint32_t launches) {
  ComputeEstimate e;
  e.launch_s = gpu.launch_overhead_s * launches;
  const double peak = gpu.peak_for(dtype);
  e.flop_s = flop > 0 ? flop / peak : 0.0;
  e.memory_s = bytes > 0 ? bytes / gpu.memory_bandwidth_Bps : 0.0;
  e.sequential = gpu.sequential_compute_and_memory;
  return e;
}

std::optional<double> recorded_time_factor(const TaskSpec& task, const GpuType& gpu) {
  if (!task.recorded) return std::nullopt;
  const double recorded = task.recorded->throughput, here = gpu.training_throughput.of(task.recorded->precision);
  if (recorded <= 0 || here <= 0) return std::nullopt;
  return recorded / here;
}

namespace {

// A model step's estimate for every run in this process (a plan's simulations, a benchmark's repetitions): what
// ComputeModel::step works out from these, each kept by value (the constants by a pointer the entry keeps alive, as
// they are not changed once a model of compute holds them), so no architecture, GPU or constants freed and made again
// at the same address can answer for another.
struct StepKey {
  Architecture architecture;
  StepShape shape;
  Dtype dtype = Dtype::bf16;
  double steps = 0;
  GpuType gpu;
  std::shared_ptr<const KernelConstants> kernels;
  bool operator==(const StepKey&) const = default;
};

class SharedSteps {
 public:
  std::optional<ComputeEstimate> find(const StepKey& key) const {
    const std::lock_guard lock(mutex_);
    const auto bucket = entries_.find(hash(key));
    if (bucket == entries_.end()) return std::nullopt;
    for (const auto& [k, e] : bucket->second) {
      if (k == key) return e;
    }
    return std::nullopt;
  }
  void add(StepKey key, const ComputeEstimate& e) {
    const std::lock_guard lock(mutex_);
    if (++size_ > kLimit) {  // a bound for a long-lived process; each entry is worked out again when asked
      entries_.clear();
      size_ = 1;
    }
    entries_[hash(key)].emplace_back(std::move(key), e);
  }

 private:
  static constexpr std::size_t kLimit = 1 << 14;
  static std::size_t hash(const StepKey& k) {
    std::size_t h = std::hash<std::string>{}(k.architecture.id) ^ (std::hash<std::string>{}(k.gpu.id) << 1);
    for (double x : {k.shape.batch, k.shape.width, k.shape.height, k.shape.frames, k.shape.tokens, k.shape.context, k.steps}) {
      h = h * 1099511628211ull ^ std::hash<double>{}(x);
    }
    return h ^ static_cast<std::size_t>(k.dtype) ^ (static_cast<std::size_t>(k.shape.runtime) << 8);
  }
  mutable std::mutex mutex_;
  std::unordered_map<std::size_t, std::vector<std::pair<StepKey, ComputeEstimate>>> entries_;
  std::size_t size_ = 0;
};

SharedSteps& shared_steps() {
  static SharedSteps steps;
  return steps;
}

}  // namespace

ComputeModel::ComputeModel(std::shared_ptr<const KernelConstants> kernels)
    : kernels_(kernels ? std::move(kernels) : builtin_kernel_constants()) {}

ComputeEstimate ComputeModel::step(const TaskSpec& task, const GpuType& gpu, double batch_factor) const {
  const auto key = std::make_tuple(&task, &gpu, batch_factor);
  if (const auto it = steps_.find(key); it != steps_.end()) return it->second;
  StepShape shape = task.shape;
  shape.batch *= batch_factor;
  if (shape.tiles.vram_below > 0 && gpu.vram_bytes >= shape.tiles.vram_below) shape.tiles = {};  // this GPU holds the whole decode
  StepKey shared{*task.architecture, shape, task.dtype, static_cast<double>(task.steps), gpu, kernels_};
  if (const auto known = shared_steps().find(shared)) return steps_.emplace(key, *known).first->second;
  const KernelModel model(gpu, kernels_);
  const StepEstimate step = estimate_step(*task.architecture, shape, model, task.dtype);
  // A parallel step is its gang's work: each of its GPUs runs one GPU's share of it (the task's work is
  // split evenly over its gang). A PipeFusion run's steps take its pipeline's time: its first stage's
  // kernels, stretched by the warm-up steps and the pipeline's filling and draining.
  double stretch = 1;
  if (shape.pipeline_stages > 1 && step.time_s > 0 && task.steps > 0) {
    StepShape whole = shape;
    whole.patches = 1;
    const double whole_s = estimate_step(*task.architecture, whole, model, task.dtype).time_s;
    stretch = pipefusion_run_s(*task.architecture, shape, task.steps, step.time_s, whole_s) / (task.steps * step.time_s);
  }
  const double gang = shape.gpus() * stretch;
  ComputeEstimate e;
  e.sequential = true;  // kernels run one after another
  e.launch_s = gang * (step.fixed_s + step.host_wait_s);
  e.flop_s = gang * step.compute_bound_s;
  e.memory_s = gang * step.memory_bound_s;
  shared_steps().add(std::move(shared), e);
  return steps_.emplace(key, e).first->second;
}

ComputeEstimate ComputeModel::of(const TaskSpec& task, const GpuType& gpu, double share) const {
  if (task.training) {
    // The iteration's compute on one GPU of its gang: `share` of the gang's work.
    ComputeEstimate e;
    e.sequential = true;
    const TrainingIteration::OnGpu& on = task.training->on_gpu(gpu);
    e.flop_s = (on.compute_s + (task.checkpoint ? on.checkpoint_s : 0)) * task.gpus * share;
    return e;
  }
  if (!task.architecture) {
    ComputeEstimate e = estimate_compute(gpu, task.flop * share, task.bytes * share, task.dtype, task.launches);
    // A trace job's work is seconds on the GPU that recorded it: on another, a training speed-up, not a FLOP rate.
    if (const std::optional<double> factor = recorded_time_factor(task, gpu)) e.flop_s = task.flop * share / task.recorded->peak_flop_per_s * *factor;
    return e;
  }
  ComputeEstimate e = step(task, gpu, 1);
  const double times = task.steps * share;
  e.launch_s *= times;
  e.flop_s *= times;
  e.memory_s *= times;
  return e;
}

ComputeEstimate ComputeModel::batched(const TaskSpec& task, const GpuType& gpu, double members) const {
  ComputeEstimate e = step(task, gpu, members);
  e.launch_s *= task.steps;
  e.flop_s *= task.steps;
  e.memory_s *= task.steps;
  return e;
}

std::vector<std::string> borrowed_kernel_constants(const ClusterSpec& cluster, const std::vector<Workflow>& workflows, bool serving) {
  const bool steps = serving || std::any_of(workflows.begin(), workflows.end(), [](const Workflow& w) {
    return std::any_of(w.tasks.begin(), w.tasks.end(), [](const TaskSpec& t) { return t.architecture != nullptr || t.training != nullptr; });
  });
  const bool cudnn = std::any_of(workflows.begin(), workflows.end(), [](const Workflow& w) {
    return std::any_of(w.tasks.begin(), w.tasks.end(), [](const TaskSpec& t) { return t.architecture != nullptr && t.shape.attention == AttentionBackend::cudnn; });
  });
  std::vector<std::string> out;
  if (!steps) return out;
  for (const NodeGroup& g : cluster.groups) {
    const KernelModel model(g.gpu);
    for (const std::string& guess : {model.guess(), cudnn ? model.attention_guess(AttentionBackend::cudnn) : std::string()}) {
      const std::string line = g.gpu.id + " (" + std::string(gpu_arch_name(g.gpu.arch)) + "): " + guess;
      if (!guess.empty() && std::find(out.begin(), out.end(), line) == out.end()) out.push_back(line);
    }
  }
  return out;
}

const std::string* kernel_guess(const KernelGuesses& guesses, const std::string& node_type) {
  const auto it = std::find_if(guesses.begin(), guesses.end(), [&](const auto& g) { return g.first == node_type; });
  return it == guesses.end() ? nullptr : &it->second;
}

}  // namespace fleetsim
