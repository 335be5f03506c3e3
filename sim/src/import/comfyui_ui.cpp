#include "comfyui_ui.hpp"

#include <map>
#include <set>
#include <vector>

namespace fleetsim::detail {
namespace {

// The names of a node type's widget values, in the order the UI saves them. "" is a value the UI
// adds after a seed (control_after_generate) or an upload button, which the API format does not have.
const std::map<std::string, std::vector<std::string>, std::less<>>& widget_names() {
  static const std::map<std::string, std::vector<std::string>, std::less<>> names{
      {"CheckpointLoaderSimple", {"ckpt_name"}},
      {"CheckpointLoader", {"config_name", "ckpt_name"}},
      {"ImageOnlyCheckpointLoader", {"ckpt_name"}},
      {"UNETLoader", {"unet_name", "weight_dtype"}},
      {"CLIPLoader", {"clip_name", "type"}},
      {"DualCLIPLoader", {"clip_name1", "clip_name2", "type"}},
      {"VAELoader", {"vae_name"}},
      {"UpscaleModelLoader", {"model_name"}},
      {"LoraLoader", {"lora_name", "strength_model", "strength_clip"}},
      {"LoraLoaderModelOnly", {"lora_name", "strength_model"}},
      {"LoadImage", {"image", ""}},
      {"EmptyLatentImage", {"width", "height", "batch_size"}},
      {"EmptySD3LatentImage", {"width", "height", "batch_size"}},
      {"LatentUpscale", {"upscale_method", "width", "height", "crop"}},
      {"LatentUpscaleBy", {"upscale_method", "scale_by"}},
      {"ImageScale", {"upscale_method", "width", "height", "crop"}},
      {"ImageScaleBy", {"upscale_method", "scale_by"}},
      {"RepeatLatentBatch", {"amount"}},
      {"CLIPTextEncode", {"text"}},
      {"CLIPSetLastLayer", {"stop_at_clip_layer"}},
      {"FluxGuidance", {"guidance"}},
      {"ModelSamplingFlux", {"max_shift", "base_shift", "width", "height"}},
      {"SVD_img2vid_Conditioning", {"width", "height", "video_frames", "motion_bucket_id", "fps", "augmentation_level"}},
      {"VideoLinearCFGGuidance", {"min_cfg"}},
      {"KSampler", {"seed", "", "steps", "cfg", "sampler_name", "scheduler", "denoise"}},
      {"KSamplerAdvanced", {"add_noise", "noise_seed", "", "steps", "cfg", "sampler_name", "scheduler", "start_at_step",
                            "end_at_step", "return_with_leftover_noise"}},
      {"KSamplerSelect", {"sampler_name"}},
      {"BasicScheduler", {"scheduler", "steps", "denoise"}},
      {"RandomNoise", {"noise_seed", ""}},
      {"CFGGuider", {"cfg"}},
      {"VAEDecodeTiled", {"tile_size", "overlap", "temporal_size", "temporal_overlap"}},
      {"SaveImage", {"filename_prefix"}},
      {"SaveAnimatedWEBP", {"filename_prefix", "fps", "lossless", "quality", "method"}},
  };
  return names;
}

constexpr int kModeMuted = 2, kModeBypassed = 4;

}  // namespace

bool is_comfyui_ui_workflow(const Json& doc) {
  return doc.is_object() && doc.contains("nodes") && doc["nodes"].is_array() && doc.contains("links") && doc["links"].is_array();
}

Json comfyui_ui_to_api(const Json& ui, Problems& problems) {
  // Link id -> [source node id, source slot].
  std::map<std::int64_t, Json> sources;
  const Json& links = ui["links"];
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Json& l = links[i];
    const bool ok = l.is_array() && l.size() >= 5 && l[0].is_number_integer() && l[1].is_number_integer() && l[2].is_number_integer();
    if (!ok) {
      problems.add(child_pointer("/links", i), "expected a link [id, source node, source slot, target node, target slot, type], found " + describe(l));
      continue;
    }
    sources[l[0].get<std::int64_t>()] = Json::array({std::to_string(l[1].get<std::int64_t>()), l[2].get<std::int64_t>()});
  }

  Json api = Json::object();
  const Json& nodes = ui["nodes"];
  std::set<std::string> left_out;  // muted and bypassed nodes
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const Json& n = nodes[i];
    const std::string at = child_pointer("/nodes", i);
    if (!n.is_object() || !n.contains("id") || !n["id"].is_number_integer() || !n.contains("type") || !n["type"].is_string()) {
      problems.add(at, "expected a node with an integer \"id\" and a string \"type\", found " + describe(n));
      continue;
    }
    const std::string id = std::to_string(n["id"].get<std::int64_t>());
    if (n.contains("mode") && n["mode"].is_number_integer() && (n["mode"] == kModeMuted || n["mode"] == kModeBypassed)) {
      left_out.insert(id);
      continue;
    }
    if (api.contains(id)) {
      problems.add(at + "/id", "node id " + id + " appears twice");
      continue;
    }
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
      } else if (const auto known = widget_names().find(n["type"].get<std::string>()); known != widget_names().end()) {
        for (std::size_t k = 0; k < values.size() && k < known->second.size(); ++k) {
          if (!known->second[k].empty()) inputs[known->second[k]] = values[k];
        }
      }
    }
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
            continue;
          }
          if (!slot.contains("link") || slot["link"].is_null()) continue;  // not connected
          if (!slot["link"].is_number_integer()) {
            problems.add(slot_at + "/link", "expected a link id or null, found " + describe(slot["link"]));
            continue;
          }
          const auto source = sources.find(slot["link"].get<std::int64_t>());
          if (source == sources.end()) {
            problems.add(slot_at + "/link", "link " + std::to_string(slot["link"].get<std::int64_t>()) + " is not in \"links\"");
            continue;
          }
          inputs[slot["name"].get<std::string>()] = source->second;
        }
      }
    }
    api[id] = Json{{"class_type", n["type"]}, {"inputs", std::move(inputs)}};
  }
  // Inputs from left-out (muted, bypassed) nodes are dropped, as ComfyUI drops muted nodes.
  for (auto& [id, node] : api.items()) {
    Json& inputs = node["inputs"];
    for (auto it = inputs.begin(); it != inputs.end();) {
      if (it->is_array() && it->size() == 2 && (*it)[0].is_string() && left_out.contains((*it)[0].get<std::string>())) {
        it = inputs.erase(it);
      } else {
        ++it;
      }
    }
  }
  return api;
}

}  // namespace fleetsim::detail
