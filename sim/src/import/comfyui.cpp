#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <functional>
#include <set>

#include "fleetsim/import.hpp"
#include "../json_reader.hpp"
#include "comfyui_ui.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Problems;

enum class Family { sd15, sdxl, flux, svd };
enum class Role { source, pass, sink, sample, encode_text, decode, encode_image, upscale, custom };

// Pixel size of what flows along a link (images and latents alike), with batch and video frames.
struct Size {
  double width = 1024, height = 1024, batch = 1, frames = 1;
  bool given = false;  // false: no node of the graph set it, the default stands
  double pixels() const { return width * height * batch * frames; }
};

struct Node {
  std::string id;
  std::string cls;
  const Json* inputs = nullptr;
  Role role = Role::pass;
  std::optional<Family> family;
  std::string family_evidence;  // how the family was told: a file name, or the node it came from
  std::string unmodelled;       // a family its file name shows that the importer has no profile for
  Size size;
  int task = -1;  // index in the workflow when the node is a task
  double output_bytes = 0;
};

const std::map<std::string, Role, std::less<>>& roles() {
  static const std::map<std::string, Role, std::less<>> table{
      {"CheckpointLoaderSimple", Role::source}, {"CheckpointLoader", Role::source}, {"UNETLoader", Role::source},
      {"ImageOnlyCheckpointLoader", Role::source}, {"CLIPLoader", Role::source}, {"DualCLIPLoader", Role::source},
      {"VAELoader", Role::source}, {"UpscaleModelLoader", Role::source}, {"LoadImage", Role::source},
      {"EmptyLatentImage", Role::source}, {"EmptySD3LatentImage", Role::source},
      {"LoraLoader", Role::pass}, {"LoraLoaderModelOnly", Role::pass}, {"ConditioningCombine", Role::pass},
      {"ConditioningConcat", Role::pass}, {"ConditioningZeroOut", Role::pass}, {"FluxGuidance", Role::pass},
      {"ModelSamplingFlux", Role::pass}, {"ModelSamplingDiscrete", Role::pass}, {"VideoLinearCFGGuidance", Role::pass},
      {"SVD_img2vid_Conditioning", Role::pass}, {"LatentUpscale", Role::pass}, {"LatentUpscaleBy", Role::pass},
      {"ImageScale", Role::pass}, {"ImageScaleBy", Role::pass}, {"RepeatLatentBatch", Role::pass},
      {"SaveImage", Role::sink}, {"PreviewImage", Role::sink}, {"SaveAnimatedWEBP", Role::sink},
      {"SaveAnimatedPNG", Role::sink},
      {"KSamplerSelect", Role::pass}, {"BasicScheduler", Role::pass}, {"BasicGuider", Role::pass},
      {"CFGGuider", Role::pass}, {"RandomNoise", Role::pass}, {"CLIPSetLastLayer", Role::pass},
      {"PrimitiveInt", Role::pass}, {"PrimitiveFloat", Role::pass}, {"PrimitiveBoolean", Role::pass},
      {"PrimitiveString", Role::pass}, {"PrimitiveStringMultiline", Role::pass},
      {"KSampler", Role::sample}, {"KSamplerAdvanced", Role::sample}, {"SamplerCustom", Role::sample},
      {"SamplerCustomAdvanced", Role::sample},
      {"CLIPTextEncode", Role::encode_text}, {"CLIPTextEncodeSDXL", Role::encode_text}, {"CLIPTextEncodeFlux", Role::encode_text},
      {"VAEDecode", Role::decode}, {"VAEDecodeTiled", Role::decode}, {"VAEEncode", Role::encode_image},
      {"ImageUpscaleWithModel", Role::upscale},
  };
  return table;
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Families a file name can show that the importer has no model for: their graphs are costed as
// another family's, and the import says so.
std::optional<std::string> unmodelled_family(const std::string& file_name) {
  const std::string name = lowercase(file_name);
  for (const char* family : {"wan", "umt5", "hunyuan", "ltx", "mochi", "sd3", "qwen", "hidream", "cosmos", "kontext"}) {
    if (name.find(family) != std::string::npos) return family;
  }
  if (name.find("v2-1") != std::string::npos || name.find("sd21") != std::string::npos || name.find("sd_2") != std::string::npos) return "sd2";
  return std::nullopt;
}

std::optional<Family> family_from_name(const std::string& file_name) {
  if (unmodelled_family(file_name)) return std::nullopt;
  const std::string name = lowercase(file_name);
  // T5-XXL ("t5xxl") is FLUX's text encoder: look for it before "xl".
  if (name.find("flux") != std::string::npos || name.find("t5") != std::string::npos) return Family::flux;
  if (name.find("svd") != std::string::npos) return Family::svd;
  if (name.find("xl") != std::string::npos) return Family::sdxl;
  if (name.find("1.5") != std::string::npos || name.find("1-5") != std::string::npos ||
      name.find("sd15") != std::string::npos) {
    return Family::sd15;
  }
  return std::nullopt;
}

// Tokens of a prompt as a text encoder pads it: about 4 tokens per 3 words (a guess for English
// prompts), plus start and end; CLIP in chunks of 77, T5 to at least its minimum.
double prompt_tokens(const std::string& text, double min_tokens) {
  double words = 0;
  bool in_word = false;
  for (unsigned char c : text) {
    const bool letter = std::isspace(c) == 0;
    words += letter && !in_word ? 1 : 0;
    in_word = letter;
  }
  const double tokens = std::ceil(words * 4 / 3) + 2;
  if (min_tokens == 77) return 77 * std::max(1.0, std::ceil((tokens - 2) / 75));
  return std::max(min_tokens, tokens);
}

const char* family_label(Family f) {
  switch (f) {
    case Family::sd15: return "SD 1.5";
    case Family::sdxl: return "SDXL";
    case Family::flux: return "FLUX.1";
    case Family::svd: return "Stable Video Diffusion";
  }
  return "?";
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// What a task's work was taken to be, in words: the model step and its shape, or the operator.
std::string work_text(const TaskSpec& t) {
  if (t.architecture) {
    const StepShape& s = t.shape;
    std::string text = t.architecture->id + (t.steps == 1 ? "" : ", " + number_text(t.steps) + " steps");
    if (s.width > 0) text += ", " + number_text(s.width) + "x" + number_text(s.height);
    if (s.frames > 1) text += "x" + number_text(s.frames) + " frames";
    if (s.batch != 1) text += ", batch " + number_text(s.batch);
    if (s.tokens > 0) text += ", " + number_text(s.tokens) + " tokens";
    if (s.context > 0) text += ", " + number_text(s.context) + " text tokens";
    return text;
  }
  return t.op.empty() ? "the node-costs file's FLOP and bytes" : "operator profile " + t.op;
}

bool is_link(const Json& v) { return v.is_array() && v.size() == 2 && (v[0].is_string() || v[0].is_number_integer()); }
std::string link_source(const Json& v) { return v[0].is_string() ? v[0].get<std::string>() : std::to_string(v[0].get<long long>()); }

// ComfyUI's primitive nodes (comfy_extras/nodes_primitive.py) output the one "value" they are given.
bool is_primitive(std::string_view cls) {
  return cls == "PrimitiveInt" || cls == "PrimitiveFloat" || cls == "PrimitiveBoolean" || cls == "PrimitiveString" ||
         cls == "PrimitiveStringMultiline";
}

// An input linked to a primitive node takes its value, so that a sampler's steps set there count.
void inline_primitives(Json& doc) {
  for (auto& [id, node] : doc.items()) {
    if (!node.is_object() || !node.contains("inputs") || !node["inputs"].is_object()) continue;
    for (auto& [name, v] : node["inputs"].items()) {
      if (!is_link(v)) continue;
      const auto src = doc.find(link_source(v));
      if (src == doc.end() || !src->is_object() || !src->contains("class_type") || !(*src)["class_type"].is_string() ||
          !is_primitive((*src)["class_type"].get<std::string>()) || !src->contains("inputs") || !(*src)["inputs"].is_object()) {
        continue;
      }
      const Json& inputs = (*src)["inputs"];
      if (const auto value = inputs.find("value"); value != inputs.end() && !is_link(*value)) v = *value;
    }
  }
}

// ComfyUI's own bounds on the widgets read here (its nodes.py: MAX_RESOLUTION 16384, batch_size up to
// 4096, steps up to 10000, cfg up to 100, scale_by 0.01 to 8, RepeatLatentBatch amount up to 64).
struct WidgetBounds {
  std::string_view key;
  double lowest, highest;
};
constexpr WidgetBounds kWidgetBounds[] = {
    {"width", 16, 16384},      {"height", 16, 16384},         {"batch_size", 1, 4096}, {"steps", 1, 10000},
    {"start_at_step", 0, 10000}, {"end_at_step", 0, 10000}, {"cfg", 0, 100},         {"scale_by", 0.01, 8},
    {"amount", 1, 64},         {"video_frames", 1, 4096}};

// A node's number widget, or `fallback` where it has none (or a link feeds it); a value outside
// ComfyUI's own range is a problem at its pointer (and `fallback` stands in, to go on checking).
double number_input(const Node& n, const char* key, double fallback, detail::Problems& problems) {
  if (n.inputs == nullptr) return fallback;
  const auto it = n.inputs->find(key);
  if (it == n.inputs->end() || !it->is_number()) return fallback;
  const double x = it->get<double>();
  for (const WidgetBounds& b : kWidgetBounds) {
    if (b.key == key && !(x >= b.lowest && x <= b.highest)) {
      problems.add(detail::child_pointer(detail::child_pointer(detail::child_pointer("", n.id), "inputs"), key),
                   "expected a number from " + number_text(b.lowest) + " to " + number_text(b.highest) + " (ComfyUI's own range), found " +
                       detail::describe(*it));
      return fallback;
    }
  }
  return x;
}

// Per family: the models a graph's tasks use, the architectures their layer-level profiles come from
// (none: the operator profiles, scaled by pixels), and its latent channels.
struct FamilyProfile {
  const char* sample_op;
  double sample_ref_pixels, sample_ref_frames;
  const char* encode_op;
  const char* encode_model;
  const char* decode_op;
  double decode_ref_pixels;
  const char* decode_model;
  const char* model;
  double latent_channels;
  double conditioning_bytes;  // one prompt's embedding
  const char* sample_arch = nullptr;
  const char* encode_arch = nullptr;
  const char* decode_arch = nullptr;
  Dtype dtype = Dtype::fp16;  // ComfyUI's default for the family's diffusion model on A100/H100-class GPUs
  double min_text_tokens = 77;  // what the text encoder pads a prompt to
};

const FamilyProfile& profile(Family f) {
  // SDXL's text encode runs CLIP-G (CLIP-L beside it, a sixth of its FLOP, is left out); FLUX's runs
  // T5-XXL, which ComfyUI pads to 256 tokens.
  static const FamilyProfile sd15{"sd15-unet-step-512", 512.0 * 512, 1, "clip-l-text-encode-77", "sd-1.5",
                                  "sd15-vae-decode-512", 512.0 * 512, "sd-1.5", "sd-1.5", 4, 77 * 768 * 2,
                                  "sd15-unet", "clip-l-text", "sd-vae-decoder"};
  static const FamilyProfile sdxl{"sdxl-unet-step-1024", 1024.0 * 1024, 1, "sdxl-text-encode", "sdxl-base-1.0",
                                  "sdxl-vae-decode-1024", 1024.0 * 1024, "sdxl-base-1.0", "sdxl-base-1.0", 4, 77 * 2048 * 2,
                                  "sdxl-unet", "clip-g-text", "sd-vae-decoder"};
  static const FamilyProfile flux{"flux-dev-step-1024", 1024.0 * 1024, 1, "t5xxl-text-encode-512", "t5-v1_1-xxl-encoder",
                                  "sdxl-vae-decode-1024", 1024.0 * 1024, "sdxl-vae", "flux.1-dev", 16, 256 * 4096 * 2,
                                  "flux-dit", "t5-xxl-encoder", "flux-vae-decoder", Dtype::bf16, 256};
  static const FamilyProfile svd{"svd-xt-step-576x1024-25f", 576.0 * 1024, 25, "sdxl-text-encode", "sdxl-base-1.0",
                                 "sdxl-vae-decode-1024", 1024.0 * 1024, "svd-xt", "svd-xt", 4, 1024 * 2};
  switch (f) {
    case Family::sd15: return sd15;
    case Family::sdxl: return sdxl;
    case Family::flux: return flux;
    case Family::svd: return svd;
  }
  return sdxl;
}

}  // namespace

bool is_comfyui_prompt(std::string_view json_text) {
  const Json doc = Json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (detail::is_comfyui_ui_workflow(doc)) return true;
  if (!doc.is_object() || doc.empty()) return false;
  for (const auto& [id, node] : doc.items()) {
    if (!node.is_object() || !node.contains("class_type")) return false;
  }
  return true;
}

Workflow import_comfyui(std::string_view json_text, const std::string& file_name, const Catalog& catalog,
                        const ComfyUiOptions& options) {
  const std::string_view node_costs_json = options.node_costs_json;
  const std::string& node_costs_file = options.node_costs_file;
  Problems problems(file_name);
  Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  if (detail::is_comfyui_ui_workflow(doc)) {
    doc = detail::comfyui_ui_to_api(doc, problems);
    problems.throw_if_any();
  }
  if (doc.is_object()) inline_primitives(doc);
  if (!doc.is_object() || doc.empty()) {
    problems.add("", "expected a ComfyUI graph: an API-format prompt (an object of node id -> {\"class_type\", \"inputs\"}, "
                     "Save (API Format) in ComfyUI) or a UI workflow (an object with \"nodes\" and \"links\" arrays, Save)");
    problems.throw_if_any();
  }
  Json costs = Json::object();
  if (!node_costs_json.empty()) {
    Problems cost_problems(node_costs_file);
    costs = detail::parse_json(node_costs_json, cost_problems);
    if (!costs.is_object()) {
      cost_problems.add("", "expected an object of class type -> cost");
    } else {
      for (const auto& [cls, cost] : costs.items()) {
        if (!cost.is_object()) {
          cost_problems.add(detail::child_pointer("", cls), "expected {\"flop\": ..., \"bytes\": ...} or {\"free\": true}, found " +
                                                                detail::describe(cost));
        }
      }
    }
    cost_problems.throw_if_any();
  }

  std::map<std::string, Node, std::less<>> nodes;
  for (const auto& [id, value] : doc.items()) {
    const std::string at = detail::child_pointer("", id);
    if (!value.is_object() || !value.contains("class_type") || !value["class_type"].is_string()) {
      problems.add(at, "expected a node {\"class_type\": ..., \"inputs\": {...}}, found " + detail::describe(value));
      continue;
    }
    Node n;
    n.id = id;
    n.cls = value["class_type"].get<std::string>();
    if (value.contains("inputs")) {
      if (value["inputs"].is_object()) {
        n.inputs = &value["inputs"];
      } else {
        problems.add(at + "/inputs", "expected an object, found " + detail::describe(value["inputs"]));
      }
    }
    nodes.emplace(id, std::move(n));
  }
  problems.throw_if_any();

  // Links, and node types nobody knows.
  std::map<std::string, std::vector<std::string>, std::less<>> unknown;
  for (auto& [id, n] : nodes) {
    if (const auto it = roles().find(n.cls); it != roles().end()) {
      n.role = it->second;
    } else if (costs.contains(n.cls)) {
      const Json& free = costs[n.cls].contains("free") ? costs[n.cls]["free"] : Json(false);
      if (!free.is_boolean()) {
        throw InputError({Problem{node_costs_file, detail::child_pointer(detail::child_pointer("", n.cls), "free"),
                                  "expected true or false, found " + detail::describe(free)}});
      }
      n.role = free.get<bool>() ? Role::pass : Role::custom;
    } else {
      unknown[n.cls].push_back(id);
    }
    if (n.inputs == nullptr) continue;
    for (const auto& [name, v] : n.inputs->items()) {
      if (is_link(v) && nodes.count(link_source(v)) == 0) {
        problems.add(detail::child_pointer(detail::child_pointer(detail::child_pointer("", id), "inputs"), name),
                     "links to node \"" + link_source(v) + "\", which is not in the graph");
      }
    }
  }
  std::string unknown_note;
  if (!unknown.empty()) {
    // Strict, an error's list; else one of the assumptions, its list a level deeper than they are.
    const std::string indent = options.strict ? "\n  " : "\n    ";
    std::string list;
    for (const auto& [cls, ids] : unknown) {
      list += indent + cls + " (node" + (ids.size() > 1 ? "s " : " ");
      // Ten ids say where; a graph of thousands of them needs no more.
      for (std::size_t i = 0; i < std::min<std::size_t>(ids.size(), 10); ++i) list += (i ? ", " : "") + ids[i];
      if (ids.size() > 10) list += " and " + std::to_string(ids.size() - 10) + " more";
      list += ")";
    }
    if (options.strict) {
      problems.add("", "unknown ComfyUI node types; give each a cost with a node-costs file "
                       "({\"Type\": {\"flop\": ..., \"bytes\": ...}} or {\"Type\": {\"free\": true}}):" + list);
    } else {
      // They keep Role::pass: their inputs flow through to whatever reads them.
      unknown_note = "unknown node types passed through as if they did no GPU work, a guess (a node-costs file gives them a cost; "
                     "--strict refuses them):" + list;
    }
  }
  problems.throw_if_any();

  const auto number = [&](const Node& n, const char* key, double fallback) { return number_input(n, key, fallback, problems); };
  auto linked = [&](const Node& n, const char* key) -> Node* {
    if (n.inputs == nullptr) return nullptr;
    const auto it = n.inputs->find(key);
    return it != n.inputs->end() && is_link(*it) ? &nodes.at(link_source(*it)) : nullptr;
  };

  // Depth-first topological order over links, with a stack of its own (a chain of 100,000 nodes is no
  // deeper for it); a cycle is an error.
  std::vector<Node*> order;
  std::map<std::string, int, std::less<>> state;  // 1 visiting, 2 done
  struct Frame {
    Node* node;
    std::vector<Node*> sources;  // the nodes its links come from, in input order
    std::size_t next = 0;
  };
  std::vector<Frame> stack;
  const auto enter = [&](Node& n) {
    state[n.id] = 1;
    Frame frame{&n, {}};
    if (n.inputs != nullptr) {
      for (const auto& [name, v] : n.inputs->items()) {
        if (is_link(v)) frame.sources.push_back(&nodes.at(link_source(v)));
      }
    }
    stack.push_back(std::move(frame));
  };
  for (auto& [id, root] : nodes) {
    if (state[id] != 0) continue;
    enter(root);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.sources.size()) {
        state[top.node->id] = 2;
        order.push_back(top.node);
        stack.pop_back();
        continue;
      }
      Node& src = *top.sources[top.next++];
      if (state[src.id] == 1) {
        problems.add(detail::child_pointer("", top.node->id), "links form a cycle through node \"" + src.id + "\"");
        problems.throw_if_any();
      }
      if (state[src.id] == 0) enter(src);
    }
  }

  Workflow wf;
  wf.file = file_name;
  if (!unknown_note.empty()) wf.assumptions.push_back(unknown_note);
  wf.name = "ComfyUI graph " + file_name;
  auto op = [&](const char* id) -> const OperatorSpec& {
    const OperatorSpec* spec = catalog.op(id);
    if (spec == nullptr) throw InputError({Problem{file_name, "", std::string("the catalog lacks operator profile \"") + id + "\""}});
    return *spec;
  };
  auto arch = [&](const char* id) {
    const auto it = catalog.architectures().find(id);
    if (it == catalog.architectures().end()) throw InputError({Problem{file_name, "", std::string("the catalog lacks architecture \"") + id + "\""}});
    return it->second;
  };
  // The prompt a sampler or text encoder works from: its own text, or the text encoder's its
  // conditioning comes from, through guidance and other pass-through nodes ("" when none is found).
  std::function<std::string(const Node&, int)> prompt_from = [&](const Node& n, int depth) -> std::string {
    if (n.inputs == nullptr || depth > 32) return "";
    for (const char* key : {"text", "text_g", "t5xxl"}) {
      if (const auto it = n.inputs->find(key); it != n.inputs->end() && it->is_string()) return it->get<std::string>();
    }
    for (const char* key : {"positive", "guider", "conditioning"}) {
      if (const Node* src = linked(n, key)) {
        if (std::string text = prompt_from(*src, depth + 1); !text.empty()) return text;
      }
    }
    return "";
  };
  auto prompt_of = [&](const Node& n) { return prompt_from(n, 0); };
  auto weights_of = [&](const std::string& model) {
    const ModelSpec* m = catalog.model(model);
    return m != nullptr ? m->weights_bytes : 0.0;
  };

  for (Node* n : order) {
    // Family: the node's own checkpoint name, else the first input that has one.
    if (n->inputs != nullptr) {
      // Either name of a dual loader, or its "type" ("flux"), can tell.
      for (const char* key : {"ckpt_name", "unet_name", "clip_name", "clip_name1", "clip_name2", "type"}) {
        if (!n->inputs->contains(key) || !(*n->inputs)[key].is_string()) continue;
        const std::string name = (*n->inputs)[key].get<std::string>();
        if (auto u = unmodelled_family(name); u && n->unmodelled.empty()) {
          n->unmodelled = *u;
          n->family_evidence = "\"" + name + "\" (" + n->cls + "#" + n->id + ")";
        } else if (auto f = family_from_name(name); f && n->unmodelled.empty()) {
          n->family = f;
          n->family_evidence = "\"" + name + "\" (" + n->cls + "#" + n->id + ")";
        }
      }
      // Else from the inputs, the model-carrying ones first (a refiner's latent may come from another family).
      auto inherit = [&](const Node& src) {
        if (n->family || !n->unmodelled.empty() || (!src.family && src.unmodelled.empty())) return;
        n->family = src.family;
        n->unmodelled = src.unmodelled;
        n->family_evidence = src.family_evidence;
      };
      for (const char* key : {"model", "clip", "guider", "vae", "conditioning", "positive"}) {
        if (const Node* src = linked(*n, key)) inherit(*src);
      }
      for (const auto& [name, v] : n->inputs->items()) {
        if (is_link(v)) inherit(nodes.at(link_source(v)));
      }
      // Size: from the data input, then the node's own parameters.
      for (const char* key : {"latent_image", "samples", "image", "pixels", "latent"}) {
        if (const Node* src = linked(*n, key)) {
          n->size = src->size;
          break;
        }
      }
    }
    Size& s = n->size;
    if (n->cls == "EmptyLatentImage" || n->cls == "EmptySD3LatentImage" || n->cls == "LatentUpscale" || n->cls == "ImageScale") {
      s.width = number(*n, "width", s.width);
      s.height = number(*n, "height", s.height);
      s.batch = number(*n, "batch_size", s.batch);
      s.given = s.given || n->cls != "LatentUpscale";
    } else if (n->cls == "SVD_img2vid_Conditioning") {
      s.width = number(*n, "width", 1024);
      s.height = number(*n, "height", 576);
      s.frames = number(*n, "video_frames", 25);
      s.given = true;
      n->family = Family::svd;
      n->family_evidence = n->cls;
    } else if (n->cls == "LatentUpscaleBy" || n->cls == "ImageScaleBy") {
      const double by = number(*n, "scale_by", 1);
      s.width *= by;
      s.height *= by;
    } else if (n->cls == "RepeatLatentBatch") {
      s.batch *= number(*n, "amount", 1);
    }
    if (n->role == Role::sample) {
      // The video size comes in through the positive conditioning.
      if (const Node* cond = linked(*n, "positive"); cond != nullptr && cond->family == Family::svd) {
        s = cond->size;
        n->family = Family::svd;
        n->family_evidence = cond->family_evidence;
      }
    }

    const Family family = n->family.value_or(Family::sdxl);
    const FamilyProfile& p = profile(family);
    const double latent_bytes = s.pixels() / 64 * p.latent_channels * 2;  // fp16, 8x down-sampled
    const double image_bytes = s.pixels() * 3 * 4;                        // ComfyUI images are float32 RGB
    TaskSpec t;
    t.name = n->cls + "#" + n->id;
    auto scaled = [&](const OperatorSpec& o, double times) {
      t.flop = o.flop * times;
      t.bytes = o.bytes * times;
      t.dtype = o.dtype;
      t.op = o.id;
    };
    switch (n->role) {
      case Role::sample: {
        // Steps: the sampler's own, or its scheduler's (SamplerCustom(Advanced) takes sigmas from one).
        const Node* scheduler = linked(*n, "sigmas");
        const double steps = number(*n, "steps", scheduler != nullptr ? number(*scheduler, "steps", 20) : 20);
        const double last = std::min(steps, number(*n, "end_at_step", steps));
        const double count = std::max(1.0, last - number(*n, "start_at_step", 0));
        if (p.sample_arch != nullptr) {
          // ComfyUI runs the positive and negative prompts as one batch of two, unless cfg is 1
          // (FLUX-dev's guidance is distilled), when it skips the negative.
          const Node* guider = linked(*n, "guider");
          const double cfg = number(*n, "cfg", guider == nullptr ? (family == Family::flux ? 1.0 : 8.0)
                                                     : guider->cls == "BasicGuider" ? 1.0 : number(*guider, "cfg", 8.0));
          const StepShape shape{.batch = s.batch * (std::abs(cfg - 1) < 1e-9 ? 1 : 2), .width = s.width, .height = s.height,
                                .frames = s.frames, .context = prompt_tokens(prompt_of(*n), p.min_text_tokens)};
          t.dtype = p.dtype;
          set_model_step(t, arch(p.sample_arch), shape, count);
        } else {
          scaled(op(p.sample_op), count * s.pixels() / (p.sample_ref_pixels * p.sample_ref_frames));
          t.launches = static_cast<std::uint32_t>(count);
        }
        t.model = p.model;
        t.working_set_bytes = 2e9 + 4 * latent_bytes * 64;  // activations grow with resolution (approx.)
        n->output_bytes = latent_bytes;
        break;
      }
      case Role::encode_text:
        if (p.encode_arch != nullptr) {
          t.dtype = Dtype::fp16;
          set_model_step(t, arch(p.encode_arch), StepShape{.tokens = prompt_tokens(prompt_of(*n), p.min_text_tokens)}, 1);
        } else {
          scaled(op(p.encode_op), 1);
        }
        t.model = p.encode_model;
        t.working_set_bytes = 1e9;
        n->output_bytes = p.conditioning_bytes;
        break;
      case Role::decode:
      case Role::encode_image:
        if (n->role == Role::decode && p.decode_arch != nullptr) {
          t.dtype = Dtype::bf16;  // ComfyUI's VAE dtype where bf16 runs
          set_model_step(t, arch(p.decode_arch), StepShape{.batch = s.batch * s.frames, .width = s.width, .height = s.height}, 1);
        } else {
          // A VAE encoder costs about half its decoder (approx.).
          scaled(op(p.decode_op), s.pixels() / p.decode_ref_pixels * (n->role == Role::decode ? 1.0 : 0.5));
        }
        t.model = p.decode_model;
        t.working_set_bytes = 2e9 + 8 * image_bytes;
        n->output_bytes = n->role == Role::decode ? image_bytes : latent_bytes;
        break;
      case Role::upscale:
        t.dtype = Dtype::fp16;
        set_model_step(t, arch("real-esrgan-x4"), StepShape{.batch = s.batch * s.frames, .width = s.width, .height = s.height}, 1);
        t.model = "real-esrgan-x4plus";
        t.working_set_bytes = 2e9 + 16 * image_bytes;
        s.width *= 4;
        s.height *= 4;
        n->output_bytes = s.pixels() * 3 * 4;
        break;
      case Role::custom: {
        const Json& c = costs[n->cls];
        const std::string at = detail::child_pointer("", n->cls);
        Problems cost_problems(node_costs_file);
        detail::ObjectReader r(c, at, cost_problems);
        r.boolean_or("free", false);
        t.flop = r.quantity("flop", Dimension::flop, detail::Need::required).value_or(0);
        t.bytes = r.quantity_or("bytes", Dimension::bytes, 0);
        const std::string dtype = r.string_or("dtype", "fp16");
        if (auto d = parse_dtype(dtype)) {
          t.dtype = *d;
        } else {
          r.problem("dtype", "expected one of fp64, fp32, tf32, bf16, fp16, fp8, int8, found \"" + dtype + "\"");
        }
        t.model = r.string_or("model", "");
        t.working_set_bytes = r.quantity_or("working_set", Dimension::bytes, 1e9);
        r.finish();
        cost_problems.throw_if_any();
        n->output_bytes = image_bytes;
        break;
      }
      default:
        continue;
    }
    t.weights_bytes = t.model.empty() ? 0 : weights_of(t.model);
    // What was assumed, in words, for the user to check.
    std::string note = t.name + ": " + work_text(t);
    if (n->role != Role::custom && n->role != Role::upscale) {
      if (!n->unmodelled.empty()) {
        note += "; " + n->family_evidence + " is a " + n->unmodelled + " model, which the importer has no profile for: costed as " +
                family_label(family) + ", a guess";
      } else if (n->family) {
        note += "; " + std::string(family_label(family)) + " from " + n->family_evidence;
      } else {
        note += "; no loader names the model family: " + std::string(family_label(family)) + " assumed";
      }
    }
    if (n->role != Role::custom && n->role != Role::encode_text && !s.given) {
      note += "; size " + number_text(s.width) + "x" + number_text(s.height) + " assumed: no node sets it";
    }
    wf.assumptions.push_back(std::move(note));
    n->task = static_cast<int>(wf.tasks.size());
    wf.tasks.push_back(std::move(t));
  }

  problems.throw_if_any();  // widgets out of ComfyUI's range

  // Edges: from each task back through pass-through nodes to the tasks that feed it.
  for (Node* n : order) {
    if (n->task < 0 || n->inputs == nullptr) continue;
    std::set<int> producers;
    std::vector<const Node*> to_visit;
    std::set<std::string> seen;
    for (const auto& [name, v] : n->inputs->items()) {
      if (is_link(v)) to_visit.push_back(&nodes.at(link_source(v)));
    }
    while (!to_visit.empty()) {
      const Node* src = to_visit.back();
      to_visit.pop_back();
      if (!seen.insert(src->id).second) continue;
      if (src->task >= 0) {
        producers.insert(src->task);
        continue;
      }
      if (src->inputs == nullptr) continue;
      for (const auto& [name, v] : src->inputs->items()) {
        if (is_link(v)) to_visit.push_back(&nodes.at(link_source(v)));
      }
    }
    for (int p : producers) {
      const auto from = std::find_if(order.begin(), order.end(), [&](const Node* x) { return x->task == p; });
      wf.edges.push_back(EdgeSpec{static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(n->task), (*from)->output_bytes});
    }
  }
  std::set<std::string> no_work;
  for (const auto& [id, n] : nodes) {
    if (n.task < 0) no_work.insert(n.cls);
  }
  if (!no_work.empty()) {
    std::string list;
    for (const std::string& cls : no_work) list += (list.empty() ? "" : ", ") + cls;
    wf.assumptions.push_back("no GPU work (loaders, plumbing, outputs): " + list);
  }
  if (wf.tasks.empty()) {
    problems.add("", "the graph has no node that does GPU work (sampler, text encode, VAE, upscale)");
    problems.throw_if_any();
  }
  wf.finalize();
  return wf;
}

std::string workflow_json(const Workflow& wf) {
  nlohmann::ordered_json tasks = nlohmann::ordered_json::array();
  auto bytes = [](double b) {
    char text[48];
    std::snprintf(text, sizeof text, "%.9g GB", b / 1e9);
    return std::string(text);
  };
  for (const TaskSpec& t : wf.tasks) {
    nlohmann::ordered_json task{{"name", t.name}};
    if (t.gpus != 1) task["gpus"] = t.gpus;
    if (!t.model.empty()) task["model"] = {{"id", t.model}, {"weights", bytes(t.weights_bytes)}};
    if (t.working_set_bytes > 0) task["working_set"] = bytes(t.working_set_bytes);
    if (t.architecture) {
      const StepShape& s = t.shape;
      nlohmann::ordered_json work{{"architecture", t.architecture->id}, {"steps", t.steps}, {"batch", s.batch}};
      if (s.width > 0) work["width"] = s.width;
      if (s.height > 0) work["height"] = s.height;
      if (s.frames != 1) work["frames"] = s.frames;
      if (s.tokens > 0) work["tokens"] = s.tokens;
      if (s.context > 0) work["context"] = s.context;
      work["dtype"] = dtype_name(t.dtype);
      work["runtime"] = runtime_name(s.runtime);
      task["work"] = std::move(work);
    } else {
      char flop[48];
      std::snprintf(flop, sizeof flop, "%.6g GFLOP", t.flop / 1e9);
      task["work"] = {{"flop", flop}, {"bytes", bytes(t.bytes)}, {"dtype", dtype_name(t.dtype)}, {"launches", t.launches}};
    }
    tasks.push_back(std::move(task));
  }
  nlohmann::ordered_json edges = nlohmann::ordered_json::array();
  for (const EdgeSpec& e : wf.edges) {
    edges.push_back({{"from", wf.tasks[e.from].name}, {"to", wf.tasks[e.to].name}, {"bytes", bytes(e.bytes)}});
  }
  nlohmann::ordered_json doc{{"name", wf.name}, {"tasks", tasks}, {"edges", edges}};
  return doc.dump(2) + "\n";
}

}  // namespace fleetsim
