// Readers shared by the loaders (private): one JSON value in, one checked model object out.
#pragma once

#include <memory>

#include "fleetsim/cost.hpp"
#include "fleetsim/scenario.hpp"
#include "fleetsim/training.hpp"
#include "fleetsim/workflow.hpp"
#include "json_reader.hpp"

namespace fleetsim::detail {

// Reads a workflow object at `pointer`; problems are recorded, not thrown. Adjacency is not built.
Workflow read_workflow(const Json& value, const std::string& pointer, Problems& problems,
                       const Catalog& catalog);

// Reads a cluster object (nodes, fabric) at `pointer` over `catalog`; problems are recorded, not thrown.
void read_cluster(const Json& value, const std::string& pointer, Problems& problems, const Catalog& catalog,
                  ClusterSpec& cluster);

// Reads a scenario's "serving" array (docs/serving.md): deployments on the scenario's cluster, each
// placed (ServingDeployment::placement). Problems are recorded, not thrown.
void read_serving(const Json& value, const std::string& pointer, Problems& problems, const ClusterSpec& cluster, bool cluster_ok,
                  const std::string& base_dir, std::vector<std::shared_ptr<const ServingDeployment>>& out);

// Reads a training job object (docs/training.md) at `pointer`. A job in a scenario (`in_scenario`) needs no
// cluster, and one it names is not read: it runs on the scenario's. Problems are recorded, not thrown; the
// job is not checked (check_training_job).
void read_training_job(const Json& value, const std::string& pointer, Problems& problems, bool in_scenario, TrainingJob& job);

// A training job of a scenario's workload (docs/training.md#inside-a-scenario) as a workflow: one task an
// iteration, each waiting for the one before, the job's gang computing the iteration and then reducing its
// gradients over the scenario's network; elastic, at each DP degree it may run at. Throws InputError where the
// job cannot run in a scenario.
Workflow training_workflow(const TrainingJob& job, int iterations, const ClusterSpec& cluster, const TrainingCheckpoint& checkpoint = {},
                           const TrainingElastic& elastic = {});

// Reads a plan file's "cost" object (docs/plan.md#cost) at `pointer` into `cost`. Owning needs a purchase price
// for every node type searched: one without is a problem at its index under `node_types_pointer`.
void read_ownership_cost(const Json& value, const std::string& pointer, Problems& problems, const std::vector<std::string>& node_types,
                         const std::string& node_types_pointer, OwnershipCost& cost);

// Applies "--set POINTER=VALUE" edits to a parsed document; VALUE is JSON, or else a plain string.
void apply_edits(Json& doc, std::span<const ScenarioEdit> edits, Problems& problems);

}  // namespace fleetsim::detail
