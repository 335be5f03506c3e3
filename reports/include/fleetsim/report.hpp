// Writers of a run's results: the human summary, the machine-readable JSON summary, and the
// task-level trace as CSV and JSON. Also the catalog listing. Output is deterministic: the same
// run gives the same bytes.
#pragma once

#include <ostream>
#include <string>

#include "fleetsim/catalog.hpp"
#include "fleetsim/simulation.hpp"

namespace fleetsim {

void write_summary_text(std::ostream& out, const Scenario& scenario, const Summary& summary);
std::string summary_json(const Summary& summary);  // pretty-printed, ends with a newline

void write_trace_csv(std::ostream& out, const Scenario& scenario, const RunResult& run);
void write_trace_json(std::ostream& out, const Scenario& scenario, const RunResult& run);

void write_catalog_text(std::ostream& out, const Catalog& catalog);
std::string catalog_json(const Catalog& catalog);

}  // namespace fleetsim
