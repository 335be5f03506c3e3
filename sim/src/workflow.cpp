#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/topological_sort.hpp>
#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "fleetsim/kernel_model.hpp"
#include "fleetsim/suggest.hpp"
#include "fleetsim/workflow.hpp"
#include "loaders.hpp"

namespace fleetsim {

bool TaskSpec::runs_on(std::size_t gang) const {
  if (!elastic) return gang == static_cast<std::size_t>(gpus);
  if (gang < static_cast<std::size_t>(elastic->min_gpus) || gang > static_cast<std::size_t>(gpus)) return false;
  return elastic->sizes.empty() || std::find(elastic->sizes.begin(), elastic->sizes.end(), gang) != elastic->sizes.end();
}

const TaskSpec& TaskSpec::as_run_on(std::size_t gang) const {
  if (!on_sizes || gang == static_cast<std::size_t>(gpus)) return *this;
  const auto at = std::find(elastic->sizes.begin(), elastic->sizes.end(), gang);
  return at == elastic->sizes.end() ? *this : (*on_sizes)[static_cast<std::size_t>(at - elastic->sizes.begin())];
}

std::vector<KernelCall> set_model_step(TaskSpec& task, std::shared_ptr<const Architecture> architecture, const StepShape& shape, double steps) {
  auto calls = step_kernels(*architecture, shape, task.dtype);  // one GPU's, of a parallel step's gang
  const double gang = shape.gpus();
  task.architecture = std::move(architecture);
  task.shape = shape;
  task.steps = steps;
  task.flop = gang * steps * kernels_flop(calls);
  task.bytes = gang * steps * kernels_bytes(calls, task.dtype);  // as the roofline of a step would count them
  task.launches = static_cast<std::uint32_t>(std::min(1e9, gang * steps * static_cast<double>(calls.size())));
  return calls;
}

TaskWork work_on(const TaskSpec& task, const GpuType& gpu) {
  if (!task.architecture || task.shape.tiles.vram_below <= 0 || gpu.vram_bytes < task.shape.tiles.vram_below) return {task.flop, task.bytes, task.launches};
  // The whole decode's count, at the task's scale (scale_work multiplies a task's flop and bytes).
  TaskSpec tiled = task, whole = task;
  set_model_step(tiled, task.architecture, task.shape, task.steps);
  StepShape shape = task.shape;
  shape.tiles = {};
  set_model_step(whole, task.architecture, shape, task.steps);
  const auto scaled = [](double of_whole, double given, double counted) { return counted > 0 ? of_whole * given / counted : of_whole; };
  return {scaled(whole.flop, task.flop, tiled.flop), scaled(whole.bytes, task.bytes, tiled.bytes), whole.launches};
}

namespace detail {
namespace {

// "parallel": {"sequence": k, "ring": r, "cfg": 2} or {"pipefusion": n, "patches": m, "warmup": w, "cfg": 2}: a
// step split over the task's gang of k (or n) x 2 GPUs, by sequence (a diffusion transformer's tokens; in
// attention, its heads over groups of k / r GPUs, Ulysses, and its queries over rings of r with the keys passed
// round), by PipeFusion's stages of blocks and bands of rows, and by guidance (the batch's halves).
void read_parallel(ObjectReader& w, TaskSpec& task, const Architecture& a) {
  const Json* value = w.field("parallel");
  if (value == nullptr) return;
  ObjectReader p(*value, w.pointer("parallel"), w.problems());
  if (!p.ok()) return;
  const std::int64_t k = p.integer_or("sequence", 1, 1, 1024), cfg = p.integer_or("cfg", 1, 1, 2), ring = p.integer_or("ring", 1, 1, 1024);
  const std::int64_t stages = p.integer_or("pipefusion", 1, 1, 1024), patches = p.integer_or("patches", stages, 1, 1 << 20);
  const std::int64_t warmup = p.integer_or("warmup", 1, 0, 1'000'000);  // xDiT's default --warmup_steps
  if (p.field("sequence") == nullptr && p.field("cfg") == nullptr && p.field("pipefusion") == nullptr) {
    p.problem("sequence", "expected \"sequence\" (GPUs per step by tokens), \"pipefusion\" (stages of blocks), \"cfg\" (2: the guidance batch's halves) or a mix");
  }
  if (stages <= 1 && p.field("warmup") != nullptr) p.problem("warmup", "a PipeFusion setting: give \"pipefusion\", two or more stages, with it");
  if (p.field("attention") != nullptr) {
    p.problem("attention", "replaced by \"ring\", the GPUs of each ring that passes keys and values round (xDiT's ring degree): ring attention over "
                           "the whole sequence gang is \"ring\" equal to \"sequence\"");
  }
  p.finish();
  StepShape shape = task.shape;
  shape.sequence_parallel = static_cast<double>(k);
  shape.ring_degree = static_cast<double>(ring);
  shape.cfg_parallel = static_cast<double>(cfg);
  shape.pipeline_stages = static_cast<double>(stages);
  shape.patches = static_cast<double>(patches);  // defaults to the stages: more without them is a problem
  shape.pipeline_warmup = stages > 1 ? static_cast<double>(warmup) : 0;
  const char* split = k > 1 ? "sequence" : stages > 1 ? "pipefusion" : "cfg";
  if (const auto problem = parallel_problem(a, shape)) {
    const bool defaulted = problem->field == "patches" && p.field("patches") == nullptr;  // the bands default to the stages
    p.problem(defaulted ? "pipefusion" : problem->field, problem->message + (defaulted ? " (\"patches\" defaults to the stages)" : ""));
  } else if (shape.gpus() > 1 && task.gpus != k * cfg * stages) {
    p.problem(split, "a parallel step runs on a gang of its degree: expected the task's \"gpus\" to be " + std::to_string(k * cfg * stages) +
                         ", found " + std::to_string(task.gpus));
  } else if (shape.gpus() > 1 && !task.collectives.empty()) {
    p.problem(split, "a parallel step's collective is its own exchange: give the task no \"collective\"");
  } else {
    task.shape = shape;
  }
}

// "tiles": {"size": 64, "overlap": 8, "frames": 16, "frame_overlap": 2, "vram_below": "30 GB"}: a VAE's decode in tiles
// of latent pixels and (a video VAE's) latent frames, each overlapping the next, only on GPUs with less memory than
// `vram_below` where given (StepShape::Tiles).
void read_tiles(ObjectReader& w, StepShape& s, const Architecture& a) {
  const Json* value = w.field("tiles");
  if (value == nullptr) return;
  const std::size_t before = w.problems().size();
  ObjectReader t(*value, w.pointer("tiles"), w.problems());
  if (!t.ok()) return;
  StepShape::Tiles tiles;
  tiles.size = t.number("size", Need::required, 1, 1e5).value_or(0);
  tiles.overlap = t.number("overlap", Need::optional, 0, 1e5).value_or(0);
  tiles.frames = t.number("frames", Need::optional, 1, 1e5).value_or(default_tile_frames(a));
  tiles.frame_overlap = t.number("frame_overlap", Need::optional, 0, 1e5).value_or(0);
  tiles.vram_below = t.quantity_or("vram_below", Dimension::bytes, 0);
  t.finish();
  if (w.problems().size() > before) return;  // a field's own problem says enough
  if (const auto problem = tiles_problem(a, tiles)) {
    t.problem(problem->field, problem->message);
  } else {
    s.tiles = tiles;
  }
}

// A model step: {"architecture", "steps", "runtime", "attention", "parallel", "tiles", and the shape: batch, width, height, frames, tokens, context}.
void read_model_step(ObjectReader& w, TaskSpec& task, const Catalog& catalog) {
  const auto id = w.string("architecture", Need::required);
  const auto found = id ? catalog.architectures().find(*id) : catalog.architectures().end();
  if (id && found == catalog.architectures().end()) {
    std::string known;
    for (const auto& [name, a] : catalog.architectures()) known += (known.empty() ? "" : ", ") + name;
    w.problem("architecture", "unknown architecture \"" + *id + "\" (expected one of " + known + ")" + did_you_mean_key(*id, catalog.architectures()));
  }
  StepShape& s = task.shape;
  s.batch = w.number("batch", Need::optional, 1, 1e6).value_or(1);
  s.width = w.number("width", Need::optional, 0, 1e5).value_or(0);
  s.height = w.number("height", Need::optional, 0, 1e5).value_or(0);
  s.frames = w.number("frames", Need::optional, 1, 1e5).value_or(1);
  s.tokens = w.number("tokens", Need::optional, 0, 1e7).value_or(0);
  s.context = w.number("context", Need::optional, 0, 1e8).value_or(0);
  task.steps = w.number("steps", Need::optional, 1e-6, 1e6).value_or(1);
  const std::string dtype = w.string_or("dtype", "bf16");
  if (auto d = parse_dtype(dtype)) {
    task.dtype = *d;
  } else {
    w.problem("dtype", "expected one of fp64, fp32, tf32, bf16, fp16, fp8, int8, found \"" + dtype + "\"");
  }
  const auto runtime = w.string("runtime", Need::optional);
  if (runtime && !parse_runtime(*runtime)) w.problem("runtime", "expected " + runtime_choices() + ", found \"" + *runtime + "\"");
  const std::string attention = w.string_or("attention", "flash2");
  if (const auto backend = parse_attention_backend(attention)) {
    s.attention = *backend;
  } else {
    w.problem("attention", "expected " + attention_backend_choices() + ", found \"" + attention + "\"");
  }
  w.field("parallel");  // read once the architecture is known
  if (found == catalog.architectures().end()) return;
  const Architecture& a = *found->second;
  s.runtime = runtime && parse_runtime(*runtime) ? *parse_runtime(*runtime) : default_runtime(a);
  if (const auto problem = runtime_problem(a, s.runtime)) w.problem("runtime", problem->message);
  if (works_on_pixels(a.family) && (s.width <= 0 || s.height <= 0)) w.problem(s.width <= 0 ? "width" : "height", "a " + a.family + " step needs the image's width and height in pixels");
  if (a.family == "transformer" && s.tokens <= 0) w.problem("tokens", "a transformer step needs the tokens it processes");
  read_parallel(w, task, a);
  read_tiles(w, s, a);
  if (!w.problems().empty()) return;  // the file is rejected: no kernels for a shape with holes
  const std::vector<KernelCall> calls = set_model_step(task, found->second, s, task.steps);
  // The process groups as xDiT's USP makes them (yunchang's set_seq_parallel_pg, Ulysses low): each guidance
  // half's k GPUs in Ulysses groups of u consecutive ranks and rings of r ranks u apart.
  const int u = static_cast<int>(s.ulysses_degree()), r = static_cast<int>(s.ring_degree);
  if (u > 1) {  // each group's all-to-alls, every step
    const SequenceExchange x = sequence_exchange(a, s, task.dtype);
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_to_all, .bytes = task.steps * x.bytes, .calls = task.steps * x.calls, .group_size = u});
  }
  if (r > 1) {
    // Each ring passes keys and values round (each GPU to the next), each pass hidden behind a block of
    // self-attention: the sends may run beside (r - 1)/r of the self-attention's share of the step's FLOP
    // (the last block has no send to hide; a cross-attention passes nothing).
    const SequenceExchange x = ring_exchange(a, s, task.dtype);
    std::vector<KernelCall> passes;
    std::copy_if(calls.begin(), calls.end(), std::back_inserter(passes), [](const KernelCall& c) { return c.cls == KernelClass::attention && !c.name.ends_with(".cross"); });
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::send_recv, .bytes = task.steps * x.bytes,
                                              .overlap = (r - 1.0) / r * kernels_flop(passes) / kernels_flop(calls), .calls = task.steps * x.calls,
                                              .group_size = r, .group_stride = u});
  }
  if (s.pipeline_stages > 1) {
    // Each stage hands each band (and the text, once a step) to the next as it finishes it, behind the next
    // band's kernels (xDiT's isend); a warm-up step hands the whole image down the stages one at a time.
    const PipelineExchange x = pipeline_exchange(a, s, task.dtype);
    const double warmup = std::min(s.pipeline_warmup, task.steps), patched = task.steps - warmup, stages = s.pipeline_stages;
    if (patched > 0) {
      task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::send_recv, .bytes = patched * x.bytes, .overlap = 1, .calls = patched * x.calls,
                                                .group_size = static_cast<int>(stages)});
    }
    if (warmup > 0) {
      task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::send_recv, .bytes = warmup * (stages - 1) * x.bytes, .calls = warmup * (stages - 1),
                                                .group_size = static_cast<int>(stages)});
    }
    task.working_set_bytes += pipeline_buffer_bytes(a, s, task.dtype);
  }
  if (s.cfg_parallel > 1) {  // the halves' outputs gathered for the guidance, every step
    task.collectives.push_back(CollectiveSpec{.op = CollectiveOp::all_gather, .bytes = task.steps * guidance_exchange_bytes(a, s, task.dtype), .calls = task.steps});
  }
}

// Fills flop/bytes/dtype/launches from "work": {"flop", "bytes", "dtype"}, {"operator", "count"} or a
// model step {"architecture", "steps", shape}.
void read_work(ObjectReader& task_reader, TaskSpec& task, const Catalog& catalog) {
  // A task that only communicates needs no work.
  const Json* work = task_reader.field("work", !task.collectives.empty() ? Need::optional : Need::required);
  if (work == nullptr) return;
  ObjectReader w(*work, task_reader.pointer("work"), task_reader.problems());
  if (!w.ok()) return;
  if (w.field("architecture") != nullptr) {
    if (w.field("operator") != nullptr || w.field("flop") != nullptr) w.problem("architecture", "give one of \"architecture\", \"operator\" or \"flop\"");
    read_model_step(w, task, catalog);
    task.size = static_cast<TaskSpec::Size>(w.choice("size", {"fixed", "exponential"}, 0));
    w.finish();
    return;
  }
  const Json* op = w.field("operator");
  const std::int64_t count = w.integer_or("count", 1, 1, 1'000'000);
  if (op != nullptr) {
    const auto id = w.string("operator", Need::required);
    const bool has_flop = w.field("flop") != nullptr;
    const bool has_bytes = w.field("bytes") != nullptr;
    if (has_flop || has_bytes) {
      w.problem("operator", "give either \"operator\" (with \"count\") or \"flop\" and \"bytes\", not both");
    }
    const OperatorSpec* spec = id ? catalog.op(*id) : nullptr;
    if (id && spec == nullptr) w.problem("operator", "unknown operator profile \"" + *id + "\"");
    if (spec != nullptr) {
      task.op = spec->id;
      task.flop = spec->flop * static_cast<double>(count);
      task.bytes = spec->bytes * static_cast<double>(count);
      task.dtype = spec->dtype;
      task.launches = static_cast<std::uint32_t>(count);
    }
    if (w.field("dtype") != nullptr) {
      if (auto d = parse_dtype(w.string("dtype", Need::optional).value_or(""))) {
        task.dtype = *d;
      } else {
        w.problem("dtype", "expected one of fp64, fp32, tf32, bf16, fp16, fp8, int8");
      }
    }
  } else {
    task.flop = w.quantity("flop", Dimension::flop, Need::required).value_or(0);
    task.bytes = w.quantity_or("bytes", Dimension::bytes, 0);
    if (w.field("count") != nullptr) w.problem("count", "\"count\" goes with \"operator\"");
    const std::string dtype = w.string_or("dtype", "bf16");
    if (auto d = parse_dtype(dtype)) {
      task.dtype = *d;
    } else {
      w.problem("dtype", "expected one of fp64, fp32, tf32, bf16, fp16, fp8, int8, found \"" + dtype + "\"");
    }
    task.launches = static_cast<std::uint32_t>(w.integer_or("launches", 1, 1, 1'000'000'000));
  }
  task.size = static_cast<TaskSpec::Size>(w.choice("size", {"fixed", "exponential"}, 0));
  w.finish();
}

// "model": "catalog-id" or {"id": ..., "weights": ...}.
void read_model(ObjectReader& task_reader, TaskSpec& task, const Catalog& catalog) {
  const Json* model = task_reader.field("model");
  if (model == nullptr) return;
  if (model->is_string()) {
    task.model = model->get<std::string>();
    if (const ModelSpec* spec = catalog.model(task.model)) {
      task.weights_bytes = spec->weights_bytes;
    } else {
      task_reader.problem("model", "unknown model \"" + task.model +
                                       "\" (name a catalog model, or give {\"id\": ..., \"weights\": ...})");
    }
    return;
  }
  ObjectReader m(*model, task_reader.pointer("model"), task_reader.problems());
  task.model = m.string("id", Need::required).value_or("");
  task.weights_bytes = m.quantity("weights", Dimension::bytes, Need::required).value_or(0);
  m.finish();
}

void read_one_collective(const Json& value, const std::string& pointer, Problems& problems, TaskSpec& task) {
  ObjectReader c(value, pointer, problems);
  if (!c.ok()) return;
  CollectiveSpec spec;
  if (auto op = c.string("op", Need::required)) {
    if (auto parsed = parse_collective_op(*op)) {
      spec.op = *parsed;
    } else {
      c.problem("op", "expected one of all-reduce, all-gather, reduce-scatter, broadcast, reduce, all-to-all, send-recv, found \"" + *op + "\"");
    }
  }
  const std::string algo = c.string_or("algo", "auto");
  if (auto parsed = parse_collective_algo(algo)) {
    spec.algo = *parsed;
  } else {
    c.problem("algo", "expected one of auto, ring, tree, nvls, nvls-tree, pat, direct, found \"" + algo + "\"");
  }
  spec.bytes = c.quantity("bytes", Dimension::bytes, Need::required).value_or(0);
  const bool pairwise = spec.op == CollectiveOp::all_to_all || spec.op == CollectiveOp::send_recv;
  const bool fits = spec.algo == CollectiveAlgo::automatic || (spec.algo == CollectiveAlgo::direct) == pairwise;
  const bool reduction_only = spec.algo == CollectiveAlgo::tree || spec.algo == CollectiveAlgo::nvls_tree;
  const bool gather_only = spec.algo == CollectiveAlgo::pat;
  const bool gathers = spec.op == CollectiveOp::all_gather || spec.op == CollectiveOp::reduce_scatter;
  const bool nvls_ops = spec.op == CollectiveOp::all_reduce || gathers;
  if (!fits || (reduction_only && spec.op != CollectiveOp::all_reduce) || (gather_only && !gathers) ||
      (spec.algo == CollectiveAlgo::nvls && !nvls_ops)) {
    c.problem("algo", std::string(collective_algo_name(spec.algo)) + " cannot run " + std::string(collective_op_name(spec.op)) +
                          " (ring: all but all-to-all and send-recv; tree and nvls-tree: all-reduce; nvls: all-reduce, "
                          "all-gather, reduce-scatter; pat: all-gather, reduce-scatter; direct: all-to-all and send-recv)");
  }
  spec.compression = c.number("compression", Need::optional, 1e-6, 1.0).value_or(1.0);
  spec.overlap = c.number("overlap", Need::optional, 0.0, 1.0).value_or(0.0);
  c.finish();
  if (spec.op == CollectiveOp::all_to_all && static_cast<std::size_t>(task.gpus) > kMaxAllToAllRanks) {
    c.problem("op", "an all-to-all over the task's " + std::to_string(task.gpus) + " GPUs is a flow from each to every other, over the " +
                        std::to_string(kMaxAllToAllRanks) + " ranks an all-to-all may have: a smaller gang");
  }
  task.collectives.push_back(spec);
}

// "collective": one {"op", "bytes", ...}, or a list of them, each from its own overlap on.
void read_collective(ObjectReader& task_reader, TaskSpec& task) {
  const Json* value = task_reader.field("collective");
  if (value == nullptr) return;
  const std::string pointer = task_reader.pointer("collective");
  if (!value->is_array()) {
    read_one_collective(*value, pointer, task_reader.problems(), task);
    return;
  }
  if (value->empty() || value->size() > TaskSpec::kMaxCollectives) {
    task_reader.problem("collective", "expected one collective or a list of 1 to " + std::to_string(TaskSpec::kMaxCollectives) + ", found a list of " +
                                          std::to_string(value->size()));
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) read_one_collective((*value)[i], child_pointer(pointer, i), task_reader.problems(), task);
}

void read_batching(ObjectReader& task_reader, TaskSpec& task) {
  const Json* value = task_reader.field("batching");
  if (value == nullptr) return;
  ObjectReader b(*value, task_reader.pointer("batching"), task_reader.problems());
  if (!b.ok()) return;
  BatchingSpec spec;
  spec.max_size = static_cast<std::uint32_t>(b.integer("max_size", Need::required, 1, 65536).value_or(1));
  spec.max_wait_s = b.quantity_or("max_wait", Dimension::time, 0);
  spec.shared_bytes = b.number("shared_bytes", Need::optional, 0.0, 1.0).value_or(0.0);
  b.finish();
  if (task.gpus != 1) task_reader.problem("batching", "only single-GPU tasks are batched; this one needs a gang of " + std::to_string(task.gpus));
  if (spec.max_size > 1) task.batching = spec;  // 1: no batching
}

// "elastic": {"min_gpus": k, "restart": "30 s", "min_interval": "5 min"}; `gpus` is the largest degree.
void read_elastic(ObjectReader& task_reader, TaskSpec& task) {
  const Json* value = task_reader.field("elastic");
  if (value == nullptr) return;
  ObjectReader e(*value, task_reader.pointer("elastic"), task_reader.problems());
  if (!e.ok()) return;
  if (task.shape.gpus() > 1) task_reader.problem("elastic", "a parallel step keeps the gang its degree names: it cannot be elastic");
  ElasticSpec spec;
  const auto min_gpus = e.integer("min_gpus", Need::required, 1, 65536);
  spec.restart_s = e.quantity("restart", Dimension::time, Need::required).value_or(0);
  // By default at most a tenth of a job's time goes to restarts caused by resizing.
  spec.min_interval_s = e.quantity_or("min_interval", Dimension::time, 10 * spec.restart_s);
  e.finish();
  if (min_gpus && *min_gpus > task.gpus) {
    e.problem("min_gpus", "expected at most the task's \"gpus\" (" + std::to_string(task.gpus) +
                              ", its largest data-parallel degree), found " + std::to_string(*min_gpus));
  }
  if (task.batching) task_reader.problem("elastic", "a batched task cannot be elastic (batches run on one GPU)");
  spec.min_gpus = static_cast<int>(min_gpus.value_or(1));
  task.elastic = spec;
}

}  // namespace

Workflow read_workflow(const Json& value, const std::string& pointer, Problems& problems,
                       const Catalog& catalog) {
  Workflow wf;
  wf.file = problems.file();
  wf.pointer = pointer;
  ObjectReader top(value, pointer, problems);
  wf.name = top.string_or("name", "");
  top.string("description", Need::optional);

  std::map<std::string, std::uint32_t, std::less<>> index_of;
  if (const Json* tasks = top.field("tasks", Need::required)) {
    if (!tasks->is_array() || tasks->empty()) {
      top.problem("tasks", "expected a non-empty array of tasks, found " + describe(*tasks));
    } else {
      for (std::size_t i = 0; i < tasks->size(); ++i) {
        ObjectReader r((*tasks)[i], child_pointer(top.pointer("tasks"), i), problems);
        if (!r.ok()) continue;
        TaskSpec t;
        t.name = r.string("name", Need::required).value_or("task" + std::to_string(i));
        t.gpus = static_cast<int>(r.integer_or("gpus", 1, 1, 65536));
        read_model(r, t, catalog);
        t.working_set_bytes = r.quantity_or("working_set", Dimension::bytes, 0);
        read_collective(r, t);
        read_work(r, t, catalog);
        read_batching(r, t);
        read_elastic(r, t);
        r.finish();
        if (!index_of.emplace(t.name, static_cast<std::uint32_t>(wf.tasks.size())).second) {
          r.problem("name", "duplicate task name \"" + t.name + "\"");
        }
        wf.tasks.push_back(std::move(t));
      }
    }
  }

  if (const Json* edges = top.field("edges")) {
    if (!edges->is_array()) {
      top.problem("edges", "expected an array of edges, found " + describe(*edges));
    } else {
      for (std::size_t i = 0; i < edges->size(); ++i) {
        ObjectReader r((*edges)[i], child_pointer(top.pointer("edges"), i), problems);
        if (!r.ok()) continue;
        EdgeSpec e;
        bool ok = true;
        for (auto [key, slot] : {std::pair{"from", &e.from}, std::pair{"to", &e.to}}) {
          const auto name = r.string(key, Need::required);
          const auto it = name ? index_of.find(*name) : index_of.end();
          if (name && it == index_of.end()) r.problem(key, "unknown task \"" + *name + "\"");
          if (it == index_of.end()) {
            ok = false;
          } else {
            *slot = it->second;
          }
        }
        e.bytes = r.quantity_or("bytes", Dimension::bytes, 0);
        r.finish();
        if (ok && e.from == e.to) {
          r.problem("to", "an edge from a task to itself is a cycle");
          ok = false;
        }
        if (ok) wf.edges.push_back(e);
      }
    }
  }
  top.finish();
  return wf;
}

}  // namespace detail

void Workflow::finalize() {
  const auto n = static_cast<std::uint32_t>(tasks.size());
  auto build = [&](auto endpoint, std::vector<std::uint32_t>& offsets, std::vector<std::uint32_t>& list) {
    offsets.assign(n + 1, 0);
    for (const EdgeSpec& e : edges) ++offsets[endpoint(e) + 1];
    for (std::uint32_t t = 0; t < n; ++t) offsets[t + 1] += offsets[t];
    list.assign(edges.size(), 0);
    std::vector<std::uint32_t> fill(offsets.begin(), offsets.end() - 1);
    for (std::uint32_t i = 0; i < edges.size(); ++i) list[fill[endpoint(edges[i])]++] = i;
  };
  build([](const EdgeSpec& e) { return e.to; }, in_offsets_, in_edges_);
  build([](const EdgeSpec& e) { return e.from; }, out_offsets_, out_edges_);

  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph g(n);
  for (const EdgeSpec& e : edges) boost::add_edge(e.from, e.to, g);

  // A depth-first search finds a back edge exactly when there is a cycle; name it for the user.
  struct BackEdge {
    std::uint32_t from, to;
  };
  struct CycleFinder : boost::default_dfs_visitor {
    void back_edge(Graph::edge_descriptor e, const Graph& graph) const {
      throw BackEdge{static_cast<std::uint32_t>(boost::source(e, graph)),
                     static_cast<std::uint32_t>(boost::target(e, graph))};
    }
  };
  try {
    boost::depth_first_search(g, boost::visitor(CycleFinder{}));
  } catch (const BackEdge& cycle) {
    throw InputError({Problem{file, pointer + "/edges",
                              "the edges form a cycle (task \"" + tasks[cycle.from].name +
                                  "\" -> \"" + tasks[cycle.to].name +
                                  "\" closes it); a workflow must be a DAG"}});
  }
  std::vector<std::uint32_t> reverse_order;
  boost::topological_sort(g, std::back_inserter(reverse_order));
  topo_order_.assign(reverse_order.rbegin(), reverse_order.rend());
}

Workflow parse_workflow(std::string_view json_text, const std::string& file_name, const Catalog& catalog) {
  detail::Problems problems(file_name);
  const detail::Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  Workflow wf = detail::read_workflow(doc, "", problems, catalog);
  problems.throw_if_any();
  wf.finalize();
  return wf;
}

Workflow load_workflow(const std::string& path, const Catalog& catalog) {
  return parse_workflow(read_text_file(path), path, catalog);
}

}  // namespace fleetsim
