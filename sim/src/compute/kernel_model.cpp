#include "fleetsim/kernel_model.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <vector>

#include "../json_reader.hpp"

namespace fleetsim::embedded {
std::string_view kernels_json();
}  // namespace fleetsim::embedded

namespace fleetsim {

namespace {
constexpr std::array<std::string_view, 13> kClassNames{"gemm",    "attention", "norm",      "add",    "activation", "gated-activation", "rope",
                                                       "softmax", "embedding", "reduction", "memory", "broadcast",  "indexed-copy"};
std::size_t memory_index(KernelClass cls) { return static_cast<std::size_t>(cls) - static_cast<std::size_t>(KernelClass::norm); }

// A causal forward's query blocks as the GPU dispatches them: each head's `blocks` in order, block i seeing the keys up
// to its last query (n - m + min(m, (i + 1) block), plus `overhead`), the heads one after another, each block to the
// first SM that frees. The blocks' keys grow within a head, so the last to start are the longest, and where the heads
// fill only a few waves the GPU waits for them. The keys the slowest SM sees: up to 8 waves of blocks of whole heads,
// the list schedule itself; beyond (or for a share of a head), fluidly, block j starts once the blocks before it,
// less half of the `sms` in flight, are done on `sms` SMs, and the last head's blocks end last (within 5% of the list
// schedule there, as the tests check).
double causal_forward_keys(double heads, double blocks, double block, double m, double n, double overhead, double sms) {
  const double whole = std::floor(m / block);  // blocks whose last query is within m
  const auto keys = [&](double i) { return n - m + std::min(m, (i + 1) * block) + overhead; };
  if (heads * blocks <= 0) return 0;
  if (heads * blocks <= 8 * sms && heads == std::floor(heads)) {  // whole heads: a share of one is fluid
    // The same shapes come back (a serving run's prompts, a search's layers): the schedules this thread played last,
    // by their inputs, so a repeat costs a lookup (the result is a function of them: outputs do not change).
    struct Played {
      std::array<double, 7> inputs{};
      double keys = -1;
    };
    thread_local std::array<Played, 4096> played;
    const std::array<double, 7> inputs{heads, blocks, block, m, n, overhead, sms};
    std::size_t hash = 0;
    for (double x : inputs) hash = (hash ^ std::hash<double>{}(x)) * 0x9e3779b97f4a7c15ULL;
    Played& slot = played[(hash >> 32) % played.size()];
    if (slot.keys >= 0 && slot.inputs == inputs) return slot.keys;
    // The first wave starts at once: its blocks' ends are when each SM is next free. Each later block goes to the SM
    // that frees first (a heap of those times, earliest on top).
    const auto first = static_cast<std::size_t>(std::min(sms, heads * blocks)), all = static_cast<std::size_t>(heads * blocks);
    const auto per_head = static_cast<std::size_t>(blocks);
    thread_local std::vector<double> free_at;
    free_at.resize(first);
    for (std::size_t j = 0; j < first; ++j) free_at[j] = keys(static_cast<double>(j % per_head));
    double end = *std::max_element(free_at.begin(), free_at.end());
    std::make_heap(free_at.begin(), free_at.end(), std::greater<>());
    for (std::size_t j = first; j < all; ++j) {
      std::pop_heap(free_at.begin(), free_at.end(), std::greater<>());
      free_at.back() += keys(static_cast<double>(j % per_head));
      end = std::max(end, free_at.back());
      std::push_heap(free_at.begin(), free_at.end(), std::greater<>());
    }
    slot = {inputs, end};
    return end;
  }
  const auto within = [&](double r) {  // the first r blocks of a head
    const double w = std::min(r, whole);
    return r * (n - m + overhead) + block * w * (w + 1) / 2 + std::max(0.0, r - whole) * m;
  };
  const double head = within(blocks), total = heads * blocks;
  const auto before = [&](double j) {  // the blocks dispatched before the j-th
    if (j <= 0) return 0.0;
    const double q = std::floor(j / blocks);
    return q * head + within(j - q * blocks);
  };
  double slowest = keys(blocks - 1);
  if (total <= sms) return slowest;
  for (double r = 0; r < blocks; ++r) {
    const double j = total - blocks + r;
    if (j < sms) continue;
    slowest = std::max(slowest, (before(j) - 0.5 * (before(j) - before(j - sms))) / sms + keys(r));
  }
  return slowest;
}
}  // namespace

const KernelArchConstants& KernelConstants::of(GpuArch arch) const {
  return arch == GpuArch::ampere ? ampere : arch == GpuArch::hopper ? hopper : arch == GpuArch::ada ? ada : fallback;
}
KernelArchConstants& KernelConstants::of(GpuArch arch) {
  return arch == GpuArch::ampere ? ampere : arch == GpuArch::hopper ? hopper : arch == GpuArch::ada ? ada : fallback;
}

namespace {

using detail::Json;
using detail::Need;
using detail::ObjectReader;
using detail::Problems;

std::vector<double> read_numbers(ObjectReader& r, std::string_view key, std::size_t count, double min) {
  std::vector<double> out;
  const Json* v = r.field(key, Need::required);
  if (v == nullptr) return out;
  bool good = v->is_array() && (count == 0 ? !v->empty() : v->size() == count);
  if (good) {
    for (const Json& x : *v) good = good && x.is_number() && std::isfinite(x.get<double>()) && x.get<double>() >= min;
  }
  if (!good) {
    r.problem(key, "expected an array of " + (count == 0 ? std::string("one or more") : std::to_string(count)) + " numbers of at least " +
                       Json(min).dump() + ", found " + detail::describe(*v));
    return out;
  }
  for (const Json& x : *v) out.push_back(x.get<double>());
  return out;
}

// An attention backend's constants, their names after `prefix`.
AttentionConstants read_attention(ObjectReader& r, const std::string& prefix) {
  AttentionConstants c;
  c.efficiency = r.number(prefix + "efficiency", Need::required, 1e-6, 1).value_or(1);
  c.key_overhead = r.number(prefix + "key_overhead", Need::required, 0, 1e6).value_or(0);
  c.head_overhead = r.number(prefix + "head_overhead", Need::required, 0, 1e4).value_or(0);
  c.fixed_us = r.number(prefix + "fixed_us", Need::required, 0, 1e6).value_or(0);
  return c;
}

KernelArchConstants read_arch(ObjectReader& a, std::size_t tiles) {
  KernelArchConstants k;
  k.source = a.string("source", Need::required).value_or("");
  k.borrowed = a.string("borrowed", Need::optional).value_or("");
  k.fitted_on = a.string("fitted_on", Need::optional).value_or("");
  if (!k.fitted_on.empty() && Catalog::builtin().gpu(k.fitted_on) == nullptr) {
    a.problem("fitted_on", "expected a GPU of the built-in catalog (fleetsim catalog lists them), found \"" + k.fitted_on + "\"");
  }
  k.tile_efficiency = read_numbers(a, "gemm_tile_efficiency", tiles, 1e-6);
  if (std::any_of(k.tile_efficiency.begin(), k.tile_efficiency.end(), [](double e) { return e > 1; })) {
    a.problem("gemm_tile_efficiency", "expected shares of peak of at most 1");
  }
  k.k_overhead = a.number("gemm_k_overhead", Need::required, 0, 1e6).value_or(0);
  k.gemm_memory_efficiency = a.number("gemm_memory_efficiency", Need::required, 1e-6, 2).value_or(1);
  k.gemm_fixed_us = a.number("gemm_fixed_us", Need::required, 0, 1e6).value_or(0);
  k.gemm_fp8_efficiency = a.number("gemm_fp8_efficiency", Need::optional, 1e-3, 2).value_or(1);
  k.gemm_fp8_blockwise_efficiency = a.number("gemm_fp8_blockwise_efficiency", Need::optional, 1e-3, 2).value_or(k.gemm_fp8_efficiency);
  if (const Json* v = a.field("memory_bound", Need::required)) {
    ObjectReader m(*v, a.pointer("memory_bound"), a.problems());
    if (m.ok()) {
      for (std::size_t c = 0; c < kMemoryKernelClasses; ++c) {
        const std::string_view name = kClassNames[c + 2];
        if (const Json* cv = m.field(name, Need::required)) {
          ObjectReader r(*cv, m.pointer(name), a.problems());
          if (!r.ok()) continue;
          MemoryKernelConstants& mc = k.memory[c];
          mc.efficiency = r.number("efficiency", Need::required, 1e-6, 2).value_or(1);
          mc.fixed_us = r.number("fixed_us", Need::required, 0, 1e6).value_or(0);
          mc.row_GBps = r.number("row_GBps", Need::required, 0, 1e6).value_or(0);
          mc.rows_per_sm = r.number("rows_per_sm", Need::required, 1e-3, 1e6).value_or(1);
          mc.l2_speedup = r.number("l2_speedup", Need::required, 1, 100).value_or(1);
          r.finish();
        }
      }
      m.finish();
    }
  }
  k.attention = read_attention(a, "attention_");
  if (const Json* v = a.field("cudnn_attention", Need::optional)) {
    ObjectReader c(*v, a.pointer("cudnn_attention"), a.problems());
    if (c.ok()) {
      k.cudnn_attention_source = c.string("source", Need::required).value_or("");
      k.cudnn_attention = read_attention(c, "");
      c.finish();
    }
  }
  k.attention_backward_rate = a.number("attention_backward_rate", Need::optional, 1e-3, 10).value_or(0);
  k.attention_backward_rate_causal = a.number("attention_backward_rate_causal", Need::optional, 1e-3, 10).value_or(0);
  a.finish();
  return k;
}

std::shared_ptr<const KernelConstants> read_constants(const Json& doc, Problems& problems) {
  auto k = std::make_shared<KernelConstants>();
  ObjectReader top(doc, "", problems);
  if (!top.ok()) return k;
  k->about = top.string("about", Need::optional).value_or("");
  if (const Json* g = top.field("gemm", Need::required)) {
    ObjectReader r(*g, top.pointer("gemm"), problems);
    if (r.ok()) {
      k->gemm_source = r.string("source", Need::required).value_or("");
      if (const Json* tiles = r.field("tiles", Need::required)) {
        bool good = tiles->is_array() && !tiles->empty();
        for (std::size_t i = 0; good && i < tiles->size(); ++i) {
          const Json& t = (*tiles)[i];
          good = t.is_array() && t.size() == 2 && t[0].is_number() && t[1].is_number() && t[0].get<double>() >= 1 && t[1].get<double>() >= 1;
          if (good) k->tiles.push_back({t[0].get<double>(), t[1].get<double>()});
        }
        if (!good) r.problem("tiles", "expected an array of [rows, columns] pairs of at least 1");
      }
      k->split_k = read_numbers(r, "split_k", 0, 1);
      k->split_k_min_k = r.number("split_k_min_k", Need::required, 1).value_or(1);
      r.finish();
    }
  }
  k->attention_block = top.number("attention_block", Need::required, 1, 4096).value_or(128);
  if (const Json* d = top.field("attention_head_dims", Need::required)) {
    ObjectReader r(*d, top.pointer("attention_head_dims"), problems);
    if (r.ok()) {
      k->attention_head_dims_source = r.string("source", Need::required).value_or("");
      k->attention_head_dims = read_numbers(r, "dims", 0, 1);
      if (!std::is_sorted(k->attention_head_dims.begin(), k->attention_head_dims.end())) r.problem("dims", "expected head dimensions in ascending order");
      r.finish();
    }
  }
  if (const Json* b = top.field("attention_backward", Need::required)) {
    ObjectReader r(*b, top.pointer("attention_backward"), problems);
    if (r.ok()) {
      k->attention_backward_source = r.string("source", Need::required).value_or("");
      k->attention_backward_flop = r.number("flop_factor", Need::required, 1, 100).value_or(2.5);
      k->attention_backward_rate = r.number("rate", Need::required, 1e-3, 10).value_or(1);
      k->attention_backward_rate_causal = r.number("rate_causal", Need::required, 1e-3, 10).value_or(1);
      r.finish();
    }
  }
  if (const Json* h = top.field("host", Need::required)) {
    ObjectReader r(*h, top.pointer("host"), problems);
    if (r.ok()) {
      k->host_source = r.string("source", Need::required).value_or("");
      k->eager_dispatch_us = r.number("eager_dispatch_us", Need::required, 0, 1e4).value_or(0);
      // Optional: a constants file written before it was measured takes the built-in figures.
      const Json* adam = r.field("cpu_adam", Need::optional);
      if (adam == nullptr) {
        const KernelConstants& b = *builtin_kernel_constants();
        k->cpu_adam_source = b.cpu_adam_source;
        k->cpu_adam_torch_params_per_s = b.cpu_adam_torch_params_per_s;
        k->cpu_adam_deepspeed_params_per_s = b.cpu_adam_deepspeed_params_per_s;
      } else {
        ObjectReader a(*adam, r.pointer("cpu_adam"), problems);
        if (a.ok()) {
          k->cpu_adam_source = a.string("source", Need::required).value_or("");
          k->cpu_adam_torch_params_per_s = a.number("torch_params_per_s", Need::required, 1e6, 1e12).value_or(1e9);
          k->cpu_adam_deepspeed_params_per_s = a.number("deepspeed_params_per_s", Need::required, 1e6, 1e12).value_or(1e9);
          a.finish();
        }
      }
      r.finish();
    }
  }
  if (const Json* archs = top.field("architectures", Need::required)) {
    ObjectReader r(*archs, top.pointer("architectures"), problems);
    if (r.ok()) {
      for (const auto& [name, into] : {std::pair{"ampere", &k->ampere}, std::pair{"hopper", &k->hopper}, std::pair{"ada", &k->ada}, std::pair{"default", &k->fallback}}) {
        if (const Json* v = r.field(name, Need::required)) {
          ObjectReader a(*v, r.pointer(name), problems);
          if (a.ok()) *into = read_arch(a, k->tiles.size());
        }
      }
      r.finish();
    }
  }
  top.finish();
  return k;
}

}  // namespace

std::string kernel_constants_json(const KernelConstants& k) {
  Json doc = Json::object();
  doc["about"] = k.about;
  Json tiles = Json::array();
  for (const auto& t : k.tiles) tiles.push_back({t[0], t[1]});
  doc["gemm"] = {{"source", k.gemm_source}, {"tiles", tiles}, {"split_k", k.split_k}, {"split_k_min_k", k.split_k_min_k}};
  doc["attention_block"] = k.attention_block;
  doc["attention_head_dims"] = {{"source", k.attention_head_dims_source}, {"dims", k.attention_head_dims}};
  doc["attention_backward"] = {{"source", k.attention_backward_source}, {"flop_factor", k.attention_backward_flop},
                               {"rate", k.attention_backward_rate}, {"rate_causal", k.attention_backward_rate_causal}};
  doc["host"] = {{"source", k.host_source},
                 {"eager_dispatch_us", k.eager_dispatch_us},
                 {"cpu_adam", {{"source", k.cpu_adam_source}, {"torch_params_per_s", k.cpu_adam_torch_params_per_s},
                               {"deepspeed_params_per_s", k.cpu_adam_deepspeed_params_per_s}}}};
  Json archs = Json::object();
  for (const auto& [name, a] : {std::pair{"ampere", &k.ampere}, std::pair{"hopper", &k.hopper}, std::pair{"ada", &k.ada}, std::pair{"default", &k.fallback}}) {
    Json memory = Json::object();
    for (std::size_t c = 0; c < kMemoryKernelClasses; ++c) {
      const MemoryKernelConstants& m = a->memory[c];
      memory[std::string(kClassNames[c + 2])] = {{"efficiency", m.efficiency}, {"fixed_us", m.fixed_us}, {"row_GBps", m.row_GBps},
                                                  {"rows_per_sm", m.rows_per_sm}, {"l2_speedup", m.l2_speedup}};
    }
    archs[name] = {{"source", a->source},
                   {"gemm_tile_efficiency", a->tile_efficiency},
                   {"gemm_k_overhead", a->k_overhead},
                   {"gemm_memory_efficiency", a->gemm_memory_efficiency},
                   {"gemm_fixed_us", a->gemm_fixed_us},
                   {"memory_bound", memory},
                   {"attention_efficiency", a->attention.efficiency},
                   {"attention_key_overhead", a->attention.key_overhead},
                   {"attention_head_overhead", a->attention.head_overhead},
                   {"attention_fixed_us", a->attention.fixed_us}};
    if (const auto& c = a->cudnn_attention) {
      archs[name]["cudnn_attention"] = {{"source", a->cudnn_attention_source}, {"efficiency", c->efficiency}, {"key_overhead", c->key_overhead},
                                        {"head_overhead", c->head_overhead}, {"fixed_us", c->fixed_us}};
    }
    if (a->gemm_fp8_efficiency != 1) archs[name]["gemm_fp8_efficiency"] = a->gemm_fp8_efficiency;
    if (a->gemm_fp8_blockwise_efficiency != a->gemm_fp8_efficiency) archs[name]["gemm_fp8_blockwise_efficiency"] = a->gemm_fp8_blockwise_efficiency;
    if (a->attention_backward_rate > 0) archs[name]["attention_backward_rate"] = a->attention_backward_rate;
    if (a->attention_backward_rate_causal > 0) archs[name]["attention_backward_rate_causal"] = a->attention_backward_rate_causal;
    if (!a->borrowed.empty()) archs[name]["borrowed"] = a->borrowed;
    if (!a->fitted_on.empty()) archs[name]["fitted_on"] = a->fitted_on;
  }
  doc["architectures"] = archs;
  return doc.dump(2) + "\n";
}

std::string_view kernel_class_name(KernelClass cls) { return kClassNames[static_cast<std::size_t>(cls)]; }

std::string_view attention_backend_name(AttentionBackend backend) { return backend == AttentionBackend::cudnn ? "cudnn" : "flash2"; }

std::optional<AttentionBackend> parse_attention_backend(std::string_view name) {
  if (name == "flash2") return AttentionBackend::flash2;
  if (name == "cudnn") return AttentionBackend::cudnn;
  return std::nullopt;
}

std::string attention_backend_choices() { return "flash2 or cudnn"; }

std::optional<KernelClass> parse_kernel_class(std::string_view name) {
  for (std::size_t i = 0; i < kClassNames.size(); ++i) {
    if (kClassNames[i] == name) return static_cast<KernelClass>(i);
  }
  return std::nullopt;
}

double dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp64: return 8;
    case Dtype::fp32:
    case Dtype::tf32: return 4;
    case Dtype::bf16:
    case Dtype::fp16: return 2;
    case Dtype::fp8:
    case Dtype::int8: return 1;
  }
  return 2;
}

std::shared_ptr<const KernelConstants> parse_kernel_constants(std::string_view text, const std::string& file) {
  Problems problems(file);
  const Json doc = detail::parse_json(text, problems);
  problems.throw_if_any();
  auto k = read_constants(doc, problems);
  problems.throw_if_any();
  return k;
}

std::shared_ptr<const KernelConstants> builtin_kernel_constants() {
  static const std::shared_ptr<const KernelConstants> k = parse_kernel_constants(embedded::kernels_json(), "models/kernels.json (built in)");
  return k;
}

KernelModel::KernelModel(const GpuType& gpu, std::shared_ptr<const KernelConstants> constants)
    : gpu_(gpu), k_(std::move(constants)), arch_(&k_->of(gpu.arch)) {
  tensor_ratio_.fill(1.0);
  if (!arch_->fitted_on.empty()) fitted_ = Catalog::builtin().gpu(arch_->fitted_on);
  const GpuType* listed = Catalog::builtin().gpu(gpu_.id);
  const GpuType& design = listed != nullptr ? *listed : gpu_;
  if (fitted_ == nullptr || fitted_->id == design.id || design.sms <= 0 || fitted_->sms <= 0) return;
  const auto per_sm = [](const GpuType& g, Dtype d) { return g.peak_flop_per_s[static_cast<std::size_t>(d)] / g.sms; };
  // A dtype one of the two has no peak of its own for falls back to another on it: compared as bf16 is.
  const auto ratio = [&](Dtype d) { return per_sm(design, d) > 0 && per_sm(*fitted_, d) > 0 ? per_sm(design, d) / per_sm(*fitted_, d) : 0.0; };
  const double bf16 = ratio(Dtype::bf16) > 0 ? ratio(Dtype::bf16) : ratio(Dtype::fp16);
  for (Dtype d : {Dtype::tf32, Dtype::bf16, Dtype::fp16, Dtype::fp8, Dtype::int8}) {
    const double r = ratio(d) > 0 ? ratio(d) : bf16;
    tensor_ratio_[static_cast<std::size_t>(d)] = r > 0 ? r : 1.0;
  }
}

double KernelModel::share(double fitted_share, Dtype dtype) const {
  const double r = tensor_ratio_[static_cast<std::size_t>(dtype)];
  return r == 1.0 ? fitted_share : 1 / (1 + r * (1 / fitted_share - 1));
}

std::string KernelModel::guess() const {
  if (!arch_->borrowed.empty()) return arch_->borrowed;
  // The GEMM and attention constants are shares of the tensor cores' peak, carried to another GPU by share(): an
  // assumption that matters little where the SMs' tensor work is alike, and much where it is not (an H20, GA102's A10
  // and A40).
  const double ratio = 1 / tensor_ratio_[static_cast<std::size_t>(Dtype::bf16)];  // the fitted GPU's work an SM against this one's
  if (ratio < 1.5 && ratio > 1 / 1.5) return "";
  char times[32];
  std::snprintf(times, sizeof times, "%.1f", ratio);
  std::string arch(gpu_arch_name(gpu_.arch));
  if (!arch.empty()) arch[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(arch[0])));
  return arch + "'s constants were fitted on " + fitted_->id + ", whose tensor cores do " + times +
         " times this GPU's work an SM: its GEMMs and attention are a guess";
}

std::string KernelModel::attention_guess(AttentionBackend backend) const {
  if (backend == AttentionBackend::flash2 || arch_->cudnn_attention) return "";
  return "cuDNN attention was not measured on " + std::string(gpu_arch_name(gpu_.arch)) +
         " GPUs: FlashAttention-2's constants stand in (PyTorch 2.11 picks cuDNN's only on Hopper and Blackwell)";
}

// Each candidate tile shape, and split-K where its tiles cannot fill the SMs: waves of one tile per SM,
// a tile's work (its K plus the prologue and epilogue) at the SM's share of peak times the shape's
// efficiency. The fastest candidate is cuBLAS's pick; operands through HBM bound it from below (a
// convolution's input once, not once per tap: an implicit GEMM gathers its columns on chip).
KernelEstimate KernelModel::gemm(const KernelCall& call, Dtype dtype) const {
  const double m = call.m, n = call.n, k = call.k, batch = call.batch, taps = call.taps, weight_bytes = call.weight_bytes;
  KernelEstimate e;
  e.fixed_s = arch_->gemm_fixed_us * 1e-6;
  if (m <= 0 || n <= 0 || k <= 0) return e;
  const double sms = std::max(1, gpu_.sms);
  const double element = dtype_bytes(dtype);
  const double per_sm = gpu_.peak_for(dtype) * gpu_.kernel_compute_scale[static_cast<std::size_t>(dtype)] / sms;
  const double bw = gpu_.memory_bandwidth_Bps * gpu_.kernel_memory_scale * arch_->gemm_memory_efficiency;
  e.memory_s = batch * (weight_bytes > 0 ? element * (m * k / taps + m * n) + weight_bytes * k * n : element * (m * k / taps + k * n + m * n)) / bw;
  double best = std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t < k_->tiles.size(); ++t) {
    const auto [tm, tn] = k_->tiles[t];
    const double tiles = batch * std::ceil(m / tm) * std::ceil(n / tn);
    const double fp8 = call.block_scaled ? arch_->gemm_fp8_blockwise_efficiency : arch_->gemm_fp8_efficiency;
    const double rate = per_sm * share(arch_->tile_efficiency[t], dtype) * (dtype == Dtype::fp8 ? fp8 : 1.0);
    for (double s : k_->split_k) {
      if (s > 1 && (tiles * s > 2 * sms || k / s < k_->split_k_min_k)) break;
      const double waves = std::ceil(tiles * s / sms);
      double time = waves * 2 * tm * tn * (std::ceil(k / s) + arch_->k_overhead) / rate;
      if (s > 1) time += 4 * batch * m * n * s / bw;  // partial sums written and reduced in fp32
      best = std::min(best, time);
    }
  }
  e.compute_s = best;
  return e;
}

double kernel_bytes(const KernelCall& c, Dtype dtype) {
  const double element = dtype_bytes(dtype);
  if (c.element_bytes > 0 && c.cls != KernelClass::gemm && c.cls != KernelClass::attention) return c.element_bytes * c.m * c.n;
  switch (c.cls) {
    case KernelClass::gemm:
      return c.batch * (c.weight_bytes > 0 ? element * (c.m * c.k / c.taps + c.m * c.n) + c.weight_bytes * c.k * c.n : element * (c.m * c.k / c.taps + c.k * c.n + c.m * c.n));
    case KernelClass::attention: {  // queries in and outputs out; keys and values (one latent tensor, or two)
      const double v = c.v > 0 ? c.v : c.k;
      return element * (c.batch * c.m * (c.k + v) + c.batch / std::max(1.0, c.groups) * c.n * (c.latent_kv ? c.k : c.k + v));
    }
    case KernelClass::memory: return element * c.m * c.n;
    case KernelClass::reduction: return element * (c.m * c.n + c.m);
    case KernelClass::norm: return element * (2 * c.m * c.n + c.n);
    case KernelClass::add:
    case KernelClass::gated_activation: return element * 3 * c.m * c.n;
    case KernelClass::activation:
    case KernelClass::rope:
    case KernelClass::softmax:
    case KernelClass::embedding:
    case KernelClass::broadcast:  // a broadcast operand is small beside the tensor
    case KernelClass::indexed_copy: return element * 2 * c.m * c.n;
  }
  return 0;
}

KernelEstimate KernelModel::estimate(const KernelCall& c, Dtype dtype) const {
  const double bw = gpu_.memory_bandwidth_Bps * gpu_.kernel_memory_scale;
  KernelEstimate e;
  if (c.cls == KernelClass::gemm) return gemm(c, dtype);
  if (c.cls == KernelClass::attention) {
    // FlashAttention: query blocks of attention_block rows per CTA, in waves over the SMs; QK^T and
    // PV are 4 m n k FLOP per head. Each block also pays a prologue and epilogue (key_overhead keys)
    // and, per key, softmax work that does not shrink with the head dimension (head_overhead, in
    // head-dimension units). Causal: a block sees the keys up to its last query, the diagonal key
    // block whole.
    const AttentionConstants& a = c.backend == AttentionBackend::cudnn && arch_->cudnn_attention ? *arch_->cudnn_attention : arch_->attention;
    e.fixed_s = a.fixed_us * 1e-6;
    const double sms = std::max(1, gpu_.sms);
    const double block = std::min(k_->attention_block, c.m);
    const double blocks = std::ceil(c.m / block);
    const double rate = gpu_.peak_for(dtype) * gpu_.kernel_compute_scale[static_cast<std::size_t>(dtype)] / sms * share(a.efficiency, dtype);
    // A head dimension the kernels are not built for runs padded to the next one they are. QK^T at the
    // keys' dimension, PV at the values'.
    const auto padded = [&](double dim) {
      const auto built = std::lower_bound(k_->attention_head_dims.begin(), k_->attention_head_dims.end(), dim);
      return built == k_->attention_head_dims.end() ? dim : *built;
    };
    const double head_dims = padded(c.k) + padded(c.v > 0 ? c.v : c.k);
    const double per_key = 2 * block * (head_dims + 2 * a.head_overhead) / rate;  // a block's time per key it sees
    e.memory_s = kernel_bytes(c, dtype) / bw;
    if (c.causal && !c.backward) {
      e.compute_s = causal_forward_keys(c.batch, blocks, block, c.m, c.n, a.key_overhead, sms) * per_key;
      return e;
    }
    // Blocks of equal keys in waves; a causal backward's blocks on average (its key blocks each loop over the query
    // blocks after them, longest first: they even out).
    const double keys = c.causal ? std::min(c.n, c.n - c.m / 2 + block / 2) : c.n;
    e.compute_s = std::ceil(c.batch * blocks / sms) * (keys + a.key_overhead) * per_key;
    if (c.backward) {  // the same blocks, more products at their own rate; twice the tensors moved
      const double own = c.causal ? arch_->attention_backward_rate_causal : arch_->attention_backward_rate;
      e.compute_s *= k_->attention_backward_flop / (own > 0 ? own : c.causal ? k_->attention_backward_rate_causal : k_->attention_backward_rate);
      e.memory_s *= 2;
    }
    return e;
  }
  const MemoryKernelConstants& mc = arch_->memory[memory_index(c.cls)];
  const double bytes = kernel_bytes(c, dtype);
  const double in_l2 = bytes > 0 && gpu_.l2_bytes > 0 ? std::min(1.0, gpu_.l2_bytes / bytes) : 0.0;
  e.memory_s = bytes / (bw * mc.efficiency) * (1 - in_l2 + in_l2 / mc.l2_speedup);
  // Row by row: a CTA per row, rows_per_sm of them at once on each SM, each at row_GBps.
  if (mc.row_GBps > 0 && c.m >= 1 && c.cls != KernelClass::memory) {
    const double waves = std::ceil(c.m / (std::max(1, gpu_.sms) * mc.rows_per_sm));
    e.compute_s = waves * bytes / c.m / (mc.row_GBps * 1e9);
  }
  e.fixed_s = mc.fixed_us * 1e-6;
  return e;
}

double KernelModel::time_s(const std::vector<KernelCall>& calls, Dtype dtype) const {
  double t = 0;
  for (const KernelCall& c : calls) t += c.count * estimate(c, dtype).time_s();
  return t;
}

}  // namespace fleetsim
