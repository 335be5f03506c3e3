#include "fleetsim/model_profile.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "fleetsim/error.hpp"
#include "fleetsim/units.hpp"

namespace fleetsim {

double Architecture::number(std::string_view key, double fallback) const {
  const auto it = numbers.find(key);
  return it == numbers.end() ? fallback : it->second;
}

const std::vector<double>& Architecture::list(std::string_view key) const {
  const auto it = lists.find(key);
  FLEETSIM_CHECK(it != lists.end(), "architecture " + id + " has no list " + std::string(key) + " (checked at load)");
  return it->second;
}

bool is_llm(const Architecture& a) { return a.family == "transformer" && a.number("vocab", 0) > 0; }

Runtime default_runtime(const Architecture& a) { return is_llm(a) ? Runtime::compiled : Runtime::comfyui; }

namespace {

const std::map<std::string_view, ArchitectureFields>& families() {
  static const std::map<std::string_view, ArchitectureFields> f{
      {"transformer", {{"layers", "hidden", "heads", "ffn"}, {"kv_heads", "head_dim", "gated", "vocab", "causal", "rope", "experts", "experts_per_token", "shared_ffn", "dense_layers", "dense_ffn",
         "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qkv_bias"},
        {}}},
      {"unet",
       {{"mid_depth", "context_dim", "context_tokens", "layers_per_block", "latent_channels", "vae_factor"},
        {"head_dim", "heads", "time_dim", "linear_projection"},
        {"channels", "depth"}}},
      {"dit",
       {{"hidden", "heads", "double_blocks", "single_blocks", "mlp_ratio", "patch", "latent_channels", "vae_factor", "text_tokens",
         "text_dim"},
        {"cross_attention", "ffn", "temporal_factor", "temporal_patch", "rope", "qk_norm"},
        {}}},
      {"vae-decoder", {{"latent_channels", "layers_per_block", "vae_factor"}, {"temporal_factor", "video_stand_in"}, {"channels"}}},
      {"causal-vae-decoder", {{"latent_channels", "layers_per_block", "vae_factor", "temporal_factor", "temporal_upsamplings"}, {"patch", "up_residual"}, {"channels"}}},
      {"conv3d-vae-decoder", {{"latent_channels", "layers_per_block", "vae_factor", "temporal_factor"}, {}, {"channels"}}},
      {"ltx-vae-decoder", {{"latent_channels", "layers_per_block", "vae_factor", "temporal_factor", "patch"}, {"timestep_conditioning"}, {"channels"}}},
      {"mochi-vae-decoder", {{"latent_channels", "vae_factor", "temporal_factor"}, {}, {"channels", "res_blocks", "temporal_expansions"}}},
      {"rrdb", {{"blocks", "features", "growth", "scale"}, {}, {}}},
  };
  return f;
}

// The latent frames a video VAE of temporal factor `tf` makes of `shape`'s frames: the first alone, then tf a
// latent frame (1 for an image).
double latent_frames_of(const StepShape& shape, double tf) { return shape.frames > 1 ? std::floor((shape.frames - 1) / tf) + 1 : 1; }

// A diffusion transformer's image (or video) tokens: its latent (vae_factor, temporal_factor) cut into patches of
// `patch` latent pixels a side and `temporal_patch` latent frames.
double image_tokens(const Architecture& a, const StepShape& s) {
  const double f = a.number("vae_factor", 8), p = a.number("patch", 2), tf = a.number("temporal_factor", 1), tp = a.number("temporal_patch", 1);
  return std::ceil(latent_frames_of(s, tf) / tp) * std::ceil(s.height / f / p) * std::ceil(s.width / f / p);
}

// Appends a family's kernels in launch order: the model's GEMMs, convolutions and attentions, and its
// small operations (norms, activations, copies) as the runtime runs them (models/runtimes.json).
class Builder {
 public:
  Builder(std::vector<KernelCall>& out, const RuntimeProfile& runtime, Dtype dtype) : out_(out), runtime_(runtime), dtype_(dtype) {}
  bool eager() const { return runtime_.eager; }
  bool separate_projections() const { return runtime_.separate_projections; }

  void gemm(const std::string& name, double m, double n, double k, double count = 1) {
    push({.cls = KernelClass::gemm, .m = m, .n = n, .k = k, .count = count, .name = name});
  }
  // A k x k convolution (kt x k x k: over kt frames too, each of the b outputs reading its kt) with stride s
  // onto an output of b x h x w pixels, as an implicit GEMM, with the layout changes and the bias its runtime
  // adds around it; `input_pixels` where its input is not b x h x w x s^2 (a causal convolution's, padded).
  // A 1 x 1 filter is laid out the same either way, so only larger ones have their weights reordered.
  void conv(const std::string& name, double b, double h, double w, double cin, double cout, double k, double s = 1, double kt = 1, double input_pixels = 0) {
    op("conv_layout", name + ".to_nhwc", input_pixels > 0 ? input_pixels : b * h * w * s * s, cin);
    if (k * k * kt > 1) op("conv_weight_layout", name + ".weights_to_nhwc", cout, cin * k * k * kt);
    push({.cls = KernelClass::gemm, .m = b * h * w, .n = cout, .k = cin * k * k * kt, .taps = k * k * kt, .name = name});
    op("conv_layout", name + ".to_nchw", b * h * w, cout);
    op("conv_bias", name + ".bias", b * h * w, cout);
  }
  // GroupNorm (32 groups) of b samples of px pixels x c channels, then SiLU if `silu`.
  void group_norm(const std::string& name, double b, double px, double c, bool silu) {
    op(silu ? "group_norm_silu" : "group_norm", name, b * px, c, 1, b * 32);
  }
  // A small operation over rows x width, `count` times, as the runtime runs it; `groups`: the rows of a
  // kernel that runs a CTA per (sample, group).
  void op(std::string_view operation, const std::string& name, double rows, double width, double count = 1, double groups = 0) {
    for (KernelCall& call : operation_kernels(runtime_, operation, rows, width, dtype_, groups)) {
      call.count *= count;
      call.name = name;
      push(std::move(call));
    }
  }
  // A memory-bound kernel of the model itself, the same under every runtime (an embedding's gather).
  void kernel(KernelClass cls, const std::string& name, double rows, double width) { push({.cls = cls, .m = rows, .n = width, .name = name}); }
  void attention(const std::string& name, double heads, double queries, double keys, double head_dim, bool causal = false, double groups = 1) {
    push({.cls = KernelClass::attention, .m = queries, .n = keys, .k = head_dim, .batch = heads, .groups = groups, .causal = causal, .name = name});
  }

  // Any other kernel, written out (a batched GEMM, an attention of its own shape).
  void push(KernelCall call) { out_.push_back(std::move(call)); }
  // The kernels appended so far; every one appended since `mark` run `times` as often.
  std::size_t size() const { return out_.size(); }
  void repeat_since(std::size_t mark, double times) {
    for (std::size_t i = mark; i < out_.size(); ++i) out_[i].count *= times;
  }

 private:
  std::vector<KernelCall>& out_;
  const RuntimeProfile& runtime_;
  Dtype dtype_;
};

// A layer's multi-head latent attention over m = batch x tokens new tokens after `context` cached ones.
// A prompt (more than one token a sequence): the latent of every token, cached and new, up-projected to
// keys and values, then multi-head attention at the keys' and values' head dimensions. A decode step:
// absorbed, as vLLM's and SGLang's MLA decode runs it: the queries' no-rope part projected into the
// latent (a batched GEMM a head), a multi-query attention over the latents the heads share, the output
// projected back out of the latent a head.
void latent_attention(const LatentAttention& l, double h, double heads, const StepShape& s, std::string_view norm, Builder& b) {
  const double tokens = std::max(1.0, s.tokens), m = s.batch * tokens;
  if (l.q_rank > 0) {
    b.gemm("attn.q_a", m, l.q_rank, h);
    b.op(norm, "attn.q_a.norm", m, l.q_rank);
    b.gemm("attn.q_b", m, heads * l.qk(), l.q_rank);
  } else {
    b.gemm("attn.q", m, heads * l.qk(), h);
  }
  b.gemm("attn.kv_a", m, l.cached(), h);
  b.op(norm, "attn.kv_a.norm", m, l.kv_rank);
  b.op("rope", "attn.rope", m, heads * l.rope);
  b.op("rope", "attn.rope", m, l.rope);
  if (tokens > 1) {
    b.gemm("attn.kv_b", s.batch * (s.context + tokens), heads * (l.nope + l.v), l.kv_rank);
    b.push({.cls = KernelClass::attention, .m = tokens, .n = s.context + tokens, .k = l.qk(), .batch = s.batch * heads, .causal = true, .v = l.v, .name = "attn"});
  } else {
    b.push({.cls = KernelClass::gemm, .m = m, .n = l.kv_rank, .k = l.nope, .batch = heads, .name = "attn.q_absorb"});
    b.push({.cls = KernelClass::attention, .m = 1, .n = s.context + 1, .k = l.cached(), .batch = s.batch * heads, .groups = heads, .v = l.kv_rank,
            .latent_kv = true, .name = "attn"});
    b.push({.cls = KernelClass::gemm, .m = m, .n = l.v, .k = l.kv_rank, .batch = heads, .name = "attn.v_absorb"});
  }
  b.gemm("attn.out", m, h, heads * l.v);
}

// A decoder (or, with causal 0, encoder) transformer: per layer a norm, the QKV projection (separate
// q, k and v projections in the eager code of text encoders, one fused where compiled), rotary
// embedding, attention over the cached and new tokens, the output projection, a residual add, a norm,
// the MLP (gated or not) and an add; then a norm and the vocabulary projection.
void transformer(const Architecture& a, const StepShape& s, Builder& b) {
  const double h = a.number("hidden", 0), heads = a.number("heads", 0), kv = a.number("kv_heads", heads);
  const double hd = a.number("head_dim", h / heads), vocab = a.number("vocab", 0);  // Qwen3's heads are wider than h / heads
  const bool causal = a.number("causal", 1) != 0, rope = a.number("rope", 1) != 0, gated = a.number("gated", 0) != 0;
  const double tokens = std::max(1.0, s.tokens), m = s.batch * tokens;
  const std::string_view norm = vocab > 0 ? "rms_norm" : "layer_norm";  // LLMs' RMSNorm; CLIP's and T5's encoders as LayerNorm
  if (vocab > 0) b.kernel(KernelClass::embedding, "embedding", m, h);  // a gather: reads and writes a row per token
  const std::optional<LatentAttention> latent = LatentAttention::of(a);
  const double dense_layers = a.number("dense_layers", 0);  // DeepSeek's first layers: a dense MLP before the mixtures
  for (double layer = 0; layer < a.number("layers", 0); ++layer) {
    b.op(norm, "attn.norm", m, h);
    if (latent) {
      latent_attention(*latent, h, heads, s, norm, b);
    } else if (b.eager()) {
      b.gemm("attn.q", m, heads * hd, h);
      b.gemm("attn.k", m, kv * hd, h);
      b.gemm("attn.v", m, kv * hd, h);
    } else {
      b.gemm("attn.qkv", m, (heads + 2 * kv) * hd, h);
    }
    if (!latent) {
      if (rope) {
        b.op("rope", "attn.rope", m, heads * hd);
        b.op("rope", "attn.rope", m, kv * hd);
      }
      b.attention("attn", s.batch * heads, tokens, s.context + tokens, hd, causal, heads / kv);
      b.gemm("attn.out", m, h, heads * hd);
    }
    b.op("residual_add", "attn.residual", m, h);
    b.op(norm, "mlp.norm", m, h);
    const double experts = layer < dense_layers ? 0 : a.number("experts", 0), top_k = a.number("experts_per_token", 1);
    const double ffn = layer < dense_layers ? a.number("dense_ffn", 0) : a.number("ffn", 0);
    if (experts > 0) {  // a mixture of experts: a router, then each expert reached its share of the tokens
      const double touched = experts_touched(experts, top_k, m), rows = m * top_k / touched;
      b.gemm("moe.router", m, experts, h);
      b.gemm("moe.up", rows, (gated ? 2 : 1) * ffn, h, touched);
      b.op(gated ? "gated_activation" : "gelu", "moe.act", m * top_k, ffn);
      b.gemm("moe.down", rows, h, ffn, touched);
      if (const double shared = a.number("shared_ffn", 0); shared > 0) {  // a shared expert every token passes through
        b.gemm("moe.shared.up", m, (gated ? 2 : 1) * shared, h);
        b.op(gated ? "gated_activation" : "gelu", "moe.shared.act", m, shared);
        b.gemm("moe.shared.down", m, h, shared);
      }
    } else {
      if (gated && b.eager()) {
        b.gemm("mlp.gate", m, ffn, h);
        b.gemm("mlp.up", m, ffn, h);
      } else {
        b.gemm("mlp.up", m, (gated ? 2 : 1) * ffn, h);
      }
      b.op(gated ? "gated_activation" : "gelu", "mlp.act", m, ffn);
      b.gemm("mlp.down", m, h, ffn);
    }
    b.op("residual_add", "mlp.residual", m, h);
  }
  b.op(norm, "final.norm", m, h);
  if (vocab > 0) b.gemm("lm_head", s.training ? m : s.batch, vocab, h);
}

// A Stable Diffusion UNet as ComfyUI's openaimodel runs it: ResNet blocks and, where a level's depth is
// above 0, spatial transformers of self-attention, cross-attention to the text and a GEGLU
// feed-forward (separate q, k and v projections); down, a middle, and up with the skips concatenated.
void unet(const Architecture& a, const StepShape& s, Builder& b) {
  const auto& channels = a.list("channels");
  const auto& depth = a.list("depth");
  const double f = a.number("vae_factor", 8), lat = a.number("latent_channels", 4);
  const double h0 = std::ceil(s.height / f), w0 = std::ceil(s.width / f), n = s.batch;
  const double ctx_dim = a.number("context_dim", 0), ctx = s.context > 0 ? s.context : a.number("context_tokens", 77);
  const double temb = a.number("time_dim", 4 * channels.front());
  const bool linear_projection = a.number("linear_projection", 1) != 0;
  auto heads_of = [&](double c) { return a.number("heads", 0) > 0 ? a.number("heads", 0) : c / a.number("head_dim", 64); };
  auto resnet = [&](double cin, double cout, double h, double w) {
    const double px = n * h * w;
    b.group_norm("resnet.norm1", n, h * w, cin, true);
    b.conv("resnet.conv1", n, h, w, cin, cout, 3);
    b.op("vector_silu", "resnet.time", n, temb);
    b.gemm("resnet.time", n, cout, temb);
    b.op("time_add", "resnet.time_add", px, cout);
    b.group_norm("resnet.norm2", n, h * w, cout, true);
    b.conv("resnet.conv2", n, h, w, cout, cout, 3);
    if (cin != cout) b.conv("resnet.shortcut", n, h, w, cin, cout, 1);
    b.op("residual_add", "resnet.residual", px, cout);
  };
  auto transformer2d = [&](double c, double h, double w, double blocks) {
    if (blocks <= 0) return;
    const double tok = h * w, m = n * tok, heads = heads_of(c), hd = c / heads;
    b.group_norm("attn.groupnorm", n, tok, c, false);
    if (linear_projection) {
      b.op("to_tokens", "attn.to_tokens", m, c);
      b.gemm("attn.proj_in", m, c, c);
    } else {
      b.conv("attn.proj_in", n, h, w, c, c, 1);
      b.op("to_tokens", "attn.to_tokens", m, c);
    }
    for (double i = 0; i < blocks; ++i) {
      b.op("layer_norm", "attn.norm1", m, c);
      b.gemm("attn.self.q", m, c, c);
      b.gemm("attn.self.k", m, c, c);
      b.gemm("attn.self.v", m, c, c);
      b.attention("attn.self", n * heads, tok, tok, hd);
      b.gemm("attn.self.out", m, c, c);
      b.op("residual_add", "attn.self.residual", m, c);
      b.op("layer_norm", "attn.norm2", m, c);
      b.gemm("attn.cross.q", m, c, c);
      b.gemm("attn.cross.k", n * ctx, c, ctx_dim);
      b.gemm("attn.cross.v", n * ctx, c, ctx_dim);
      b.attention("attn.cross", n * heads, tok, ctx, hd);
      b.gemm("attn.cross.out", m, c, c);
      b.op("residual_add", "attn.cross.residual", m, c);
      b.op("layer_norm", "attn.norm3", m, c);
      b.gemm("attn.ff.in", m, 8 * c, c);
      b.op("gated_activation", "attn.ff.geglu", m, 4 * c);
      b.gemm("attn.ff.out", m, c, 4 * c);
      b.op("residual_add", "attn.ff.residual", m, c);
    }
    if (linear_projection) {
      b.gemm("attn.proj_out", m, c, c);
      b.op("to_pixels", "attn.to_pixels", m, c);
    } else {
      b.op("to_pixels", "attn.to_pixels", m, c);
      b.conv("attn.proj_out", n, h, w, c, c, 1);
    }
    b.op("residual_add", "attn.residual", m, c);
  };
  b.op("sampler", "step", n, 0);  // the sampler's and guidance's arithmetic on the latent
  b.op("timestep_embedding", "time.embed", n, 0);
  b.gemm("time.embed1", n, temb, channels.front());
  b.gemm("time.embed2", n, temb, temb);
  b.conv("conv_in", n, h0, w0, lat, channels.front(), 3);
  std::vector<double> skips{channels.front()};
  double c_in = channels.front(), h = h0, w = w0;
  const double per_block = a.number("layers_per_block", 2);
  for (std::size_t i = 0; i < channels.size(); ++i) {
    for (double j = 0; j < per_block; ++j) {
      resnet(c_in, channels[i], h, w);
      transformer2d(channels[i], h, w, depth[i]);
      c_in = channels[i];
      skips.push_back(c_in);
    }
    if (i + 1 < channels.size()) {
      h = std::ceil(h / 2);
      w = std::ceil(w / 2);
      b.conv("downsample", n, h, w, c_in, c_in, 3, 2);
      skips.push_back(c_in);
    }
  }
  resnet(c_in, c_in, h, w);
  transformer2d(c_in, h, w, a.number("mid_depth", 0));
  resnet(c_in, c_in, h, w);
  for (std::size_t r = channels.size(); r-- > 0;) {
    for (double j = 0; j <= per_block; ++j) {
      const double skip = skips.back();
      skips.pop_back();
      b.op("concat", "up.concat", n * h * w, c_in + skip);
      resnet(c_in + skip, channels[r], h, w);
      transformer2d(channels[r], h, w, depth[r]);
      c_in = channels[r];
    }
    if (r > 0) {
      h *= 2;
      w *= 2;
      b.op("upsample", "upsample.interpolate", n * h * w, c_in);
      b.conv("upsample", n, h, w, c_in, c_in, 3);
    }
  }
  b.group_norm("norm_out", n, h * w, c_in, true);
  b.conv("conv_out", n, h, w, c_in, lat, 3);
}

// A diffusion transformer over patches of the latent, as ComfyUI runs FLUX, SD3, HunyuanVideo and Wan:
// double-stream blocks (image and text each with their own weights and adaLN modulation, attending
// jointly), single-stream blocks over both, or, with cross_attention, blocks over the image alone that
// attend to the text (Wan, with separate q, k and v projections).
void dit(const Architecture& a, const StepShape& s, Builder& b) {
  const double h = a.number("hidden", 0), heads = a.number("heads", 0), hd = h / heads;
  const double p = a.number("patch", 2), lat = a.number("latent_channels", 16), tp = a.number("temporal_patch", 1);
  const double img = image_tokens(a, s);
  const double txt = s.context > 0 ? s.context : a.number("text_tokens", 0), n = s.batch, all = img + txt;
  const double mlp = a.number("ffn", a.number("mlp_ratio", 4) * h);
  // Sequence parallel over sp GPUs: each holds 1/sp of the tokens (rows r per token of the batch) and,
  // in attention, 1/sp of the heads over every token; the cross-attention's text stays whole on each.
  const double sp = std::max(1.0, s.sequence_parallel), r = n / sp;
  // PipeFusion: this GPU is the first stage (the embeddings and the stage's blocks; the final layer and the
  // sampler run on the last), each step on one band of the image's rows at a time (`q_img` of its tokens,
  // the text whole with each band, as xDiT's blocks take it), its attention over every token's keys and
  // values, the band's own written into the layer's buffer first. The list is one band's, run `patches` times.
  const bool piped = s.pipeline_stages > 1, banded = s.patches > 1;
  const PipelineStage stage = first_pipeline_stage(a, s);
  const double patches = std::max(1.0, s.patches), q_img = img / patches, q_all = q_img + txt;
  const bool cross = a.number("cross_attention", 0) != 0, rope = a.number("rope", 1) != 0, qk_norm = a.number("qk_norm", 1) != 0;
  auto qk_norms = [&](const char* name, double tokens) {
    if (qk_norm) b.op("rms_norm", name, r * tokens * heads, hd, 2);  // queries and keys, per head
  };
  // Attention of this GPU's queries over `keys` (every token's, or the text's): Ulysses alone gives it 1/sp
  // of the heads over every query; with rings of ring_degree GPUs, 1/u of the heads (u = sp / ring_degree,
  // Ulysses' share) over its ring's 1/ring_degree of the queries, one block of the keys a pass
  // (ring_degree passes where the keys go round the ring, each pass after the first merging its output
  // into the others' in fp32: zhuzilin/ring-flash-attention's _update_out_and_lse, as xDiT runs it, a
  // cast, a subtraction, a broadcast product and a subtraction, unfused; 38 bytes an element).
  auto attention = [&](const char* name, double tokens, double keys, bool ring_keys) {
    if (banded && ring_keys) b.op("concat", std::string(name) + ".kv_buffer", r * q_img, 2 * h, 2);  // torch.cat of the band's keys and values, then its write into the buffer
    const double ring = std::max(1.0, s.ring_degree), head_share = heads / (sp / ring);
    if (ring <= 1) return b.attention(name, r * heads, tokens, keys, hd);
    const double passes = ring_keys ? ring : 1, rows = n * tokens / ring;
    b.push({.cls = KernelClass::attention, .m = tokens / ring, .n = keys / passes, .k = hd, .batch = n * head_share, .count = passes, .name = name});
    if (passes > 1) b.push({.cls = KernelClass::memory, .m = rows * head_share, .n = hd, .count = 4 * (passes - 1), .element_bytes = 38.0 / 4, .name = std::string(name) + ".merge"});
  };
  const std::size_t band = b.size();
  if (!piped) b.op("sampler", "step", n, 0);  // the sampler's and guidance's arithmetic on the latent
  b.op("timestep_embedding", "time.embed", n, 0);
  if (rope) b.op("position_tables", "rope.tables", n, 0);
  b.op("patchify", "patchify", r * q_img, lat * p * p * tp);
  b.gemm("patch_embed", r * q_img, h, lat * p * p * tp);
  b.gemm("text_embed", r * txt, h, a.number("text_dim", 0));
  b.gemm("time_embed", n, h, 256);
  b.gemm("time_embed", n, h, h);
  for (double i = 0; i < stage.doubles; ++i) {
    for (double tokens : {q_img, txt}) {
      b.op("vector_silu", "double.modulation", n, h);
      b.gemm("double.modulation", n, 6 * h, h);
      b.op("layer_norm", "double.norm1", r * tokens, h);
      b.op("modulate", "double.modulate1", r * tokens, h);
      if (b.separate_projections()) {
        for (const char* name : {"double.q", "double.k", "double.v"}) b.gemm(name, r * tokens, h, h);
      } else {
        b.gemm("double.qkv", r * tokens, 3 * h, h);
      }
      qk_norms("double.qk_norm", tokens);
    }
    // Text and image queries, keys and values concatenated (a band's queries with the text's, every token's keys and values).
    if (banded) {
      b.op("qkv_join", "double.join", r * q_all, h);
      b.op("qkv_join", "double.join", r * all, h, 2);
    } else {
      b.op("qkv_join", "double.join", r * all, h, 3);
    }
    if (rope) b.op("rope", "double.rope", r * q_all, h, 2);
    attention("double.attn", q_all, all, true);
    b.op("attention_out", "double.attn.out", r * q_all, h);
    for (double tokens : {q_img, txt}) {
      b.gemm("double.out", r * tokens, h, h);
      b.op("gate_residual", "double.residual1", r * tokens, h);
      b.op("layer_norm", "double.norm2", r * tokens, h);
      b.op("modulate", "double.modulate2", r * tokens, h);
      b.gemm("double.mlp.in", r * tokens, mlp, h);
      b.op("gelu", "double.mlp.act", r * tokens, mlp);
      b.gemm("double.mlp.out", r * tokens, h, mlp);
      b.op("gate_residual", "double.residual2", r * tokens, h);
    }
  }
  const double singles = stage.singles;
  if (singles > 0 && !cross) b.op("concat", "single.join", r * q_all, h);  // text and image, once
  for (double i = 0; i < singles; ++i) {
    const double tokens = cross ? q_img : q_all, keys = cross ? img : all, m = r * tokens;
    b.op("vector_silu", "single.modulation", n, h);
    if (!cross) b.gemm("single.modulation", n, 3 * h, h);  // Wan's blocks add learned modulation: no GEMM
    if (!cross) b.op("stream_join", "single.join", m, h);   // diffusers joins text and image in every block
    b.op("layer_norm", "single.norm1", m, h);
    b.op("modulate", "single.modulate1", m, h);
    if (cross) {
      b.gemm("single.q", m, h, h);
      b.gemm("single.k", m, h, h);
      b.gemm("single.v", m, h, h);
      qk_norms("single.qk_norm", tokens);
      if (rope) b.op("rope", "single.rope", m, h, 2);
      attention("single.attn", tokens, keys, true);
      b.op("attention_out", "single.attn.out", m, h);
      b.gemm("single.out", m, h, h);
      b.op("gate_residual", "single.residual1", m, h);
      b.op("layer_norm", "single.norm3", m, h);
      b.gemm("single.cross.q", m, h, h);
      b.gemm("single.cross.k", n * txt, h, h);
      b.gemm("single.cross.v", n * txt, h, h);
      if (qk_norm) b.op("rms_norm", "single.cross.qk_norm", (r * tokens + n * txt) * heads, hd);
      attention("single.cross", tokens, txt, false);
      b.op("attention_out", "single.cross.out", m, h);
      b.gemm("single.cross.out", m, h, h);
      b.op("residual_add", "single.residual2", m, h);
      b.op("layer_norm", "single.norm2", m, h);
      b.op("modulate", "single.modulate2", m, h);
      b.gemm("single.mlp.in", m, mlp, h);
      b.op("gelu", "single.mlp.act", m, mlp);
      b.gemm("single.mlp.out", m, h, mlp);
      b.op("gate_residual", "single.residual3", m, h);
    } else {
      // FLUX's single block: QKV and the MLP input in one projection (four in diffusers), the attention
      // output and the MLP's activation concatenated into one output projection.
      if (b.separate_projections()) {
        for (const char* name : {"single.q", "single.k", "single.v"}) b.gemm(name, m, h, h);
        b.gemm("single.mlp.in", m, mlp, h);
      } else {
        b.gemm("single.qkv_mlp", m, 3 * h + mlp, h);
      }
      qk_norms("single.qk_norm", tokens);
      if (rope) b.op("rope", "single.rope", m, h, 2);
      attention("single.attn", tokens, keys, true);
      b.op("gelu", "single.mlp.act", m, mlp);
      b.op("concat", "single.concat", m, h + mlp);
      b.gemm("single.out", m, h, h + mlp);
      b.op("gate_residual", "single.residual", m, h);
    }
  }
  if (piped) {
    b.repeat_since(band, patches);
    return;
  }
  b.op("vector_silu", "final.modulation", n, h);
  b.gemm("final.modulation", n, 2 * h, h);
  b.op("layer_norm", "final.norm", r * img, h);
  b.op("modulate", "final.modulate", r * img, h);
  b.gemm("final.proj", r * img, lat * p * p * tp, h);
  b.op("patchify", "unpatchify", r * img, lat * p * p * tp);
}

// A decoder call's latent frames, height and width, and how many calls have them.
using TileCall = std::function<void(double t, double h, double w, double times)>;

// The tiles of a t x h x w latent (frames, height, width), each side cut into tiles of its own size overlapping by
// its own overlap as ComfyUI's tiled_scale_multidim places them; each distinct tile a `call`, `times` as many as
// tiles have it.
void for_each_tile(const std::array<double, 3>& extent, const std::array<double, 3>& tile, const std::array<double, 3>& overlap, double times,
                   const TileCall& call) {
  for (const auto& [tile_t, nt] : tile_extents(extent[0], tile[0], overlap[0])) {
    for (const auto& [tile_h, nh] : tile_extents(extent[1], tile[1], overlap[1])) {
      for (const auto& [tile_w, nw] : tile_extents(extent[2], tile[2], overlap[2])) call(tile_t, tile_h, tile_w, times * nt * nh * nw);
    }
  }
}

// A video decode of t x h x w latent frames and pixels a sample: one call a sample, or one a tile (StepShape::Tiles).
void decode_in_3d_tiles(const StepShape& s, double t, double h, double w, const TileCall& call) {
  if (s.tiles.size <= 0) {
    call(t, h, w, s.batch);
    return;
  }
  for_each_tile({t, h, w}, {s.tiles.frames, s.tiles.size, s.tiles.size}, {s.tiles.frame_overlap, s.tiles.overlap, s.tiles.overlap}, s.batch, call);
}

// A VAE decoder (ComfyUI's, as in Stable Diffusion and FLUX): a convolution in, a middle of two ResNet
// blocks around a one-head attention (q, k and v as 1x1 convolutions), then per level ResNet blocks and
// a 2x upsampling, and a convolution out to RGB. Video frames decode as a batch of images. Tiled, each image
// decodes in three passes of tiles (comfy/sd.py decode_tiled_ at a125cd8): size/2 wide by 2 size tall, 2 size wide
// by size/2 tall, then size square, placed as tiled_scale_multidim places them, the three passes averaged; each
// tile a call of its own whose pixels are cast to fp32 on the GPU (decode_fn); the blend runs on the host, left out.
void vae_decoder(const Architecture& a, const StepShape& s, Builder& b) {
  auto channels = a.list("channels");
  std::reverse(channels.begin(), channels.end());
  const double f = a.number("vae_factor", 8), tf = a.number("temporal_factor", 1);
  const double images = s.batch * latent_frames_of(s, tf);
  const bool tiled = s.tiles.size > 0;
  // One call on n images of h0 x w0 latent pixels, `times` times.
  const auto decoder_call = [&](double n, double h0, double w0, double times) {
    const std::size_t mark = b.size();
    double h = h0, w = w0;
    auto resnet = [&](double cin, double cout) {
      b.group_norm("resnet.norm1", n, h * w, cin, true);
      b.conv("resnet.conv1", n, h, w, cin, cout, 3);
      b.group_norm("resnet.norm2", n, h * w, cout, true);
      b.conv("resnet.conv2", n, h, w, cout, cout, 3);
      if (cin != cout) b.conv("resnet.shortcut", n, h, w, cin, cout, 1);
      b.op("residual_add", "resnet.residual", n * h * w, cout);
    };
    double c = channels.front();
    b.conv("conv_in", n, h, w, a.number("latent_channels", 4), c, 3);
    resnet(c, c);
    b.group_norm("mid.attn.norm", n, h * w, c, false);
    for (const char* name : {"mid.attn.q", "mid.attn.k", "mid.attn.v"}) b.conv(name, n, h, w, c, c, 1);
    b.op("to_tokens", "mid.attn.to_tokens", n * h * w, c, 3);
    b.attention("mid.attn", n, h * w, h * w, c);
    b.op("to_pixels", "mid.attn.to_pixels", n * h * w, c);
    b.conv("mid.attn.out", n, h, w, c, c, 1);
    b.op("residual_add", "mid.attn.residual", n * h * w, c);
    resnet(c, c);
    for (std::size_t i = 0; i < channels.size(); ++i) {
      for (double j = 0; j <= a.number("layers_per_block", 2); ++j) {
        resnet(c, channels[i]);
        c = channels[i];
      }
      if (i + 1 < channels.size()) {
        h *= 2;
        w *= 2;
        b.op("upsample", "upsample.interpolate", n * h * w, c);
        b.conv("upsample", n, h, w, c, c, 3);
      }
    }
    b.group_norm("norm_out", n, h * w, c, true);
    b.conv("conv_out", n, h, w, c, 3, 3);
    if (tiled) b.op("elementwise", "tile.to_fp32", n * h * w, 3);
    b.repeat_since(mark, times);
  };
  const double latent_h = std::ceil(s.height / f), latent_w = std::ceil(s.width / f);
  if (!tiled) {
    decoder_call(images, latent_h, latent_w, 1);
    return;
  }
  // tiled_scale(tile_x, tile_y) tiles (height, width) by (tile_y, tile_x), an image at a time.
  const double size = s.tiles.size, half = std::floor(size / 2);
  for (const auto& [tile_h, tile_w] : {std::pair{2 * size, half}, {half, 2 * size}, {size, size}}) {
    for_each_tile({1, latent_h, latent_w}, {1, tile_h, tile_w}, {0, s.tiles.overlap, s.tiles.overlap}, images,
                  [&](double, double h, double w, double times) { decoder_call(1, h, w, times); });
  }
}

// A causal 3D VAE decoder, as ComfyUI runs Wan 2.1's (comfy/ldm/wan/vae.py at a125cd8, Decoder3d and
// WanVAE.decode, the Wan 2.1 code with ComfyUI's ops): one latent frame a call, each call's output appended to
// the video so far (a torch.cat of all of it). Every causal convolution pads its input with F.pad, a fill of the
// padded tensor and a copy into it (a clone alone where nothing is padded): the first call with two zero frames
// before its one, the others after a torch.cat of the two input frames kept from the call before (but the second
// call's time convolutions, which have none kept yet); each 3x3x3 one first keeps its input's last two
// frames for the next call (a clone, joined to the frame before where the input has one). Norms are RMS over
// the channels (F.normalize x sqrt(C) x gamma, no bias), each followed by a SiLU; the middle attends, one head,
// within each frame. The first `temporal_upsamplings` upsamplings double the frames as well (after the first
// call): a causal (3, 1, 1) convolution to twice the channels, its halves stacked as twice the frames. Every
// upsampling then doubles the pixels (nearest-exact; diffusers' in fp32) and halves the channels with a 3x3
// convolution a frame (the frames moved into a batch of images: einops rearrange, a view the interpolation copies where there are
// several; the way back stays a view), and the next level's first ResNet block starts from half. 4(T - 1) + 1 frames out of T latent ones.
// Wan 2.2's (`up_residual`, comfy/ldm/wan/vae2_2.py at a125cd8: Decoder3d of Up_ResidualBlocks) keeps the width
// through an upsampling (the next level's first ResNet block changes it, its 1x1x1 shortcut where it does) and
// adds to each upsampling level a shortcut from the level's input (DupUp3D: its channels repeated and folded into
// the doubled frames and pixels, two copies); its output is `patch` x `patch` pixels a channel group (3 x patch^2
// channels out of the last convolution), unfolded into the video at the end (einops rearrange, one copy of it);
// diffusers' copies each up block's input for its shortcut, ComfyUI's keeps it (up_block_input).
void causal_vae_decoder(const Architecture& a, const StepShape& s, Builder& b) {
  const std::vector<double>& widths = a.list("channels");  // the input convolution's and middle's, then each level's
  const double f = a.number("vae_factor", 8), tf = a.number("temporal_factor", 4), latent = a.number("latent_channels", 16);
  const double resnets = a.number("layers_per_block", 2) + 1;
  const double temporal = a.number("temporal_upsamplings", 0), patch = a.number("patch", 1);
  const bool up_residual = a.number("up_residual", 0) != 0, tiled = s.tiles.size > 0;
  // One decode (WanVAE.decode) of `batch` samples of `latent_frames` x h0 x w0, `height` x `width` pixels out, `decodes` times.
  const auto decode = [&](double batch, double latent_frames, double h0, double w0, double height, double width, double decodes) {
    const std::size_t decode_mark = b.size();
    // One decoder call on one latent frame (the frames before it kept unless it is the first), `times` times. In the
    // second call a time upsampling's convolution has nothing kept yet (the first call only marked it) and pads two
    // zero frames instead, as the first call's 3x3x3 ones do.
    const auto decoder_call = [&](bool cached, double times, bool second = false) {
      const std::size_t mark = b.size();
      double n = 1, h = h0, w = w0;  // frames at this level, their pixels
      const auto rows = [&](double frames) { return batch * frames * h * w; };
      // The frames a convolution keeps for the next call: its input's last two, joined to the one before.
      const auto keep = [&](const std::string& name, double c) {  // the cache is kept even where there is no next call
        b.op("concat", name + ".keep", rows(std::min(n, 2.0)), c);
        if (n < 2 && cached) b.op("concat", name + ".keep", rows(2), c);
      };
      // A causal convolution over kt frames (3 or 1) of k x k pixels: over 3, its input's last frames kept first and
      // the frames kept from the call before joined; the input padded.
      const auto conv = [&](const std::string& name, double cin, double cout, double kt, double k) {
        const double frames_in = n + kt - 1, pad = k - 1;
        const bool kept = cached && !(second && k == 1);  // the frames this convolution's last call kept
        if (kt > 1) keep(name, cin);
        if (kept && kt > 1) b.op("concat", name + ".with_kept", rows(frames_in), cin);
        const double padded = batch * frames_in * (h + pad) * (w + pad);
        if (pad > 0 || (kt > 1 && !kept)) b.op("pad_fill", name + ".pad", padded, cin);  // zero frames or pixels to write
        b.op("pad", name + ".pad", padded, cin);
        b.conv(name, batch * n, h, w, cin, cout, k, 1, kt, padded);
      };
      const auto norm_silu = [&](const std::string& name, double c) {
        b.op("channel_rms_norm", name, rows(n), c);
        b.op("silu", name + ".silu", rows(n), c);
      };
      const auto resnet = [&](double cin, double cout) {
        norm_silu("resnet.norm1", cin);
        conv("resnet.conv1", cin, cout, 3, 3);
        norm_silu("resnet.norm2", cout);
        conv("resnet.conv2", cout, cout, 3, 3);
        if (cin != cout) conv("resnet.shortcut", cin, cout, 1, 1);
        b.op("residual_add", "resnet.residual", rows(n), cout);
      };
      double c = widths.front();
      conv("conv_in", latent, c, 3, 3);
      resnet(c, c);
      b.op("channel_rms_norm", "mid.attn.norm", rows(n), c);  // one frame: its rearranges are views
      b.conv("mid.attn.qkv", batch * n, h, w, c, 3 * c, 1);
      b.op("to_tokens", "mid.attn.to_tokens", rows(n), c, 3);
      b.attention("mid.attn", batch * n, h * w, h * w, c);
      b.op("to_pixels", "mid.attn.to_pixels", rows(n), c);
      b.conv("mid.attn.out", batch * n, h, w, c, c, 1);
      b.op("residual_add", "mid.attn.residual", rows(n), c);
      resnet(c, c);
      for (std::size_t i = 1; i < widths.size(); ++i) {
        double cin = i > 1 && !up_residual ? c / 2 : c;
        const double frames_in = n;  // the level's input, which Wan 2.2's shortcut starts from
        if (up_residual) b.op("up_block_input", "up_block.input", rows(n), cin);
        for (double j = 0; j < resnets; ++j) {
          resnet(cin, widths[i]);
          cin = widths[i];
        }
        c = widths[i];
        if (i + 1 == widths.size()) break;
        const bool in_time = static_cast<double>(i) <= temporal;
        if (in_time && cached) {
          conv("upsample.time", c, 2 * c, 3, 1);
          b.op("concat", "upsample.time.stack", rows(2 * n), c);
          n *= 2;
        }
        if (n > 1) b.op("frames_to_batch", "upsample.to_images", rows(n), c);  // back is a view
        h *= 2;
        w *= 2;
        b.op("frame_upsample", "upsample.interpolate", rows(n), c);
        b.conv("upsample", batch * n, h, w, c, up_residual ? c : c / 2, 3);
        if (up_residual) {  // the first call's shortcut makes both frames of a time upsampling and keeps the last
          b.op("dup_up", "upsample.shortcut", rows(frames_in * (in_time ? 2 : 1)), c);
          b.op("residual_add", "upsample.shortcut.add", rows(n), c);
        }
      }
      norm_silu("norm_out", c);
      conv("conv_out", c, 3 * patch * patch, 3, 3);
      b.repeat_since(mark, times);
    };
    b.op("pad", "post_quant.pad", batch * latent_frames * h0 * w0, latent);
    b.conv("post_quant", batch * latent_frames, h0, w0, latent, latent, 1);
    decoder_call(false, 1);
    if (latent_frames > 1) {
      decoder_call(true, 1, true);
      if (latent_frames > 2) decoder_call(true, latent_frames - 2);
      // Each later call's frames appended to the video so far: 1 + 4i frames copied at call i, (2T + 1) on average.
      b.op("concat", "frames.cat", batch * (2 * latent_frames + 1) * height * width, 3, latent_frames - 1);
    }
    const double frames_out = tf * (latent_frames - 1) + 1;
    if (patch > 1) b.op("unpatchify", "unpatchify", batch * frames_out * height * width, 3);
    if (tiled) b.op("elementwise", "tile.to_fp32", batch * frames_out * height * width, 3);
    b.repeat_since(decode_mark, decodes);
  };
  const double latent_frames = latent_frames_of(s, tf), h0 = std::ceil(s.height / f), w0 = std::ceil(s.width / f);
  if (!tiled) {
    decode(s.batch, latent_frames, h0, w0, s.height, s.width, 1);
    return;
  }
  // Tiled (sd.py decode_tiled_3d), each tile a decode of its own, its frames one a call as the whole clip's.
  decode_in_3d_tiles(s, latent_frames, h0, w0, [&](double t, double h, double w, double times) { decode(1, t, h, w, h * f, w * f, times); });
}

// A VAE decoder of 3D convolutions over the whole clip, as ComfyUI runs HunyuanVideo's (comfy/ldm/modules/
// diffusionmodules/model.py Decoder with conv3d and time_compress, at a125cd8): the 2D decoder's layout with
// every 3x3 convolution a 3x3x3 one (VideoConv3d: its input padded first, a copy, replicating the edges, two
// frames before the first and none after, so causal in time), each GroupNorm over its groups' channels of
// every frame, and the middle's one-head attention over the pixels of all the call's frames (q, k and v made
// contiguous, a copy each). An upsampling keeps its channels (the next level's first ResNet block changes
// them); the lowest level's doubles the pixels only, the log2(temporal_factor) levels above it double the
// frames after the first as well (the first frame interpolated apart, the two joined by a torch.cat): a call
// of T latent frames makes 4(T - 1) + 1. Tiled, each tile is a call of its own and its pixels are cast to
// fp32 on the GPU (ComfyUI's decode_fn); the blend of the tiles runs on the host, left out here.
void conv3d_vae_decoder(const Architecture& a, const StepShape& s, Builder& b) {
  auto channels = a.list("channels");
  std::reverse(channels.begin(), channels.end());
  const double f = a.number("vae_factor", 8), tf = a.number("temporal_factor", 4), latent = a.number("latent_channels", 16);
  const double resnets = a.number("layers_per_block", 2) + 1, temporal_levels = std::log2(tf);
  const bool tiled = s.tiles.size > 0;
  // One decoder call on one sample's t0 latent frames of h0 x w0, `times` times: a batch's samples decode one a
  // call (tiled_scale_multidim takes them one by one; a whole decode where one sample's clip fills the memory,
  // as a video's does, batches one: sd.py decode's batch_number).
  const auto decoder_call = [&](double t0, double h0, double w0, double times) {
    const std::size_t mark = b.size();
    double t = t0, h = h0, w = w0;
    const auto voxels = [&] { return t * h * w; };
    // `after_norm`: its input is a GroupNorm's and SiLU's output, which a runtime may leave in another dtype.
    const auto conv = [&](const std::string& name, double cin, double cout, double k, bool after_norm = false) {
      const double padded = k > 1 ? (t + k - 1) * (h + k - 1) * (w + k - 1) : 0;
      if (k > 1) b.op(after_norm ? "norm_replicate_pad" : "replicate_pad", name + ".pad", padded, cin);
      b.conv(name, t, h, w, cin, cout, k, 1, k, padded);
    };
    const auto resnet = [&](double cin, double cout) {
      b.group_norm("resnet.norm1", 1, voxels(), cin, true);
      conv("resnet.conv1", cin, cout, 3, true);
      b.group_norm("resnet.norm2", 1, voxels(), cout, true);
      conv("resnet.conv2", cout, cout, 3, true);
      if (cin != cout) conv("resnet.shortcut", cin, cout, 1);
      b.op("residual_add", "resnet.residual", voxels(), cout);
    };
    b.conv("post_quant", t, h, w, latent, latent, 1);  // AutoencoderKL's, a 1x1x1 Conv3d
    double c = channels.front();
    conv("conv_in", latent, c, 3);
    resnet(c, c);
    b.group_norm("mid.attn.norm", 1, voxels(), c, false);
    for (const char* name : {"mid.attn.q", "mid.attn.k", "mid.attn.v"}) b.conv(name, t, h, w, c, c, 1);
    b.op("to_tokens", "mid.attn.to_tokens", voxels(), c, 3);
    // The frame-causal mask some codes build for it each call (ComfyUI's passes none): voxels x voxels at once,
    // or a row at a time, row i of frame f opening (f + 1) h w keys, (t + 1) h w / 2 on average.
    b.op("causal_mask", "mid.attn.mask", voxels(), voxels());
    b.op("causal_mask_row", "mid.attn.mask.row", 1, (t + 1) * h * w / 2, voxels());
    b.attention("mid.attn", 1, voxels(), t * h * w, c);
    b.op("to_pixels", "mid.attn.to_pixels", voxels(), c);
    b.conv("mid.attn.out", t, h, w, c, c, 1);
    b.op("residual_add", "mid.attn.residual", voxels(), c);
    resnet(c, c);
    for (std::size_t i = 0; i < channels.size(); ++i) {
      for (double j = 0; j < resnets; ++j) {
        resnet(c, channels[i]);
        c = channels[i];
      }
      if (i + 1 == channels.size()) break;
      const double level = static_cast<double>(channels.size() - 1 - i);  // ComfyUI's i_level, from the top
      h *= 2;
      w *= 2;
      if (level <= temporal_levels && t > 1) {
        b.op("upsample", "upsample.interpolate", 2 * (t - 1) * h * w, c);
        b.op("upsample", "upsample.first_frame", h * w, c);
        t = 2 * t - 1;
        b.op("concat", "upsample.cat", voxels(), c);
      } else {
        b.op("upsample", "upsample.interpolate", voxels(), c);
      }
      conv("upsample", c, c, 3);
    }
    b.group_norm("norm_out", 1, voxels(), c, false);
    b.op("silu", "norm_out.nonlinearity", voxels(), c);
    conv("conv_out", c, 3, 3);
    if (tiled) b.op("elementwise", "tile.to_fp32", voxels(), 3);
    b.repeat_since(mark, times);
  };
  decode_in_3d_tiles(s, latent_frames_of(s, tf), std::ceil(s.height / f), std::ceil(s.width / f), decoder_call);
}

// LTX-Video's VAE decoder as ComfyUI runs its 0.9.5+ version (comfy/ldm/lightricks/vae/causal_video_autoencoder.py
// at a125cd8, the decoder sd.py builds for those weights): one call over the whole clip. The latent is noised and
// scaled first (randn_like x 0.025 + 0.975 x, then un-normalized: six small kernels). Every convolution is 3x3x3 and,
// decoding, not causal: the first and last frames are repeated (two copies) and joined to the video (a copy), then
// padded by reflection in height and width (a copy) before a convolution that pads nothing. Each level is
// `layers_per_block` ResNet blocks of PixelNorm (over the channels), the timestep's scale and shift where the
// weights have `timestep_conditioning` (its embedding two small GEMMs a level), SiLU and a convolution, twice, and
// a residual add; between levels, a depth-to-space upsampling: a convolution to 8 x the next width at the level's
// size, its channels rearranged into 2x the frames, height and width (a copy; the first frame dropped), plus the
// input rearranged and repeated into the same shape (two copies) and added. So T latent frames become 8(T - 1) + 1,
// and the last convolution's 3 x patch^2 channels unfold into patch x patch pixels each (a copy of the video).
// Tiled (sd.py decode_tiled_3d), each tile is such a call of its own, its pixels cast to fp32 on the GPU.
void ltx_vae_decoder(const Architecture& a, const StepShape& s, Builder& b) {
  const std::vector<double>& widths = a.list("channels");  // the first level's (conv_in's), then each upsampled level's
  const double f = a.number("vae_factor", 32), tf = a.number("temporal_factor", 8), latent = a.number("latent_channels", 128);
  const double resnets = a.number("layers_per_block", 5), patch = a.number("patch", 4);
  const bool timestep = a.number("timestep_conditioning", 0) != 0, tiled = s.tiles.size > 0;
  // One call (a sample's whole clip, or a tile) of t0 x h0 x w0 latent frames and pixels, `times` times.
  const auto decoder_call = [&](double t0, double h0, double w0, double times) {
    const std::size_t mark = b.size();
    double t = t0, h = h0, w = w0;
    const auto voxels = [&] { return t * h * w; };
    const auto conv = [&](const std::string& name, double cin, double cout) {
      b.op("concat", name + ".edge_frames", 2 * h * w, cin);
      b.op("concat", name + ".cat", (t + 2) * h * w, cin);
      const double padded = (t + 2) * (h + 2) * (w + 2);
      b.op("spatial_pad", name + ".pad", padded, cin);
      b.conv(name, t, h, w, cin, cout, 3, 1, 3, padded);
    };
    const auto embed = [&](const std::string& name, double out) {  // the timestep's embedding, once a level
      if (!timestep) return;
      b.op("timestep_embedding", name, 1, 256);
      b.gemm(name + ".linear_1", 1, out, 256);
      b.op("silu", name + ".silu", 1, out);
      b.gemm(name + ".linear_2", 1, out, out);
    };
    const auto norm = [&](const std::string& name, double c) {
      b.op("pixel_norm", name, voxels(), c);
      if (timestep) b.op("scale_shift", name + ".scale_shift", voxels(), c);
      b.op("silu", name + ".silu", voxels(), c);
    };
    // With timestep conditioning the latent is noised first (randn_like, two scalings, an add); then un-normalized.
    b.op("elementwise", "latent.noise_and_scale", voxels(), latent, timestep ? 6 : 2);
    double c = widths.front();
    conv("conv_in", latent, c);
    for (std::size_t i = 0; i < widths.size(); ++i) {
      embed("time_embedder", 4 * c);
      for (double j = 0; j < resnets; ++j) {
        norm("resnet.norm1", c);
        conv("resnet.conv1", c, c);
        norm("resnet.norm2", c);
        conv("resnet.conv2", c, c);
        b.op("residual_add", "resnet.residual", voxels(), c);
      }
      if (i + 1 == widths.size()) break;
      const double next = widths[i + 1];
      conv("upsample", c, 8 * next);
      const double doubled = 8 * voxels();  // before the first frame is dropped
      b.op("depth_to_space", "upsample.depth_to_space", doubled, next);
      b.op("depth_to_space_residual", "upsample.shortcut", doubled, next);
      t = 2 * t - 1;
      h *= 2;
      w *= 2;
      b.op("residual_add", "upsample.residual", voxels(), next);
      c = next;
    }
    embed("last_time_embedder", 2 * c);
    norm("norm_out", c);
    conv("conv_out", c, 3 * patch * patch);
    b.op("unpatchify", "unpatchify", voxels() * patch * patch, 3);
    if (tiled) b.op("elementwise", "tile.to_fp32", voxels() * patch * patch, 3);
    b.repeat_since(mark, times);
  };
  decode_in_3d_tiles(s, latent_frames_of(s, tf), std::ceil(s.height / f), std::ceil(s.width / f), decoder_call);
}

// Mochi 1's VAE decoder as ComfyUI runs it (comfy/ldm/genmo/vae/model.py at a125cd8, Decoder of VideoVAE): one
// call over the whole clip, no attention. A 1x1x1 convolution from the latent to the widest level, then levels from
// the widest down of `res_blocks` ResBlocks each (the first level's and the last's as well), each upsampling level
// ending in a Conv1x1 (a Linear over channels-last activations: movedim, a copy where it is not contiguous, a GEMM
// and the bias added on its own) to the next width x its frames' and pixels' expansion, rearranged into them
// (DepthToSpaceTime: a copy; the first expansion - 1 frames dropped, a view); then a SiLU and a Conv1x1 to RGB made
// contiguous. A ResBlock is two of (GroupNormSpatial, SiLU, a causal 3x3x3 convolution), then a residual add: the
// norm runs over 8 frames at a time (each chunk of the frames-into-batch view made contiguous, normalized and
// copied into the output), the SiLU in place on the permuted view, and each convolution first repeats the first
// frame twice (F.pad replicate in time, a copy), then pads height and width by replication too (nn.Conv3d with
// padding_mode "replicate" pads with F.pad before it convolves: a second copy). T latent frames become
// 6(T - 1) + 1 with expansions 3 and 2, each side 8 times. A batch's videos decode one a call; tiled, each tile is a
// call of its own (as conv3d_vae_decoder's) whose pixels are cast to fp32 on the GPU.
void mochi_vae_decoder(const Architecture& a, const StepShape& s, Builder& b) {
  const std::vector<double>& widths = a.list("channels");  // narrowest first, as the code lists them
  const std::vector<double>& res_blocks = a.list("res_blocks");  // the narrowest level's, the upsampling levels' up to the widest's, the widest's start
  const std::vector<double>& expansions = a.list("temporal_expansions");  // the upsamplings' from the narrowest
  const double f = a.number("vae_factor", 8), tf = a.number("temporal_factor", 6);
  const bool tiled = s.tiles.size > 0;
  // One call on one sample's t0 latent frames of h0 x w0, `times` times (a batch's samples, or tiles).
  const auto decoder_call = [&](double t0, double h0, double w0, double times) {
    const std::size_t mark = b.size();
    double t = t0, h = h0, w = w0;
    const auto voxels = [&] { return t * h * w; };
    const auto resblock = [&](double c) {
      for (const char* half : {"1", "2"}) {
        const std::string name = std::string("resblock.") + half;
        // Each chunk of 8 frames (the last maybe fewer) a norm over its frames, 32 groups each.
        const double chunks = std::floor(t / 8), rest = t - 8 * chunks;
        if (chunks > 0) b.op("frame_chunk_norm", name + ".norm", 8 * h * w, c, chunks, 8 * 32);
        if (rest > 0) b.op("frame_chunk_norm", name + ".norm", rest * h * w, c, 1, rest * 32);
        b.op("silu", name + ".silu", voxels(), c);
        const double padded = (t + 2) * h * w, padded_hw = (t + 2) * (h + 2) * (w + 2);
        b.op("replicate_pad", name + ".pad", padded, c);        // PConv3d's causal pad in time
        b.op("replicate_pad", name + ".pad_hw", padded_hw, c);  // nn.Conv3d's own, padding_mode "replicate"
        b.conv(name + ".conv", t, h, w, c, c, 3, 1, 3, padded_hw);
      }
      b.op("residual_add", "resblock.residual", voxels(), c);
    };
    const auto linear = [&](const std::string& name, double cin, double cout) {  // Conv1x1
      b.op("to_tokens", name + ".movedim", voxels(), cin);
      b.gemm(name, voxels(), cout, cin);
      b.op("conv_bias", name + ".bias", voxels(), cout);
    };
    std::size_t level = widths.size() - 1;
    double c = widths[level];
    b.conv("conv_in", t, h, w, a.number("latent_channels", 12), c, 1);
    for (double j = 0; j < res_blocks.back(); ++j) resblock(c);
    for (; level > 0; --level) {
      for (double j = 0; j < res_blocks[level]; ++j) resblock(c);
      const double next = widths[level - 1], expansion = expansions[level - 1];
      linear("upsample.proj", c, next * expansion * 4);
      b.op("depth_to_space", "upsample.depth_to_space", voxels() * expansion * 4, next);
      t = expansion * t - (expansion - 1);
      h *= 2;
      w *= 2;
      c = next;
    }
    for (double j = 0; j < res_blocks.front(); ++j) resblock(c);
    b.op("silu", "output.silu", voxels(), c);
    linear("output_proj", c, 3);
    b.op("to_pixels", "output.contiguous", voxels(), 3);
    if (tiled) b.op("elementwise", "tile.to_fp32", voxels(), 3);
    b.repeat_since(mark, times);
  };
  decode_in_3d_tiles(s, latent_frames_of(s, tf), std::ceil(s.height / f), std::ceil(s.width / f), decoder_call);
}

// Real-ESRGAN's RRDBNet: a convolution in, residual-in-residual dense blocks (three dense blocks of five
// convolutions each over the concatenation of the block's input and what came before, growing by
// `growth` channels, LeakyReLU after each but the last, scaled residuals), a trunk convolution, two
// nearest 2x upsamplings with convolutions, and two convolutions out; width x height is the image being
// upscaled.
void rrdb(const Architecture& a, const StepShape& s, Builder& b) {
  const double nf = a.number("features", 64), gc = a.number("growth", 32), n = s.batch;
  double h = s.height, w = s.width;
  b.conv("conv_first", n, h, w, 3, nf, 3);
  for (double i = 0; i < a.number("blocks", 23); ++i) {
    for (int dense = 0; dense < 3; ++dense) {
      for (int j = 0; j < 5; ++j) {
        if (j > 0) b.op("concat", "dense.concat", n * h * w, nf + j * gc);
        b.conv("dense.conv", n, h, w, nf + j * gc, j == 4 ? nf : gc, 3);
        if (j < 4) b.op("elementwise", "dense.lrelu", n * h * w, gc);
      }
      b.op("elementwise", "dense.scale", n * h * w, nf);
      b.op("residual_add", "dense.residual", n * h * w, nf);
    }
    b.op("elementwise", "rrdb.scale", n * h * w, nf);
    b.op("residual_add", "rrdb.residual", n * h * w, nf);
  }
  b.conv("trunk", n, h, w, nf, nf, 3);
  b.op("residual_add", "trunk.residual", n * h * w, nf);
  for (int up = 0; up < 2; ++up) {
    h *= 2;
    w *= 2;
    b.op("upsample", "upsample.interpolate", n * h * w, nf);
    b.conv("upsample", n, h, w, nf, nf, 3);
    b.op("elementwise", "upsample.lrelu", n * h * w, nf);
  }
  b.conv("conv_hr", n, h, w, nf, nf, 3);
  b.op("elementwise", "conv_hr.lrelu", n * h * w, nf);
  b.conv("conv_last", n, h, w, nf, 3, 3);
}

}  // namespace

std::vector<KernelCall> operation_kernels(const RuntimeProfile& runtime, std::string_view operation, double rows, double width, Dtype dtype, double groups) {
  const auto it = runtime.ops.find(operation);
  FLEETSIM_CHECK(it != runtime.ops.end(), "runtime " + runtime.name + " lacks operation " + std::string(operation) + " (checked at load)");
  std::vector<KernelCall> calls;
  for (const RuntimeKernel& k : it->second) {
    if (k.launches > 0) {
      calls.push_back({.cls = KernelClass::memory, .count = k.launches, .name = k.op, .origin = &k});
      continue;
    }
    const double m = k.per_group ? groups : rows, n = k.per_group ? rows * width / std::max(1.0, groups) : width;
    calls.push_back({.cls = k.cls, .m = m, .n = n, .element_bytes = k.element_bytes(dtype), .name = k.op, .origin = &k});
  }
  return calls;
}

namespace {

// What a diffusion transformer's sequence-parallel exchanges scale with: its self-attention layers, and one
// GPU's shard of a self-attention's tokens (image and text jointly, or the image alone where the text is
// cross-attended; its share of the sequence and of the guidance batch) times the hidden size, in `dtype`.
struct SelfAttention {
  double layers = 0, shard_bytes = 0;
};
SelfAttention self_attention(const Architecture& a, const StepShape& s, Dtype dtype) {
  const double img = image_tokens(a, s);
  const double txt = s.context > 0 ? s.context : a.number("text_tokens", 0);
  const double joint = a.number("cross_attention", 0) != 0 ? img : img + txt;
  return {a.number("double_blocks", 0) + a.number("single_blocks", 0),
          s.batch / std::max(1.0, s.cfg_parallel) * joint / std::max(1.0, s.sequence_parallel) * a.number("hidden", 0) * dtype_bytes(dtype)};
}

}  // namespace

SequenceExchange sequence_exchange(const Architecture& a, const StepShape& s, Dtype dtype) {
  if (a.family != "dit" || s.ulysses_degree() <= 1) return {};
  const SelfAttention x = self_attention(a, s, dtype);
  const double calls = 4 * x.layers;  // queries, keys, values and the output, per layer
  return {calls, calls * x.shard_bytes};
}

SequenceExchange ring_exchange(const Architecture& a, const StepShape& s, Dtype dtype) {
  if (a.family != "dit" || s.ring_degree <= 1) return {};
  const SelfAttention x = self_attention(a, s, dtype);
  const double calls = x.layers * (s.ring_degree - 1);  // every self-attention passes its block on r - 1 times
  return {calls, calls * 2 * x.shard_bytes};          // keys and values
}

double guidance_exchange_bytes(const Architecture& a, const StepShape& s, Dtype dtype) {
  const double f = a.number("vae_factor", 8), tf = a.number("temporal_factor", 1);
  const double latent_frames = latent_frames_of(s, tf);
  return s.batch * a.number("latent_channels", 4) * latent_frames * std::ceil(s.height / f) * std::ceil(s.width / f) * dtype_bytes(dtype);
}

PipelineStage first_pipeline_stage(const Architecture& a, const StepShape& s) {
  PipelineStage stage;
  const double doubles = a.number("double_blocks", 0), singles = a.number("single_blocks", 0);
  stage.blocks = doubles + singles;
  const double first = std::ceil(stage.blocks / std::max(1.0, s.pipeline_stages));
  stage.doubles = std::min(doubles, first);
  stage.singles = std::min(singles, first - stage.doubles);
  return stage;
}

double pipefusion_run_s(const Architecture& a, const StepShape& s, double steps, double patched_step_s, double whole_step_s) {
  const double stages = std::max(1.0, s.pipeline_stages), patches = std::max(1.0, s.patches);
  const double warmup = std::min(s.pipeline_warmup, steps), band_s = patched_step_s / patches;
  const double warm_s = warmup * whole_step_s / first_pipeline_stage(a, s).share();
  if (steps <= warmup) return warm_s;
  return warm_s + (steps - warmup) * std::max(patches, stages) * band_s + (std::min(patches, stages) - 1) * band_s;
}

PipelineExchange pipeline_exchange(const Architecture& a, const StepShape& s, Dtype dtype) {
  if (a.family != "dit" || s.pipeline_stages <= 1) return {};
  StepShape whole = s;
  whole.sequence_parallel = 1;  // every token's hidden states (self_attention's shard of the sequence is its all)
  const double bytes = self_attention(a, whole, dtype).shard_bytes;
  // Where the text is cross-attended self_attention counts the image alone: the text is sent too.
  const double txt = s.context > 0 ? s.context : a.number("text_tokens", 0);
  const double text = a.number("cross_attention", 0) != 0 ? s.batch / std::max(1.0, s.cfg_parallel) * txt * a.number("hidden", 0) * dtype_bytes(dtype) : 0;
  return {.calls = std::max(1.0, s.patches) + 1, .bytes = bytes + text};
}

double pipeline_buffer_bytes(const Architecture& a, const StepShape& s, Dtype dtype) {
  if (a.family != "dit" || s.pipeline_stages <= 1) return 0;
  const PipelineStage stage = first_pipeline_stage(a, s);
  return 2 * (stage.doubles + stage.singles) * s.batch / std::max(1.0, s.cfg_parallel) * image_tokens(a, s) * a.number("hidden", 0) * dtype_bytes(dtype);
}

double experts_touched(double experts, double top_k, double tokens) {
  if (experts <= 0) return 0;
  const double k = std::clamp(top_k, 1.0, experts);
  return std::max(k, experts * (1 - std::pow(1 - k / experts, std::max(tokens, 1.0))));
}

bool decodes_images_in_tiles(const Architecture& a) { return a.family == "vae-decoder" && a.number("video_stand_in", 0) == 0; }

bool decodes_video_in_tiles(const Architecture& a) { return decodes_video(a.family); }

double default_tile_frames(const Architecture& a) { return decodes_video_in_tiles(a) ? 1e5 : 0; }

std::optional<ShapeProblem> parallel_problem(const Architecture& a, const StepShape& s) {
  const auto whole = [](double x) { return std::to_string(static_cast<long long>(x)); };
  const double heads = a.number("heads", 0), ulysses = s.ulysses_degree(), stages = s.pipeline_stages;
  const double blocks = a.number("double_blocks", 0) + a.number("single_blocks", 0);
  const double rows = std::ceil(s.height / a.number("vae_factor", 8) / a.number("patch", 2));  // the latent's rows of tokens, which bands split
  if (s.sequence_parallel > 1 && a.family != "dit") {
    return ShapeProblem{"sequence", "sequence parallelism splits a diffusion transformer's tokens (family dit); " + a.id + " is a " + a.family};
  }
  if (stages > 1 && a.family != "dit") return ShapeProblem{"pipefusion", "PipeFusion splits a diffusion transformer's blocks (family dit); " + a.id + " is a " + a.family};
  if (stages <= 1 && s.patches > 1) return ShapeProblem{"patches", "a PipeFusion setting: give \"pipefusion\", two or more stages, with it"};
  if (stages > 1 && s.sequence_parallel > 1) {
    return ShapeProblem{"pipefusion", "PipeFusion beside sequence parallelism (xDiT's hybrid) is not modelled: give one of \"pipefusion\" and \"sequence\""};
  }
  if (stages > 1 && std::ceil(blocks / stages) * (stages - 1) >= blocks) {  // xDiT gives every stage but the last ceil(blocks / stages)
    return ShapeProblem{"pipefusion", "stages of ceil(blocks / stages) consecutive blocks, as xDiT splits " + a.id + "'s " + whole(blocks) +
                                          " blocks, leave the last of " + whole(stages) + " stages none: expected fewer stages"};
  }
  if (stages > 1 && s.patches > rows) {
    return ShapeProblem{"patches", "bands are rows of the latent's tokens: expected at most the image's " + whole(rows) + ", found " + whole(s.patches)};
  }
  if (std::fmod(s.sequence_parallel, s.ring_degree) != 0) {
    return ShapeProblem{"ring", "expected a divisor of \"sequence\" " + whole(s.sequence_parallel) + " (rings of that many GPUs, Ulysses over the other factor), found " + whole(s.ring_degree)};
  }
  if (ulysses > 1 && std::fmod(heads, ulysses) != 0) {
    return ShapeProblem{s.ring_degree > 1 ? "ring" : "sequence", "Ulysses splits the heads over " + whole(ulysses) + " GPUs (\"sequence\" / \"ring\"): expected a divisor of " + a.id +
                                                                      "'s " + whole(heads) + " attention heads"};
  }
  if (s.cfg_parallel > 1 && std::fmod(s.batch, s.cfg_parallel) != 0) {
    return ShapeProblem{"cfg", "guidance parallelism puts the batch's halves on two GPUs: expected an even batch, found " + whole(s.batch)};
  }
  return std::nullopt;
}

std::optional<ShapeProblem> tiles_problem(const Architecture& a, const StepShape::Tiles& tiles) {
  if (tiles == StepShape::Tiles{}) return std::nullopt;
  if (!decodes_video_in_tiles(a) && !decodes_images_in_tiles(a)) {
    return ShapeProblem{"size", "tiles cut the decode of a 2D image VAE (family vae-decoder) or a 3D video VAE (causal-vae-decoder, conv3d-vae-decoder, ltx-vae-decoder, mochi-vae-decoder); " +
                                    a.id + " is a " + a.family + (a.family == "vae-decoder" ? " standing in for a video VAE" : "")};
  }
  for (const auto& [field, value] : {std::pair{"size", tiles.size}, {"overlap", tiles.overlap}, {"frames", tiles.frames}, {"frame_overlap", tiles.frame_overlap}}) {
    if (value != std::floor(value)) return ShapeProblem{field, "expected a whole number of latent pixels or frames, found " + format_number(value)};
  }
  if (decodes_images_in_tiles(a)) {
    // Its passes' narrow tiles are size / 2 across, and overlap by as much as the square ones.
    if (tiles.frames != 0 || tiles.frame_overlap != 0) {
      return ShapeProblem{tiles.frames != 0 ? "frames" : "frame_overlap", "a 2D VAE decodes each frame as an image: its tiles take no frames"};
    }
    if (tiles.size < 2) return ShapeProblem{"size", "expected at least 2 latent pixels a side (its narrow passes are half as wide), found " + format_number(tiles.size)};
    if (tiles.overlap >= std::floor(tiles.size / 2)) {
      return ShapeProblem{"overlap", "expected fewer latent pixels than half the tile's size " + format_number(tiles.size) +
                                         " (the narrow passes' tiles), found " + format_number(tiles.overlap)};
    }
    return std::nullopt;
  }
  if (tiles.size < 1) return ShapeProblem{"size", "expected at least 1 latent pixel a side, found " + format_number(tiles.size)};
  if (tiles.overlap >= tiles.size) {
    return ShapeProblem{"overlap", "expected fewer latent pixels than the tile's size " + format_number(tiles.size) + ", found " + format_number(tiles.overlap)};
  }
  if (tiles.frames < 1) return ShapeProblem{"frames", "expected at least 1 latent frame a tile, found " + format_number(tiles.frames)};
  if (tiles.frame_overlap >= tiles.frames) {
    return ShapeProblem{"frame_overlap", "expected fewer latent frames than the tile's " + format_number(tiles.frames) + ", found " + format_number(tiles.frame_overlap)};
  }
  return std::nullopt;
}

std::vector<std::pair<double, double>> tile_extents(double extent, double tile, double overlap) {
  if (extent <= tile || tile <= overlap) return {{extent, 1}};
  std::map<double, double> counts;  // extent -> tiles of it
  for (double start = 0; start < extent - overlap; start += tile - overlap) {
    const double at = std::max(0.0, std::min(extent - overlap, start));
    counts[std::min(tile, extent - at)] += 1;
  }
  return {counts.begin(), counts.end()};
}

namespace {

// One decoder call's peak over t x h x w latent frames and pixels (see video_decode_peak_bytes).
double conv3d_call_peak(const Architecture& a, double t, double h, double w, Dtype dtype) {
  auto channels = a.list("channels");
  std::reverse(channels.begin(), channels.end());
  const double temporal_levels = std::log2(a.number("temporal_factor", 4));
  double peak = 0;
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const double widest = std::max(channels[i], i > 0 ? channels[i - 1] : channels[i]);
    // The block's input and its normalized copy, the padded copy and the convolution's output.
    const double held = (3 * t * h * w + (t + 2) * (h + 2) * (w + 2)) * widest * dtype_bytes(dtype);
    peak = std::max(peak, held);
    if (i + 1 == channels.size()) break;
    h *= 2;
    w *= 2;
    if (static_cast<double>(channels.size() - 1 - i) <= temporal_levels && t > 1) t = 2 * t - 1;
  }
  return peak;
}

double mochi_call_peak(const Architecture& a, double t, double h, double w, Dtype dtype) {
  const std::vector<double>& widths = a.list("channels");
  const std::vector<double>& expansions = a.list("temporal_expansions");
  double peak = 0;
  for (std::size_t level = widths.size(); level-- > 0;) {
    const double c = widths[level];
    // A ResBlock: its input, the norm's output, the padded copy (in time) and the convolution's output.
    peak = std::max(peak, (3 * t * h * w + (t + 2) * h * w) * c * dtype_bytes(dtype));
    if (level == 0) break;
    // The upsampling: its input, the Conv1x1's output and its rearranged copy.
    const double expanded = widths[level - 1] * expansions[level - 1] * 4;
    peak = std::max(peak, (c + 2 * expanded) * t * h * w * dtype_bytes(dtype));
    t = expansions[level - 1] * t - (expansions[level - 1] - 1);
    h *= 2;
    w *= 2;
  }
  return peak;
}

// A causal decoder's decode (causal_vae_decoder): one latent frame a call, so each level holds a few frames (its
// block's input and normalized copy, the padded copy and the convolution's output, of the call's frames and the two
// kept); besides, for the whole decode, the two frames every causal 3x3x3 convolution keeps for the next call (of
// its input: a level's first block starts from the upsampling's output, half the width before it in Wan 2.1's),
// and the video so far, twice while torch.cat joins a call's frames.
double causal_decode_peak(const Architecture& a, double t, double h, double w, Dtype dtype) {
  const std::vector<double>& widths = a.list("channels");
  const double temporal = a.number("temporal_upsamplings", 0), tf = a.number("temporal_factor", 4), f = a.number("vae_factor", 8);
  const double convs = 2 * (a.number("layers_per_block", 2) + 1);  // a level's causal 3x3x3 convolutions (two a ResNet block)
  const bool up_residual = a.number("up_residual", 0) != 0;
  const double video = 2 * (tf * (t - 1) + 1) * h * f * w * f * 3 * dtype_bytes(dtype);
  double kept = 2 * h * w * (a.number("latent_channels", 16) + 4 * widths[0]);  // conv_in's, and the middle's two blocks'
  double n = 1, peak = 0;  // frames a call at this level: 1, doubled by each upsampling in time after the first call
  for (std::size_t i = 0; i < widths.size(); ++i) {
    const double widest = std::max(widths[i], i > 0 ? widths[i - 1] : widths[i]);
    peak = std::max(peak, (3 * n * h * w + (n + 2) * (h + 2) * (w + 2)) * widest * dtype_bytes(dtype));
    if (i == 0) continue;
    const double first_input = i > 1 && !up_residual ? widths[i - 1] / 2 : widths[i - 1];
    kept += 2 * h * w * (first_input + (convs - 1) * widths[i]);
    if (i + 1 == widths.size()) {
      kept += 2 * h * w * widths[i];  // conv_out's
      break;
    }
    if (static_cast<double>(i) <= temporal && t > 1) {
      n *= 2;
      kept += 2 * h * w * widths[i];  // the upsampling's causal convolution in time
    }
    h *= 2;
    w *= 2;
  }
  return peak + kept * dtype_bytes(dtype) + video;
}

// LTX-Video's decoder call over t x h x w latent frames and pixels (ltx_vae_decoder): per level a block's input and
// normalized copy, the edge-framed and padded copies and the convolution's output; the upsampling's convolution to
// 8 x the next width, its rearranged copy and the shortcut's.
double ltx_call_peak(const Architecture& a, double t, double h, double w, Dtype dtype) {
  const std::vector<double>& widths = a.list("channels");
  double peak = 0;
  for (std::size_t i = 0; i < widths.size(); ++i) {
    const double c = widths[i], voxels = t * h * w;
    peak = std::max(peak, (3 * voxels + (t + 2) * h * w + (t + 2) * (h + 2) * (w + 2)) * c * dtype_bytes(dtype));
    if (i + 1 == widths.size()) break;
    peak = std::max(peak, (c + 3 * 8 * widths[i + 1]) * voxels * dtype_bytes(dtype));
    t = 2 * t - 1;
    h *= 2;
    w *= 2;
  }
  return peak;
}

}  // namespace

double video_decode_peak_bytes(const Architecture& a, const StepShape& s, Dtype dtype) {
  if (!decodes_video_in_tiles(a)) return 0;
  const auto call_peak = [&](double t, double h, double w) {
    if (a.family == "causal-vae-decoder") return causal_decode_peak(a, t, h, w, dtype);
    if (a.family == "ltx-vae-decoder") return ltx_call_peak(a, t, h, w, dtype);
    return a.family == "mochi-vae-decoder" ? mochi_call_peak(a, t, h, w, dtype) : conv3d_call_peak(a, t, h, w, dtype);
  };
  const double f = a.number("vae_factor", 8);
  double peak = 0;  // over the calls (one a sample's whole clip, or one a tile), the largest
  decode_in_3d_tiles(s, latent_frames_of(s, a.number("temporal_factor", 4)), std::ceil(s.height / f), std::ceil(s.width / f),
                     [&](double t, double h, double w, double) { peak = std::max(peak, call_peak(t, h, w)); });
  return peak;
}

const ArchitectureFields* architecture_fields(std::string_view family) {
  const auto it = families().find(family);
  return it == families().end() ? nullptr : &it->second;
}

bool decodes_video(std::string_view family) {
  return family == "causal-vae-decoder" || family == "conv3d-vae-decoder" || family == "ltx-vae-decoder" || family == "mochi-vae-decoder";
}

bool works_on_pixels(std::string_view family) {
  return decodes_video(family) || family == "unet" || family == "dit" || family == "vae-decoder" || family == "rrdb";
}

std::vector<std::string_view> architecture_families() {
  std::vector<std::string_view> out;
  for (const auto& [name, fields] : families()) out.push_back(name);
  return out;
}

StepShape reference_shape(const Architecture& a) {
  StepShape s;
  s.runtime = default_runtime(a);
  if (a.family == "transformer") {
    s.tokens = a.number("vocab", 0) > 0 ? 2048 : 512;
  } else {
    s.width = s.height = a.family == "rrdb" ? 512 : 1024;
  }
  return s;
}

std::vector<KernelCall> step_kernels(const Architecture& a, const StepShape& whole, Dtype dtype) {
  StepShape s = whole;  // one GPU's: its half of a guidance-parallel batch
  s.batch = whole.batch / std::max(1.0, whole.cfg_parallel);
  std::vector<KernelCall> calls;
  Builder b(calls, runtime_profile(s.runtime), dtype);
  if (a.family == "transformer") transformer(a, s, b);
  else if (a.family == "unet") unet(a, s, b);
  else if (a.family == "dit") dit(a, s, b);
  else if (a.family == "vae-decoder") vae_decoder(a, s, b);
  else if (a.family == "causal-vae-decoder") causal_vae_decoder(a, s, b);
  else if (a.family == "conv3d-vae-decoder") conv3d_vae_decoder(a, s, b);
  else if (a.family == "ltx-vae-decoder") ltx_vae_decoder(a, s, b);
  else if (a.family == "mochi-vae-decoder") mochi_vae_decoder(a, s, b);
  else if (a.family == "rrdb") rrdb(a, s, b);
  else FLEETSIM_CHECK(false, "unknown architecture family " + a.family + " (checked at load)");
  for (KernelCall& c : calls) {
    if (c.cls == KernelClass::attention) c.backend = s.attention;
  }
  return calls;
}

StepEstimate estimate_step(const Architecture& a, const StepShape& s, const KernelModel& model, Dtype dtype) {
  StepEstimate r;
  r.calls = step_kernels(a, s, dtype);
  r.kernels.reserve(r.calls.size());
  const double dispatch = runtime_profile(s.runtime).eager ? model.constants().eager_dispatch_us * 1e-6 : 0.0;
  double host = 0, gpu = 0;  // when the host has launched the last kernel, when the GPU finishes it
  for (const KernelCall& c : r.calls) {
    const KernelEstimate& e = r.kernels.emplace_back(model.estimate(c, dtype));
    const double t = e.time_s(), rest = c.count - 1;
    r.fixed_s += c.count * e.fixed_s;
    (e.memory_bound() ? r.memory_bound_s : r.compute_bound_s) += c.count * (t - e.fixed_s);
    // The first of `count` launches starts when both the host has launched it and the GPU is free; the
    // others follow back to back unless the host launches more slowly than they run.
    host += dispatch;
    gpu = std::max(std::max(gpu, host) + t + rest * t, host + rest * dispatch + t);
    host += rest * dispatch;
  }
  r.time_s = gpu;
  if (dispatch > 0) r.host_wait_s = std::max(0.0, gpu - r.fixed_s - r.compute_bound_s - r.memory_bound_s);
  return r;
}

double kernels_bytes(const std::vector<KernelCall>& calls, Dtype dtype) {
  double bytes = 0;
  for (const KernelCall& c : calls) bytes += c.count * kernel_bytes(c, dtype);
  return bytes;
}

double kernels_flop(const std::vector<KernelCall>& calls) {
  double flop = 0;
  for (const KernelCall& c : calls) {
    if (c.cls == KernelClass::gemm) flop += c.count * 2 * c.m * c.n * c.k * c.batch;
    if (c.cls == KernelClass::attention) {
      const double dims = c.k + (c.v > 0 ? c.v : c.k);  // QK^T and PV
      flop += c.count * 2 * c.batch * c.m * (c.causal ? std::max(c.n - c.m / 2, c.n / 2) : c.n) * dims * (c.backward ? 2.5 : 1);  // FlashAttention-2 backward: 5 products to 2
    }
  }
  return flop;
}

std::optional<LatentAttention> LatentAttention::of(const Architecture& a) {
  if (a.number("kv_lora_rank", 0) <= 0) return std::nullopt;
  return LatentAttention{.q_rank = a.number("q_lora_rank", 0), .kv_rank = a.number("kv_lora_rank", 0), .nope = a.number("qk_nope_head_dim", 0),
                         .rope = a.number("qk_rope_head_dim", 0), .v = a.number("v_head_dim", 0)};
}

double LatentAttention::parameters(double hidden, double heads) const {
  const double q = q_rank > 0 ? q_rank * heads * qk() : hidden * heads * qk();
  return replicated_parameters(hidden) + q + kv_rank * heads * (nope + v) + heads * v * hidden;
}

double LatentAttention::replicated_parameters(double hidden) const { return (q_rank > 0 ? hidden * q_rank : 0) + hidden * cached(); }

}  // namespace fleetsim
