// A workflow: a DAG of tasks joined by edges that carry tensors. Tasks name the GPUs they need
// (1, or a gang of k), the model whose weights must be resident, a VRAM working set and their work
// (FLOP + bytes of memory traffic, or a count of a named operator profile from the catalog).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/collective.hpp"
#include "fleetsim/model_profile.hpp"

namespace fleetsim {

struct TrainingIteration;

// A collective the task's gang runs after its compute, or beside it from a point of it on (gradient
// all-reduce, activation exchange...).
struct CollectiveSpec {
  CollectiveOp op = CollectiveOp::all_reduce;
  CollectiveAlgo algo = CollectiveAlgo::automatic;
  double bytes = 0;         // nccl-tests' size convention
  double compression = 1;  // bytes actually sent per byte of data (gradient compression < 1)
  double overlap = 0;      // fraction of the compute the collective may run alongside, 0 to 1
  // The collective runs `calls` times back to back, each on bytes / calls: planned for one call (its
  // algorithm and protocol chosen for that size), its flows carry every call's bytes and pay every
  // call's latency.
  double calls = 1;
  // Groups of the gang that each run the collective at once, on their own ranks: `group_size` ranks
  // `group_stride` apart (a training job's data-parallel groups: dp ranks, tp apart, in Megatron's rank
  // order), block after block of size x stride ranks from rank `group_offset` on (a pipeline's odd stage
  // boundaries: pairs of stages from the second); 0: the whole gang as one group. `mirrored` (the gang an even
  // number of whole blocks, no offset): each group also takes the same ranks of the block as far from the gang's
  // end as its own is from the start (the first block's with the last's...), so groups hold 2 x group_size ranks
  // (DualPipe: the two GPUs holding the same two stages reduce their gradients together).
  int group_size = 0;
  int group_stride = 1;
  int group_offset = 0;
  bool mirrored = false;
  // Groups whose data differ block by block (a training job's stages hold different weights: the first the
  // embedding, the last the head): the bytes of the groups of each block, in place of `bytes` (mirrored: of
  // each pair of blocks, by its first). Empty: every group's is `bytes`.
  std::vector<double> block_bytes = {};
  // Only the groups the gang's placement splits across nodes run, where the first GPU's node could hold a group
  // whole (a training job's TP groups: inside a node their traffic is on links only the gang's GPUs use, and its
  // compute already holds their time; on smaller nodes its compute times them across nodes); none where no group
  // is. Groups of consecutive ranks only (stride 1, no offset, not mirrored, no block_bytes).
  bool split_groups_only = false;
};

// Serving-style batching: ready instances of the same task run together on one GPU, up to
// `max_size`, the first one held up to `max_wait` for others to arrive. A batch of n does n times
// the FLOP but reads the shared part of the bytes (the weights) once.
struct BatchingSpec {
  std::uint32_t max_size = 1;
  double max_wait_s = 0;
  double shared_bytes = 0;  // fraction of the task's bytes a batch reads once, 0 to 1
};

// Elastic data-parallel training (Pollux/Sia-style): the task runs on any degree from `min_gpus` to
// its `gpus`, grows onto GPUs that free up and shrinks to give GPUs to waiting tasks. Each resize
// keeps the work done (a checkpoint at the resize) and costs `restart_s` before computing goes on;
// a task is resized at most once per `min_interval_s` (counted from its start or last resize).
struct ElasticSpec {
  int min_gpus = 1;
  double restart_s = 0;
  double min_interval_s = 0;
  // The gang sizes it may run on, ascending (an elastic training job's: tp x cp x pp times each DP degree its
  // batch divides into); empty: every size from min_gpus to the task's gpus.
  std::vector<std::uint32_t> sizes = {};
};

struct TaskSpec {
  // The fields a run reads for every task it starts come first, so that a task touches few cache lines of its
  // spec (a 100,000-task DAG's specs are some 50 MB, far more than the cache holds); names and ids, read for
  // outputs, last.
  int gpus = 1;                  // gang size
  Dtype dtype = Dtype::bf16;
  // How the work of one instance varies around the given amount (its mean): fixed, or drawn
  // per instance from an exponential distribution (job sizes in queueing models).
  enum class Size : std::uint8_t { fixed, exponential } size = Size::fixed;
  bool checkpoint = false;  // a training iteration that ends by saving its job's checkpoint (training->checkpoint_every)
  std::uint32_t launches = 1;    // kernel launches, each paying the GPU's launch overhead
  double weights_bytes = 0;      // whole model; a gang shards it evenly (weights_per_gpu_bytes)
  double working_set_bytes = 0;  // per GPU of the gang
  double flop = 0;               // whole task; a gang splits it evenly
  double bytes = 0;              // memory traffic of the whole task
  // A model step's kernels (layer-level profile), `steps` times, in place of the roofline of flop and
  // bytes (which then hold the steps' totals, for reports).
  std::shared_ptr<const Architecture> architecture;
  double steps = 0;
  // A training job's iteration (docs/training.md#inside-a-scenario): its compute per GPU type from the
  // training model, in place of the roofline (flop holds the model FLOP, for reports).
  std::shared_ptr<const TrainingIteration> training;
  std::optional<ElasticSpec> elastic;
  // An elastic training iteration as it runs on each of its gang sizes (elastic->sizes, in that order): the
  // iteration timed at that DP degree and its collectives laid out over that gang. Null for other tasks.
  std::shared_ptr<const std::vector<TaskSpec>> on_sizes;
  // A job replayed from a trace: `flop` is its duration on the GPU it was recorded on, at that GPU's bf16 peak
  // (`peak_flop_per_s`); another GPU type runs it at the ratio of their training throughputs in its precision
  // (of their bf16 peaks where either has no throughput in the catalog).
  struct Recorded {
    double peak_flop_per_s = 0;
    double throughput = 0;  // the recording GPU's, relative to a V100 (0: none in the catalog)
    TrainingPrecision precision = TrainingPrecision::fp32;
    bool operator==(const Recorded&) const = default;
  };
  std::optional<Recorded> recorded;
  std::optional<BatchingSpec> batching;
  // What its gang exchanges (nothing on one GPU): each collective from its own point of the compute on
  // (its overlap), all at once where they overlap; the task ends when its compute and every one are done.
  std::vector<CollectiveSpec> collectives;
  static constexpr std::size_t kMaxCollectives = 8;  // a run keeps which have begun in a byte
  StepShape shape;
  std::string name;
  std::string model;             // model id, "" when the task loads no weights
  std::string op;                // operator profile id when work came from one

  // Whether a gang of `gang` GPUs may run it: its gpus, or (elastic) a size in its range and, where listed, in
  // elastic->sizes.
  bool runs_on(std::size_t gang) const;
  // The task as it runs on a gang of `gang` GPUs: itself at its gpus, else its on_sizes entry where it has them.
  const TaskSpec& as_run_on(std::size_t gang) const;

  // VRAM one GPU of the gang needs while the task runs; the least it can start with when up to
  // `offloadable` of its working set may stay in host memory.
  // The weights one GPU of the gang holds: a shard, but the whole model under a parallel step, where every
  // GPU runs every layer on its share of the tokens or of the batch; its stage's share under PipeFusion (the
  // first stage's, the largest).
  double weights_per_gpu_bytes() const {
    if (shape.pipeline_stages > 1 && architecture) return weights_bytes * first_pipeline_stage(*architecture, shape).share();
    return shape.gpus() > 1 ? weights_bytes : weights_bytes / gpus;
  }
  double vram_per_gpu_bytes(double offloadable = 0) const { return weights_per_gpu_bytes() + (1 - offloadable) * working_set_bytes; }
  // The working set on a GPU of `vram_bytes`: a decode tiled only below `vram_below` (StepShape::Tiles) holds
  // its whole decode's peak on a GPU that large (vram_below is that peak with the weights); working_set_bytes,
  // the tiles', elsewhere. The least any GPU needs is working_set_bytes.
  double working_set_on(double vram_bytes) const {
    const double below = shape.tiles.vram_below;
    return below > 0 && vram_bytes >= below ? std::max(working_set_bytes, below - weights_per_gpu_bytes()) : working_set_bytes;
  }
};

struct EdgeSpec {
  std::uint32_t from = 0;  // producer task index
  std::uint32_t to = 0;    // consumer task index
  double bytes = 0;        // tensor size
};

// A run of the workflow as it was recorded (a WfCommons instance's execution): its makespan and the
// machines it ran on, to print beside the simulated one.
struct RecordedRun {
  double makespan_s = 0;
  std::string machines;  // "4 machines, 192 cores (x86_64)"; "" where the instance does not say
};

class Workflow {
 public:
  std::string id;    // key the scenario knows it by
  std::string name;
  std::string file;     // where it was defined
  std::string pointer;  // JSON pointer of the definition in that file ("" for a whole file)
  std::vector<TaskSpec> tasks;
  std::vector<EdgeSpec> edges;
  // What an importer assumed where its input said nothing (a model family, a default resolution),
  // and what it passed over, one line each: for the user to see, never silent.
  std::vector<std::string> assumptions;
  std::optional<RecordedRun> recorded;

  // Edge indices into / out of a task. Valid after finalize().
  std::span<const std::uint32_t> inputs(std::uint32_t task) const {
    return {in_edges_.data() + in_offsets_[task], in_offsets_[task + 1] - in_offsets_[task]};
  }
  std::span<const std::uint32_t> outputs(std::uint32_t task) const {
    return {out_edges_.data() + out_offsets_[task], out_offsets_[task + 1] - out_offsets_[task]};
  }
  const std::vector<std::uint32_t>& topological_order() const { return topo_order_; }

  // Builds the adjacency and the topological order. Throws InputError naming `file` when the edges
  // form a cycle.
  void finalize();

 private:
  std::vector<std::uint32_t> in_offsets_, in_edges_, out_offsets_, out_edges_, topo_order_;
};

// Makes `task` `steps` steps of a model at `shape` (its dtype stays): flop, bytes and launches become
// the totals of the steps' kernels, for reports; the step's time comes from the kernels themselves.
// Returns one step's kernels (one GPU's, of a parallel step's gang).
std::vector<KernelCall> set_model_step(TaskSpec& task, std::shared_ptr<const Architecture> architecture, const StepShape& shape, double steps);

// A task's work as it runs on `gpu` (what a real backend replays): its flop, bytes and launches, but for a decode
// whose fallback tiles apply only below Tiles::vram_below, whole on a GPU that holds it (as ComputeModel times it).
struct TaskWork {
  double flop = 0, bytes = 0;
  std::uint32_t launches = 1;
};
TaskWork work_on(const TaskSpec& task, const GpuType& gpu);

// Loads a workflow file; operator and model references resolve against `catalog`.
Workflow load_workflow(const std::string& path, const Catalog& catalog);
Workflow parse_workflow(std::string_view json_text, const std::string& file_name, const Catalog& catalog);

}  // namespace fleetsim
