// The training jobs of a scenario's run, as the summary and the page show them.
#pragma once

#include <ostream>
#include <vector>
#include <nlohmann/json.hpp>

#include "fleetsim/summary.hpp"

namespace fleetsim {

// One row a job: its gang, iterations done, iteration time (mean, p95) against alone, tokens/s and MFU;
// then what the figures mean and leave out.
void write_training_results(std::ostream& out, const std::vector<TrainingResult>& results);
nlohmann::ordered_json training_results_json(const std::vector<TrainingResult>& results);

}  // namespace fleetsim
