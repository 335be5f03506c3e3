#include <memory>
#include <string>

#include "fleetsim/training.hpp"
#include "fleetsim/units.hpp"
#include "loaders.hpp"

namespace fleetsim {

Workflow detail::training_workflow(const TrainingJob& job, int iterations, const ClusterSpec& cluster) {
  const auto iteration = std::make_shared<const TrainingIteration>(training_iteration(job, cluster));
  Workflow wf;
  wf.name = job.name + " (training, " + std::to_string(iterations) + " iteration" + (iterations == 1 ? "" : "s") + ")";
  wf.file = job.file;
  wf.pointer = job.pointer;
  TaskSpec task;
  task.gpus = job.gpus();
  // Weights, gradients, optimizer state and activations stay for the whole job; they are the job's
  // working set on each GPU, not weights loaded from storage.
  task.working_set_bytes = iteration->memory_per_gpu_bytes;
  task.flop = iteration->model_flop;
  task.dtype = job.dtype;
  task.training = iteration;
  if (job.dp * job.cp > 1) {
    // Every (TP rank, stage) reduces its gradients over its DP x CP group at once: dp x cp ranks, tp apart.
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_reduce, .bytes = iteration->dp_bytes, .overlap = iteration->dp_overlap,
                                              .calls = iteration->dp_calls, .group_size = job.dp * job.cp, .group_stride = job.tp});
  }
  for (int i = 0; i < iterations; ++i) {
    task.name = "iteration " + std::to_string(i + 1);
    wf.tasks.push_back(task);
    if (i > 0) wf.edges.push_back({.from = static_cast<std::uint32_t>(i - 1), .to = static_cast<std::uint32_t>(i)});
  }
  wf.assumptions.push_back("training job \"" + job.name + "\": its compute is timed alone on its GPU type (TP inside a node, stage sends on one switch); "
                           "only its data-parallel gradient reduction runs on the shared network");
  if (job.zero_stage() >= 3 && job.dp > 1) {
    wf.assumptions.push_back("training job \"" + job.name + "\": its FSDP gathers and reduce-scatters (two all-gathers and a reduce-scatter of every layer a step) "
                             "run on the shared network beside its forward and backward passes, as one all-reduce of 1.5 times its gradients in " +
                             format_number(iteration->dp_calls) + " calls; a layer waiting for a gather its compute did not hide (train times it) is not modelled");
  }
  if (job.model.moe() && job.ep > 1) {
    wf.assumptions.push_back("training job \"" + job.name + "\": its expert all-to-alls are timed with its compute, alone; its expert gradients "
                             "are reduced with the dense ones over DP x CP, scaled to the bytes their own " + std::to_string(job.expert_dp()) + "-GPU groups move");
  }
  wf.finalize();
  return wf;
}

}  // namespace fleetsim
