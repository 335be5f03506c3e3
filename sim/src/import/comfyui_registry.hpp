// What the ComfyUI importer knows, as data (models/comfyui.json, extendable by a user's file): what
// each node type does when ComfyUI runs it, the names of its widget values, how it sets the size of
// the latent or image it passes on, and the model families a loader's file name shows.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fleetsim/catalog.hpp"
#include "../json_reader.hpp"

namespace fleetsim::detail {

// What a node does when ComfyUI runs it. `unpriced` nodes run a model the importer does not time
// (CLIP vision, ControlNet inside the sampler): they pass data through and are listed as a guess.
// `custom`: priced by the user's node-costs file (not a role the registry gives).
enum class ComfyRole { source, pass, sink, sample, encode_text, decode, encode_image, upscale, unpriced, ui, custom };

// How a node sets the size of what it passes on: named widgets that set width, height, frames and batch;
// one that scales both sides, one that repeats the batch, one that rescales to a total of megapixels.
struct ComfySizeRule {
  std::string width, height, frames, batch, scale, repeat, megapixels;
  bool zero_keeps_aspect = false;  // a side of 0 is derived from the other (LatentUpscale, ImageScale)
  bool sets() const { return !width.empty() || !height.empty() || !frames.empty() || !batch.empty(); }
};

struct ComfyNodeType {
  ComfyRole role = ComfyRole::pass;
  std::vector<std::string> widgets;  // names of the UI's widget values in order; "" for UI-only values
  ComfySizeRule size;
  std::string family;   // a family the node implies (SVD's conditioning), "" when none
  std::string encodes;  // an encode_image node VAE-encodes this input's image only when it is linked
  std::vector<std::string> outputs;  // per output slot, the input it passes on unchanged ("" computed)
};

// One stage of a family: a layer-level architecture, or an operator profile scaled by pixels from the
// pixels and frames it was measured at (0: not scaled); with the catalog model whose weights it loads.
// A VAE stage may have both: the architecture decodes, the operator (at half its work) encodes.
struct ComfyStage {
  std::string architecture, op, model;
  double at_pixels = 0, at_frames = 1;
  std::string file, pointer;  // where it was written (a registry file and the stage's pointer), for messages
  bool empty() const { return architecture.empty() && op.empty(); }
};

struct ComfyFamily {
  std::string id, label;
  ComfyStage diffusion, text, vae;  // any may be empty: a text encoder's file tells only its text stage
  Dtype dtype = Dtype::fp16;        // the diffusion model's compute type in ComfyUI on A100/H100-class GPUs
  bool guidance_distilled = false;  // cfg 1 by default: one pass per step (FLUX dev, schnell)
  bool reference_image = false;     // an edit model: a reference image's tokens join the output's
  double text_tokens = 77;          // what the text encoder pads a prompt to
  double latent_channels = 4;
  double text_width = 768;          // the text encoder's output width (bytes of the conditioning)
};

// A loader's file name (lowercased) shows a family when it contains every one of `contains`; a piece
// that starts with "^" must begin the file's own name ("^ae." is FLUX's VAE, not any "vae.").
struct ComfyFileRule {
  std::vector<std::string> contains;
  std::string family;
};

struct ComfyRegistry {
  std::map<std::string, ComfyNodeType, std::less<>> nodes;
  std::map<std::string, ComfyFamily, std::less<>> families;
  std::vector<ComfyFileRule> files;  // the first that matches wins

  const ComfyFamily* family_of_file(std::string_view file_name) const;
  const ComfyNodeType* node(std::string_view class_type) const;
};

// Text lower-cased (ASCII), as file rules compare names.
std::string lowercase(std::string_view text);

// The built-in registry (models/comfyui.json), read once.
const ComfyRegistry& builtin_comfyui_registry();

// `base` with a user's file added: its node types and families replace those of the same name, its file
// rules are tried before the built-in ones. Problems name `file_name` and the field.
ComfyRegistry extend_comfyui_registry(const ComfyRegistry& base, std::string_view json_text, const std::string& file_name);

}  // namespace fleetsim::detail
