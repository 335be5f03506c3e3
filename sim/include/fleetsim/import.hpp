// Importers of graphs users already have. ComfyUI's API-format prompt (node id -> class_type and
// inputs, links as [node id, output index]), or its UI workflow (nodes and links arrays, read as the
// API format it stands for), becomes a fleetsim workflow: sampler, text-encode,
// VAE and upscale nodes become tasks whose work is a model step of the family's architecture at the
// node's steps, resolution, frames, batch and prompt length (operator profiles where no architecture
// fits); loaders' file names tell the family, through the registry models/comfyui.json; other known
// nodes pass data through. What it assumed is listed in the workflow's `assumptions`. Node types it
// does not know pass data through, listed as a guess (or, strict, refused); a node-costs file gives
// them a cost.
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/workflow.hpp"

namespace fleetsim {

// Whether JSON text looks like a ComfyUI graph: an API-format prompt (every top-level value has a
// class_type) or a UI workflow ("nodes" and "links" arrays).
bool is_comfyui_prompt(std::string_view json_text);

struct ComfyUiOptions {
  // Maps class types to {"flop", "bytes", "dtype", "model", "working_set"}, or {"free": true} for nodes
  // that do no GPU work; empty: none.
  std::string_view node_costs_json = {};
  std::string node_costs_file = {};
  // Additions to the built-in registry (models/comfyui.json): node types, model families and the file
  // names that show them, tried before the built-in ones; empty: none.
  std::string_view registry_json = {};
  std::string registry_file = {};
  // Every guess an error instead of an assumption: node types neither known nor priced, families the
  // importer has no profile for or could not tell, sizes no node sets.
  bool strict = false;
  // The GPU whose memory a VAE decode and its weights may fill before ComfyUI, out of memory, falls back to tiles
  // (a scenario: its cluster's smallest, where a prompt may run); none: 80 GB, an A100's or H100's.
  const GpuType* gpu = nullptr;
  // A scenario's largest GPU, where larger than `gpu` (and `gpu` given): the notes say where a decode that `gpu`
  // cannot hold whole runs whole. (The fallback tiles apply only below the whole decode's need on any GPU:
  // StepShape::Tiles::vram_below.)
  const GpuType* largest_gpu = nullptr;
  // Whose kernels run the models' attention: FlashAttention-2's (the default: PyTorch up to 2.10) or cuDNN's (PyTorch
  // 2.11 on Hopper).
  AttentionBackend attention = AttentionBackend::flash2;
};

Workflow import_comfyui(std::string_view json_text, const std::string& file_name, const Catalog& catalog,
                        const ComfyUiOptions& options = {});

// Whether JSON text looks like a WfCommons WfFormat instance ("schemaVersion" and "workflow").
bool is_wfcommons_instance(std::string_view json_text);

// A WfCommons instance (WfFormat 1.4, 1.5 or 1.6): one single-GPU task per task, whose work takes its
// recorded runtime on `reference` at its bf16 peak; edges carry the files a child reads from its parent.
Workflow import_wfcommons(std::string_view json_text, const std::string& file_name, const GpuType& reference);

// A public cluster job log as fleetsim's job-trace CSV (see the scenario's "trace" workload), with
// what the conversion kept, dropped and assumed, in words.
struct TraceImport {
  std::string csv;
  std::size_t jobs = 0;  // rows of the CSV
  std::vector<std::string> notes;
};
// Which jobs of a log to keep: submitted within [from_s, to_s) seconds after the log's first job, of
// these tenants (empty: all), with at least min_gpus GPUs.
struct TraceFilter {
  double from_s = 0;
  double to_s = std::numeric_limits<double>::infinity();
  std::vector<std::string> tenants;
  std::size_t min_gpus = 1;
};
// Which Philly field names a job's tenant: its virtual cluster, its user, or none (no tenant column).
enum class PhillyTenant { vc, user, none };
// Microsoft Philly's cluster_job_log (JSON): each job that ran becomes a row with its submission time,
// the GPUs of its last attempt and that attempt's run time. Malformed jobs are InputErrors naming the
// file and the job's pointer (repeated ones summarized).
TraceImport import_philly_trace(std::string_view json_text, const std::string& file_name, PhillyTenant tenant = PhillyTenant::vc,
                                const TraceFilter& filter = {});

// Any job log in CSV: the columns that hold each job's submission time, GPU count and run time (or its
// start and end times), and optionally its tenant, status, the share of each GPU it asked for (a
// column and its unit: "gpu_milli" and 1000 for thousandths) and the job a row belongs to (logs whose
// rows are a job's tasks: their GPUs add up, the job runs from its first start to its last end). Times
// are seconds (any standard number form) or "2020-07-01 08:00:00" (a space or a T, optionally with a
// UTC offset); only differences of times are used. `header`: the column names of files without a
// header row (empty: the first line is the header).
struct JobCsvColumns {
  std::string submit, gpus, duration, start, end, tenant, status, share, job;
  double share_unit = 1;
  std::vector<std::string> header;
  std::string assumed;  // what the mapping takes for granted, said in the import's notes
};
// "submit=submit_time,gpus=gpu_num,duration=duration,tenant=vc" (share=COLUMN/UNIT): which column is
// which, over `base` (a key given here replaces base's; duration replaces start and end, and back).
// Throws InputError naming an unknown key, a missing one, or duration given with start/end.
JobCsvColumns parse_job_csv_columns(std::string_view mapping, JobCsvColumns base = {});

// The job logs fleetsim knows by name: their columns, where to get them and what they leave out.
struct JobLogFormat {
  std::string name;     // --format
  std::string log;      // what it is and where it comes from
  std::string columns;  // the mapping, as --columns takes it
  std::vector<std::string> header;  // for logs shipped without a header row
  std::string assumed;
  JobCsvColumns mapping() const;  // parse_job_csv_columns(columns) with the header and what is assumed
};
const std::vector<JobLogFormat>& job_log_formats();
// The known log of that name, or nullptr.
const JobLogFormat* find_job_log_format(std::string_view name);

// Rows that did not run (no GPUs, no run time) are dropped and counted; fractional GPU asks are rounded
// up and counted; malformed cells are InputErrors naming the file, the line and the column (repeated
// ones summarized).
TraceImport import_job_csv(std::string_view text, const std::string& file_name, const JobCsvColumns& columns, const TraceFilter& filter = {});

// A workflow as fleetsim workflow JSON (explicit FLOP and bytes per task).
std::string workflow_json(const Workflow& workflow);

}  // namespace fleetsim
