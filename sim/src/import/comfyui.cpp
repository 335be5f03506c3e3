#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <functional>
#include <set>

#include "fleetsim/import.hpp"
#include "fleetsim/suggest.hpp"
#include "../json_reader.hpp"
#include "comfyui_registry.hpp"
#include "comfyui_ui.hpp"

namespace fleetsim {
namespace {

using detail::Json;
using detail::Problems;

using detail::ComfyFamily;
using detail::ComfyRegistry;
using detail::ComfyRole;
using detail::ComfyStage;

// Pixel size of what flows along a link (images and latents alike), with batch and video frames.
// The largest image and batch a graph may reach (ComfyUI's own widgets stop at 16,384 a side; upscale
// models go four times past it once).
constexpr double kMaxSide = 65'536, kMaxImages = 65'536;

struct Size {
  double width = 1024, height = 1024, batch = 1, frames = 1;
  bool given = false;  // false: no node of the graph set it, the default stands
  double pixels() const { return width * height * batch * frames; }
};

struct Node {
  std::string id;
  std::string cls;
  const Json* inputs = nullptr;
  ComfyRole role = ComfyRole::pass;
  const detail::ComfyNodeType* type = nullptr;  // null: a type the registry does not know
  const ComfyFamily* family = nullptr;
  std::string family_evidence;  // how the family was told: a file name, or the node it came from
  std::string_view fp8_stage;   // the stage ("diffusion", "text", "vae") whose weights that file holds in fp8
  Size size;
  int task = -1;  // index in the workflow when the node is a task
  double output_bytes = 0;
};

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

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The bytes past which a whole decode (a clip, or one image) is taken to run out of memory: the GPU's memory
// (ComfyUI tries the whole decode and tiles only once CUDA refuses an allocation), and in words, for the notes.
// A scenario's largest GPU, where larger (largest_bytes; 0 where none is larger): the note names it where it holds a
// decode whole that the smallest cannot.
struct DecodeMemory {
  double bytes;
  std::string words;
  double largest_bytes = 0;
  std::string largest_words;
  DecodeMemory(const GpuType* gpu, const GpuType* largest)
      : bytes(gpu != nullptr ? gpu->vram_bytes : 80e9),
        words(gpu != nullptr ? gpu->id + "'s " + format_quantity(bytes, Dimension::bytes) : "80 GB (an A100's or H100's: no GPU given)") {
    if (gpu != nullptr && largest != nullptr && largest->vram_bytes > bytes) {
      largest_bytes = largest->vram_bytes;
      largest_words = largest->id + "'s " + format_quantity(largest_bytes, Dimension::bytes);
    }
  }
};

// ComfyUI's own estimate of what a 2D image VAE's decode of one image of h x w latent pixels holds (memory_used_decode in
// comfy/sd.py at a125cd8): 2,178 x 64 values of the VAE's dtype a latent pixel. Published peaks agree: diffusers' VAE-decode
// tables (docs/source/en/hybrid_inference/vae_decode.md) give SD 1.5's VAE in fp16 4.8-5.2 GB at 1024x1024 and 1.3-1.5 GB at
// 512x512 on six GPUs, against 4.6 and 1.1 GB here plus its 0.17 GB of weights.
double comfy_image_decode_bytes(double h, double w, Dtype dtype) { return 2178 * 64 * h * w * dtype_bytes(dtype); }

// What a 2D image VAE's decode task holds, by that estimate: one tile's where it decodes in tiles (tiled_scale runs one tile
// of one image at a time; each of decode_tiled_'s passes has tiles of size x size latent pixels' area, or the image where
// smaller), else one image's. ComfyUI's decode runs as many images at once as the free memory holds (its batch_number), so
// on a large GPU it may hold more; one image is what it needs on any GPU, and the task runs on GPUs the import does not know.
double image_decode_working_set(const StepShape& shape, double f, Dtype dtype) {
  const double h = std::ceil(shape.height / f), w = std::ceil(shape.width / f);
  if (shape.tiles.size > 0) return comfy_image_decode_bytes(1, std::min(shape.tiles.size * shape.tiles.size, h * w), dtype);
  return comfy_image_decode_bytes(h, w, dtype);
}

// ComfyUI's own estimate of what a 2D image VAE's encode of `pixels` image pixels holds (memory_used_encode in comfy/sd.py at
// a125cd8): 1,767 values of the VAE's dtype a pixel.
double comfy_image_encode_bytes(double pixels, Dtype dtype) { return 1767 * pixels * dtype_bytes(dtype); }

// How ComfyUI cuts a VAE's decode into tiles (comfy/sd.py and nodes.py at a125cd8), for a 3D video VAE (any family
// decodes_video_in_tiles names, of spatial factor f and temporal factor tf) and a 2D image VAE. VAEDecodeTiled's widgets as
// nodes.py converts them to latent units: an overlap over a quarter of the tile becomes a quarter; for a video VAE
// a temporal overlap over half the temporal size is halved, and at least 2 latent frames a tile and 1 of overlap
// (sd.py decode_tiled); a 2D VAE's tiles run decode_tiled_'s three passes. VAEDecode: the whole decode, untiled,
// or, where that and the VAE's weights would not fit the GPU's memory (DecodeMemory), sd.py decode's fallback after the out-of-memory error, a guess:
// for a video VAE 256-pixel tiles overlapping by a quarter, every frame in each (whether it fits: the clip's
// estimated peak); for a 2D VAE decode_tiled_'s defaults, 64 latent pixels overlapping by 16 (whether it fits:
// ComfyUI's own estimate of one image's decode, memory_used_decode, 2,178 x 64 values of its dtype a latent pixel,
// since decode splits a batch to fit; sd.py's video estimates are pessimistic, Mochi's 137 GB at 848x480x163 against
// about 68 GB of its largest tensors, so a video VAE's own peak is estimated here instead).
struct DecodeTiles {
  StepShape::Tiles tiles;
  std::string note;  // which, in words
  bool guess = false;
};
// ComfyUI's fallback once the whole decode, `need` bytes with its weights, runs out of memory (`holds`: what the
// decode would hold, in words): `tiles` (`how`, in words), a guess, only on GPUs with less memory than `need`
// (Tiles::vram_below); the note says so where the scenario's largest GPU holds it whole.
DecodeTiles fallback_tiles(StepShape::Tiles tiles, double need, const DecodeMemory& memory, const std::string& holds, const std::string& how);
DecodeTiles decode_tiles(const Node& n, const Architecture& vae, const StepShape& shape, Dtype dtype, const DecodeMemory& memory, double weights_bytes,
                         const std::function<double(const std::string&, double)>& widget) {
  const double f = vae.number("vae_factor", 8), tf = vae.number("temporal_factor", 4);
  const bool video = decodes_video_in_tiles(vae);
  if (n.cls == "VAEDecodeTiled") {
    const double size = widget("tile_size", 512), time = widget("temporal_size", 64), overlap_given = widget("overlap", 64),
                 time_overlap_given = widget("temporal_overlap", 8);
    const double overlap = size < 4 * overlap_given ? std::floor(size / 4) : overlap_given;
    StepShape::Tiles tiles{.size = std::floor(size / f), .overlap = std::floor(overlap / f)};
    if (!video) {
      return {tiles, "decoded in three passes of tiles of " + number_text(tiles.size * f) + " pixels overlapping by " + number_text(tiles.overlap * f) +
                         " (ComfyUI's decode_tiled_: half as wide and twice as tall, twice as wide and half as tall, square)"};
    }
    const double time_overlap = time < 2 * time_overlap_given ? std::floor(time_overlap_given / 2) : time_overlap_given;
    tiles.frames = std::max(2.0, std::floor(time / tf));
    tiles.frame_overlap = std::max(1.0, std::min(std::floor(tiles.frames / 2), std::floor(time_overlap / tf)));
    return {tiles, "decoded in tiles of " + number_text(tiles.size * f) + " pixels and " + number_text(tiles.frames) + " latent frames"};
  }
  if (!video) {
    const double image_bytes = comfy_image_decode_bytes(std::ceil(shape.height / f), std::ceil(shape.width / f), dtype);
    if (image_bytes + weights_bytes <= memory.bytes) return {};
    const StepShape::Tiles fallback{.size = 64, .overlap = 16};  // decode_tiled_'s defaults
    return fallback_tiles(fallback, image_bytes + weights_bytes, memory,
                          "one image's decode would hold about " + format_quantity(image_bytes, Dimension::bytes) + " by ComfyUI's estimate",
                          "in three passes of " + number_text(fallback.size * f) + "-pixel tiles overlapping by " + number_text(fallback.overlap * f));
  }
  const double peak_bytes = video_decode_peak_bytes(vae, shape, dtype);
  const std::string peak = format_quantity(peak_bytes, Dimension::bytes);
  if (peak_bytes + weights_bytes <= memory.bytes) return {{}, "the whole clip decoded without tiles (its peak about " + peak + ")"};
  const double tile = std::floor(256 / f);
  return fallback_tiles({.size = tile, .overlap = std::floor(tile / 4), .frames = 999, .frame_overlap = 1}, peak_bytes + weights_bytes, memory,
                        "the whole clip's decode would hold about " + peak, "in 256-pixel tiles of every frame");
}

DecodeTiles fallback_tiles(StepShape::Tiles tiles, double need, const DecodeMemory& memory, const std::string& holds, const std::string& how) {
  const bool mixed = need <= memory.largest_bytes;
  // On every GPU that holds the whole decode, ComfyUI's first try succeeds: the tiles only below that, here and
  // wherever the workflow is taken (rounded up to a whole MB, which the workflow file writes exactly).
  tiles.vram_below = std::ceil(need / 1e6) * 1e6;
  return {tiles,
          holds + ", with its weights past " + memory.words + ": decoded as ComfyUI falls back after running out of memory, " + how +
              " (the failed attempt left out)" +
              (mixed ? "; whole where a prompt runs on a GPU of " + format_quantity(need, Dimension::bytes) + " or more (as " + memory.largest_words +
                           "), which holds more than the tiles' working set"
                     : "") +
              ", a guess",
          true};
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

// The stage a node's role runs, and the input that brings its model (a sampler's model, a text
// encode's clip, a VAE node's vae).
struct Runs {
  const char* input;
  std::string_view stage;
};
Runs runs_from(ComfyRole role) {
  if (role == ComfyRole::sample) return {"model", "diffusion"};
  if (role == ComfyRole::encode_text) return {"clip", "text"};
  return {"vae", "vae"};
}

bool is_link(const Json& v) { return v.is_array() && v.size() == 2 && (v[0].is_string() || v[0].is_number_integer()); }
std::string link_source(const Json& v) { return v[0].is_string() ? v[0].get<std::string>() : std::to_string(v[0].get<long long>()); }

// An input linked to an output that passes on one of its node's own values takes that value (the
// registry's "outputs": a primitive's "value", WanCameraEmbedding's width, height and length), so that a
// sampler's steps or a video's size set there count. Passes repeat for chains of such nodes.
void inline_forwarded_values(Json& doc, const ComfyRegistry& registry) {
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [id, node] : doc.items()) {
      if (!node.is_object() || !node.contains("inputs") || !node["inputs"].is_object()) continue;
      for (auto& [name, v] : node["inputs"].items()) {
        if (!is_link(v) || !v[1].is_number_integer() || v[1].get<std::int64_t>() < 0) continue;
        const auto src = doc.find(link_source(v));
        if (src == doc.end() || !src->is_object() || !src->contains("class_type") || !(*src)["class_type"].is_string() ||
            !src->contains("inputs") || !(*src)["inputs"].is_object()) {
          continue;
        }
        const detail::ComfyNodeType* type = registry.node((*src)["class_type"].get<std::string>());
        const std::size_t slot = v[1].get<std::size_t>();
        if (type == nullptr || slot >= type->outputs.size() || type->outputs[slot].empty()) continue;
        const Json& inputs = (*src)["inputs"];
        if (const auto value = inputs.find(type->outputs[slot]); value != inputs.end() && !is_link(*value)) {
          v = *value;
          changed = true;
        }
      }
    }
  }
}

// ComfyUI's own bounds on the widgets read here (its nodes.py: MAX_RESOLUTION 16384, batch_size up to
// 4096, steps up to 10000, cfg up to 100, scale_by 0.01 to 8, RepeatLatentBatch amount up to 64; video
// lengths up to MAX_RESOLUTION; ImageScaleToTotalPixels 0.01 to 16 megapixels).
struct WidgetBounds {
  std::string_view key;
  double lowest, highest;
};
constexpr WidgetBounds kWidgetBounds[] = {
    {"width", 16, 16384},      {"height", 16, 16384},         {"batch_size", 1, 4096}, {"steps", 1, 10000},
    {"start_at_step", 0, 10000}, {"end_at_step", 0, 10000}, {"cfg", 0, 100},         {"scale_by", 0.01, 8},
    {"amount", 1, 64},         {"video_frames", 1, 4096},    {"length", 1, 16384},     {"megapixels", 0.01, 16},
    {"tile_size", 64, 4096},   {"overlap", 0, 4096},         {"temporal_size", 8, 4096}, {"temporal_overlap", 4, 4096}};

// A node's number widget, or `fallback` where it has none (or a link feeds it); a value outside
// ComfyUI's own range is a problem at its pointer (and `fallback` stands in, to go on checking).
double number_input(const Node& n, const std::string& key, double fallback, detail::Problems& problems) {
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
  std::optional<ComfyRegistry> extended;
  if (!options.registry_json.empty()) {
    extended = detail::extend_comfyui_registry(detail::builtin_comfyui_registry(), options.registry_json, options.registry_file);
  }
  const ComfyRegistry& registry = extended ? *extended : detail::builtin_comfyui_registry();
  const DecodeMemory decode_memory(options.gpu, options.largest_gpu);
  Problems problems(file_name);
  Json doc = detail::parse_json(json_text, problems);
  problems.throw_if_any();
  if (detail::is_comfyui_ui_workflow(doc)) {
    doc = detail::comfyui_ui_to_api(doc, registry, problems);
    problems.throw_if_any();
  }
  if (doc.is_object()) inline_forwarded_values(doc, registry);
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
    n.type = registry.node(n.cls);
    if (costs.contains(n.cls)) {  // the user's price wins over the registry's
      const Json& free = costs[n.cls].contains("free") ? costs[n.cls]["free"] : Json(false);
      if (!free.is_boolean()) {
        throw InputError({Problem{node_costs_file, detail::child_pointer(detail::child_pointer("", n.cls), "free"),
                                  "expected true or false, found " + detail::describe(free)}});
      }
      n.role = free.get<bool>() ? ComfyRole::pass : ComfyRole::custom;
    } else if (n.type != nullptr) {
      n.role = n.type->role;
      // An image-to-video node with no start image encodes nothing: it only makes the empty latent.
      const bool encodes_nothing = !n.type->encodes.empty() && (n.inputs == nullptr || !n.inputs->contains(n.type->encodes) ||
                                                               !is_link((*n.inputs)[n.type->encodes]));
      if (n.role == ComfyRole::encode_image && encodes_nothing) n.role = ComfyRole::source;
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

  const auto number = [&](const Node& n, const std::string& key, double fallback) { return number_input(n, key, fallback, problems); };
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
  // A stage's architecture or operator profile the catalog lacks is the registry's mistake: reported there.
  auto op = [&](const ComfyStage& stage) -> const OperatorSpec& {
    const OperatorSpec* spec = catalog.op(stage.op);
    if (spec == nullptr) {
      throw InputError({Problem{stage.file, stage.pointer + "/operator", "the catalog lacks operator profile \"" + stage.op + "\""}});
    }
    return *spec;
  };
  auto arch = [&](const std::string& id, const ComfyStage* stage) {
    const auto it = catalog.architectures().find(id);
    if (it == catalog.architectures().end()) {
      throw InputError({Problem{stage != nullptr ? stage->file : file_name, stage != nullptr ? stage->pointer + "/architecture" : "",
                                "the catalog lacks architecture \"" + id + "\"" + did_you_mean_key(id, catalog.architectures())}});
    }
    return it->second;
  };
  // The prompt a sampler or text encoder works from: its own text, or the text encoder's its
  // conditioning comes from, through guidance and other pass-through nodes ("" when none is found).
  std::function<std::string(const Node&, int)> prompt_from = [&](const Node& n, int depth) -> std::string {
    if (n.inputs == nullptr || depth > 32) return "";
    for (const char* key : {"text", "text_g", "t5xxl", "prompt"}) {
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

  // What a loader's strings show: the first of its file names (or its "type") a registry rule knows.
  // A node type the registry does not know (a custom loader) has its file-name-shaped strings read.
  const auto family_of_strings = [&](Node& n) {
    // Each key with the stage whose weights its file holds.
    static constexpr std::pair<const char*, std::string_view> kKeys[] = {
        {"ckpt_name", "diffusion"}, {"unet_name", "diffusion"}, {"model_name", "diffusion"}, {"clip_name", "text"},
        {"clip_name1", "text"},     {"clip_name2", "text"},     {"clip_name3", "text"},       {"clip_name4", "text"},
        {"type", ""},               {"vae_name", "vae"}};
    const auto try_name = [&](const std::string& name, std::string_view stage) {
      if (const ComfyFamily* f = registry.family_of_file(name)) {
        n.family = f;
        n.family_evidence = "\"" + name + "\" (" + n.cls + "#" + n.id + ")";
        // An fp8 file (flux1-dev-fp8, umt5_xxl_fp8_e4m3fn_scaled) holds a byte per parameter.
        if (detail::lowercase(name).find("fp8") != std::string::npos) n.fp8_stage = stage;
      }
      return n.family != nullptr;
    };
    for (const auto& [key, stage] : kKeys) {
      if (const auto it = n.inputs->find(key); it != n.inputs->end() && it->is_string() && try_name(it->get<std::string>(), stage)) return;
    }
    if (n.type != nullptr) return;
    for (const auto& [name, v] : n.inputs->items()) {
      if (!v.is_string()) continue;
      const std::string text = v.get<std::string>();
      for (const char* ext : {".safetensors", ".gguf", ".ckpt", ".pt", ".pth", ".bin", ".sft"}) {
        if (text.ends_with(ext) && try_name(text, "")) return;
      }
    }
  };
  const ComfyFamily& fallback = registry.families.at("sdxl");
  std::vector<std::string> guesses;  // assumptions that are guesses: errors when strict

  for (Node* n : order) {
    if (n->inputs != nullptr) {
      family_of_strings(*n);
      if (n->family == nullptr && n->type != nullptr && !n->type->family.empty()) {
        n->family = &registry.families.at(n->type->family);
        n->family_evidence = n->cls + "#" + n->id;
      }
      // Else from the inputs: the one that carries the model the node runs (a sampler's model, a text
      // encode's clip, a VAE's vae) whatever it shows; then the others, model-carrying ones first (a
      // refiner's latent may come from another family), preferring one whose family has the stage the
      // node runs (a VAE encode's text encoder tells nothing of its VAE).
      if (const Node* src = linked(*n, runs_from(n->role).input); src != nullptr && src->family != nullptr && n->family == nullptr) {
        n->family = src->family;
        n->family_evidence = src->family_evidence;
        n->fp8_stage = src->fp8_stage;
      }
      std::vector<const Node*> sources;
      for (const char* key : {"model", "clip", "guider", "vae", "conditioning", "positive"}) {
        if (const Node* src = linked(*n, key)) sources.push_back(src);
      }
      for (const auto& [name, v] : n->inputs->items()) {
        if (is_link(v)) sources.push_back(&nodes.at(link_source(v)));
      }
      const auto runs_here = [&](const ComfyFamily& f) {
        switch (n->role) {
          case ComfyRole::sample: return !f.diffusion.empty();
          case ComfyRole::encode_text: return !f.text.empty();
          case ComfyRole::decode:
          case ComfyRole::encode_image: return !f.vae.empty();
          default: return true;
        }
      };
      for (const bool by_stage : {true, false}) {
        for (const Node* src : sources) {
          if (n->family != nullptr || src->family == nullptr || (by_stage && !runs_here(*src->family))) continue;
          n->family = src->family;
          n->family_evidence = src->family_evidence;
          n->fp8_stage = src->fp8_stage;
        }
      }
      // Size: from the data input (a latent before an image: a guide image does not size the video),
      // then the node's own widgets.
      for (const char* key : {"latent_image", "samples", "latent", "video_latent", "samples1", "pixels", "image", "start_image", "images"}) {
        if (const Node* src = linked(*n, key)) {
          n->size = src->size;
          break;
        }
      }
    }
    Size& s = n->size;
    if (n->type != nullptr) {
      const detail::ComfySizeRule& rule = n->type->size;
      if (rule.sets()) {
        // A side of 0 keeps the aspect where the node says so (LatentUpscale, ImageScale); both 0, the size stays.
        const auto side = [&](const std::string& key, double current) {
          if (key.empty()) return current;
          if (rule.zero_keeps_aspect && n->inputs != nullptr) {
            const auto it = n->inputs->find(key);
            if (it != n->inputs->end() && it->is_number() && it->get<double>() == 0) return 0.0;
          }
          return number(*n, key, current);
        };
        const double w = side(rule.width, s.width), h = side(rule.height, s.height);
        if (w > 0 || h > 0) {
          const double aspect = s.width / s.height;
          s.width = w > 0 ? w : std::round(h * aspect);
          s.height = h > 0 ? h : std::round(w / aspect);
        }
        if (!rule.frames.empty()) s.frames = number(*n, rule.frames, s.frames);
        if (!rule.batch.empty()) s.batch = number(*n, rule.batch, s.batch);
        s.given = true;
      }
      if (!rule.scale.empty()) {
        const double by = number(*n, rule.scale, 1);
        s.width *= by;
        s.height *= by;
      }
      if (!rule.repeat.empty()) s.batch *= number(*n, rule.repeat, 1);
      if (!rule.megapixels.empty()) {
        const double by = std::sqrt(number(*n, rule.megapixels, 1) * 1024 * 1024 / (s.width * s.height));
        s.width = std::round(s.width * by);
        s.height = std::round(s.height * by);
      }
    }
    if (n->role == ComfyRole::sample) {
      // A video's size may come in through the positive conditioning (SVD's).
      if (const Node* cond = linked(*n, "positive"); cond != nullptr && cond->type != nullptr && !cond->type->family.empty()) {
        s = cond->size;
        n->family = cond->family;
        n->family_evidence = cond->family_evidence;
        n->fp8_stage = cond->fp8_stage;
      }
    }

    // Chains of upscales and batch repeats multiply the size; past what any GPU holds it is an error at
    // the node where it happens, not an infinite working set further on.
    if (!(s.width <= kMaxSide && s.height <= kMaxSide && s.batch * s.frames <= kMaxImages)) {
      problems.add(detail::child_pointer("", n->id), "the image reaches " + format_number(s.width) + " x " + format_number(s.height) + " pixels, " +
                                                        format_number(s.batch * s.frames) + " images, through the nodes before it: more than any GPU holds (at most " +
                                                        format_number(kMaxSide) + " pixels a side and " + format_number(kMaxImages) + " images)");
      problems.throw_if_any();
    }
    // The family's stage for the node's role; SDXL's where the family has none (or none was told).
    const ComfyFamily* family = n->family;
    const auto stage_of = [&](ComfyStage ComfyFamily::*which) -> std::pair<const ComfyFamily*, const ComfyStage*> {
      if (family != nullptr && !(family->*which).empty()) return {family, &(family->*which)};
      return {&fallback, &(fallback.*which)};
    };
    const ComfyFamily& latent_family = family != nullptr && family->latent_channels > 0 ? *family : fallback;
    const double latent_bytes = s.pixels() / 64 * latent_family.latent_channels * 2;  // 16-bit, 8x down-sampled
    const double image_bytes = s.pixels() * 3 * 4;                                    // ComfyUI images are float32 RGB
    TaskSpec t;
    t.name = n->cls + "#" + n->id;
    auto scaled = [&](const OperatorSpec& o, double times) {
      t.flop = o.flop * times;
      t.bytes = o.bytes * times;
      t.dtype = o.dtype;
      t.op = o.id;
    };
    const ComfyFamily* costed_as = nullptr;  // the family whose stage priced the task
    DecodeTiles decode;                       // how a VAE's decode (or a 2D image VAE's encode) was cut
    double peak_bytes = 0;                    // a VAE task's estimated working set: a video VAE decode's peak, or ComfyUI's estimate
    bool image_vae = false;                   // a 2D image VAE's decode or encode: its working set is ComfyUI's estimate
    switch (n->role) {
      case ComfyRole::sample: {
        const auto [f, stage] = stage_of(&ComfyFamily::diffusion);
        costed_as = f;
        // Steps: the sampler's own, or its scheduler's (SamplerCustom(Advanced) takes sigmas from one).
        const Node* scheduler = linked(*n, "sigmas");
        const double steps = number(*n, "steps", scheduler != nullptr ? number(*scheduler, "steps", 20) : 20);
        const double last = std::min(steps, number(*n, "end_at_step", steps));
        const double count = std::max(1.0, last - number(*n, "start_at_step", 0));
        if (!stage->architecture.empty()) {
          // ComfyUI runs the positive and negative prompts as one batch of two, unless cfg is 1
          // (guidance-distilled models), when it skips the negative.
          const Node* guider = linked(*n, "guider");
          const double cfg = number(*n, "cfg", guider == nullptr ? (f->guidance_distilled ? 1.0 : 8.0)
                                                     : guider->cls == "BasicGuider" ? 1.0 : number(*guider, "cfg", 8.0));
          // An edit model's reference image joins as tokens: one more frame of the output's size.
          const StepShape shape{.batch = s.batch * (std::abs(cfg - 1) < 1e-9 ? 1 : 2), .width = s.width, .height = s.height,
                                .frames = s.frames + (f->reference_image ? 1 : 0), .context = prompt_tokens(prompt_of(*n), f->text_tokens)};
          t.dtype = f->dtype;
          set_model_step(t, arch(stage->architecture, stage), shape, count);
        } else {
          scaled(op(*stage), count * (stage->at_pixels > 0 ? s.pixels() / (stage->at_pixels * stage->at_frames) : 1));
          t.launches = static_cast<std::uint32_t>(count);
        }
        t.model = stage->model;
        t.working_set_bytes = 2e9 + 4 * latent_bytes * 64;  // activations grow with resolution (approx.)
        n->output_bytes = latent_bytes;
        break;
      }
      case ComfyRole::encode_text: {
        const auto [f, stage] = stage_of(&ComfyFamily::text);
        costed_as = f;
        if (!stage->architecture.empty()) {
          t.dtype = Dtype::fp16;
          set_model_step(t, arch(stage->architecture, stage), StepShape{.tokens = prompt_tokens(prompt_of(*n), f->text_tokens)}, 1);
        } else {
          scaled(op(*stage), 1);
        }
        t.model = stage->model;
        t.working_set_bytes = 1e9;
        n->output_bytes = f->text_tokens * f->text_width * 2;
        break;
      }
      case ComfyRole::decode:
      case ComfyRole::encode_image: {
        const auto [f, stage] = stage_of(&ComfyFamily::vae);
        costed_as = f;
        // ComfyUI's VAE dtype (vae_dtype in comfy/model_management.py): bf16 where the GPU runs it, else fp32 (a V100, a T4).
        const bool no_bf16 = options.gpu != nullptr && options.gpu->peak_flop_per_s[static_cast<std::size_t>(Dtype::bf16)] == 0;
        const Dtype vae_dtype = no_bf16 ? Dtype::fp32 : Dtype::bf16;
        if (n->role == ComfyRole::decode && !stage->architecture.empty()) {
          t.dtype = vae_dtype;
          // A video decoder decodes the video's frames together; a 2D one, each frame as an image.
          const auto vae = arch(stage->architecture, stage);
          const bool video = decodes_video(vae->family);
          StepShape shape{.batch = video ? s.batch : s.batch * s.frames, .width = s.width, .height = s.height, .frames = video ? s.frames : 1};
          if (decodes_video_in_tiles(*vae) || decodes_images_in_tiles(*vae)) {
            decode = decode_tiles(*n, *vae, shape, t.dtype, decode_memory, weights_of(stage->model), [&](const std::string& key, double otherwise) { return number(*n, key, otherwise); });
            shape.tiles = decode.tiles;
            image_vae = decodes_images_in_tiles(*vae);
            peak_bytes = image_vae ? image_decode_working_set(shape, vae->number("vae_factor", 8), t.dtype) : video_decode_peak_bytes(*vae, shape, t.dtype);
          } else if (n->cls == "VAEDecodeTiled") {
            decode = {{}, "its tiles not modelled for " + vae->id + ": timed as one whole decode, a guess", true};
          }
          set_model_step(t, vae, shape, 1);
        } else {
          // A VAE encoder costs about half its decoder (approx.).
          scaled(op(*stage), s.pixels() / stage->at_pixels * (n->role == ComfyRole::decode ? 1.0 : 0.5));
          // A 2D image VAE's encode holds ComfyUI's estimate of one image's (encode splits a batch to fit), or of one tile's:
          // VAEEncodeTiled's, or, where the image and the weights would not fit the GPU, encode_tiled_'s defaults, 512 pixels,
          // as ComfyUI falls back after running out of memory (a guess: its time stays the whole encode's).
          if (n->role == ComfyRole::encode_image && !stage->architecture.empty() && decodes_images_in_tiles(*arch(stage->architecture, stage))) {
            const double pixels = s.width * s.height, whole = comfy_image_encode_bytes(pixels, vae_dtype);
            double tile = n->cls == "VAEEncodeTiled" ? number(*n, "tile_size", 512) : 0;
            if (tile == 0 && whole + weights_of(stage->model) > decode_memory.bytes) {
              tile = 512;
              decode = {{}, "one image's encode would hold about " + format_quantity(whole, Dimension::bytes) + " by ComfyUI's estimate, with its weights past " +
                                decode_memory.words + ": held as one 512-pixel tile's, as ComfyUI falls back to tiles after running out of memory (timed whole), a guess",
                        true};
            }
            peak_bytes = tile > 0 ? comfy_image_encode_bytes(std::min(tile * tile, pixels), vae_dtype) : whole;
            image_vae = true;
          }
        }
        t.model = stage->model;
        // A 2D image VAE's decode and encode hold what ComfyUI's estimates say; a video VAE's decode its peak, and other
        // stages (video encodes, decodes of the video stand-in) 2 GB and eight copies of the image, a guess.
        t.working_set_bytes = image_vae ? peak_bytes : std::max(2e9 + 8 * image_bytes, peak_bytes);
        n->output_bytes = n->role == ComfyRole::decode ? image_bytes : latent_bytes;
        break;
      }
      case ComfyRole::upscale:
        t.dtype = Dtype::fp16;
        set_model_step(t, arch("real-esrgan-x4", nullptr), StepShape{.batch = s.batch * s.frames, .width = s.width, .height = s.height}, 1);
        t.model = "real-esrgan-x4plus";
        t.working_set_bytes = 2e9 + 16 * image_bytes;
        s.width *= 4;
        s.height *= 4;
        n->output_bytes = s.pixels() * 3 * 4;
        break;
      case ComfyRole::custom: {
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
    // The stage's weights from an fp8 file: a byte per parameter where the catalog counts two, a model
    // of its own (a GPU holding the 16-bit file does not hold this one).
    const bool fp8 = !t.model.empty() && costed_as == family && family != nullptr && n->fp8_stage == runs_from(n->role).stage;
    if (fp8) {
      t.model += " (fp8)";
      t.weights_bytes /= 2;
    }
    // What was assumed, in words, for the user to check; guesses are said to be.
    std::string note = t.name + ": " + work_text(t);
    if (fp8) note += ", weights at a byte per parameter (an fp8 file)";
    if (!decode.note.empty()) note += ", " + decode.note;
    bool guessed = false;
    if (costed_as != nullptr) {
      if (family == nullptr) {
        note += "; no loader names the model family: " + costed_as->label + " assumed, a guess";
        guessed = true;
      } else if (costed_as != family) {
        note += "; " + n->family_evidence + " is a " + family->label + " model, which the importer has no profile for here: costed as " +
                costed_as->label + ", a guess";
        guessed = true;
      } else {
        note += "; " + family->label + " from " + n->family_evidence;
      }
    }
    if (n->role != ComfyRole::custom && n->role != ComfyRole::encode_text && !s.given) {
      note += "; size " + number_text(s.width) + "x" + number_text(s.height) + " assumed: no node sets it, a guess";
      guessed = true;
    }
    if (guessed || decode.guess) guesses.push_back(note);
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
  // Nodes that are no task: doing no GPU work, or running a model the importer does not time (a guess).
  std::set<std::string> no_work, unpriced;
  for (const auto& [id, n] : nodes) {
    if (n.task >= 0 || n.type == nullptr) continue;  // unknown types are listed above
    (n.role == ComfyRole::unpriced ? unpriced : no_work).insert(n.cls);
  }
  const auto joined = [](const std::set<std::string>& names) {
    std::string list;
    for (const std::string& cls : names) list += (list.empty() ? "" : ", ") + cls;
    return list;
  };
  if (!unpriced.empty()) {
    guesses.push_back("these run a model the importer does not time, passed through as if free, a guess (a node-costs file "
                      "prices them): " + joined(unpriced));
    wf.assumptions.push_back(guesses.back());
  }
  if (!no_work.empty()) wf.assumptions.push_back("no GPU work (loaders, plumbing, outputs): " + joined(no_work));
  if (options.strict && !guesses.empty()) {
    std::string list;
    for (const std::string& g : guesses) list += "\n  " + g;
    problems.add("", "--strict: the import would guess:" + list);
    problems.throw_if_any();
  }
  if (wf.tasks.empty()) {
    problems.add("", "the graph has no node that does GPU work (sampler, text encode, VAE, upscale)");
    problems.throw_if_any();
  }
  if (options.attention != AttentionBackend::flash2) {  // the same kernels' FLOP and bytes: only their times change
    for (TaskSpec& t : wf.tasks) {
      if (t.architecture) t.shape.attention = options.attention;
    }
    wf.assumptions.push_back("attention on cuDNN's kernels, as PyTorch 2.11 runs it on Hopper");
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
      if (s.tiles.size > 0) {
        work["tiles"] = {{"size", s.tiles.size}, {"overlap", s.tiles.overlap}};
        if (s.tiles.frames > 0) {  // a video VAE's
          work["tiles"]["frames"] = s.tiles.frames;
          work["tiles"]["frame_overlap"] = s.tiles.frame_overlap;
        }
        if (s.tiles.vram_below > 0) work["tiles"]["vram_below"] = bytes(s.tiles.vram_below);
      }
      work["dtype"] = dtype_name(t.dtype);
      work["runtime"] = runtime_name(s.runtime);
      if (s.attention != AttentionBackend::flash2) work["attention"] = attention_backend_name(s.attention);
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
