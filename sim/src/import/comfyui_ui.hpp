// ComfyUI's UI workflow format (what Save writes: "nodes" and "links" arrays, widget values by
// position) turned into the API format the importer reads (node id -> class_type and named inputs).
#pragma once

#include "../json_reader.hpp"

namespace fleetsim::detail {

struct ComfyRegistry;

// Whether the document is a UI workflow: an object with "nodes" and "links" arrays.
bool is_comfyui_ui_workflow(const Json& doc);

// The API-format prompt of a UI workflow, as ComfyUI would queue it. Links become [source id, output
// slot] inputs; widget values are named from the registry's widget order (other types keep their
// links, and their strings by position). Editor-only nodes are left out and seen through: notes, Reroutes (followed to
// their source), PrimitiveNodes (their value replaces the link, so a widget converted to an input keeps
// the value the user set). Bypassed nodes pass on their input of the link's type; muted ones feed
// nothing. Structural problems are added with their UI pointers.
Json comfyui_ui_to_api(const Json& ui, const ComfyRegistry& registry, Problems& problems);

}  // namespace fleetsim::detail
