// The parts of a serving deployment's report that a `serve` run and a scenario's run both show.
#pragma once

#include <ostream>
#include <string>
#include <nlohmann/json.hpp>

#include "fleetsim/serving.hpp"

namespace fleetsim {

// The deployment, its KV cache, what it served, its percentiles, SLO verdicts and assumptions.
void write_serving_results(std::ostream& out, const ServingDeployment& d, const ServingResult& r);
nlohmann::ordered_json serving_results_json(const ServingDeployment& d, const ServingResult& r);
// The verdicts, the results as text, the TTFT and TPOT distributions and the batches and KV cache over
// time, under `heading`s; `id_suffix` keeps the charts' ids apart where a page shows several deployments.
void write_serving_sections(std::ostream& out, const ServingDeployment& d, const ServingResult& r, const std::string& id_suffix, const char* heading);

}  // namespace fleetsim
