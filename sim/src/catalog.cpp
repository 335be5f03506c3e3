#include "fleetsim/catalog.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catalog_readers.hpp"
#include "fleetsim/model_profile.hpp"

namespace fleetsim::embedded {
std::string_view hardware_json();
std::string_view operators_json();
std::string_view architectures_json();
}  // namespace fleetsim::embedded

namespace fleetsim {
namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;
using detail::Problems;

constexpr std::array<std::string_view, kDtypeCount> kDtypeNames{"fp64", "fp32", "tf32", "bf16",
                                                                 "fp16", "fp8",  "int8"};
constexpr std::array<std::string_view, 6> kLinkKindNames{"nvlink", "pcie", "infiniband", "roce",
                                                         "ethernet", "memory"};
constexpr std::array<std::string_view, 8> kGpuArchNames{"unknown", "volta", "ampere", "ada", "hopper", "blackwell", "pascal", "turing"};

std::string read_source(ObjectReader& r, Need need) {
  const std::optional<std::string> source = r.string("source", need);
  if (source && source->empty()) {
    r.problem("source", "expected the public source of this entry's numbers, found an empty string");
  }
  return source.value_or("");
}

// A GPU's training throughput relative to a V100-SXM2-16GB: both precisions, which of them are estimated, and
// the benchmarks they come from.
TrainingThroughput read_training_throughput(ObjectReader& r) {
  TrainingThroughput t;
  for (TrainingPrecision p : {TrainingPrecision::fp32, TrainingPrecision::mixed}) {
    // Past 1,000 V100s in one GPU is a typo.
    t.relative[static_cast<std::size_t>(p)] = r.number(training_precision_name(p), Need::required, 1e-6, 1e3).value_or(0);
  }
  const std::size_t estimated = r.choice("estimated", {"none", "fp32", "mixed", "both"}, 0);
  t.estimated = {estimated == 1 || estimated == 3, estimated == 2 || estimated == 3};
  t.source = read_source(r, Need::required);
  r.finish();
  return t;
}

}  // namespace

namespace detail {

// With a base entry every field is optional and defaults to the base's value (inline overrides).
GpuType read_gpu(ObjectReader& r, const std::string& id, const GpuType* base) {
  GpuType g = base != nullptr ? *base : GpuType{};
  const Need need = base != nullptr ? Need::optional : Need::required;
  g.id = id;
  g.name = r.string("name", need).value_or(g.name.empty() ? id : g.name);
  g.arch = static_cast<GpuArch>(r.choice("arch", kGpuArchNames, static_cast<std::size_t>(g.arch)));
  g.sms = static_cast<int>(r.integer_or("sms", g.sms, 1, 100000));
  g.l2_bytes = r.quantity_or("l2_cache", Dimension::bytes, g.l2_bytes);
  g.vram_bytes = r.quantity("vram", Dimension::bytes, need).value_or(g.vram_bytes);
  g.memory_bandwidth_Bps = r.quantity("memory_bandwidth", Dimension::bandwidth, need).value_or(g.memory_bandwidth_Bps);
  if (const Json* flops = r.field("peak_flops", need)) {
    ObjectReader f(*flops, r.pointer("peak_flops"), r.problems());
    for (std::size_t d = 0; d < kDtypeCount; ++d) {
      g.peak_flop_per_s[d] = f.quantity(kDtypeNames[d], Dimension::flop_rate, Need::optional)
                                 .value_or(base != nullptr ? g.peak_flop_per_s[d] : 0.0);
    }
    f.finish();
  }
  g.tdp_w = r.quantity("tdp", Dimension::power, need).value_or(g.tdp_w);
  g.idle_power_w = r.quantity_or("idle_power", Dimension::power, g.idle_power_w);
  g.launch_overhead_s = r.quantity_or("launch_overhead", Dimension::time, g.launch_overhead_s);
  // A launch takes microseconds; a second is far past any GPU's, and 1e300 s would end no run.
  if (g.launch_overhead_s > 1) r.problem("launch_overhead", "expected at most 1 s (a kernel launch takes microseconds), found " + format_quantity(g.launch_overhead_s, Dimension::time));
  // Prices up to $1M an hour and $1B a GPU: past those a cost is a typo, and sums of them overflow.
  g.price_usd_per_hour = r.number("price_usd_per_hour", need, 0.0, 1e6).value_or(g.price_usd_per_hour);
  g.purchase_usd = r.number("purchase_usd", Need::optional, 0.0, 1e9).value_or(g.purchase_usd);
  g.sequential_compute_and_memory =
      r.choice("compute_and_memory", {"overlapped", "sequential"}, g.sequential_compute_and_memory ? 1 : 0) == 1;
  if (const Json* throughput = r.field("training_throughput")) {
    ObjectReader t(*throughput, r.pointer("training_throughput"), r.problems());
    if (t.ok()) g.training_throughput = read_training_throughput(t);
  } else if (base != nullptr && g.training_throughput.of(TrainingPrecision::fp32) > 0 && g.peak_flop_per_s != base->peak_flop_per_s) {
    // Other peaks without a throughput of their own: the base's, scaled as the peaks its precisions run at, a guess.
    TrainingThroughput& t = g.training_throughput;
    t.relative[0] *= g.peak_for(Dtype::tf32) / base->peak_for(Dtype::tf32);
    t.relative[1] *= g.peak_for(Dtype::bf16) / base->peak_for(Dtype::bf16);
    t.estimated = {true, true};
    t.source = "The catalog's figures scaled by the overridden peaks (tf32 or fp32, bf16 or fp16), a guess. " + t.source;
  }
  const std::string source = read_source(r, need);
  if (!source.empty()) g.source = source;
  bool any_peak = false;
  for (double p : g.peak_flop_per_s) any_peak = any_peak || p > 0;
  if (r.ok() && !any_peak) r.problem("peak_flops", "expected at least one positive peak, such as \"bf16\": \"989 TFLOP/s\"");
  if (r.ok() && g.vram_bytes <= 0) r.problem("vram", "expected a positive size");
  if (r.ok() && g.memory_bandwidth_Bps <= 0) r.problem("memory_bandwidth", "expected a positive bandwidth");
  return g;
}

NodeType read_node(ObjectReader& r, const std::string& id, const NodeType* base) {
  NodeType n = base != nullptr ? *base : NodeType{};
  const Need need = base != nullptr ? Need::optional : Need::required;
  n.id = id;
  n.name = r.string("name", need).value_or(n.name.empty() ? id : n.name);
  n.gpu = r.string("gpu", need).value_or(n.gpu);
  n.gpus = static_cast<int>(r.integer("gpus", need, 1, 1024).value_or(n.gpus));
  n.gpu_link = r.string("gpu_link", need).value_or(n.gpu_link);
  n.host_link = r.string("host_link", need).value_or(n.host_link);
  n.nic = r.string("nic", need).value_or(n.nic);
  n.nics = static_cast<int>(r.integer("nics", need, 1, 64).value_or(n.nics));
  n.host_memory_bytes = r.quantity_or("host_memory", Dimension::bytes, n.host_memory_bytes);
  n.memory_bus_Bps = r.quantity_or("memory_bus", Dimension::bandwidth, n.memory_bus_Bps);
  if (n.memory_bus_Bps < 0) r.problem("memory_bus", "expected a bandwidth of at least 0");
  n.compute_pool_devices = r.number("compute_pool", Need::optional, 0, n.gpus).value_or(n.compute_pool_devices);
  n.host_memory_bandwidth_Bps = r.quantity_or("host_memory_bandwidth", Dimension::bandwidth, n.host_memory_bandwidth_Bps);
  n.cpu = static_cast<CpuVendor>(r.choice("cpu", {"intel", "amd"}, static_cast<std::size_t>(n.cpu)));
  n.nvls = r.boolean_or("nvls", n.nvls);
  n.price_usd_per_hour = r.number("price_usd_per_hour", Need::optional).value_or(n.price_usd_per_hour);
  n.purchase_usd = r.number("purchase_usd", Need::optional).value_or(n.purchase_usd);
  n.system_power_w = r.quantity_or("system_power", Dimension::power, n.system_power_w);
  const std::string source = read_source(r, need);
  if (!source.empty()) n.source = source;
  return n;
}

}  // namespace detail

namespace {

using detail::read_gpu;
using detail::read_node;

LinkType read_link(ObjectReader& r, const std::string& id) {
  LinkType l;
  l.id = id;
  l.name = r.string("name", Need::required).value_or(id);
  if (auto kind = r.string("kind", Need::required)) {
    bool found = false;
    for (std::size_t k = 0; k < kLinkKindNames.size(); ++k) {
      if (*kind == kLinkKindNames[k]) {
        l.kind = static_cast<LinkKind>(k);
        found = true;
      }
    }
    if (!found) r.problem("kind", "expected one of nvlink, pcie, infiniband, roce, ethernet, memory, found \"" + *kind + "\"");
  }
  l.bandwidth_Bps = r.quantity("bandwidth", Dimension::bandwidth, Need::required).value_or(0);
  if (l.bandwidth_Bps <= 0 && r.field("bandwidth") != nullptr) r.problem("bandwidth", "expected a positive bandwidth");
  l.latency_s = r.quantity("latency", Dimension::time, Need::required).value_or(0);
  l.nccl_bandwidth_Bps = r.quantity_or("nccl_bandwidth", Dimension::bandwidth, 0.0);
  if (l.nccl_bandwidth_Bps < 0) r.problem("nccl_bandwidth", "expected a positive bandwidth");
  l.source = read_source(r, Need::required);
  return l;
}

ModelSpec read_model(ObjectReader& r, const std::string& id) {
  ModelSpec m;
  m.id = id;
  m.name = r.string("name", Need::required).value_or(id);
  m.weights_bytes = r.quantity("weights", Dimension::bytes, Need::required).value_or(0);
  m.source = read_source(r, Need::required);
  return m;
}

OperatorSpec read_operator(ObjectReader& r, const std::string& id) {
  OperatorSpec o;
  o.id = id;
  o.name = r.string("name", Need::required).value_or(id);
  o.flop = r.quantity("flop", Dimension::flop, Need::required).value_or(0);
  o.bytes = r.quantity("bytes", Dimension::bytes, Need::required).value_or(0);
  if (auto dtype = r.string("dtype", Need::required)) {
    if (auto d = parse_dtype(*dtype)) {
      o.dtype = *d;
    } else {
      r.problem("dtype", "expected one of fp64, fp32, tf32, bf16, fp16, fp8, int8, found \"" + *dtype + "\"");
    }
  }
  o.source = read_source(r, Need::required);
  return o;
}

// An architecture: name, family and source, then the numbers and lists its family needs or allows.
std::shared_ptr<const Architecture> read_architecture(ObjectReader& r, const std::string& id) {
  auto a = std::make_shared<Architecture>();
  a->id = id;
  a->name = r.string("name", Need::required).value_or(id);
  a->source = read_source(r, Need::required);
  a->family = r.string("family", Need::required).value_or("");
  const ArchitectureFields* fields = architecture_fields(a->family);
  if (fields == nullptr) {
    std::string known;
    for (std::string_view f : architecture_families()) known += (known.empty() ? "" : ", ") + std::string(f);
    if (r.field("family") != nullptr) r.problem("family", "expected one of " + known + ", found \"" + a->family + "\"");
    return a;
  }
  // Counts of layers and blocks bound the kernels a step lists: at most 1000 each.
  auto most = [](std::string_view key) {
    for (std::string_view count : {"layers", "blocks", "double_blocks", "single_blocks", "layers_per_block", "mid_depth"}) {
      if (key == count) return 1e3;
    }
    return 1e9;
  };
  for (std::string_view key : fields->numbers) {
    if (auto v = r.number(key, Need::required, 0.0, most(key))) a->numbers.emplace(key, *v);
  }
  for (std::string_view key : fields->optional_numbers) {
    if (auto v = r.number(key, Need::optional, 0.0, most(key))) a->numbers.emplace(key, *v);
  }
  for (std::string_view key : fields->lists) {
    const Json* v = r.field(key, Need::required);
    if (v == nullptr) continue;
    // Levels of a UNet or a VAE: at most 16, each at most 1e9 channels or 1000 transformer or ResBlocks deep.
    const bool blocks = key == "depth" || key == "res_blocks";
    const double top = blocks ? 1e3 : 1e9;
    bool good = v->is_array() && !v->empty() && v->size() <= 16;
    for (std::size_t i = 0; good && i < v->size(); ++i) good = (*v)[i].is_number() && (*v)[i].get<double>() >= 0 && (*v)[i].get<double>() <= top;
    if (!good) {
      r.problem(key, "expected an array of 1 to 16 numbers from 0 to " + std::string(blocks ? "1000" : "1e9") + ", found " + detail::describe(*v));
      continue;
    }
    std::vector<double>& list = a->lists[std::string(key)];
    for (const Json& x : *v) list.push_back(x.get<double>());
  }
  if (a->family == "unet" && a->lists.count("channels") != 0 && a->lists.count("depth") != 0 &&
      a->lists["channels"].size() != a->lists["depth"].size()) {
    r.problem("depth", "expected one transformer depth per level of \"channels\"");
  }
  if (a->family == "unet" && a->numbers.count("heads") == 0 && a->numbers.count("head_dim") == 0) {
    r.problem("head_dim", "expected \"head_dim\" or \"heads\"");
  }
  for (std::string_view key : {"hidden", "heads", "layers", "channels"}) {
    if (a->numbers.count(std::string(key)) != 0 && a->numbers[std::string(key)] <= 0) r.problem(key, "expected a positive number");
  }
  // Multi-head latent attention (DeepSeek-V2/V3): keys and values from a cached latent of kv_lora_rank,
  // heads of qk_nope_head_dim + qk_rope_head_dim for queries and keys and v_head_dim for values.
  const auto has = [&](std::string_view key) { return a->numbers.count(std::string(key)) != 0; };
  const bool mla = has("kv_lora_rank");
  if (mla && a->numbers["kv_lora_rank"] <= 0) r.problem("kv_lora_rank", "expected a positive latent width");
  for (std::string_view key : {"qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}) {
    if (mla && (!has(key) || a->numbers[std::string(key)] <= 0)) r.problem(key, "expected a positive number beside \"kv_lora_rank\" (multi-head latent attention)");
    if (!mla && has(key)) r.problem(key, "expected only beside \"kv_lora_rank\" (multi-head latent attention)");
  }
  // Wan 2.2's VAE decoder: residual upsamplings or not, and the head's pixels a channel group.
  if (has("up_residual") && a->numbers["up_residual"] != 0 && a->numbers["up_residual"] != 1) {
    r.problem("up_residual", "expected 0 or 1, found " + format_number(a->numbers["up_residual"]));
  }
  if (has("patch") && (a->numbers["patch"] < 1 || a->numbers["patch"] != std::floor(a->numbers["patch"]))) {
    r.problem("patch", "expected a whole number of pixels, at least 1, found " + format_number(a->numbers["patch"]));
  }
  if (has("timestep_conditioning") && a->numbers["timestep_conditioning"] != 0 && a->numbers["timestep_conditioning"] != 1) {
    r.problem("timestep_conditioning", "expected 0 or 1, found " + format_number(a->numbers["timestep_conditioning"]));
  }
  // LTX-Video's decoder doubles the frames and pixels at each level but the last, and unfolds its patches: the
  // compression its entry states must be what its levels make.
  if (a->family == "ltx-vae-decoder" && a->lists.count("channels") != 0 && has("patch")) {
    const double doublings = std::pow(2.0, static_cast<double>(a->lists["channels"].size()) - 1);
    if (has("temporal_factor") && a->numbers["temporal_factor"] != doublings) {
      r.problem("temporal_factor", "expected " + format_number(doublings) + ", the frames its " + std::to_string(a->lists["channels"].size()) + " levels double to");
    }
    if (has("vae_factor") && a->numbers["vae_factor"] != doublings * a->numbers["patch"]) {
      r.problem("vae_factor", "expected " + format_number(doublings * a->numbers["patch"]) + ": its levels' doublings times its patch");
    }
  }
  // Mochi's decoder: ResBlocks for the widest level's start, each upsampling level and the narrowest level's end; an
  // expansion of the frames a upsampling, each doubling the pixels; what they make is the compression stated.
  if (a->family == "mochi-vae-decoder" && a->lists.count("channels") != 0 && a->lists.count("res_blocks") != 0 && a->lists.count("temporal_expansions") != 0) {
    const std::size_t levels = a->lists["channels"].size();
    const std::vector<double>& expansions = a->lists["temporal_expansions"];
    const std::vector<double>& blocks = a->lists["res_blocks"];
    if (std::any_of(blocks.begin(), blocks.end(), [](double n) { return n != std::floor(n); })) r.problem("res_blocks", "expected whole numbers of ResBlocks");
    if (blocks.size() != levels + 1) r.problem("res_blocks", "expected " + std::to_string(levels + 1) + " counts: one a level of \"channels\" and one more for the widest level's start");
    if (expansions.size() + 1 != levels) {
      r.problem("temporal_expansions", "expected " + std::to_string(levels - 1) + " expansions: one an upsampling between the levels of \"channels\"");
    } else {
      double frames = 1;
      for (double e : expansions) frames *= e;
      if (std::any_of(expansions.begin(), expansions.end(), [](double e) { return e < 1 || e != std::floor(e); })) {
        r.problem("temporal_expansions", "expected whole numbers of frames, at least 1 each");
      } else if (has("temporal_factor") && a->numbers["temporal_factor"] != frames) {
        r.problem("temporal_factor", "expected " + format_number(frames) + ", the product of its temporal expansions");
      }
      if (has("vae_factor") && a->numbers["vae_factor"] != std::pow(2.0, static_cast<double>(levels) - 1)) {
        r.problem("vae_factor", "expected " + format_number(std::pow(2.0, static_cast<double>(levels) - 1)) + ": each of its upsamplings doubles the pixels");
      }
    }
  }
  if (!mla && has("q_lora_rank")) r.problem("q_lora_rank", "expected only beside \"kv_lora_rank\" (multi-head latent attention)");
  if (mla && (has("head_dim") || has("kv_heads"))) r.problem(has("head_dim") ? "head_dim" : "kv_heads", "expected no head_dim or kv_heads beside \"kv_lora_rank\": latent attention's heads are qk_nope_head_dim + qk_rope_head_dim wide and share one latent");
  // The first dense_layers layers of a mixture of experts have a dense MLP of dense_ffn (DeepSeek's first_k_dense_replace).
  if (has("dense_layers")) {
    const double dense = a->numbers["dense_layers"];
    if (dense != std::floor(dense)) r.problem("dense_layers", "expected a whole number of layers, found " + format_number(dense));
    if (!has("experts") || a->numbers["experts"] <= 0) r.problem("dense_layers", "expected only in a mixture of experts (beside \"experts\")");
    if (has("layers") && dense > a->numbers["layers"]) r.problem("dense_layers", "expected at most \"layers\" (" + format_number(a->numbers["layers"]) + ")");
    if (dense > 0 && (!has("dense_ffn") || a->numbers["dense_ffn"] <= 0)) r.problem("dense_ffn", "expected the dense layers' MLP width beside \"dense_layers\"");
  } else if (has("dense_ffn")) {
    r.problem("dense_ffn", "expected only beside \"dense_layers\"");
  }
  return a;
}

// Reads one section ("gpus": {id: entry, ...}) into `into`, rejecting ids already present.
template <typename Entry, typename Read>
void read_section(ObjectReader& top, std::string_view section, Read read,
                  std::map<std::string, Entry, std::less<>>& into) {
  const Json* entries = top.field(section);
  if (entries == nullptr) return;
  ObjectReader list(*entries, top.pointer(section), top.problems());
  if (!list.ok()) return;
  for (const auto& [id, value] : entries->items()) {
    ObjectReader r(*list.field(id), list.pointer(id), top.problems());
    if (!r.ok()) continue;
    Entry entry = read(r, id);
    r.finish();
    if (into.count(id) != 0) {
      top.problems().add(list.pointer(id), "duplicate id: \"" + id + "\" is already in the catalog");
      continue;
    }
    into.emplace(id, std::move(entry));
  }
}

}  // namespace

std::string_view dtype_name(Dtype dtype) { return kDtypeNames[static_cast<std::size_t>(dtype)]; }

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (std::size_t d = 0; d < kDtypeCount; ++d) {
    if (kDtypeNames[d] == name) return static_cast<Dtype>(d);
  }
  return std::nullopt;
}

std::string_view link_kind_name(LinkKind kind) { return kLinkKindNames[static_cast<std::size_t>(kind)]; }
std::string_view gpu_arch_name(GpuArch arch) { return kGpuArchNames[static_cast<std::size_t>(arch)]; }
std::string_view training_precision_name(TrainingPrecision precision) { return precision == TrainingPrecision::fp32 ? "fp32" : "mixed"; }

double GpuType::peak_for(Dtype dtype) const {
  // Where a format is unsupported, the first supported one of its chain runs it: the other 16-bit
  // format, then wider ones. A GPU with none of them cannot run the task (checked at load).
  using D = Dtype;
  static constexpr std::array<std::array<Dtype, 5>, kDtypeCount> chains{{
      {D::fp64, D::fp32, D::fp32, D::fp32, D::fp32},  // fp64
      {D::fp32, D::fp64, D::fp64, D::fp64, D::fp64},  // fp32
      {D::tf32, D::fp32, D::fp64, D::fp64, D::fp64},  // tf32
      {D::bf16, D::fp16, D::fp32, D::fp64, D::fp64},  // bf16
      {D::fp16, D::bf16, D::fp32, D::fp64, D::fp64},  // fp16
      {D::fp8, D::fp16, D::bf16, D::fp32, D::fp64},   // fp8
      {D::int8, D::fp16, D::bf16, D::fp32, D::fp64},  // int8
  }};
  for (Dtype d : chains[static_cast<std::size_t>(dtype)]) {
    const double peak = peak_flop_per_s[static_cast<std::size_t>(d)];
    if (peak > 0) return peak;
  }
  return 0.0;
}

void Catalog::add_json(std::string_view text, const std::string& file_name) {
  Problems problems(file_name);
  const Json doc = detail::parse_json(text, problems);
  problems.throw_if_any();

  Catalog merged = *this;  // all or nothing: a bad file leaves the catalog unchanged
  ObjectReader top(doc, "", problems);
  top.string("about", Need::optional);
  read_section(top, "gpus", [](ObjectReader& r, const std::string& id) { return read_gpu(r, id, nullptr); }, merged.gpus_);
  read_section(top, "links", read_link, merged.links_);
  read_section(top, "nodes", [](ObjectReader& r, const std::string& id) { return read_node(r, id, nullptr); }, merged.nodes_);
  read_section(top, "models", read_model, merged.models_);
  read_section(top, "operators", read_operator, merged.operators_);
  read_section(top, "architectures", read_architecture, merged.architectures_);
  top.finish();

  // References from node types, checked once every section is read.
  for (const auto& [id, node] : merged.nodes_) {
    if (nodes_.count(id) != 0) continue;  // checked when its own file was added
    const std::string at = detail::child_pointer("/nodes", id);
    auto require = [&](const std::string& ref, bool found, std::string_view field, std::string_view kind) {
      if (!found) problems.add(detail::child_pointer(at, field), "unknown " + std::string(kind) + " \"" + ref + "\"");
    };
    require(node.gpu, merged.gpu(node.gpu) != nullptr, "gpu", "GPU type");
    require(node.gpu_link, merged.link(node.gpu_link) != nullptr, "gpu_link", "link type");
    require(node.host_link, merged.link(node.host_link) != nullptr, "host_link", "link type");
    require(node.nic, merged.link(node.nic) != nullptr, "nic", "link type");
  }
  problems.throw_if_any();
  *this = std::move(merged);
}

void Catalog::add_file(const std::string& path) { add_json(read_text_file(path), path); }

const Catalog& Catalog::builtin() {
  static const Catalog catalog = [] {
    Catalog c;
    c.add_json(embedded::hardware_json(), "models/hardware.json (built in)");
    c.add_json(embedded::operators_json(), "models/operators.json (built in)");
    c.add_json(embedded::architectures_json(), "models/architectures.json (built in)");
    return c;
  }();
  return catalog;
}

namespace {
template <typename Map>
const typename Map::mapped_type* find_in(const Map& map, std::string_view id) {
  const auto it = map.find(id);
  return it == map.end() ? nullptr : &it->second;
}
}  // namespace

const GpuType* Catalog::gpu(std::string_view id) const { return find_in(gpus_, id); }
const LinkType* Catalog::link(std::string_view id) const { return find_in(links_, id); }
const NodeType* Catalog::node(std::string_view id) const { return find_in(nodes_, id); }
const ModelSpec* Catalog::model(std::string_view id) const { return find_in(models_, id); }
const OperatorSpec* Catalog::op(std::string_view id) const { return find_in(operators_, id); }
const Architecture* Catalog::architecture(std::string_view id) const {
  const auto it = architectures_.find(id);
  return it == architectures_.end() ? nullptr : it->second.get();
}

std::string Catalog::llm_names() const {
  std::string names;
  for (const auto& [id, a] : architectures_) {
    if (is_llm(*a)) names += (names.empty() ? "" : ", ") + id;
  }
  return names;
}

std::string read_text_file(const std::string& path) {
  const auto refuse = [&](const std::string& why) { throw InputError({Problem{path, "", why}}); };
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(path, error);
  if (error) refuse("cannot read it: " + error.message());
  if (std::filesystem::is_directory(status)) refuse("is a directory, expected a file");
  if (!std::filesystem::is_regular_file(status)) {
    refuse(std::string("is not a regular file (") +
           (std::filesystem::is_fifo(status) ? "a FIFO" : std::filesystem::is_character_file(status) || std::filesystem::is_block_file(status) ? "a device" : "a socket or other special file") +
           "); fleetsim reads only regular files");
  }
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  if (!error && size > kMaxInputFileBytes) {
    refuse("is " + format_quantity(static_cast<double>(size), Dimension::bytes) + ", over the " +
           format_quantity(static_cast<double>(kMaxInputFileBytes), Dimension::bytes) + " that fleetsim reads");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) refuse(std::string("cannot open it for reading: ") + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError({Problem{path, "", "error while reading file"}});
  return text.str();
}

}  // namespace fleetsim
