#include "comfyui_registry.hpp"

#include <algorithm>
#include <cctype>

#include "fleetsim/catalog.hpp"

namespace fleetsim {
namespace embedded {
std::string_view comfyui_json();
}

namespace detail {
namespace {

constexpr std::string_view kRoleNames[] = {"source", "pass", "sink", "sample", "encode_text", "decode",
                                           "encode_image", "upscale", "unpriced", "ui"};

std::vector<std::string> strings(ObjectReader& r, std::string_view key) {
  std::vector<std::string> out;
  const Json* list = r.field(key);
  if (list == nullptr) return out;
  if (!list->is_array()) {
    r.problem(key, "expected an array of strings, found " + describe(*list));
    return out;
  }
  for (std::size_t i = 0; i < list->size(); ++i) {
    if (!(*list)[i].is_string()) {
      r.problems().add(child_pointer(r.pointer(key), i), "expected a string, found " + describe((*list)[i]));
      continue;
    }
    out.push_back((*list)[i].get<std::string>());
  }
  return out;
}

ComfyNodeType read_node(const Json& value, const std::string& at, Problems& problems) {
  ComfyNodeType type;
  if (value.is_string()) {  // a role alone
    const auto role = std::find(std::begin(kRoleNames), std::end(kRoleNames), value.get<std::string>());
    if (role == std::end(kRoleNames)) {
      problems.add(at, "expected a role (source, pass, sink, sample, encode_text, decode, encode_image, upscale, unpriced, ui) "
                       "or an object {\"role\", \"widgets\", \"size\", \"family\"}, found " + describe(value));
    } else {
      type.role = static_cast<ComfyRole>(role - std::begin(kRoleNames));
    }
    return type;
  }
  ObjectReader r(value, at, problems);
  if (!r.ok()) return type;
  type.role = static_cast<ComfyRole>(r.choice("role", kRoleNames, 1));
  if (r.field("role") == nullptr) r.problem("role", "is required");
  type.widgets = strings(r, "widgets");
  type.outputs = strings(r, "outputs");
  type.family = r.string_or("family", "");
  type.encodes = r.string_or("encodes", "");
  if (const Json* size = r.field("size")) {
    ObjectReader s(*size, r.pointer("size"), problems);
    ComfySizeRule& rule = type.size;
    rule.width = s.string_or("width", "");
    rule.height = s.string_or("height", "");
    rule.frames = s.string_or("frames", "");
    rule.batch = s.string_or("batch", "");
    rule.scale = s.string_or("scale", "");
    rule.repeat = s.string_or("repeat", "");
    rule.megapixels = s.string_or("megapixels", "");
    rule.zero_keeps_aspect = s.boolean_or("zero_keeps_aspect", false);
    s.finish();
  }
  r.string_or("note", "");
  r.finish();
  return type;
}

ComfyStage read_stage(ObjectReader& parent, std::string_view key) {
  ComfyStage stage;
  const Json* value = parent.field(key);
  if (value == nullptr) return stage;
  stage.file = parent.problems().file();
  stage.pointer = parent.pointer(key);
  ObjectReader r(*value, parent.pointer(key), parent.problems());
  stage.architecture = r.string_or("architecture", "");
  stage.op = r.string_or("operator", "");
  stage.model = r.string_or("model", "");
  stage.at_pixels = r.number("at_pixels", Need::optional, 1).value_or(0);
  stage.at_frames = r.number("at_frames", Need::optional, 1).value_or(1);
  if (r.ok() && stage.empty()) r.problem("architecture", "a stage needs an \"architecture\" or an \"operator\"");
  r.finish();
  return stage;
}

ComfyFamily read_family(const std::string& id, const Json& value, const std::string& at, Problems& problems) {
  ComfyFamily f;
  f.id = id;
  ObjectReader r(value, at, problems);
  if (!r.ok()) return f;
  f.label = r.string("label", Need::required).value_or(id);
  f.diffusion = read_stage(r, "diffusion");
  f.text = read_stage(r, "text");
  f.vae = read_stage(r, "vae");
  const std::string dtype = r.string_or("dtype", "fp16");
  if (auto d = parse_dtype(dtype)) {
    f.dtype = *d;
  } else {
    r.problem("dtype", "expected one of fp64, fp32, tf32, bf16, fp16, fp8, int8, found \"" + dtype + "\"");
  }
  f.guidance_distilled = r.boolean_or("guidance_distilled", false);
  f.reference_image = r.boolean_or("reference_image", false);
  f.text_tokens = r.number("text_tokens", Need::optional, 1, 1e6).value_or(77);
  f.latent_channels = r.number("latent_channels", Need::optional, 1, 4096).value_or(4);
  f.text_width = r.number("text_width", Need::optional, 1, 1e6).value_or(768);
  r.string_or("source", "");
  r.finish();
  return f;
}

void read_into(ComfyRegistry& registry, std::string_view json_text, const std::string& file_name, bool rules_first) {
  Problems problems(file_name);
  const Json doc = parse_json(json_text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  if (!top.ok()) problems.throw_if_any();
  top.string_or("about", "");
  if (const Json* nodes = top.field("nodes")) {
    if (!nodes->is_object()) {
      top.problem("nodes", "expected an object of class type -> role or {\"role\", ...}, found " + describe(*nodes));
    } else {
      for (const auto& [cls, value] : nodes->items()) registry.nodes[cls] = read_node(value, child_pointer("/nodes", cls), problems);
    }
  }
  if (const Json* families = top.field("families")) {
    if (!families->is_object()) {
      top.problem("families", "expected an object of family id -> {\"label\", \"diffusion\", \"text\", \"vae\", ...}, found " +
                                  describe(*families));
    } else {
      for (const auto& [id, value] : families->items()) {
        registry.families[id] = read_family(id, value, child_pointer("/families", id), problems);
      }
    }
  }
  std::vector<ComfyFileRule> rules;
  if (const Json* files = top.field("files")) {
    if (!files->is_array()) {
      top.problem("files", "expected an array of {\"contains\": [...], \"family\": ...}, found " + describe(*files));
    } else {
      for (std::size_t i = 0; i < files->size(); ++i) {
        ObjectReader r((*files)[i], child_pointer("/files", i), problems);
        if (!r.ok()) continue;
        ComfyFileRule rule;
        for (std::string& part : strings(r, "contains")) rule.contains.push_back(lowercase(part));
        if (rule.contains.empty()) r.problem("contains", "expected at least one piece of a file name");
        rule.family = r.string("family", Need::required).value_or("");
        r.finish();
        rules.push_back(std::move(rule));
      }
    }
  }
  top.finish();
  // Every family a rule or a node names must exist, here or in what is extended.
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (!rules[i].family.empty() && !registry.families.contains(rules[i].family)) {
      problems.add(child_pointer(child_pointer("/files", i), "family"), "names family \"" + rules[i].family + "\", which no \"families\" entry defines");
    }
  }
  for (const auto& [cls, type] : registry.nodes) {
    if (!type.family.empty() && !registry.families.contains(type.family)) {
      problems.add(child_pointer(child_pointer("/nodes", cls), "family"), "names family \"" + type.family + "\", which no \"families\" entry defines");
    }
  }
  problems.throw_if_any();
  registry.files.insert(rules_first ? registry.files.begin() : registry.files.end(), rules.begin(), rules.end());
}

}  // namespace

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

const ComfyFamily* ComfyRegistry::family_of_file(std::string_view file_name) const {
  const std::string name = lowercase(file_name);
  // A piece that starts with "^" must begin the file's own name (after any folders).
  const std::size_t slash = name.find_last_of("/\\");
  const std::string_view base = std::string_view(name).substr(slash == std::string::npos ? 0 : slash + 1);
  const auto holds = [&](const std::string& part) {
    return part.starts_with('^') ? base.starts_with(std::string_view(part).substr(1)) : name.find(part) != std::string::npos;
  };
  for (const ComfyFileRule& rule : files) {
    const bool all = std::all_of(rule.contains.begin(), rule.contains.end(), holds);
    if (all) return &families.at(rule.family);
  }
  return nullptr;
}

const ComfyNodeType* ComfyRegistry::node(std::string_view class_type) const {
  const auto it = nodes.find(class_type);
  return it == nodes.end() ? nullptr : &it->second;
}

const ComfyRegistry& builtin_comfyui_registry() {
  static const ComfyRegistry registry = [] {
    ComfyRegistry r;
    read_into(r, embedded::comfyui_json(), "models/comfyui.json (built in)", false);
    return r;
  }();
  return registry;
}

ComfyRegistry extend_comfyui_registry(const ComfyRegistry& base, std::string_view json_text, const std::string& file_name) {
  ComfyRegistry registry = base;
  read_into(registry, json_text, file_name, true);
  return registry;
}

}  // namespace detail
}  // namespace fleetsim
