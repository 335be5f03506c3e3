// Catalog entry readers (private), shared with the scenario loader for inline overrides.
#pragma once

#include "fleetsim/catalog.hpp"
#include "json_reader.hpp"

namespace fleetsim::detail {

// With `base`, every field is optional and defaults to the base entry's value.
GpuType read_gpu(ObjectReader& r, const std::string& id, const GpuType* base);
NodeType read_node(ObjectReader& r, const std::string& id, const NodeType* base);

}  // namespace fleetsim::detail
