// The runtimes of models/runtimes.json, read strictly once: what each runtime launches for the small
// operations a model's step calls by name.
#include <algorithm>
#include <array>

#include "../json_reader.hpp"
#include "fleetsim/model_profile.hpp"
#include "fleetsim/suggest.hpp"

namespace fleetsim {
namespace embedded {
std::string_view runtimes_json();
}  // namespace embedded

namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;

constexpr std::array<std::string_view, 4> kRuntimeNames{"comfyui", "diffusers", "compiled", "hunyuanvideo"};
constexpr std::array<std::string_view, 1> kTrainingRuntimeNames{"torchtitan"};

// The operations model_profile.cpp calls: every runtime says what it launches for each.
constexpr std::array<std::string_view, 46> kOperations{
    "attention_out",   "causal_mask",      "causal_mask_row",  "channel_rms_norm", "concat",           "conv_bias",       "conv_layout",  "conv_weight_layout", "depth_to_space",
    "depth_to_space_residual",             "dup_up",           "elementwise",     "frame_chunk_norm", "frame_upsample", "frames_to_batch",
    "gate_residual",   "gated_activation", "gelu",             "group_norm",      "group_norm_silu", "layer_norm",   "modulate",
    "norm_replicate_pad",
    "pad",             "pad_fill",         "patchify",         "pixel_norm",       "position_tables", "qkv_join",     "replicate_pad",   "residual_add",
    "rms_norm",        "rope",             "sampler",          "scale_shift",     "silu",         "spatial_pad",
    "stream_join",     "time_add",         "timestep_embedding", "to_pixels",     "to_tokens",    "unpatchify",
    "up_block_input",  "upsample",         "vector_silu"};

// The operations training.cpp calls in an eager runtime's transformer layer.
constexpr std::array<std::string_view, 13> kTrainingOperations{
    "fsdp_copy_out", "fused_rms_norm", "fused_rms_norm_backward", "gradient_add", "repeat_kv", "repeat_kv_backward", "residual_add",
    "rms_norm",      "rms_norm_backward", "rope",          "rope_backward", "swiglu",   "swiglu_backward"};

// "a, b, c" (or with `last` before the last: "a, b or c").
template <typename Names>
std::string listed(const Names& names, std::string_view last = ", ") {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? std::string(last) : ", ") + std::string(names[i]);
  return out;
}

// "act", "fp32", "fp32*0.5": a tensor of the operation's size (or a share of it) in a dtype.
bool add_tensor(const Json& v, RuntimeKernel& k) {
  if (!v.is_string()) return false;
  const std::string text = v.get<std::string>();
  const auto star = text.find('*');
  const std::string dtype = text.substr(0, star);
  double share = 1;
  if (star != std::string::npos) {
    const auto parsed = parse_number(std::string_view(text).substr(star + 1));
    if (!parsed || *parsed <= 0 || *parsed > 16) return false;
    share = *parsed;
  }
  if (dtype == "act") {
    k.act_tensors += share;
  } else if (const auto d = parse_dtype(dtype)) {
    k.fixed_bytes += share * dtype_bytes(*d);
  } else {
    return false;
  }
  return true;
}

std::string tensors_text(const Json& list) {
  std::string out;
  for (const Json& v : list) out += (out.empty() ? "" : "+") + v.get<std::string>();
  return out.empty() ? "-" : out;
}

RuntimeKernel read_kernel(ObjectReader& r, const std::string& operation, const std::string& source) {
  RuntimeKernel k;
  k.operation = operation;
  k.source = source;
  k.op = r.string("op", Need::required).value_or("");
  if (r.field("launches") != nullptr) {
    k.launches = r.number("launches", Need::required, 1, 1000).value_or(1);
    r.finish();
    return k;
  }
  const auto cls_name = r.string("class", Need::required).value_or("memory");
  const auto cls = parse_kernel_class(cls_name);
  if (!cls || *cls == KernelClass::gemm || *cls == KernelClass::attention) {
    r.problem("class", "expected a memory-bound kernel class (norm, add, activation, gated-activation, rope, softmax, embedding, reduction, memory, "
                       "broadcast, indexed-copy), found \"" + cls_name + "\"");
  } else {
    k.cls = *cls;
  }
  std::size_t tensors = 0;
  for (const char* key : {"reads", "writes"}) {
    const Json* list = r.field(key, Need::required);
    if (list == nullptr) continue;
    bool good = list->is_array();
    for (std::size_t i = 0; good && i < list->size(); ++i) good = add_tensor((*list)[i], k);
    if (!good) {
      r.problem(key, "expected an array of tensors, each \"act\" (the step's dtype) or a dtype (fp32, bf16, ...), optionally \"*share\" with a share "
                     "up to 16, such as [\"act\", \"fp32*0.5\"]");
    } else {
      (std::string_view(key) == "reads" ? k.reads : k.writes) = tensors_text(*list);
      tensors += list->size();
    }
  }
  if (tensors == 0 && r.field("reads") != nullptr && r.field("writes") != nullptr) {
    r.problem("reads", "expected a tensor read or written (a kernel too small to move bytes that matter is {\"op\": ..., \"launches\": n})");
  }
  if (const auto grid = r.string("grid", Need::optional)) {
    if (*grid == "groups" && k.cls == KernelClass::reduction) {
      k.per_group = true;
    } else {
      r.problem("grid", "expected \"groups\" on a reduction (a CTA per sample and group), found \"" + *grid + "\"");
    }
  }
  r.finish();
  return k;
}

// One runtime's entry; `operations`: what the code that calls it asks for, each required and none other,
// but where it runs "like" one of `before` (a model's own code forked from a library's): then only those it
// changes, the rest that runtime's.
template <std::size_t N>
RuntimeProfile read_runtime(ObjectReader& r, const std::array<std::string_view, N>& operations, const std::vector<RuntimeProfile>& before,
                            const std::vector<std::string_view>& before_names) {
  RuntimeProfile p;
  const RuntimeProfile* like = nullptr;
  if (const auto name = r.string("like", Need::optional)) {
    for (std::size_t i = 0; i < before.size(); ++i) {
      if (before_names[i] == *name) like = &before[i];
    }
    if (like == nullptr) r.problem("like", "expected a runtime listed before this one (" + (before.empty() ? "none is" : listed(before_names)) + "), found \"" + *name + "\"");
  }
  if (like != nullptr) {
    p.ops = like->ops;
    p.separate_projections = like->separate_projections;
    p.projections_source = like->projections_source;
  }
  if (const Json* families = r.field("families", Need::optional)) {
    const auto all = architecture_families();
    bool good = families->is_array() && !families->empty();
    for (std::size_t i = 0; good && i < families->size(); ++i) {
      good = (*families)[i].is_string() && std::find(all.begin(), all.end(), (*families)[i].get<std::string>()) != all.end();
      if (good) p.families.push_back((*families)[i].get<std::string>());
    }
    if (!good) r.problem("families", "expected a non-empty array of architecture families (" + listed(all) + ")");
  }
  p.name = r.string("name", Need::required).value_or("");
  p.source = r.string("source", Need::required).value_or("");
  p.eager = r.choice("launch", {"eager", "graph"}, 0) == 0;
  r.field("launch", Need::required);
  if (const Json* proj = r.field("projections", like != nullptr ? Need::optional : Need::required)) {  // {"layout": "fused" | "separate", "source": "..."}
    ObjectReader pr(*proj, r.pointer("projections"), r.problems());
    if (pr.ok()) {
      p.separate_projections = pr.choice("layout", {"fused", "separate"}, 0) == 1;
      pr.field("layout", Need::required);
      p.projections_source = pr.string("source", Need::required).value_or("");
      pr.finish();
    }
  }
  const Json* ops = r.field("ops", Need::required);
  if (ops != nullptr && !ops->is_object()) r.problem("ops", "expected an object of operations by name");
  if (ops != nullptr && ops->is_object()) {
    ObjectReader o(*ops, r.pointer("ops"), r.problems());
    for (std::string_view name : operations) {
      const Json* op = o.field(name, like != nullptr ? Need::optional : Need::required);
      if (op == nullptr) continue;
      ObjectReader opr(*op, o.pointer(name), r.problems());
      if (!opr.ok()) continue;
      const std::string source = opr.string("source", Need::required).value_or("");
      std::vector<RuntimeKernel>& kernels = p.ops[std::string(name)];
      kernels.clear();
      const Json* list = opr.field("kernels", Need::required);
      if (list != nullptr && !list->is_array()) opr.problem("kernels", "expected an array of kernels (empty: the operation launches none)");
      for (std::size_t i = 0; list != nullptr && list->is_array() && i < list->size(); ++i) {
        ObjectReader kr((*list)[i], detail::child_pointer(opr.pointer("kernels"), i), r.problems());
        if (kr.ok()) kernels.push_back(read_kernel(kr, std::string(name), source));
      }
      opr.finish();
    }
    for (const auto& [name, value] : ops->items()) {
      if (std::find(operations.begin(), operations.end(), name) == operations.end()) {
        o.problem(name, "no model or layer calls an operation \"" + name + "\"" + did_you_mean(name, std::vector<std::string>(operations.begin(), operations.end())));
      }
    }
    o.finish_without_unknowns();
  }
  r.finish();
  return p;
}

}  // namespace

std::string_view runtime_name(Runtime runtime) { return kRuntimeNames[static_cast<std::size_t>(runtime)]; }

std::optional<Runtime> parse_runtime(std::string_view name) {
  for (std::size_t i = 0; i < kRuntimeNames.size(); ++i) {
    if (kRuntimeNames[i] == name) return static_cast<Runtime>(i);
  }
  return std::nullopt;
}

std::string runtime_choices() { return listed(kRuntimeNames, " or "); }

RuntimeProfiles parse_runtimes(std::string_view text, const std::string& file) {
  detail::Problems problems(file);
  const Json doc = detail::parse_json(text, problems);
  problems.throw_if_any();
  ObjectReader top(doc, "", problems);
  top.string("about", Need::required);
  top.string("training_about", Need::required);
  RuntimeProfiles out;
  // Each section's runtimes in their names' order, every one required.
  const auto read_section = [&](const char* key, const auto& names, const auto& operations, std::vector<RuntimeProfile>& into) {
    const Json* section = top.field(key, Need::required);
    if (section == nullptr) return;
    ObjectReader r(*section, top.pointer(key), problems);
    std::vector<std::string_view> read;  // the names of `into`'s entries
    for (std::size_t i = 0; r.ok() && i < names.size(); ++i) {
      const Json* v = r.field(names[i], Need::required);
      if (v == nullptr) continue;
      ObjectReader one(*v, r.pointer(names[i]), problems);
      if (!one.ok()) continue;
      into.push_back(read_runtime(one, operations, into, read));
      read.push_back(names[i]);
    }
    r.finish();
  };
  read_section("runtimes", kRuntimeNames, kOperations, out.inference);
  for (std::size_t i = 0; i < out.inference.size(); ++i) out.inference[i].runtime = static_cast<Runtime>(i);  // all read, or problems below
  read_section("training", kTrainingRuntimeNames, kTrainingOperations, out.training);
  top.finish();
  problems.throw_if_any();
  return out;
}

namespace {
const RuntimeProfiles& builtin_runtimes() {
  static const RuntimeProfiles profiles = parse_runtimes(embedded::runtimes_json(), "models/runtimes.json (built in)");
  return profiles;
}
}  // namespace

const RuntimeProfile& runtime_profile(Runtime runtime) { return builtin_runtimes().inference[static_cast<std::size_t>(runtime)]; }

const RuntimeProfile& torchtitan_profile() { return builtin_runtimes().training.front(); }

std::optional<ShapeProblem> runtime_problem(const Architecture& a, Runtime runtime) {
  const RuntimeProfile& r = runtime_profile(runtime);
  if (r.families.empty() || std::find(r.families.begin(), r.families.end(), a.family) != r.families.end()) return std::nullopt;
  std::vector<std::string_view> general;  // the runtimes that run every model
  for (const RuntimeProfile& other : builtin_runtimes().inference) {
    if (other.families.empty()) general.push_back(runtime_name(other.runtime));
  }
  return ShapeProblem{"runtime", std::string(runtime_name(runtime)) + " is " + r.name + ": it runs " + listed(r.families) + ", not " + a.id + " (a " +
                                     a.family + "); expected one that runs every model (" + listed(general) + ")"};
}

}  // namespace fleetsim
