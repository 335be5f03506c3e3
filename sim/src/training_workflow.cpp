#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include "fleetsim/error.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/units.hpp"
#include "loaders.hpp"

namespace fleetsim {

namespace {

// One iteration of `job` as a task: its gang, the memory it holds, and the collectives it runs on the shared
// network.
TaskSpec iteration_task(const TrainingJob& job, std::shared_ptr<const TrainingIteration> iteration) {
  TaskSpec task;
  task.gpus = job.gpus();
  // Weights, gradients, optimizer state and activations stay for the whole job; they are the job's
  // working set on each GPU, not weights loaded from storage.
  task.working_set_bytes = iteration->memory_per_gpu_bytes;
  task.flop = iteration->model_flop;
  task.dtype = job.dtype;
  task.training = iteration;
  // DualPipe: GPUs r and pp - 1 - r hold the same two stages, so each group takes its DP x CP ranks of both
  // (stage blocks mirrored), as the training model plans them, at DP 1 too.
  const bool dual = job.schedule == PipelineSchedule::dualpipe;
  if (job.dp * job.cp > 1 || dual) {
    // Every (TP rank, stage) reduces its gradients over its DP x CP group at once: dp x cp ranks, tp apart, each
    // stage's own (a block of the gang a stage).
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_reduce, .bytes = iteration->dp_bytes, .overlap = iteration->dp_overlap,
                                              .calls = iteration->dp_calls, .group_size = job.dp * job.cp, .group_stride = job.tp, .mirrored = dual,
                                              .block_bytes = iteration->dp_stage_bytes});
  }
  if (iteration->expert_dp_bytes > 0) {
    // The expert gradients over each expert-DP group: the GPUs holding the same share of the same experts,
    // etp x ep apart in a stage (as the training model plans them), when the dense reduction runs.
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_reduce, .bytes = iteration->expert_dp_bytes, .overlap = iteration->dp_overlap,
                                              .group_size = iteration->expert_dp, .group_stride = iteration->etp * job.ep, .mirrored = dual,
                                              .block_bytes = iteration->expert_dp_stage_bytes});
  }
  if (iteration->ep_calls > 0) {
    // The expert all-to-alls, in each EP group (ep ranks, expert TP apart, as the training model groups them) or,
    // DeepEP's, among each group's GPUs of one local rank (a node apart), beside the whole compute, which
    // already holds their time alone.
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_to_all, .bytes = iteration->ep_bytes, .overlap = 1, .calls = iteration->ep_calls,
                                              .group_size = iteration->ep_group_size, .group_stride = iteration->ep_group_stride});
  }
  if (iteration->pp_calls > 0) {
    // The stage sends: pairs of adjacent stages (the same TP, CP and DP ranks, a stage apart), the even
    // boundaries, then the odd ones, each pair sending both ways, beside the whole compute, which already
    // holds their time alone.
    const int stage = job.tp * job.cp * job.dp;
    for (int offset = 0; offset < std::min(2, job.pp - 1) * stage; offset += stage) {
      task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::send_recv, .bytes = iteration->pp_bytes, .overlap = 1, .calls = iteration->pp_calls,
                                                .group_size = 2, .group_stride = stage, .group_offset = offset});
    }
  }
  if (iteration->cp_calls > 0) {
    // Context parallelism's ring passes: each CP group (cp ranks, tp apart) passing blocks round its ring, beside
    // the whole compute, which already holds their time alone.
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_gather, .algo = CollectiveAlgo::ring, .bytes = iteration->cp_bytes, .overlap = 1,
                                              .calls = iteration->cp_calls, .group_size = job.cp, .group_stride = job.tp});
  }
  // TP's all-reduces (tp consecutive GPUs a group) and a mixture's over its expert TP groups (etp consecutive), only
  // in groups the placement splits across nodes, after the compute: they block the passes they belong to, and the
  // compute holds them only as they run inside a node.
  if (iteration->tp_calls > 0) {
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_reduce, .bytes = iteration->tp_bytes, .calls = iteration->tp_calls,
                                              .group_size = job.tp, .split_groups_only = true});
  }
  if (iteration->etp_calls > 0) {
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_reduce, .bytes = iteration->etp_bytes, .calls = iteration->etp_calls,
                                              .group_size = iteration->etp, .split_groups_only = true});
  }
  FLEETSIM_CHECK(task.collectives.size() <= TaskSpec::kMaxCollectives, "a training iteration with more collectives than a task holds");
  return task;
}

// The elastic job at each DP degree from min_dp below its dp that check_training_job accepts (its global batch
// divides into that many replicas' micro-batches, in groups where interleaved), ascending.
std::vector<TrainingJob> elastic_degrees(const TrainingJob& job, const TrainingElastic& elastic) {
  std::vector<TrainingJob> out;
  for (int dp = elastic.min_dp; dp < job.dp; ++dp) {
    TrainingJob at = job;
    at.dp = dp;
    try {
      check_training_job(at);
    } catch (const InputError&) {
      continue;
    }
    out.push_back(std::move(at));
  }
  return out;
}

}  // namespace

Workflow detail::training_workflow(const TrainingJob& job, int iterations, const ClusterSpec& cluster, const TrainingCheckpoint& checkpoint,
                                   const TrainingElastic& elastic) {
  TrainingIteration timed = training_iteration(job, cluster);
  plan_checkpoint(timed, job, cluster, checkpoint);
  std::vector<TaskSpec> on_sizes;
  if (elastic.min_dp > 0) {
    for (const TrainingJob& at : elastic_degrees(job, elastic)) {
      try {
        on_sizes.push_back(iteration_task(at, std::make_shared<const TrainingIteration>(training_iteration(at, cluster))));
      } catch (const InputError& e) {
        std::vector<Problem> problems = e.problems();
        for (Problem& p : problems) p.message = "elastic, at DP " + std::to_string(at.dp) + ": " + p.message + " (or an elastic min_dp above " + std::to_string(at.dp) + ")";
        throw InputError(std::move(problems));
      }
      timed.elastic_dp.push_back(at.dp);
    }
    timed.elastic_dp.push_back(job.dp);
    timed.elastic_restart_s = elastic.restart_s;
  }
  const auto iteration = std::make_shared<const TrainingIteration>(std::move(timed));
  Workflow wf;
  wf.name = job.name + " (training, " + std::to_string(iterations) + " iteration" + (iterations == 1 ? "" : "s") + ")";
  wf.file = job.file;
  wf.pointer = job.pointer;
  TaskSpec task = iteration_task(job, iteration);
  const bool dual = job.schedule == PipelineSchedule::dualpipe;
  if (elastic.min_dp > 0) {
    // Elastic: placed on a gang of any of its degrees, never resized while it runs (min_interval never passes);
    // each GPU holds the most any degree needs (the fewer replicas, the larger a sharded optimizer's share).
    on_sizes.push_back(task);
    ElasticSpec spec{.restart_s = elastic.restart_s, .min_interval_s = std::numeric_limits<double>::infinity()};
    for (const TaskSpec& t : on_sizes) {
      spec.sizes.push_back(static_cast<std::uint32_t>(t.gpus));
      task.working_set_bytes = std::max(task.working_set_bytes, t.working_set_bytes);
    }
    spec.min_gpus = static_cast<int>(spec.sizes.front());
    for (TaskSpec& t : on_sizes) {
      t.elastic = spec;
      t.working_set_bytes = task.working_set_bytes;
    }
    task.elastic = std::move(spec);
    task.on_sizes = std::make_shared<const std::vector<TaskSpec>>(std::move(on_sizes));
  }
  for (int i = 0; i < iterations; ++i) {
    task.name = "iteration " + std::to_string(i + 1);
    task.checkpoint = checkpoint.every > 0 && (i + 1) % checkpoint.every == 0;
    wf.tasks.push_back(task);
    if (i > 0) wf.edges.push_back({.from = static_cast<std::uint32_t>(i - 1), .to = static_cast<std::uint32_t>(i)});
  }
  const bool experts_on_network = iteration->ep_calls > 0 || iteration->expert_dp_bytes > 0;
  wf.assumptions.push_back("training job \"" + job.name + "\": its compute is timed alone on its GPU type (TP inside a node, stage sends on one switch); "
                           "only its data-parallel gradient reduction" + (dual ? " (DualPipe: each pair of GPUs holding the same two stages reducing with its DP x CP ranks)" : "") +
                           (experts_on_network || iteration->pp_calls > 0 || iteration->cp_calls > 0 || iteration->tp_calls > 0 || iteration->etp_calls > 0 ? " (and the traffic below)" : "") + " runs on the shared network");
  // Traffic beside the compute, whose time holds its time alone.
  const auto beside_compute = [](const std::string& one) {
    return "run on the shared network beside its whole compute, which holds their time alone: they load the links other work uses, and lengthen an "
           "iteration only where contention makes them outlast its compute (an exposed " + one + " slowed is not counted whole)";
  };
  if (iteration->pp_calls > 0) {
    wf.assumptions.push_back("training job \"" + job.name + "\": its stage sends (" + format_number(iteration->pp_calls) + " an iteration each way, " +
                             format_quantity(iteration->pp_bytes, Dimension::bytes) + " a GPU) " + beside_compute("send") +
                             (job.vp > 1 ? "; interleaved, the sends from the last stage back to the first are left out" : ""));
  }
  if (iteration->tp_calls > 0 || iteration->etp_calls > 0) {
    const auto all_reduces = [](double calls, double bytes, int group) {
      return format_number(calls) + " an iteration, " + format_quantity(bytes, Dimension::bytes) + " a GPU, in groups of " + std::to_string(group) + " consecutive GPUs";
    };
    const std::string tp = iteration->tp_calls > 0 ? "TP all-reduces (" + all_reduces(iteration->tp_calls, iteration->tp_bytes, job.tp) + ")" : "";
    const std::string etp = iteration->etp_calls > 0 ? "experts' TP all-reduces (" + all_reduces(iteration->etp_calls, iteration->etp_bytes, iteration->etp) + ")" : "";
    wf.assumptions.push_back("training job \"" + job.name + "\": its " + tp + (tp.empty() || etp.empty() ? "" : " and ") + etp +
                             " are timed with its compute as inside a node; a group its placement splits across nodes runs them again on the shared "
                             "network after the compute (they block the passes they belong to): the iteration then counts them twice, once at the "
                             "node's rate, a small overstatement beside their time across nodes");
  }
  if (iteration->cp_calls > 0) {
    wf.assumptions.push_back("training job \"" + job.name + "\": its context-parallel ring passes (" + format_number(iteration->cp_calls) + " an iteration, " +
                             format_quantity(iteration->cp_bytes, Dimension::bytes) + " a GPU's group's, as ring all-gathers of " + std::to_string(job.cp) +
                             " ranks) " + beside_compute("pass"));
  }
  if (job.zero_stage() >= 3 && job.dp > 1) {
    wf.assumptions.push_back("training job \"" + job.name + "\": its FSDP gathers and reduce-scatters (two all-gathers and a reduce-scatter of every layer a step) "
                             "run on the shared network beside its forward and backward passes, as one all-reduce of 1.5 times its gradients in " +
                             format_number(iteration->dp_calls) + " calls; a layer waiting for a gather its compute did not hide (train times it) is not modelled");
  }
  if (job.model.moe() && (job.ep > 1 || iteration->expert_dp_bytes > 0)) {
    const bool deepep = job.dispatcher == TrainingJob::Dispatcher::deepep;
    const int ep_block = job.ep * job.expert_tp();
    const bool ep_inside_nodes = std::all_of(cluster.groups.begin(), cluster.groups.end(), [&](const NodeGroup& g) { return g.node.gpus % ep_block == 0; });
    const std::string exchanges =
        iteration->ep_calls > 0
            ? "its expert all-to-alls (" +
                  std::string(deepep ? "DeepEP's network leg, among each EP group's GPUs a node apart in the gang's order (of one local rank where the gang fills whole nodes), " : "") +
                  format_number(iteration->ep_calls) + " an iteration, " + format_quantity(iteration->ep_bytes, Dimension::bytes) + " a GPU) also " +
                  beside_compute("exchange") + (deepep ? " (its leg inside each node stays with the compute)" : "") + "; "
        : job.ep > 1 && !ep_inside_nodes
            ? "its expert all-to-alls (DeepEP's) are timed with its compute, alone (no rail layout is assumed: its EP blocks of " + std::to_string(ep_block) +
                  " GPUs split nodes, or its nodes differ in size, or its expert TP of " + std::to_string(job.expert_tp()) + " does not divide a node); "
        : job.ep > 1 ? "its expert all-to-alls (DeepEP's, inside a node, on links only its GPUs use) are timed with its compute, alone; "
                     : "";
    const std::string gradients = iteration->expert_dp_bytes > 0 ? "reduced over their own " + std::to_string((dual ? 2 : 1) * job.expert_dp()) + "-GPU groups, beside the dense ones, on the shared network"
                                  : job.expert_dp() > 1          ? "reduced over their own " + std::to_string(job.expert_dp()) + "-GPU groups inside the gang, timed with the compute"
                                                                 : "held once, not reduced";
    wf.assumptions.push_back("training job \"" + job.name + "\": " + exchanges + "its expert gradients are " + gradients);
  }
  if (checkpoint.every > 0) {
    std::string per_type;
    for (const TrainingIteration::OnGpu& on : iteration->on) {
      per_type += (per_type.empty() ? "" : ", ") + on.gpu + " " + format_quantity(on.checkpoint_s, Dimension::time) + " a save, " +
                  format_quantity(on.checkpoint_load_s, Dimension::time) + " to read back";
    }
    wf.assumptions.push_back("training job \"" + job.name + "\": a checkpoint every " + std::to_string(checkpoint.every) + " iterations, " +
                             format_quantity(iteration->checkpoint_bytes_per_gpu, Dimension::bytes) + " from each GPU (bf16 weights and optimizer state, " +
                             "fully parallel, each slice once) at " + format_quantity(checkpoint.write_Bps, Dimension::bandwidth) + " a node" +
                             (checkpoint.async ? ", asynchronous (the copy to host memory holds the iteration up; the write runs behind the next iterations)" : "") +
                             " (" + per_type + "); a failure or preemption loses the iterations since the last one, which its retry computes again after the read, " +
                             "their compute only (not their reduction on the network)");
  }
  if (elastic.min_dp > 0) {
    std::string degrees;
    for (int dp : iteration->elastic_dp) degrees += (degrees.empty() ? "" : ", ") + std::to_string(dp);
    wf.assumptions.push_back("training job \"" + job.name + "\": elastic at DP " + degrees + " (" + std::to_string(task.elastic->sizes.front()) + " to " +
                             std::to_string(task.gpus) + " GPUs; its global batch of " + std::to_string(job.global_batch) +
                             " kept, each replica taking its share): each iteration runs at the largest degree the GPUs free for it hold once the "
                             "tasks ahead of it in the queue have theirs, and is not resized while it runs; one placed on other GPUs than the "
                             "iteration before it first pays the restart, " + format_quantity(elastic.restart_s, Dimension::time) +
                             " (the workers restarted at a new world size and their state read back); every GPU holds the most any degree "
                             "needs, " + format_quantity(task.working_set_bytes, Dimension::bytes));
  }
  wf.finalize();
  return wf;
}

}  // namespace fleetsim
