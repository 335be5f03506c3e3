#include "comfyui_ui.hpp"

#include "comfyui_registry.hpp"

#include <map>
#include <optional>
#include <vector>

namespace fleetsim::detail {
namespace {

constexpr int kModeMuted = 2, kModeBypassed = 4;

}  // namespace

bool is_comfyui_ui_workflow(const Json& doc) {
  return doc.is_object() && doc.contains("nodes") && doc["nodes"].is_array() && doc.contains("links") && doc["links"].is_array();
}

namespace {

// What a link carries from its source, once UI-only nodes are seen through.
struct UiLink {
  std::int64_t source = 0;
  std::int64_t slot = 0;
  std::string type;  // the link's data type ("MODEL", "INT", "*")
};

struct UiNode {
  std::string type;
  int mode = 0;
  const Json* json = nullptr;
  std::vector<std::pair<std::string, std::optional<std::int64_t>>> inputs;  // (type, link) per input slot
};


}  // namespace

Json comfyui_ui_to_api(const Json& ui, const ComfyRegistry& registry, Problems& problems) {
  std::map<std::int64_t, UiLink> links;
  const Json& link_list = ui["links"];
  for (std::size_t i = 0; i < link_list.size(); ++i) {
    const Json& l = link_list[i];
    const bool ok = l.is_array() && l.size() >= 5 && l[0].is_number_integer() && l[1].is_number_integer() && l[2].is_number_integer();
    if (!ok) {
      problems.add(child_pointer("/links", i), "expected a link [id, source node, source slot, target node, target slot, type], found " + describe(l));
      continue;
    }
    links[l[0].get<std::int64_t>()] = UiLink{l[1].get<std::int64_t>(), l[2].get<std::int64_t>(),
                                            l.size() > 5 && l[5].is_string() ? l[5].get<std::string>() : "*"};
  }

  // The nodes, by id, with their input slots' types and links.
  const Json& nodes = ui["nodes"];
  std::map<std::int64_t, UiNode> by_id;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Json& n = nodes[i];
    const std::string at = child_pointer("/nodes", i);
    if (!n.is_object() || !n.contains("id") || !n["id"].is_number_integer() || !n.contains("type") || !n["type"].is_string()) {
      problems.add(at, "expected a node with an integer \"id\" and a string \"type\", found " + describe(n));
      continue;
    }
    const std::int64_t id = n["id"].get<std::int64_t>();
    UiNode node;
    node.type = n["type"].get<std::string>();
    node.mode = n.contains("mode") && n["mode"].is_number_integer() ? n["mode"].get<int>() : 0;
    node.json = &n;
    if (n.contains("inputs")) {
      const Json& slots = n["inputs"];
      if (!slots.is_array()) {
        problems.add(at + "/inputs", "expected an array of input slots, found " + describe(slots));
      } else {
        for (std::size_t k = 0; k < slots.size(); ++k) {
          const Json& slot = slots[k];
          const std::string slot_at = child_pointer(at + "/inputs", k);
          if (!slot.is_object() || !slot.contains("name") || !slot["name"].is_string()) {
            problems.add(slot_at, "expected an input slot with a \"name\", found " + describe(slot));
            node.inputs.emplace_back("", std::nullopt);
            continue;
          }
          std::optional<std::int64_t> link;
          if (slot.contains("link") && !slot["link"].is_null()) {
            if (!slot["link"].is_number_integer()) {
              problems.add(slot_at + "/link", "expected a link id or null, found " + describe(slot["link"]));
            } else if (!links.contains(slot["link"].get<std::int64_t>())) {
              problems.add(slot_at + "/link", "link " + std::to_string(slot["link"].get<std::int64_t>()) + " is not in \"links\"");
            } else {
              link = slot["link"].get<std::int64_t>();
            }
          }
          node.inputs.emplace_back(slot.contains("type") && slot["type"].is_string() ? slot["type"].get<std::string>() : "*", link);
        }
      }
    }
    if (!by_id.emplace(id, std::move(node)).second) problems.add(at + "/id", "node id " + std::to_string(id) + " appears twice");
  }

  // What an input linked by `link` receives, as ComfyUI runs the graph: through Reroutes and bypassed
  // nodes (which pass on their input of the link's type) to a running node's output ([id, slot]), or
  // a PrimitiveNode's value; nothing from a muted node, or a bypassed one with no input of that type.
  const auto resolve = [&](std::int64_t link, const std::string& at) -> std::optional<Json> {
    for (std::size_t steps = 0; steps <= links.size(); ++steps) {
      const UiLink& l = links.at(link);
      const auto src = by_id.find(l.source);
      if (src == by_id.end()) return Json::array({std::to_string(l.source), l.slot});  // reported as a dangling link later
      const UiNode& n = src->second;
      if (n.mode == kModeMuted) return std::nullopt;
      if (n.type == "PrimitiveNode") {
        const Json* values = n.json->contains("widgets_values") ? &(*n.json)["widgets_values"] : nullptr;
        if (values != nullptr && values->is_array() && !values->empty()) return (*values)[0];
        return std::nullopt;
      }
      std::optional<std::int64_t> next;
      if (n.type == "Reroute") {
        if (!n.inputs.empty()) next = n.inputs[0].second;
      } else if (n.mode == kModeBypassed) {
        for (const auto& [type, in] : n.inputs) {
          if (in && (type == l.type || l.type == "*" || type == "*")) {
            next = in;
            break;
          }
        }
      } else {
        return Json::array({std::to_string(l.source), l.slot});
      }
      if (!next) return std::nullopt;
      link = *next;
    }
    problems.add(at, "links form a cycle through Reroute or bypassed nodes");
    return std::nullopt;
  };

  Json api = Json::object();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Json& n = nodes[i];
    if (!n.is_object() || !n.contains("id") || !n["id"].is_number_integer()) continue;
    const std::int64_t id_number = n["id"].get<std::int64_t>();
    const auto found = by_id.find(id_number);
    if (found == by_id.end() || found->second.json != &n) continue;  // malformed, or the second of an id
    const UiNode& node = found->second;
    // Nodes that exist only in the editor (notes; PrimitiveNodes and Reroutes, seen through above)
    // never run.
    const ComfyNodeType* type = registry.node(node.type);
    if ((type != nullptr && type->role == ComfyRole::ui) || node.mode == kModeMuted || node.mode == kModeBypassed) continue;
    const std::string at = child_pointer("/nodes", i);
    Json inputs = Json::object();
    // Widget values first, so that a widget turned into a linked input takes its link below.
    if (n.contains("widgets_values")) {
      const Json& values = n["widgets_values"];
      if (!values.is_array()) {
        // Some nodes save their widgets by name; keep the named values as they are.
        if (values.is_object()) {
          for (const auto& [name, v] : values.items()) inputs[name] = v;
        } else {
          problems.add(at + "/widgets_values", "expected an array or an object, found " + describe(values));
        }
      } else if (type != nullptr) {
        for (std::size_t k = 0; k < values.size() && k < type->widgets.size(); ++k) {
          if (!type->widgets[k].empty()) inputs[type->widgets[k]] = values[k];
        }
      } else {
        // A type the registry does not know: its strings kept by position, so that a custom loader's
        // file name can still tell the model family.
        for (std::size_t k = 0; k < values.size(); ++k) {
          if (values[k].is_string()) inputs["widgets_values[" + std::to_string(k) + "]"] = values[k];
        }
      }
    }
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      if (!node.inputs[k].second) continue;  // not connected
      const std::string name = n["inputs"][k]["name"].get<std::string>();
      if (std::optional<Json> value = resolve(*node.inputs[k].second, child_pointer(at + "/inputs", k) + "/link")) {
        inputs[name] = std::move(*value);
      } else {
        inputs.erase(name);  // fed by a muted node: ComfyUI runs the node without it
      }
    }
    api[std::to_string(id_number)] = Json{{"class_type", node.type}, {"inputs", std::move(inputs)}};
  }
  return api;
}

}  // namespace fleetsim::detail
