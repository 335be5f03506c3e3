// Readers shared by the loaders (private): one JSON value in, one checked model object out.
#pragma once

#include <memory>

#include "fleetsim/scenario.hpp"
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

// Applies "--set POINTER=VALUE" edits to a parsed document; VALUE is JSON, or else a plain string.
void apply_edits(Json& doc, std::span<const ScenarioEdit> edits, Problems& problems);

}  // namespace fleetsim::detail
