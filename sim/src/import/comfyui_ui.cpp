#include "comfyui_ui.hpp"

#include "comfyui_registry.hpp"
#include "fleetsim/units.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

namespace fleetsim::detail {
namespace {

constexpr int kModeMuted = 2, kModeBypassed = 4;
constexpr int kMaxSubgraphDepth = 32;
// Nodes a workflow may expand to, its subgraphs' copies counted: subgraphs that each hold two of the next,
// 24 deep, would make 2^24 copies (found by a hostile-input audit), so the expansion stops at this many.
constexpr std::size_t kMaxExpandedNodes = 100'000;

}  // namespace

bool is_comfyui_ui_workflow(const Json& doc) {
  return doc.is_object() && doc.contains("nodes") && doc["nodes"].is_array() && doc.contains("links") && doc["links"].is_array();
}

namespace {

// Node ids are integers, or strings (older group nodes); both become the text of the API's ids.
std::optional<std::string> id_text(const Json& id) {
  if (id.is_number_integer()) return std::to_string(id.get<std::int64_t>());
  if (id.is_string()) return id.get<std::string>();
  return std::nullopt;
}

// What a link carries from its source. Ids are scoped: a node or link inside an instance of a subgraph
// is "instance:id" (ComfyUI's own execution ids), so that every copy of a subgraph is its own.
struct UiLink {
  std::string source;
  std::int64_t slot = 0;
  std::string type;  // the link's data type ("MODEL", "INT", "*")
  // A link inside a subgraph from its input node carries what the instance's input of that slot
  // receives: `via`, the outer link, or nothing when the instance leaves that input unlinked.
  bool boundary = false;
  std::optional<std::string> via = {};
};

struct UiNode {
  std::string type;
  int mode = 0;
  const Json* json = nullptr;
  std::string at;  // its pointer in the file
  std::vector<std::pair<std::string, std::optional<std::string>>> inputs;  // (type, link) per input slot
};

// A UI workflow with its subgraphs expanded in place, as the frontend does when it queues a graph:
// an instance of a subgraph (a node whose type is a definition's id) becomes the definition's nodes,
// its inputs reaching them through the definition's input node and its outputs coming from what
// feeds the output node. A muted or bypassed instance mutes or bypasses all its nodes.
class Flattened {
 public:
  Flattened(const Json& ui, Problems& problems) : problems_(problems) {
    collect_definitions(ui, "");
    read_graph(ui, "", "", 0, 0, nullptr);
  }

  std::map<std::string, UiLink> links;
  std::map<std::string, UiNode> nodes;
  std::vector<std::string> order;  // node ids in the order the file lists them
  // Per instance: for each output slot, the link inside that feeds the definition's output node.
  std::map<std::string, std::vector<std::optional<std::string>>> exits;

 private:
  struct Definition {
    const Json* json;
    std::string at;
  };
  // What an instance being expanded gives its definition: its scoped id and, per definition input,
  // the outer link that feeds it.
  struct Instance {
    std::string id;
    std::vector<std::optional<std::string>> inputs;
    std::optional<std::string> input_node, output_node;  // the definition's boundary node ids
  };

  void collect_definitions(const Json& graph, const std::string& at) {
    if (!graph.contains("definitions") || !graph["definitions"].is_object()) return;
    const Json& defs = graph["definitions"];
    if (!defs.contains("subgraphs")) return;
    const std::string list_at = at + "/definitions/subgraphs";
    if (!defs["subgraphs"].is_array()) {
      problems_.add(list_at, "expected an array of subgraph definitions, found " + describe(defs["subgraphs"]));
      return;
    }
    for (std::size_t i = 0; i < defs["subgraphs"].size(); ++i) {
      const Json& d = defs["subgraphs"][i];
      const std::string d_at = child_pointer(list_at, i);
      if (!d.is_object() || !d.contains("id") || !d["id"].is_string() || !d.contains("nodes") || !d["nodes"].is_array()) {
        problems_.add(d_at, "expected a subgraph definition with a string \"id\" and a \"nodes\" array, found " + describe(d));
        continue;
      }
      definitions_.emplace(d["id"].get<std::string>(), Definition{&d, d_at});
      collect_definitions(d, d_at);
    }
  }

  // The id of a definition's input or output node ("inputNode": {"id": -10}).
  static std::optional<std::string> boundary_id(const Json& definition, const char* key) {
    if (!definition.contains(key) || !definition[key].is_object() || !definition[key].contains("id")) return std::nullopt;
    return id_text(definition[key]["id"]);
  }

  void read_links(const Json& graph, const std::string& at, const std::string& scope, const Instance* instance) {
    if (!graph.contains("links")) return;
    const Json& list = graph["links"];
    if (!list.is_array()) {
      problems_.add(at + "/links", "expected an array of links, found " + describe(list));
      return;
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const Json& l = list[i];
      // [id, source node, source slot, target node, target slot, type], or (in subgraphs and version 1)
      // {"id", "origin_id", "origin_slot", "target_id", "target_slot", "type"}.
      std::optional<std::string> origin, target;
      std::int64_t id = 0, origin_slot = -1, target_slot = -1;
      std::string type = "*";
      bool ok = false;
      if (l.is_array() && l.size() >= 5 && l[0].is_number_integer() && l[2].is_number_integer()) {
        origin = id_text(l[1]);
        target = id_text(l[3]);
        id = l[0].get<std::int64_t>();
        origin_slot = l[2].get<std::int64_t>();
        target_slot = l[4].is_number_integer() ? l[4].get<std::int64_t>() : -1;
        if (l.size() > 5 && l[5].is_string()) type = l[5].get<std::string>();
        ok = origin.has_value();
      } else if (l.is_object() && l.contains("id") && l["id"].is_number_integer() && l.contains("origin_id") && l.contains("origin_slot") &&
                 l["origin_slot"].is_number_integer()) {
        origin = id_text(l["origin_id"]);
        target = l.contains("target_id") ? id_text(l["target_id"]) : std::nullopt;
        id = l["id"].get<std::int64_t>();
        origin_slot = l["origin_slot"].get<std::int64_t>();
        target_slot = l.contains("target_slot") && l["target_slot"].is_number_integer() ? l["target_slot"].get<std::int64_t>() : -1;
        if (l.contains("type") && l["type"].is_string()) type = l["type"].get<std::string>();
        ok = origin.has_value();
      }
      if (!ok) {
        problems_.add(child_pointer(at + "/links", i),
                      "expected a link [id, source node, source slot, target node, target slot, type], found " + describe(l));
        continue;
      }
      const std::string key = scope + std::to_string(id);
      UiLink link{scope + *origin, origin_slot, type};
      if (instance != nullptr && origin == instance->input_node) {
        link.boundary = true;
        if (origin_slot >= 0 && static_cast<std::size_t>(origin_slot) < instance->inputs.size()) link.via = instance->inputs[origin_slot];
      }
      if (instance != nullptr && instance->output_node && target == instance->output_node && target_slot >= 0) {
        auto& slots = exits[instance->id];
        if (slots.size() <= static_cast<std::size_t>(target_slot)) slots.resize(target_slot + 1);
        slots[target_slot] = key;
      }
      links[key] = std::move(link);
    }
  }

  void read_graph(const Json& graph, const std::string& at, const std::string& scope, int forced_mode, int depth, const Instance* instance) {
    read_links(graph, at, scope, instance);
    const Json& list = graph["nodes"];
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (++expanded_ > kMaxExpandedNodes) {
        if (expanded_ == kMaxExpandedNodes + 1) {
          problems_.add(at, "the workflow expands to more than " + format_number(kMaxExpandedNodes) + " nodes, its subgraphs' copies counted");
        }
        return;
      }
      const Json& n = list[i];
      const std::string node_at = child_pointer(at + "/nodes", i);
      const std::optional<std::string> own_id = n.is_object() && n.contains("id") ? id_text(n["id"]) : std::nullopt;
      if (!own_id || !n.contains("type") || !n["type"].is_string()) {
        problems_.add(node_at, "expected a node with an integer \"id\" and a string \"type\", found " + describe(n));
        continue;
      }
      const std::string id = scope + *own_id;
      UiNode node;
      node.type = n["type"].get<std::string>();
      node.mode = n.contains("mode") && n["mode"].is_number_integer() ? n["mode"].get<int>() : 0;
      if (forced_mode != 0 && node.mode != kModeMuted) node.mode = forced_mode;
      node.json = &n;
      node.at = node_at;
      read_inputs(n, node_at, scope, node);
      if (const auto def = definitions_.find(node.type); def != definitions_.end()) {
        expand(id, node, def->first, def->second, forced_mode, depth);
        continue;
      }
      if (nodes.contains(id)) {
        problems_.add(node_at + "/id", "node id " + *own_id + " appears twice");
        continue;
      }
      order.push_back(id);
      nodes.emplace(id, std::move(node));
    }
  }

  void read_inputs(const Json& n, const std::string& at, const std::string& scope, UiNode& node) {
    if (!n.contains("inputs")) return;
    const Json& slots = n["inputs"];
    if (!slots.is_array()) {
      problems_.add(at + "/inputs", "expected an array of input slots, found " + describe(slots));
      return;
    }
    for (std::size_t k = 0; k < slots.size(); ++k) {
      const Json& slot = slots[k];
      const std::string slot_at = child_pointer(at + "/inputs", k);
      if (!slot.is_object() || !slot.contains("name") || !slot["name"].is_string()) {
        problems_.add(slot_at, "expected an input slot with a \"name\", found " + describe(slot));
        node.inputs.emplace_back("", std::nullopt);
        continue;
      }
      std::optional<std::string> link;
      if (slot.contains("link") && !slot["link"].is_null()) {
        if (!slot["link"].is_number_integer()) {
          problems_.add(slot_at + "/link", "expected a link id or null, found " + describe(slot["link"]));
        } else if (const std::string key = scope + std::to_string(slot["link"].get<std::int64_t>()); !links.contains(key)) {
          problems_.add(slot_at + "/link", "link " + std::to_string(slot["link"].get<std::int64_t>()) + " is not in \"links\"");
        } else {
          link = key;
        }
      }
      node.inputs.emplace_back(slot.contains("type") && slot["type"].is_string() ? slot["type"].get<std::string>() : "*", link);
    }
  }

  // An instance of a subgraph: its definition's nodes, scoped by the instance's id.
  void expand(const std::string& id, const UiNode& instance_node, const std::string& definition_id, const Definition& def, int forced_mode, int depth) {
    const Json& definition = *def.json;
    const std::string& definition_at = def.at;
    if (std::find(expanding_.begin(), expanding_.end(), definition_id) != expanding_.end()) {
      std::string path;
      for (const std::string& d : expanding_) path += d + " > ";
      problems_.add(instance_node.at, "subgraph " + definition_id + " contains itself (" + path + definition_id + ")");
      return;
    }
    if (depth >= kMaxSubgraphDepth) {
      problems_.add(instance_node.at, "subgraphs nest more than " + std::to_string(kMaxSubgraphDepth) + " deep");
      return;
    }
    expanding_.push_back(definition_id);
    struct Pop {
      std::vector<std::string>& stack;
      ~Pop() { stack.pop_back(); }
    } pop{expanding_};
    Instance instance{id, {}, boundary_id(definition, "inputNode"), boundary_id(definition, "outputNode")};
    // The instance's inputs by name, matched to the definition's inputs in their order.
    if (definition.contains("inputs") && definition["inputs"].is_array()) {
      for (const Json& input : definition["inputs"]) {
        std::optional<std::string> link;
        const Json* slots = instance_node.json->contains("inputs") ? &(*instance_node.json)["inputs"] : nullptr;
        for (std::size_t k = 0; slots != nullptr && slots->is_array() && k < slots->size() && k < instance_node.inputs.size(); ++k) {
          const Json& slot = (*slots)[k];
          if (input.is_object() && input.contains("name") && slot.is_object() && slot.contains("name") && slot["name"] == input["name"]) {
            link = instance_node.inputs[k].second;
          }
        }
        instance.inputs.push_back(link);
      }
    }
    const int mode = instance_node.mode == kModeMuted || instance_node.mode == kModeBypassed ? instance_node.mode : forced_mode;
    exits[id];  // an output nothing inside feeds gives nothing
    read_graph(definition, definition_at, id + ":", mode, depth + 1, &instance);
  }

  Problems& problems_;
  std::map<std::string, Definition> definitions_;
  std::vector<std::string> expanding_;  // the definitions being expanded, outermost first
  std::size_t expanded_ = 0;            // nodes read, every copy counted
};

// What an input receives: a value or a link ([id, slot]); nothing (fed by a muted node: ComfyUI runs
// the node without it); or its own widget (a subgraph input left unlinked).
struct Received {
  enum Kind { value, nothing, widget } kind;
  Json json;
};

}  // namespace

Json comfyui_ui_to_api(const Json& ui, const ComfyRegistry& registry, Problems& problems) {
  const Flattened graph(ui, problems);
  const auto& links = graph.links;
  const auto& by_id = graph.nodes;

  // What an input linked by `link` receives, as ComfyUI runs the graph: through Reroutes, bypassed
  // nodes (which pass on their input of the link's type) and subgraph boundaries to a running node's
  // output ([id, slot]), or a PrimitiveNode's value; nothing from a muted node, or a bypassed one with
  // no input of that type.
  const auto resolve = [&](std::string link, const std::string& at) -> Received {
    for (std::size_t steps = 0; steps <= links.size() + graph.exits.size(); ++steps) {
      const UiLink& l = links.at(link);
      if (l.boundary) {
        if (!l.via) return {Received::widget, {}};
        link = *l.via;
        continue;
      }
      if (const auto exit = graph.exits.find(l.source); exit != graph.exits.end()) {
        if (l.slot < 0 || static_cast<std::size_t>(l.slot) >= exit->second.size() || !exit->second[l.slot]) return {Received::nothing, {}};
        link = *exit->second[l.slot];
        continue;
      }
      const auto src = by_id.find(l.source);
      if (src == by_id.end()) return {Received::value, Json::array({l.source, l.slot})};  // reported as a dangling link later
      const UiNode& n = src->second;
      if (n.mode == kModeMuted) return {Received::nothing, {}};
      if (n.type == "PrimitiveNode") {
        const Json* values = n.json->contains("widgets_values") ? &(*n.json)["widgets_values"] : nullptr;
        if (values != nullptr && values->is_array() && !values->empty()) return {Received::value, (*values)[0]};
        return {Received::nothing, {}};
      }
      std::optional<std::string> next;
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
        return {Received::value, Json::array({l.source, l.slot})};
      }
      if (!next) return {Received::nothing, {}};
      link = *next;
    }
    problems.add(at, "links form a cycle through Reroute, bypassed nodes or subgraph boundaries");
    return {Received::nothing, {}};
  };

  Json api = Json::object();
  for (const std::string& id : graph.order) {
    const UiNode& node = by_id.at(id);
    const Json& n = *node.json;
    // Nodes that exist only in the editor (notes; PrimitiveNodes and Reroutes, seen through above)
    // never run.
    const ComfyNodeType* type = registry.node(node.type);
    if ((type != nullptr && type->role == ComfyRole::ui) || node.mode == kModeMuted || node.mode == kModeBypassed) continue;
    const std::string& at = node.at;
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
      Received received = resolve(*node.inputs[k].second, child_pointer(at + "/inputs", k) + "/link");
      if (received.kind == Received::value) {
        inputs[name] = std::move(received.json);
      } else if (received.kind == Received::nothing) {
        inputs.erase(name);  // fed by a muted node: ComfyUI runs the node without it
      }
    }
    api[id] = Json{{"class_type", node.type}, {"inputs", std::move(inputs)}};
  }
  return api;
}

}  // namespace fleetsim::detail
