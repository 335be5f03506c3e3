// Importers of graphs users already have. ComfyUI's API-format prompt (node id -> class_type and
// inputs, links as [node id, output index]), or its UI workflow (nodes and links arrays, read as the
// API format it stands for), becomes a fleetsim workflow: sampler, text-encode,
// VAE and upscale nodes become tasks whose work is a model step of the family's architecture at the
// node's steps, resolution, batch and prompt length (operator profiles where no architecture fits);
// loaders set the model of the tasks they feed; other known nodes pass data through. What it assumed
// is listed in the workflow's `assumptions`. Node types it does not know are listed in the error,
// and can be given a cost in a node-costs file.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "fleetsim/workflow.hpp"

namespace fleetsim {

// Whether JSON text looks like a ComfyUI graph: an API-format prompt (every top-level value has a
// class_type) or a UI workflow ("nodes" and "links" arrays).
bool is_comfyui_prompt(std::string_view json_text);

// `node_costs_json` (may be empty) maps class types to {"flop", "bytes", "dtype", "model", "working_set"}
// or {"free": true} for nodes that do no GPU work.
Workflow import_comfyui(std::string_view json_text, const std::string& file_name, const Catalog& catalog,
                        std::string_view node_costs_json = {}, const std::string& node_costs_file = {});

// Whether JSON text looks like a WfCommons WfFormat instance ("schemaVersion" and "workflow").
bool is_wfcommons_instance(std::string_view json_text);

// A WfCommons instance (WfFormat 1.4 or 1.5): one single-GPU task per task, whose work takes its
// recorded runtime on `reference` at its bf16 peak; edges carry the files a child reads from its parent.
Workflow import_wfcommons(std::string_view json_text, const std::string& file_name, const GpuType& reference);

// A public cluster job log as fleetsim's job-trace CSV (see the scenario's "trace" workload), with
// what the conversion kept, dropped and assumed, in words.
struct TraceImport {
  std::string csv;
  std::size_t jobs = 0;  // rows of the CSV
  std::vector<std::string> notes;
};
// Which Philly field names a job's tenant: its virtual cluster, its user, or none (no tenant column).
enum class PhillyTenant { vc, user, none };
// Microsoft Philly's cluster_job_log (JSON): each job that ran becomes a row with its submission time,
// the GPUs of its last attempt and that attempt's run time. Malformed jobs are InputErrors naming the
// file and the job's pointer (repeated ones summarized).
TraceImport import_philly_trace(std::string_view json_text, const std::string& file_name, PhillyTenant tenant = PhillyTenant::vc);

// A workflow as fleetsim workflow JSON (explicit FLOP and bytes per task).
std::string workflow_json(const Workflow& workflow);

}  // namespace fleetsim
